"""One interface for every agent backend: a batch of chat requests in, a batch of replies out.

Backends (``surrogate``, ``vllm``, ``openai``, ``hf``) take a list of :class:`Request` and return a list of
:class:`Response` in the same order; one call serves one stage of a multi-agent protocol for all trials
at once (vLLM's offline ``LLM.chat`` style). Token counts come from the backend (its tokenizer or the
server's ``usage``). A request that fails after the backend's own retries comes back with ``error`` set
and ``text = ""``; a backend raises only for problems that affect every request (model missing, no GPU).

Secrets (API keys) are read from environment variables by the backends that need them and never appear
in requests, responses, logs or error messages.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Sampling", "Request", "Response", "Backend", "BACKENDS", "make_backend"]


@dataclass(frozen=True)
class Sampling:
    """Decoding parameters (the SR paper ran temperature 0.8, top_p 0.5, max_tokens 250)."""

    temperature: float = 0.8
    top_p: float = 0.5
    max_tokens: int = 250
    seed: int | None = None  # per-request seeds are derived from this by the harness

    def __post_init__(self):
        if not (self.temperature >= 0):
            raise ValueError(f"temperature must be >= 0; got {self.temperature!r}")
        if not (0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1]; got {self.top_p!r}")
        if int(self.max_tokens) != self.max_tokens or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be an integer >= 1; got {self.max_tokens!r}")


@dataclass
class Request:
    """One chat completion: ``messages`` in OpenAI format ([{"role": ..., "content": ...}, ...]).

    ``seed`` is this request's own sampling seed (reproducible where the backend honours seeds);
    ``json_schema`` asks for structured output where the backend supports it (vLLM
    ``StructuredOutputsParams(json=...)``, OpenAI ``response_format``); ``meta`` is opaque to real backends
    (request ids, trial/step/role for the logs) but the surrogate reads the task state from it.
    """

    messages: list[dict[str, str]]
    sampling: Sampling = field(default_factory=Sampling)
    seed: int | None = None
    json_schema: dict | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Response:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None = None  # "stop", "length", ... as the backend reports it
    error: str | None = None  # set when the request failed (text is then "")
    latency_s: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@runtime_checkable
class Backend(Protocol):
    name: str
    model: str

    def generate(self, requests: list[Request]) -> list[Response]:
        """Replies in request order (one batched call per stage)."""
        ...

    def describe(self) -> dict:
        """Provenance: backend name, model, versions and options (never secrets)."""
        ...


BACKENDS = ("surrogate", "vllm", "openai", "hf")


def make_backend(name: str, **options) -> Backend:
    """Construct a backend by name; imports are lazy so a CPU install never needs vLLM or torch."""
    if name == "surrogate":
        from mascot.llm.surrogate import SurrogateBackend

        return SurrogateBackend(**options)
    if name == "vllm":
        from mascot.llm.vllm_backend import VLLMBackend

        return VLLMBackend(**options)
    if name == "openai":
        from mascot.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(**options)
    if name == "hf":
        from mascot.llm.hf_backend import HFBackend

        return HFBackend(**options)
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
