"""LLM backends behind one batched interface: a list of :class:`Request` in, a list of :class:`Response` out.

``vllm`` (offline engine, GPU nodes), ``openai`` (any OpenAI-compatible server) and ``hf`` (transformers on a
local model directory) are imported only when constructed, so a CPU install never needs vLLM or torch.
Surrogate agents are not backends of this package: each protocol has its own (``mascot.protocols``).

Each backend has ``identity()`` (the options that change results) apart from ``describe()`` (provenance);
:func:`identity_of` gives the identity of a backend that has not been constructed yet (a run that is
already finished never loads a model), and :func:`run_spec` the form run directories record it in.
"""

from __future__ import annotations

import importlib

from mascot.backends.base import Backend, BackendFailure, Request, Response, Sampling, endpoint
from mascot.errors import InputError

__all__ = [
    "Backend",
    "BackendFailure",
    "Request",
    "Response",
    "Sampling",
    "endpoint",
    "REGISTRY",
    "identity_of",
    "make_backend",
    "run_spec",
]

# backend name -> "module:class", imported on first use
REGISTRY = {
    "vllm": "mascot.backends.vllm:VLLMBackend",
    "openai": "mascot.backends.openai:OpenAIBackend",
    "hf": "mascot.backends.hf:HFBackend",
}


def _backend_class(name: str):
    if name not in REGISTRY:
        raise InputError(f"unknown backend {name!r}; choose one of {', '.join(REGISTRY)}")
    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_backend(name: str, **options) -> Backend:
    """Construct the backend registered as ``name`` with ``options`` (lazy import).

    Returns: the backend object.
    """
    return _backend_class(name)(**options)


def identity_of(name: str, **options) -> dict:
    """``make_backend(name, **options).identity()`` without constructing the backend (no engine, no model,
    no vLLM or torch import): the class's ``identity_of`` over its constructor defaults.

    Returns: the identity dict (name, model, results-relevant options).
    """
    return _backend_class(name).identity_of(**options)


def run_spec(identity: dict) -> dict:
    """A backend identity in the form run directories record (``run.json``'s ``identity.backend``):
    ``{"name": backend, "model": model, "options": {the other identity entries}}``, leaving out entries
    that are ``None`` (the engine's default) so that adding an option with a ``None`` default does not
    change the identity of existing runs.

    Returns: a dict ``{"name", "model", "options"}``.
    """
    rest = dict(identity)
    name = rest.pop("backend", rest.pop("name", None))
    model = rest.pop("model", None)
    return {"name": name, "model": model, "options": {k: v for k, v in rest.items() if v is not None}}


from mascot import submodule_loader  # noqa: E402

__getattr__ = submodule_loader(__name__, __path__)  # (mascot.backends.MODULE after import mascot)
