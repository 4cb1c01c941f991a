"""The options of :class:`mascot.backends.openai.OpenAIBackend` checked without building it, and its API key:
read once from the environment variable the options name, refused where it would be shown (in ``base_url``),
and scrubbed from any text in every escaped form a server or library may echo it in.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import urllib.parse

from mascot.errors import InputError

__all__ = ["check_options", "redact", "MIN_SECRET"]

MIN_SECRET = 8  # shorter keys are placeholders, not secrets: replies are not checked for them
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_CHARS = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what an HTTP header value carries unchanged


def check_options(
    *,
    model,
    base_url="http://127.0.0.1:8000/v1",
    api_key_env="OPENAI_API_KEY",
    concurrency=8,
    max_retries=5,
    timeout_s=120.0,
    backoff_s=1.0,
    budget_s=None,
    **_ignored,
) -> str | None:
    """Validate :class:`OpenAIBackend`'s options without building it (the CLI checks them before it writes a
    run directory); returns the API key read from ``$api_key_env`` (None when unset). ``ValueError`` naming
    the option; never the key's value."""
    if not isinstance(api_key_env, str) or not _ENV_NAME.fullmatch(api_key_env):
        # never echoed: a key pasted here instead of a variable's name must not reach a log
        raise InputError(
            "api_key_env must be the NAME of an environment variable (letters, digits and _, not "
            "starting with a digit), not the key itself"
        )
    key = os.environ.get(api_key_env) or None
    if key is not None and not _KEY_CHARS.fullmatch(key):
        raise InputError(
            f"the value of ${api_key_env} is not a usable API key: it holds whitespace, a control "
            "or a non-ASCII character (a trailing newline or \\r from a file?); fix the variable "
            "(its value is not shown)"
        )
    if key is not None and len(key) >= MIN_SECRET and isinstance(base_url, str):
        plain = urllib.parse.unquote_plus(base_url)
        if any(form in base_url or form in plain for form in (key, urllib.parse.quote(key, safe=""))):
            # (every later message names the URL, and run.json records it)
            raise InputError(
                f"base_url holds the value of ${api_key_env} (the API key; the URL is not shown): give the "
                f"server's address only: the key is sent in the Authorization header from ${api_key_env}"
            )
    if not isinstance(model, str) or not model:
        raise InputError(f"model must be a non-empty string; got {model!r}")
    if not isinstance(base_url, str) or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in base_url):
        raise InputError(f"base_url must not hold spaces or control characters; got {base_url!r}")
    parsed = urllib.parse.urlsplit(str(base_url))
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise InputError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1; got {base_url!r}")
    if parsed.username is not None or parsed.password is not None:
        raise InputError("base_url must not carry credentials (user:password@); put the key in api_key_env")
    if parsed.query or parsed.fragment:  # (?api_key=... would be stored in run.json)
        raise InputError("base_url must not carry a query or fragment (?...#...); put a key in api_key_env")
    try:
        port = parsed.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise InputError(f"base_url has no valid port (1-65535): {parsed.netloc!r}")
    if int(concurrency) != concurrency or concurrency < 1:
        raise InputError(f"concurrency must be an integer >= 1; got {concurrency!r}")
    if int(max_retries) != max_retries or max_retries < 0:
        raise InputError(f"max_retries must be an integer >= 0; got {max_retries!r}")
    if not (0 < float(timeout_s) < math.inf):
        raise InputError(f"timeout_s must be > 0 and finite; got {timeout_s!r}")
    if not (0 <= float(backoff_s) < math.inf):
        raise InputError(f"backoff_s must be >= 0 and finite; got {backoff_s!r}")
    if budget_s is not None and not (0 < float(budget_s) < math.inf):
        raise InputError(f"budget_s (--request-budget) must be > 0 seconds and finite; got {budget_s!r}")
    return key


def redact(text: str, key: str | None) -> str:
    """``text`` with ``key`` replaced by ``***`` in every form a server or a library may echo it in: as sent,
    repr-, URL- or HTML-escaped, and each of those JSON-escaped (also "\\/", Go's \\u003c), once or twice."""
    if not key:
        return text
    plain = {
        key,
        repr(key)[1:-1],
        html.escape(key),
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote(key),
        urllib.parse.quote_plus(key),
    }
    forms = set(plain)
    for f in plain:  # each also JSON-escaped (a server's error body quoting it), once or twice
        j = json.dumps(f)[1:-1]
        go = j.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        forms |= {j, j.replace("/", "\\/"), go, json.dumps(j)[1:-1]}
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, "***")
    return text
