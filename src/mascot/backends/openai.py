"""OpenAI-compatible chat-completions backend (``vllm serve``, hosted APIs), standard library only.

One :meth:`OpenAIBackend.generate` call sends its requests concurrently (at most ``concurrency`` in
flight, a thread pool over blocking ``urllib`` calls) to ``POST {base_url}/chat/completions`` and returns
the replies in request order. Each request is retried with exponential backoff and jitter on HTTP 429,
HTTP 5xx, timeouts and connection errors (a ``Retry-After`` header, in seconds or as an HTTP date, replaces
the computed delay); any other 4xx, a malformed reply and a request that cannot be serialised fail at once.
A request that still fails comes back as ``Response(text="", error=...)``. Those are the only errors
turned into responses: anything else (``TypeError``, ``AttributeError``, ... -- a bug, not a request
problem) propagates out of :meth:`OpenAIBackend.generate`.

:meth:`OpenAIBackend.identity` is the backend name and the model: the server's address, key, timeouts,
retries and concurrency do not change what a request returns (a requeued job may reach the same
``vllm serve`` model at another address), so they are provenance (:meth:`OpenAIBackend.describe`).

Serial servers (``transformers serve`` without continuous batching, or any server that generates one request
at a time): a request that waits in the *server's* queue looks like a slow request to the client, and a
fixed concurrency of 8 with a 120 s timeout makes queued requests time out, be re-sent, and leave the server
generating abandoned ones. So the number of requests in flight adapts (``adaptive=True``, the default;
``concurrency`` is its maximum): it starts at 1, grows by one per completion whose latency is under a
quarter of ``timeout_s`` (then by one per round trip once it has had to shrink), and halves when a latency
exceeds half of ``timeout_s`` or an attempt fails with a timeout, a connection error, 429 or 5xx. A
one-at-a-time server thus settles where the latency stays well inside the timeout; a batching server
(``vllm serve``) reaches ``concurrency``. The timeout counts from when an attempt is sent: a request waiting
for a free slot in this client is not sent and not timed. The limit carries over between ``generate`` calls
of one backend.

Probe (``probe=True``; the CLI sets it unless ``--no-probe``): at construction -- once per run, before
the first stage -- :func:`mascot.backends.probe.probe_server` checks whether the server honours sampling
(and, with ``probe_structured``, ``response_format``), warns on stderr when it does not, and the findings
go into :meth:`OpenAIBackend.describe` (``"probe"``), hence into ``run.json``, never into the identity.

Progress: ``on_progress(done, total, elapsed_s, failed)`` (:func:`mascot.backends.base.attach_progress`) is called
every ``progress_every_s`` seconds of a ``generate`` call and when it ends.

Secrets: the API key is read once, at construction, from the environment variable named by
``api_key_env`` and sent only as ``Authorization: Bearer ...`` (an unredirected header; redirects are not
followed at all, so the key never travels to another host). ``describe()`` and ``repr()`` name the
variable, never its value, and every error message is scrubbed of the key.
"""

from __future__ import annotations

import email.utils
import errno
import http.client
import json
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed

from mascot.backends.base import Request, Response, constructor_options, endpoint, report_progress
from mascot.backends.openai_options import MAX_CHECKED, check_options, holds_key, is_secret, redact
from mascot.errors import BackendUnreachable, InputError
from mascot.log import get_logger, printable

_log = get_logger(__name__)

__all__ = ["OpenAIBackend", "build_payload", "check_options"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_MAX_BODY_IN_ERROR = 500


def _same_model(served: str, asked: str) -> bool:
    """Whether a reply's ``model`` names the model asked for: equal, one a prefix of the other (OpenAI answers
    ``gpt-4o`` as ``gpt-4o-2024-08-06``), or the same last path part (``/models/Qwen2.5-7B-Instruct`` for
    ``Qwen/Qwen2.5-7B-Instruct``), ignoring case."""
    a, b = served.lower().rstrip("/"), asked.lower().rstrip("/")
    return a.startswith(b) or b.startswith(a) or a.rsplit("/", 1)[-1] == b.rsplit("/", 1)[-1]


def _one_line(text: str) -> str:
    """A server's text inside an error message, on one line (an SSH banner's CR LF split the error in two)."""
    return text.strip().replace("\r", "\\r").replace("\n", "\\n")


# said with every timeout: the client closed its connection, but a server that generates one request at a time
# goes on with the abandoned one, and later requests queue behind it
_BUSY = "; the request was abandoned (a server that answers one request at a time may still be generating it)"


SILENT_TIMEOUTS = 3  # attempts timed out in a row, with no answer ever, before a server is declared down


class _RetryableError(Exception):
    """A failure worth another attempt (429, 5xx, timeout, connection trouble)."""

    def __init__(self, message: str, retry_after: float | None = None, unreachable: bool = False, timed_out=False):
        super().__init__(message)
        self.retry_after = retry_after
        self.unreachable = unreachable  # nothing listens there (refused, no such host, no route)
        self.timed_out = timed_out  # the attempt got no (complete) answer within its timeout


def _unreachable(e: BaseException) -> bool:
    reason = getattr(e, "reason", e)
    return isinstance(reason, (ConnectionRefusedError, socket.gaierror)) or (
        isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH)
    )


class _FatalError(Exception):
    """A failure that another attempt will not fix (4xx other than 429, malformed reply); ``for_all``: nor will
    any other request (401, 403, 404: the key, a permission, the address)."""

    def __init__(self, message: str, for_all: bool = False):
        super().__init__(message)
        self.for_all = for_all


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: a POST with credentials is never replayed against another URL."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError(code) for the 3xx reply


# -- one deadline per request: a watchdog shuts the request's socket down when --timeout runs out, whatever
# phase it is in (a server trickling header lines or body bytes never trips the per-read socket timeout)
_REQ = threading.local()  # the sockets the current thread's request opened


def _track(sock):
    socks = getattr(_REQ, "socks", None)
    if socks is not None:
        socks.append(sock)


class _Conn(http.client.HTTPConnection):
    def connect(self):
        super().connect()
        _track(self.sock)


class _SConn(http.client.HTTPSConnection):
    def connect(self):
        super().connect()
        _track(self.sock)


class _Handler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(_Conn, req)


class _SHandler(urllib.request.HTTPSHandler):
    def https_open(self, req):
        return self.do_open(_SConn, req, context=self._context)


def _shut(socks: list, fired: list) -> None:
    fired.append(True)
    for sock in list(socks):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def build_payload(model: str, req: Request) -> dict:
    """The JSON body of one ``/chat/completions`` call (pure; no secrets in it)."""
    s = req.sampling
    payload: dict = {
        "model": model,
        "messages": [dict(m) for m in req.messages],
        "temperature": s.temperature,
        "top_p": s.top_p,
        "max_tokens": int(s.max_tokens),
    }
    if s.seed is not None:
        payload["seed"] = int(s.seed)
    if req.json_schema is not None:
        payload["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "state", "schema": req.json_schema},
        }
    return payload


class _Gate:
    """The adaptive limit on requests in flight (see the module docstring): additive increase while
    latencies stay under ``timeout_s / 4`` (one per completion until the first decrease, then one per
    round trip), halving on a latency over ``timeout_s / 2`` or an overload error."""

    def __init__(self, maximum: int, timeout_s: float, adaptive: bool):
        self.maximum = maximum
        self.timeout_s = timeout_s
        self.adaptive = adaptive
        self.limit = 1.0 if adaptive else float(maximum)
        self.slow_start = True
        self.inflight = 0
        self.peak = 0
        self.cond = threading.Condition()

    def acquire(self) -> None:
        with self.cond:
            while self.inflight >= int(self.limit):
                self.cond.wait()
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)

    def release(self, latency_s: float | None, overloaded: bool = False) -> None:
        with self.cond:
            self.inflight -= 1
            if self.adaptive:
                if overloaded or (latency_s is not None and latency_s > self.timeout_s / 2):
                    self.limit = max(1.0, self.limit / 2)
                    self.slow_start = False
                elif latency_s is not None and latency_s < self.timeout_s / 4:
                    step = 1.0 if self.slow_start else 1.0 / self.limit
                    self.limit = min(float(self.maximum), self.limit + step)
            self.cond.notify_all()


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:  # a negative or non-finite delta is not a delta (RFC 9110): back off as usual instead of not at all
        return seconds if 0 <= seconds < float("inf") else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


class OpenAIBackend:
    """Chat completions against an OpenAI-compatible server.

    Args:
        model: the model name the server expects (``vllm serve``'s ``--served-model-name`` or model path).
        base_url: the API root, ``http(s)://host:port/v1``; ``/chat/completions`` is appended.
        api_key_env: NAME of the environment variable that holds the API key (read once, here). When the
            variable is unset or empty no ``Authorization`` header is sent (local ``vllm serve``).
        concurrency: at most this many requests in flight at once (>= 1).
        max_retries: retries after the first attempt for retryable failures (>= 0).
        timeout_s: socket timeout of one attempt, seconds (> 0), counted from when the attempt is sent.
        backoff_s: base delay; retry ``k`` (k = 0, 1, ...) waits ``backoff_s * 2**k`` scaled by a random
            factor in [0.5, 1.0] (capped at 60 s), or the server's ``Retry-After`` when it sends one (capped at
            ``max_retry_after_s``, 600 s, with a warning).
        budget_s: one request's time budget, seconds (default ``timeout_s * (max_retries + 1)``): every wait of
            the request (attempts, back-offs, ``Retry-After``) fits in it; a request that would wait past it
            gives up with the reason. A server that refuses connections for ``dead_after_s`` (10 s) in a row is
            declared down: the call's other requests are not sent (:attr:`down` says why), and so is every
            request after an HTTP 401, 403 or 404 (a key, a permission or an address that no retry mends).
        adaptive: adapt the requests in flight between 1 and ``concurrency`` (module docstring); False:
            always ``concurrency``.
        probe: probe the server at construction (:mod:`mascot.backends.probe`); ``probe_structured``: also
            whether it honours ``response_format``.
    """

    name = "openai"
    max_backoff_s = 60.0
    max_retry_after_s = 600.0
    dead_after_s = 10.0
    max_reply_bytes = 16 << 20  # a chat completion's body; a larger one is refused, not read (issue 33)
    progress_every_s = 5.0
    on_progress = None  # on_progress(done, total, elapsed_s, failed) (mascot.backends.base.attach_progress)
    on_answer = None  # on_answer(index, response) as each request of a call finishes (mascot.backends.cache)

    def __init__(
        self,
        model: str,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        max_retries: int = 5,
        timeout_s: float = 120.0,
        backoff_s: float = 1.0,
        adaptive: bool = True,
        probe: bool = False,
        probe_structured: bool = False,
        budget_s: float | None = None,
    ):
        key = check_options(
            model=model,
            base_url=base_url,
            api_key_env=api_key_env,
            concurrency=concurrency,
            max_retries=max_retries,
            timeout_s=timeout_s,
            backoff_s=backoff_s,
            budget_s=budget_s,
        )

        self.model = model
        self.base_url = str(base_url).rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.api_key_env = api_key_env
        self.concurrency = int(concurrency)
        self.max_retries = int(max_retries)
        self.timeout_s = float(timeout_s)
        self.backoff_s = float(backoff_s)
        self.budget_s = float(budget_s) if budget_s is not None else self.timeout_s * (self.max_retries + 1)
        self.adaptive = bool(adaptive)
        self.__api_key = key  # name-mangled; never printed
        self._opener = self._build_opener(self.base_url)
        self._gate = _Gate(self.concurrency, self.timeout_s, self.adaptive)
        self.probe_findings: dict | None = None
        self._down: str | None = None
        self._said_cap = self._said_wait = self._said_tokens = self._said_model = False
        self._answered, self._silent_timeouts = False, 0  # timeouts in a row from a server that never answered
        if probe:
            from mascot.backends.probe import probe_server

            models = self._served_models()
            if self._down is not None:  # a wrong port or host: say so now, not after every request's retries
                raise BackendUnreachable(
                    f"{endpoint(self)} cannot be reached ({self._down}); is the server running there? check --base-url"
                )
            self.probe_findings = probe_server(self.ask_once, endpoint(self), structured=bool(probe_structured))
            self.probe_findings["models"] = models
            if self._down is not None:
                raise BackendUnreachable(
                    f"{endpoint(self)} cannot be reached ({self._down}); is the server running there? check --base-url"
                )

    # -- public --------------------------------------------------------------------------------------

    def generate(self, requests: list[Request]) -> list[Response]:
        requests = list(requests)
        if not requests:
            return []
        self._down = None  # each call tries the server afresh
        self.down_fix = "once the server answers again, "  # what a rerun needs first (see stop_if_down)
        total = len(requests)
        results: list[Response | None] = [None] * total
        t0 = last = time.perf_counter()
        workers = min(self.concurrency, total)
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mascot-openai")
        try:
            futures = {pool.submit(self._one, r): i for i, r in enumerate(requests)}
            failed = 0
            for done, fut in enumerate(as_completed(futures), 1):
                results[futures[fut]] = r = fut.result()  # a programming error propagates (the pool cancels the rest)
                failed += bool(r.error)
                if self.on_answer is not None:  # kept at once: a kill mid-call loses no answered request
                    self.on_answer(futures[fut], r)
                now = time.perf_counter()
                if done == total or now - last >= self.progress_every_s:
                    last = now
                    report_progress(self, done, total, now - t0, failed)
        except BaseException:  # Ctrl-C or an error: do not wait for requests still blocked on the network
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return results  # type: ignore[return-value]

    @property
    def down(self) -> str | None:
        """Why the last :meth:`generate` call stopped sending (a server refusing connections for ``dead_after_s``,
        an HTTP 401, 403 or 404), or None: its unsent requests came back as errors beginning ``not sent:``."""
        return self._down

    def ask_once(self, req: Request) -> Response:
        """One attempt at ``req``, no retries, outside the concurrency limit (the probe's requests)."""
        t0 = time.perf_counter()
        try:
            resp = self._attempt(json.dumps(build_payload(self.model, req)).encode("utf-8"))
        except (_RetryableError, _FatalError) as e:
            if getattr(e, "unreachable", False):
                self._down = self._redact(str(e))
            return Response("", 0, 0, error=self._redact(str(e)), latency_s=time.perf_counter() - t0)
        resp.latency_s = time.perf_counter() - t0
        return resp

    @classmethod
    def identity_of(cls, **options) -> dict:
        """:meth:`identity` of ``OpenAIBackend(**options)`` without constructing it."""
        return {"backend": cls.name, "model": str(constructor_options(cls, options)["model"])}

    def identity(self) -> dict:
        """The options that change results: the model (see the module docstring)."""
        return self.identity_of(model=self.model)

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "api_key_set": self.__api_key is not None,
            "concurrency": self.concurrency,
            "max_retries": self.max_retries,
            "timeout_s": self.timeout_s,
            "backoff_s": self.backoff_s,
            "budget_s": self.budget_s,
            "adaptive_concurrency": self.adaptive,
            "probe": self.probe_findings,
        }

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r}, "
            f"api_key_env={self.api_key_env!r}, concurrency={self.concurrency})"
        )

    def __getstate__(self):
        # The key and the opener stay behind; the copy re-reads the variable where it is unpickled.
        state = {k: v for k, v in self.__dict__.items() if k not in ("_OpenAIBackend__api_key", "_opener", "_gate")}
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__api_key = os.environ.get(self.api_key_env) or None
        self._opener = self._build_opener(self.base_url)
        self._gate = _Gate(self.concurrency, self.timeout_s, self.adaptive)

    @staticmethod
    def _build_opener(base_url: str):
        handlers: list = [_NoRedirect(), _Handler(), _SHandler()]
        if (urllib.parse.urlsplit(base_url).hostname or "").lower() in _LOOPBACK:
            handlers.append(urllib.request.ProxyHandler({}))  # a local server is never reached via a proxy
        return urllib.request.build_opener(*handlers)

    # -- internals -----------------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        return redact(text, self.__api_key)

    def _headers(self) -> tuple[dict, dict]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        secret = {}
        if self.__api_key:
            secret["Authorization"] = f"Bearer {self.__api_key}"
        return headers, secret

    def _delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            if retry_after > self.max_retry_after_s and not self._said_cap:
                self._said_cap = True
                _log.warning(
                    f"{endpoint(self)} asked to retry after {retry_after:,.0f} s (Retry-After); waiting at most "
                    f"{self.max_retry_after_s:g} s"
                )
            elif retry_after >= 5 and not self._said_wait:  # a silent wait of minutes looked like a hang
                self._said_wait = True
                _log.warning(
                    f"{endpoint(self)} asked to retry after {retry_after:,.0f} s (Retry-After): waiting (said once per "
                    "run; --request-budget bounds each request's waits)"
                )
            return min(retry_after, self.max_retry_after_s)
        base = min(self.backoff_s * (2.0**retry), self.max_backoff_s)
        return base * (0.5 + 0.5 * random.random())

    def _one(self, req: Request) -> Response:
        """``req`` with retries, every wait inside the request's ``budget_s``; each attempt holds a slot of the
        adaptive limit while it is sent and answered (not while it backs off). ``latency_s`` counts from the
        first attempt's sending."""
        payload = build_payload(self.model, req)
        try:
            body = json.dumps(payload).encode("utf-8")
        except (TypeError, ValueError) as e:  # the request's content: a value JSON cannot hold, a lone surrogate
            return Response("", 0, 0, error=self._redact(f"request not JSON-serialisable: {e}"), latency_s=0.0)
        last = "no attempt made"
        t0 = None
        gate = self._gate
        refused_since = None  # when this request's run of refused connections began
        attempts = 0
        for attempt in range(self.max_retries + 1):
            asked_slot = time.perf_counter()
            gate.acquire()
            if self._down is not None:  # another request found the server down, or an error no retry mends
                gate.release(None)
                return Response("", 0, 0, error=f"not sent: {self._down}", latency_s=0.0)
            sent = time.perf_counter()
            t0 = sent if t0 is None else t0
            left = self.budget_s - (sent - t0)
            if attempts and left < min(1.0, self.timeout_s):  # a wait for a free slot used the rest of the budget:
                gate.release(None)  # an attempt now could not be answered in time (and would load the server)
                return Response(
                    "",
                    0,
                    0,
                    error=self._redact(
                        f"gave up after {attempts} attempt(s) and {sent - t0:.1f} s: the retry waited "
                        f"{sent - asked_slot:.1f} s for a free connection slot (the other requests' attempts were "
                        f"still in flight: a slow or hanging server) and "
                        + (f"only {left:.2f} s were left" if left > 0 else "nothing was left")
                        + f" of this request's time budget of {self.budget_s:g} s (--request-budget; default "
                        f"--timeout x (--max-retries + 1)); last error: {last}"
                    ),
                    latency_s=sent - t0,
                )
            attempts += 1
            try:
                resp = self._attempt(body, min(self.timeout_s, left))
            except _RetryableError as e:
                gate.release(None, overloaded=True)
                last = str(e)
                now = time.perf_counter()
                if e.timed_out and not self._answered:
                    self._silent_timeouts += 1
                    if self._silent_timeouts >= SILENT_TIMEOUTS and self._down is None:
                        self._down = self._redact(
                            f"the server at {self.url} accepts connections but answered none of "
                            f"{self._silent_timeouts} attempts in a row within --timeout {self.timeout_s:g} s (is it "
                            f"still loading a model, or stuck?); last error: {last}"
                        )
                        self.down_fix = "once the server answers (or with a longer --timeout), "
                    if self._down is not None:
                        return Response("", 0, 0, error=self._down, latency_s=now - t0)
                if not e.unreachable:
                    refused_since = None
                elif refused_since is None:
                    refused_since = now
                elif now - refused_since >= self.dead_after_s:
                    self._down = self._redact(
                        f"no server answered at {self.url} for {now - refused_since:.0f} s ({attempts} attempts): {last}"
                    )
                    return Response("", 0, 0, error=self._down, latency_s=now - t0)
                if attempt == self.max_retries:
                    break
                # the server's Retry-After against the budget first (the cap below only shortens a wait that fits)
                wait = e.retry_after if e.retry_after is not None else self._delay(attempt, None)
                if refused_since is not None:  # a refused connection is retried within dead_after_s, then given up
                    wait = min(wait, max(self.dead_after_s - (now - refused_since), 0.0) + 0.05)
                # an attempt needs time to be answered: none starts with less than a second (or the timeout) left
                if now + wait - t0 >= self.budget_s - min(1.0, self.timeout_s):
                    asked = f"the server asked to wait {e.retry_after:g} s (Retry-After); " if e.retry_after else ""
                    msg = self._redact(
                        f"gave up after {attempts} attempt(s) and {now - t0:.1f} s: {asked}the next attempt would "
                        f"start past this request's time budget of {self.budget_s:g} s (--request-budget); last "
                        f"error: {last}"
                    )
                    return Response("", 0, 0, error=msg, latency_s=now - t0)
                if e.retry_after is not None:
                    wait = self._delay(attempt, e.retry_after)  # capped, and said
                time.sleep(wait)
            except _FatalError as e:
                gate.release(time.perf_counter() - sent)
                msg = self._redact(str(e))
                if e.for_all:  # the same answer awaits every request: send no more of them
                    self._down = msg
                    self.down_fix = (
                        "fix what the server reported (the API key in --api-key-env, --base-url or --model), then "
                    )
                return Response("", 0, 0, error=msg, latency_s=time.perf_counter() - t0)
            except BaseException:
                gate.release(None)
                raise
            else:
                gate.release(time.perf_counter() - sent)
                if resp.completion_tokens > req.sampling.max_tokens:  # more than the request allows: not a reply
                    return Response(
                        "",
                        0,
                        0,
                        error=self._redact(
                            f"malformed response from {self.url}: usage.completion_tokens = {resp.completion_tokens} "
                            f"exceeds the request's max_tokens = {req.sampling.max_tokens}"
                        ),
                        latency_s=time.perf_counter() - t0,
                    )
                if resp.prompt_tokens > len(body) + 512 and not self._said_tokens:  # more tokens than the request
                    self._said_tokens = True  # has characters (an outside tester's server counted 10^9 for 1 kB)
                    _log.warning(
                        f"{endpoint(self)} counted {resp.prompt_tokens:,} prompt tokens for a request of "
                        f"{len(body):,} bytes: more tokens than characters; budgets are charged by these counts "
                        "(said once per run)"
                    )
                resp.latency_s = time.perf_counter() - t0
                return resp
        msg = self._redact(f"failed after {attempts} attempt(s): {last}")
        if refused_since is not None:  # the rest of this call's requests fail at once instead of each retrying
            self._down = msg
        return Response("", 0, 0, error=msg, latency_s=time.perf_counter() - t0)

    def _served_models(self) -> dict:
        """``GET {base_url}/models``: refuses a ``model`` the server does not serve, naming those it does; the
        finding for ``run.json`` (``{"verdict": "listed"/"unknown", ...}``). One attempt."""
        headers, secret = self._headers()
        http_req = urllib.request.Request(self.base_url + "/models", headers=headers, method="GET")
        for k, v in secret.items():
            http_req.add_unredirected_header(k, v)
        try:
            with self._opener.open(http_req, timeout=min(self.timeout_s, 10.0)) as r:
                raw = r.read(1 << 20)
            data = json.loads(raw)
            ids = [str(m["id"]) for m in data["data"] if isinstance(m, dict) and "id" in m]
        except urllib.error.HTTPError as e:
            e.close()
            return {"verdict": "unknown", "error": f"HTTP {e.code} from {self.base_url}/models"}
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException, OSError) as e:
            if _unreachable(e):
                self._down = self._redact(f"connection error to {self.base_url}/models: {getattr(e, 'reason', e)}")
            return {"verdict": "unknown", "error": self._redact(f"{type(e).__name__}: {e}")[:300]}
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            return {"verdict": "unknown", "error": f"not a model list: {type(e).__name__}"}
        # each id redacted, then the list as one text: a key cut into ids of 5 characters showed whole (a tester)
        ids = [printable(self._redact(i)) for i in ids]
        listed = ", ".join(ids[:20])
        if self._redact(listed) != listed:
            ids = ["*** (withheld: the list of models held the API key)"]
        if ids and self.model not in ids:
            shown = ", ".join(repr(i) for i in ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
            raise InputError(
                f"{endpoint(self)} does not serve model {self.model!r}; it serves {shown}: pass one of them to --model"
            )
        return {"verdict": "listed", "served": ids[:20]}

    def _attempt(self, body: bytes, timeout_s: float | None = None) -> Response:
        timeout_s = self.timeout_s if timeout_s is None else max(float(timeout_s), 0.001)
        headers, secret = self._headers()
        http_req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        for k, v in secret.items():
            http_req.add_unredirected_header(k, v)
        sent = time.perf_counter()
        _REQ.socks, fired = [], []
        watchdog = threading.Timer(timeout_s, _shut, args=(_REQ.socks, fired))
        watchdog.daemon = True
        watchdog.start()
        try:
            return self._exchange(http_req, sent, fired, timeout_s)
        finally:
            watchdog.cancel()
            _REQ.socks = None

    def _exchange(self, http_req, sent: float, fired: list, timeout_s: float) -> Response:
        try:
            with self._opener.open(http_req, timeout=timeout_s) as r:
                # the body in pieces, against one deadline for the whole request: a server that trickles a
                # byte at a time never trips the per-read socket timeout (one request took 57 s at 2 s)
                parts, size = [], 0
                while chunk := r.read1(1 << 16):
                    parts.append(chunk)
                    size += len(chunk)
                    if size > self.max_reply_bytes:  # a 60 MB reply was taken whole (and written to the records)
                        raise _FatalError(
                            f"the reply from {self.url} is larger than {self.max_reply_bytes:,} bytes; not read further "
                            "(nothing of it is kept)"
                        )
                    if time.perf_counter() - sent > timeout_s:
                        raise TimeoutError(f"the response was still arriving after {timeout_s:g} s")
                raw = b"".join(parts)
                if fired:  # the watchdog shut the socket down mid-response: what came is cut off
                    raise TimeoutError(f"the response was still arriving after {timeout_s:g} s")
                if r.length:  # the connection closed before Content-Length bytes came (read1 does not raise)
                    raise BackendUnreachable(
                        f"the connection closed {r.length} bytes short of the response's Content-Length"
                    )
                self._answered = True
        except urllib.error.HTTPError as e:
            self._answered = True  # an HTTP status came back: the server is alive, whatever it said
            try:
                detail = e.read()[:_MAX_BODY_IN_ERROR].decode("utf-8", "replace")
            except (OSError, http.client.HTTPException):  # the error body itself was cut off
                detail = ""
            finally:
                e.close()
            msg = self._redact(f"HTTP {e.code} from {self.url}: {_one_line(detail)}".rstrip(": "))
            if 300 <= e.code < 400:  # (refused by _NoRedirect: the key is never sent to another address)
                msg += " (a redirect: mascot follows none, so that the key goes nowhere else; give the final address)"
            if e.code == 429 or 500 <= e.code < 600:
                raise _RetryableError(
                    msg, _parse_retry_after(e.headers.get("Retry-After") if e.headers else None)
                ) from None
            raise _FatalError(msg, for_all=e.code in (401, 403, 404)) from None
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException, OSError) as e:
            # (TimeoutError, socket.timeout since 3.10, is an OSError)
            if isinstance(e, TimeoutError):
                raise _RetryableError(
                    self._redact(f"timeout after {timeout_s:g} s: {e}{_BUSY}"), timed_out=True
                ) from None
            if fired:  # the watchdog shut the socket down: the whole request outlasted the timeout
                raise _RetryableError(
                    f"timeout after {timeout_s:g} s: no complete response in time (the "
                    f"server was still connecting or sending){_BUSY}",
                    timed_out=True,
                ) from None
            if isinstance(e, urllib.error.URLError):
                kind = "timeout" if isinstance(e.reason, TimeoutError) else "connection error"
                raise _RetryableError(
                    self._redact(f"{kind} to {self.url}: {e.reason}"),
                    unreachable=_unreachable(e),
                    timed_out=kind == "timeout",
                ) from None
            raise _RetryableError(
                self._redact(f"connection error to {self.url}: {type(e).__name__}: {_one_line(str(e))}"),
                unreachable=_unreachable(e),
            ) from None
        return self._reply(raw)

    def _reply(self, raw: bytes) -> Response:
        """The :class:`Response` in a chat-completions body; ``_FatalError`` naming what is malformed."""

        def malformed(why: str) -> _FatalError:
            snippet = _one_line(raw[:200].decode("utf-8", "replace"))  # (a body's newlines split the error line)
            return _FatalError(self._redact(f"malformed response ({why}): {snippet}"))

        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError; "[" * 200000 (a tester)
            raise malformed(f"{type(e).__name__}: {e}") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise malformed("no 'choices' list of objects")
        choice = choices[0]
        message = choice.get("message") or {}
        if not isinstance(message, dict):
            raise malformed("'message' is not an object")
        text = message.get("content")
        if not isinstance(text, (str, type(None))):
            raise malformed("'message.content' is not a string")
        usage = data.get("usage")
        if not isinstance(usage, dict):  # budgets are charged by the server's counts: never a silent 0
            raise malformed("no 'usage' object with the token counts" if usage is None else "'usage' is not an object")
        tokens = []
        for k in ("prompt_tokens", "completion_tokens"):
            v = usage.get(k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 <= v < 2**31) or v != int(v):
                raise malformed(f"usage.{k} = {v!r:.60} is not a token count (an integer in [0, 2^31))")
            tokens.append(int(v))
        if tokens[0] == 0:  # every request sends a prompt (a server that counts none ran rounds for free, then
            # stopped at "c1 must be > 0" in the budget monitor: an outside tester)
            raise malformed(
                "usage.prompt_tokens = 0 for a prompt that is not empty (budgets charge the server's counts)"
            )
        if text is None and tokens[1] > 0:  # tokens generated, none of them an answer (a refusal, a tool call, a
            # reasoning model cut off): never recorded as an empty reply (null for no token at all is "")
            seen = [k for k in ("refusal", "tool_calls", "reasoning_content") if message.get(k)]
            raise malformed(
                f"'message.content' is null after {tokens[1]} completion tokens"
                + (f" ({', '.join(seen)})" if seen else "")
            )
        finish = choice.get("finish_reason")
        if not isinstance(finish, (str, type(None))):
            raise malformed("'finish_reason' is not a string")
        served = data.get("model")
        if isinstance(served, str) and served and not self._said_model and not _same_model(served, self.model):
            self._said_model = True  # (a reply of another model was taken without a word: an outside tester)
            _log.warning(
                f"{endpoint(self)} answers as model {printable(_one_line(self._redact(served)))[:120]!r}, not the "
                f"{self.model!r} asked for (said once per run; run.json records the model asked for)"
            )
        if self._checks_replies and len(text or "") + len(finish or "") > MAX_CHECKED:  # (16 MB took 19 s and 2 GB)
            raise _FatalError(
                f"the reply holds {len(text or '') + len(finish or ''):,} characters, more than mascot checks for the API "
                f"key ({MAX_CHECKED:,}); nothing from it is recorded"
            )
        if self._holds_key(text or "") or self._holds_key(finish or ""):
            # refused, not scrubbed: scrubbing rewrote replies (a key "0" or "Value" changed every number or
            # field name before parsing, exit 0); nothing of a reply that echoes the key is kept
            raise _FatalError(
                "the reply holds the API key (the server echoes the Authorization header back); "
                "nothing from it is recorded"
            )
        return Response(text=text or "", prompt_tokens=tokens[0], completion_tokens=tokens[1], finish_reason=finish)

    def _holds_key(self, text: str) -> bool:
        """Whether a reply's ``text`` holds the key (:func:`mascot.backends.openai_options.holds_key`)."""
        return holds_key(text, self.__api_key)

    @property
    def _checks_replies(self) -> bool:
        """Whether replies are checked for the key (:func:`mascot.backends.openai_options.is_secret`)."""
        return is_secret(self.__api_key)
