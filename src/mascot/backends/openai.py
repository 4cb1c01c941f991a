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

Secrets: the API key is read once, at construction, from the environment variable named by
``api_key_env`` and sent only as ``Authorization: Bearer ...`` (an unredirected header; redirects are not
followed at all, so the key never travels to another host). ``describe()`` and ``repr()`` name the
variable, never its value, and every error message is scrubbed of the key.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from mascot.backends.base import Request, Response, constructor_options

__all__ = ["OpenAIBackend", "build_payload"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_MAX_BODY_IN_ERROR = 500


class _RetryableError(Exception):
    """A failure worth another attempt (429, 5xx, timeout, connection trouble)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class _FatalError(Exception):
    """A failure that another attempt will not fix (4xx other than 429, malformed reply)."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: a POST with credentials is never replayed against another URL."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError(code) for the 3xx reply


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


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
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
        timeout_s: socket timeout of one attempt, seconds (> 0).
        backoff_s: base delay; retry ``k`` (k = 0, 1, ...) waits ``backoff_s * 2**k`` scaled by a random
            factor in [0.5, 1.0] (capped at 60 s), or the server's ``Retry-After`` when it sends one.
    """

    name = "openai"
    max_backoff_s = 60.0
    max_retry_after_s = 600.0

    def __init__(
        self,
        model: str,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        max_retries: int = 5,
        timeout_s: float = 120.0,
        backoff_s: float = 1.0,
    ):
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty string; got {model!r}")
        parsed = urllib.parse.urlsplit(str(base_url))
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1; got {base_url!r}")
        if parsed.username is not None or parsed.password is not None:
            raise ValueError("base_url must not carry credentials (user:password@); put the key in api_key_env")
        if int(concurrency) != concurrency or concurrency < 1:
            raise ValueError(f"concurrency must be an integer >= 1; got {concurrency!r}")
        if int(max_retries) != max_retries or max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0; got {max_retries!r}")
        if not (float(timeout_s) > 0):
            raise ValueError(f"timeout_s must be > 0; got {timeout_s!r}")
        if not (float(backoff_s) >= 0):
            raise ValueError(f"backoff_s must be >= 0; got {backoff_s!r}")
        if not isinstance(api_key_env, str) or not api_key_env:
            raise ValueError(f"api_key_env must name an environment variable; got {api_key_env!r}")

        self.model = model
        self.base_url = str(base_url).rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.api_key_env = api_key_env
        self.concurrency = int(concurrency)
        self.max_retries = int(max_retries)
        self.timeout_s = float(timeout_s)
        self.backoff_s = float(backoff_s)
        self.__api_key = os.environ.get(api_key_env) or None  # name-mangled; never printed
        self._opener = self._build_opener(self.base_url)

    # -- public --------------------------------------------------------------------------------------

    def generate(self, requests: list[Request]) -> list[Response]:
        requests = list(requests)
        if not requests:
            return []
        workers = min(self.concurrency, len(requests))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mascot-openai") as pool:
            return list(pool.map(self._one, requests))

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
        }

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r}, "
            f"api_key_env={self.api_key_env!r}, concurrency={self.concurrency})"
        )

    def __getstate__(self):
        # The key and the opener stay behind; the copy re-reads the variable where it is unpickled.
        state = {k: v for k, v in self.__dict__.items() if k not in ("_OpenAIBackend__api_key", "_opener")}
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__api_key = os.environ.get(self.api_key_env) or None
        self._opener = self._build_opener(self.base_url)

    @staticmethod
    def _build_opener(base_url: str):
        handlers: list = [_NoRedirect()]
        if (urllib.parse.urlsplit(base_url).hostname or "").lower() in _LOOPBACK:
            handlers.append(urllib.request.ProxyHandler({}))  # a local server is never reached via a proxy
        return urllib.request.build_opener(*handlers)

    # -- internals -----------------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        key = self.__api_key
        if key:
            text = text.replace(key, "***")
        return text

    def _headers(self) -> tuple[dict, dict]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        secret = {}
        if self.__api_key:
            secret["Authorization"] = f"Bearer {self.__api_key}"
        return headers, secret

    def _delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_s)
        base = min(self.backoff_s * (2.0**retry), self.max_backoff_s)
        return base * (0.5 + 0.5 * random.random())

    def _one(self, req: Request) -> Response:
        t0 = time.perf_counter()
        payload = build_payload(self.model, req)
        try:
            body = json.dumps(payload).encode("utf-8")
        except (TypeError, ValueError) as e:  # the request's content: a value JSON cannot hold, a lone surrogate
            return Response("", 0, 0, error=self._redact(f"request not JSON-serialisable: {e}"), latency_s=0.0)
        last = "no attempt made"
        for attempt in range(self.max_retries + 1):
            try:
                resp = self._attempt(body)
            except _RetryableError as e:
                last = str(e)
                if attempt < self.max_retries:
                    time.sleep(self._delay(attempt, e.retry_after))
            except _FatalError as e:
                return Response("", 0, 0, error=self._redact(str(e)), latency_s=time.perf_counter() - t0)
            else:
                resp.latency_s = time.perf_counter() - t0
                return resp
        msg = f"failed after {self.max_retries + 1} attempt(s): {last}"
        return Response("", 0, 0, error=self._redact(msg), latency_s=time.perf_counter() - t0)

    def _attempt(self, body: bytes) -> Response:
        headers, secret = self._headers()
        http_req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        for k, v in secret.items():
            http_req.add_unredirected_header(k, v)
        try:
            with self._opener.open(http_req, timeout=self.timeout_s) as r:
                raw = r.read()
        except urllib.error.HTTPError as e:
            try:
                detail = e.read()[:_MAX_BODY_IN_ERROR].decode("utf-8", "replace")
            except (OSError, http.client.HTTPException):  # the error body itself was cut off
                detail = ""
            finally:
                e.close()
            msg = self._redact(f"HTTP {e.code} from {self.url}: {detail}".rstrip(": "))
            if e.code == 429 or 500 <= e.code < 600:
                raise _RetryableError(msg, _parse_retry_after(e.headers.get("Retry-After") if e.headers else None))
            raise _FatalError(msg) from None
        except TimeoutError as e:  # socket.timeout is TimeoutError since 3.10
            raise _RetryableError(self._redact(f"timeout after {self.timeout_s:g} s: {e}")) from None
        except urllib.error.URLError as e:
            kind = "timeout" if isinstance(e.reason, TimeoutError) else "connection error"
            raise _RetryableError(self._redact(f"{kind} to {self.url}: {e.reason}")) from None
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            raise _RetryableError(self._redact(f"connection error to {self.url}: {type(e).__name__}: {e}")) from None

        return self._reply(raw)

    def _reply(self, raw: bytes) -> Response:
        """The :class:`Response` in a chat-completions body; ``_FatalError`` naming what is malformed."""

        def malformed(why: str) -> _FatalError:
            snippet = raw[:200].decode("utf-8", "replace")
            return _FatalError(self._redact(f"malformed response ({why}): {snippet}"))

        try:
            data = json.loads(raw)
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
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
        usage = data.get("usage") or {}
        if not isinstance(usage, dict):
            raise malformed("'usage' is not an object")
        try:
            tokens = [int(usage.get(k) or 0) for k in ("prompt_tokens", "completion_tokens")]
        except (TypeError, ValueError) as e:  # a non-numeric count
            raise malformed(f"token counts: {type(e).__name__}: {e}") from None
        return Response(text=text or "", prompt_tokens=tokens[0], completion_tokens=tokens[1],
                        finish_reason=choice.get("finish_reason"))
