"""The options of :class:`mascot.backends.openai.OpenAIBackend` checked without building it, and its API key:
read once from the environment variable the options name, refused where it would be shown (in ``base_url``),
and scrubbed from any text in every escaped form a server or library may echo it in.
"""

from __future__ import annotations

import base64
import functools
import math
import os
import re
import urllib.parse

from mascot.errors import InputError

__all__ = ["check_options", "redact", "holds_key", "MIN_SECRET"]

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
        plain = urllib.parse.unquote_plus(base_url).lower()
        if _patterns(key)[0].search(base_url) or key.lower() in plain:  # (host names ignore case)
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


_NAMED = {'"': "quot", "&": "amp", "<": "lt", ">": "gt", "'": "(?:apos|#x27)"}


def _hex(n: int, width: int) -> str:
    """Regex for ``n`` in hexadecimal, ``width`` digits (more leading zeros allowed), either case."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{n:0{width}x}")


def _char(c: str) -> str:
    """Regex for one character of a key as text may carry it: itself, backslash-escaped (JSON, repr, escaped
    twice), as \\uXXXX or \\xXX (JSON, Go, .NET: either case), URL-escaped, or as an HTML entity."""
    o = ord(c)
    alts = [
        re.escape(c),
        r"\\+" + re.escape(c),
        r"\\+u" + _hex(o, 4),
        r"\\+x" + _hex(o, 2),
        "%" + _hex(o, 2),
        f"&#0*{o};",
        "&#[xX]0*" + _hex(o, 1) + ";",
    ]
    if c in _NAMED:
        alts.append(f"&{_NAMED[c]};")
    return "(?:" + "|".join(alts) + ")"


@functools.lru_cache(maxsize=4)
def _patterns(key: str) -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    """(the whole key in any of :func:`_char`'s encodings, character by character, or base64-encoded; any 12
    consecutive characters of it so encoded; any 6)."""
    chars = [_char(c) for c in key]
    b64 = set()
    for raw in (key, f"Bearer {key}", f":{key}"):  # (as sent in a header, or as basic-auth's password)
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            b64.add(enc(raw.encode()).decode().rstrip("="))
    whole = "|".join(["".join(chars), *map(re.escape, sorted(b64, key=len, reverse=True))])

    def windows(k: int) -> re.Pattern:
        if len(key) < k:
            return re.compile("(?!)")  # (matches nothing)
        return re.compile("|".join("".join(chars[i : i + k]) for i in range(len(key) - k + 1)))

    return re.compile(whole), windows(12), windows(6)


def redact(text: str, key: str | None) -> str:
    """``text`` with ``key`` replaced by ``***``: the whole key in every form a server or a library may echo it in
    (character by character as such, backslash-escaped, \\u/\\x-escaped, URL-escaped or an HTML entity, in any
    mix, or base64-encoded), and any 6 consecutive characters of it so written (a server masking a key shows
    its ends: ``sk-abc*****wxyz``)."""
    if not key:
        return text
    whole, _, six = _patterns(key)
    return six.sub("***", whole.sub("***", text))


def holds_key(text: str, key: str | None) -> bool:
    """Whether ``text`` (a reply) holds ``key`` whole in any form :func:`redact` knows, or 12 consecutive
    characters of it; keys shorter than ``MIN_SECRET`` are not looked for (``0`` or ``EMPTY``, the placeholders
    local servers take, are ordinary text)."""
    if not key or len(key) < MIN_SECRET:
        return False
    whole, twelve, _ = _patterns(key)
    return bool(whole.search(text) or twelve.search(text))
