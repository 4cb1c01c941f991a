"""One interface for every agent backend: a batch of chat requests in, a batch of replies out.

Backends (``vllm``, ``openai``, ``hf``, and each protocol's surrogate) take a list of :class:`Request` and
return a list of :class:`Response` in the same order; one call serves one stage of a multi-agent protocol
for all trials at once (vLLM's offline ``LLM.chat`` style). Token counts come from the backend (its
tokenizer or the server's ``usage``). A request that fails after the backend's own retries comes back with
``error`` set and ``text = ""``; a backend raises only for problems that affect every request (model
missing, no GPU) and for programming errors (``TypeError``, ``AttributeError``, ...), which propagate.

As in vLLM's ``SamplingParams``, :class:`Sampling` holds every per-request knob, the seed included; engine
options live in the backend. Each backend reports two things about itself: :meth:`Backend.identity`, the
options that change results (what must match when a run resumes), and :meth:`Backend.describe`, the
provenance (versions, devices, throughput knobs), recorded but never compared.

Secrets (API keys) are read from environment variables by the backends that need them and never appear
in requests, responses, logs or error messages.

Progress inside a stage: a backend that takes long per call (``hf``, ``openai``) has an ``on_progress``
attribute; a harness sets it with :func:`attach_progress` and the backend calls it as
``on_progress(done, total, elapsed_s)`` (``hf`` after each generation batch, ``openai`` every few seconds
and at the end of a call). Backends without the attribute (the protocols' surrogates) stay silent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from mascot.errors import BackendError, InputError

__all__ = [
    "Sampling",
    "Request",
    "Response",
    "Backend",
    "constructor_options",
    "attach_progress",
    "progress_text",
    "report_progress",
]


@dataclass(frozen=True)
class Sampling:
    """Decoding parameters (the SR paper ran temperature 0.8, top_p 0.5, max_tokens 250)."""

    temperature: float = 0.8
    top_p: float = 0.5
    max_tokens: int = 250
    seed: int | None = None  # this request's sampling seed (None: the backend's own); harnesses set it per request

    def __post_init__(self):
        if not (0 <= self.temperature <= 100):  # finite: inf would go out as non-standard JSON (Infinity)
            raise InputError(f"temperature must be in [0, 100]; got {self.temperature!r}")
        if not (0 < self.top_p <= 1):
            raise InputError(f"top_p must be in (0, 1]; got {self.top_p!r}")
        if int(self.max_tokens) != self.max_tokens or self.max_tokens < 1:
            raise InputError(f"max_tokens must be an integer >= 1; got {self.max_tokens!r}")


@dataclass
class Request:
    """One chat completion: ``messages`` in OpenAI format ([{"role": ..., "content": ...}, ...]).

    ``sampling`` holds the decoding parameters and this request's own seed (``sampling.seed``, reproducible
    where the backend honours seeds; a harness gives each request ``dataclasses.replace(sampling,
    seed=...)``); ``json_schema`` asks for structured output where the backend supports it (vLLM
    ``StructuredOutputsParams(json=...)``, OpenAI ``response_format``); ``meta`` is opaque to backends
    (request ids, trial/step/role for the logs; a protocol's surrogate may key its noise on those ids, but
    reads the task itself from ``messages``, like a model).
    """

    messages: list[dict[str, str]]
    sampling: Sampling = field(default_factory=Sampling)
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

    def identity(self) -> dict:
        """The options that change results: ``{"backend": name, "model": ..., <option>: value, ...}``
        (JSON-serialisable; ``None``: the engine's default). A resumed run must match it."""
        ...

    def describe(self) -> dict:
        """Provenance: backend name, model, versions and options (never secrets)."""
        ...


def constructor_options(cls, options: dict) -> dict:
    """``options`` with the defaults of ``cls.__init__`` filled in (nothing is constructed); unknown
    options raise ``TypeError`` as the constructor would. Backends use it for ``identity_of(**options)``."""
    import inspect

    bound = inspect.signature(cls.__init__).bind(None, **options)
    bound.apply_defaults()
    out = dict(bound.arguments)
    out.pop(next(iter(out)))  # self
    return out


class BackendFailure(BackendError):
    """Requests got no answer from the backend (connection, HTTP status, timeout, ...) after every retry. A
    protocol raises it instead of committing the step or round: a failure is never a result, and a rerun
    redoes exactly the uncommitted work."""


def stop_if_down(backend, work: str) -> None:
    """Raise :class:`BackendFailure` when the backend's last ``generate`` call stopped sending (its ``down``: a
    server that refused connections for seconds on end, an HTTP 401, 403 or 404 that every request would get):
    asking again could not help, so ``work`` (``"step 3"``, ``"round 2"``) is not committed and the run stops."""
    why = getattr(backend, "down", None)
    if why:
        raise BackendFailure(
            f"{endpoint(backend)}: {why}. {work[:1].upper() + work[1:]} was not committed; rerun the same command "
            "to resume from it"
        )


def endpoint(backend) -> str:
    """Where a backend's requests go, for error messages: its name and base URL or model (never a secret)."""
    try:
        d = backend.describe()
    except Exception:  # noqa: BLE001 -- describe() is best effort in an error message
        d = {}
    where = (
        (d.get("base_url") if isinstance(d, dict) else None)
        or (d.get("model") if isinstance(d, dict) else None)
        or getattr(backend, "model", None)
    )
    return f"backend {getattr(backend, 'name', type(backend).__name__)}" + (f" ({where})" if where else "")


def progress_text(done: int, total: int, elapsed_s: float, failed: int = 0) -> str:
    """``"requests 3/8 done, 0.42 req/s"``: the progress line of one backend call (rate over ``elapsed_s``);
    with ``failed`` requests among the ``done``, ``"requests 3/8 done (2 answered, 1 failed), 0.14 answered/s"``:
    a failure is not throughput."""
    answered = done - failed
    rate = answered / elapsed_s if elapsed_s > 0 else 0.0
    if not failed:
        return f"requests {done}/{total} done, {rate:.2f} req/s"
    return f"requests {done}/{total} done ({answered} answered, {failed} failed), {rate:.2f} answered/s"


def attach_progress(backend, say: Callable[[str], None] | None) -> None:
    """Let ``backend`` report progress inside a call through ``say(line)`` (:func:`progress_text`); ``None``
    silences it. A backend without an ``on_progress`` attribute (a protocol's surrogate) is left alone."""
    if not hasattr(backend, "on_progress"):
        return
    backend.on_progress = (
        None
        if say is None
        else (lambda done, total, elapsed, failed=0: say(progress_text(done, total, elapsed, failed)))
    )


def report_progress(backend, done: int, total: int, elapsed_s: float, failed: int = 0) -> None:
    """Call ``backend.on_progress(done, total, elapsed_s, failed)`` if one is attached (used by the backends;
    ``failed``: how many of the ``done`` requests came back with an error)."""
    cb = getattr(backend, "on_progress", None)
    if cb is not None:
        cb(done, total, elapsed_s, failed)
