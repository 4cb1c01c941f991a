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

import numbers
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
    "CutWatch",
]


def _check_number(name: str, v) -> None:
    """Text or a boolean from a config file is a mistake, not a value (``true`` was read as 1)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise InputError(f"{name} must be a number; got {v!r}")


@dataclass(frozen=True)
class Sampling:
    """Decoding parameters (the SR paper ran temperature 0.8, top_p 0.5, max_tokens 250).

    Arguments: ``temperature``; ``top_p``; ``max_tokens`` the reply limit; ``seed`` a per-request seed for
    backends that honour one (None: none sent).
    """

    temperature: float = 0.8
    top_p: float = 0.5
    max_tokens: int = 250
    seed: int | None = None  # this request's sampling seed (None: the backend's own); harnesses set it per request

    def __post_init__(self):
        number = _check_number
        number("temperature", self.temperature)
        if not (0 <= self.temperature <= 100):  # finite: inf would go out as non-standard JSON (Infinity)
            raise InputError(f"temperature must be in [0, 100]; got {self.temperature!r}")
        number("top_p", self.top_p)
        if not (0 < self.top_p <= 1):
            raise InputError(f"top_p must be in (0, 1]; got {self.top_p!r}")
        number("max_tokens", self.max_tokens)
        if int(self.max_tokens) != self.max_tokens or self.max_tokens < 1:
            raise InputError(f"max_tokens must be an integer >= 1; got {self.max_tokens!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral)):
            raise InputError(f"seed must be an integer or absent; got {self.seed!r}")


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
    asking again could not help, so ``work`` (``"step 3"``, ``"round 2"``) is not committed and the run stops. The
    message says what a rerun needs first when the backend says it (``down_fix``)."""
    why = getattr(backend, "down", None)
    if why:
        fix = getattr(backend, "down_fix", "") or ""  # e.g. "fix what the server reported (the API key ...), then "
        raise BackendFailure(
            f"{endpoint(backend)}: {why}. {work[:1].upper() + work[1:]} was not committed; {fix}rerun the same "
            "command to resume from it"
        )


def endpoint(backend) -> str:
    """Where a backend's requests go, for error messages: its name and base URL or model (never a secret).

    Returns: a short string such as ``openai http://127.0.0.1:8000/v1``.
    """
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


class CutWatch:
    """Warn once per run, as soon as it shows, when most replies stopped at the token limit
    (``finish_reason == "length"``), and say what would help.

    Whether a higher ``--max-tokens`` helps is measured, not assumed: a cut reply that had begun its answer
    (``began(text)``, e.g. an opening brace for a JSON answer) was cut short, while one that had not is a model
    wandering (SmolLM2-135M repeats itself until any limit; most of its replies that parse use 31-49 tokens), where
    a higher limit only costs time. The warning gives both counts and the longest reply that parsed.

    ``add(responses, parsed)`` after each backend call (``parsed[i]``: whether reply ``i`` gave a usable answer);
    ``say`` receives the warning (default: the ``mascot`` logger's warning).
    """

    def __init__(
        self,
        max_tokens: int,
        began: Callable[[str], bool] = lambda text: "{" in text,
        answer: str = "a JSON object",
        say: Callable[[str], None] | None = None,
        min_replies: int = 4,
    ) -> None:
        self.max_tokens, self.began, self.answer, self.min_replies = max_tokens, began, answer, min_replies
        self._say = say
        self.replies = self.cut = self.cut_parsed = self.cut_begun = 0
        self.longest_parsed: int | None = None
        self.said = False

    @classmethod
    def tagged(cls, max_tokens: int, **kw) -> CutWatch:
        """For answers that are a leading tag (the debate's ``[DECISION: ...]``): a cut reply without one never
        had one (the tag must start the reply), so a higher limit cannot give it."""
        return cls(max_tokens, began=lambda text: False, answer="its decision tag", **kw)

    @property
    def most_cut(self) -> bool:
        """Whether most replies so far stopped at the token limit."""
        return self.cut > self.replies / 2

    def add(self, responses, parsed) -> None:
        for r, ok in zip(responses, parsed):
            if r.error:
                continue
            self.replies += 1
            if ok and r.completion_tokens is not None:
                self.longest_parsed = max(self.longest_parsed or 0, int(r.completion_tokens))
            if r.finish_reason == "length":
                self.cut += 1
                self.cut_parsed += bool(ok)
                self.cut_begun += (not ok) and self.began(r.text or "")
        if not self.said and self.replies >= self.min_replies and self.most_cut:
            self.said = True
            (self._say or _warn)(self.message())

    def finish(self) -> None:
        """At the end of a run: the warning, if it was not said yet and most replies were cut (a run of fewer
        than ``min_replies`` replies included)."""
        if not self.said and self.replies and self.most_cut:
            self.said = True
            (self._say or _warn)(self.message(first=False))

    def message(self, first: bool = True) -> str:
        """The warning's text, from the counts so far (``first``: said during a run, of its first replies)."""
        limit = f"--max-tokens {self.max_tokens}" if self.max_tokens is not None else "--max-tokens"
        m = f"{self.cut} of the {'first ' if first else ''}{self.replies} replies stopped at {limit} (finish_reason length)"
        if self.cut_parsed:
            m += f"; {self.cut_parsed} of them still gave an answer"
        lost = self.cut - self.cut_parsed
        if not lost:
            return m
        m += f"; of the {lost} cut replies that gave no answer, {self.cut_begun} had begun {self.answer}"
        if self.longest_parsed is not None:
            m += f" (the replies that gave an answer used at most {self.longest_parsed} tokens)"
        if self.cut_begun > lost / 2:
            return m + ": raise --max-tokens"
        return (
            m + ": most wander rather than run out of room, so a higher --max-tokens would mostly cost time (a lower "
            "one saves it)"
        )


def _warn(msg: str) -> None:
    from mascot.log import get_logger

    get_logger(__name__).warning(msg)
