"""The options of :class:`mascot.backends.openai.OpenAIBackend` checked without building it, and its API key:
read once from the environment variable the options name, refused where it would be shown (in ``base_url``),
and scrubbed from any text in every escaped form a server or library may echo it in.
"""

from __future__ import annotations

import base64
import functools
import html
import math
import os
import re
import unicodedata
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
        if key.lower() in _plain(base_url).lower():  # (any escape; host names ignore case)
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
    twice), as \\uXXXX or \\xXX (JSON, Go, .NET: either case), URL-escaped, or as an HTML entity. Backslash runs are
    bounded (an unbounded ``\\+`` made a run of backslashes cost the square of its length)."""
    o = ord(c)
    alts = [
        re.escape(c),
        r"\\{1,8}" + re.escape(c),
        r"\\{1,8}u" + _hex(o, 4),
        r"\\{1,8}x" + _hex(o, 2),
        "%" + _hex(o, 2),
        f"&#0*{o};",
        "&#[xX]0*" + _hex(o, 1) + ";",
    ]
    if c in _NAMED:
        alts.append(f"&{_NAMED[c]};")
    return "(?:" + "|".join(alts) + ")"


def _windows(s: str, k: int) -> tuple[str, ...]:
    """``s``'s windows of ``k`` characters that hold at least 4 distinct ones (a placeholder key's ``000000000000``
    or ``xxxxxxxxxxxx`` is ordinary text), or ``s`` itself when none does."""
    found = {s[i : i + k] for i in range(len(s) - k + 1)}
    return tuple(w for w in found if len(set(w)) >= 4) or (s,)


def _b64_windows(data: bytes) -> set[str]:
    """Base64 text (standard and URL-safe) found in any encoded text that holds 6 consecutive bytes of ``data``,
    wherever they start: for each of the 3 byte offsets, the encoding's whole groups of 4 characters that carry
    ``data``'s bytes alone, taken 2 groups (6 bytes) at a time."""
    out = set()
    for pad in range(3):
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            text = enc(b"\0" * pad + data).decode()
            # (not the first group after padding bytes, nor the last: it may carry other bytes' bits, or "=")
            groups = [text[i : i + 4] for i in range(4 if pad else 0, len(text) - 4, 4)]
            out |= {a + b for a, b in zip(groups, groups[1:])}
    return out


@functools.lru_cache(maxsize=4)
def _forms(key: str) -> dict:
    """What marks the key in a text: its windows of 12 and of 6 characters, lower-cased, as written (``raw``) and
    with its own escape-like parts undone as :func:`_plain` undoes them in a text (``plain``: a key holding
    ``%2F`` or ``\\x`` reads otherwise there); windows of 8 characters of its base64 encodings (at any offset, of
    it alone or inside a longer encoded text) and of its hexadecimal digits (``hex`` alone too); and the
    ``plain`` windows with whitespace and invisible characters dropped, in NFKC (``squeezed``)."""
    low, plain = key.lower(), _plain(key).lower()
    hexed = key.encode().hex()  # (6 bytes at a time, at every third byte: an echo of 9 or more bytes holds one)
    hex_windows = {hexed[i : i + 12] for i in range(0, len(hexed) - 11, 6)}
    squeezed = _squeeze(plain)
    return {
        "encoded": tuple(_b64_windows(key.encode()) | hex_windows),
        "hex": tuple(hex_windows),
        "spaced": squeezed != plain,
        **{
            f"{w}{k}": _windows(v, k)
            for w, v in (("raw", low), ("plain", plain), ("squeezed", squeezed))
            for k in (12, 6)
        },
    }


# one backslash each (the loop in _plain undoes escaped backslashes first): a run of backslashes before
# a failing alternative cost the square of its length with \\+
_U = re.compile(r"\\(?:u\{([0-9a-fA-F]{1,6})\}|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2}))")
_OCT = re.compile(r"\\([0-3][0-7]{2})")
_BS = re.compile(r"\\(.)", re.S)
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))
# Unicode's Default_Ignorable_Code_Point characters (DerivedCoreProperties.txt: drawn as nothing, among them
# bidirectional marks, variation selectors and tag characters): dropped from a text, with whitespace of any kind,
# and its compatibility forms (fullwidth letters) folded by NFKC, before the key is looked for once more
_IGNORABLE = re.compile(
    r"[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164"
    r"\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]+"
)
_HEX_SEP = str.maketrans("", "", ":,;.-")  # (hexadecimal written 6b:65, 6b-65, 0x6b, 0x65; spaces squeezed already)


def _code(m: re.Match) -> str:
    n = int(next(g for g in m.groups() if g is not None), 16)
    return chr(n) if n < 0x110000 else m[0]


_LEVELS = 16  # nested escapes undone, at most (each level that changes the text shortens it; bounded: linear time)


def _squeeze(text: str) -> str:
    """``text`` without whitespace or invisible characters, in NFKC (fullwidth ``ｓｋ`` reads ``sk``)."""
    if not text.isascii():
        text = _IGNORABLE.sub("", unicodedata.normalize("NFKC", text))
    return "".join(text.split())  # (str.split: every kind of Unicode whitespace, the no-break space too)


def _plain(text: str) -> str:
    """``text`` with its escapes undone, nested ones too (HTML entities, %XX, \\uXXXX, \\u{X}, \\UXXXXXXXX, \\xXX,
    octal, backslashes) and invisible characters dropped: what a key anywhere in it reads as. For finding the
    key only: never shown."""
    for _ in range(_LEVELS):
        before = text
        text = html.unescape(urllib.parse.unquote(text)).translate(_INVISIBLE)
        text = _BS.sub(r"\1", _OCT.sub(lambda m: chr(int(m[1], 8)), _U.sub(_code, text)))
        if text == before:
            break
    return text


def _seen(text: str, key: str, k: int) -> bool:
    """Whether ``text`` holds ``k`` consecutive characters of ``key`` (in any case) as written or once escapes are
    undone in both (and then whitespace and invisible characters dropped, in NFKC), or 8 characters of its base64 or
    12 of its hexadecimal encoding (its digits also separated by spaces, colons or 0x)."""
    f = _forms(key)
    low = text.lower()
    if any(w in low for w in f[f"raw{k}"]) or any(w in text or w in low for w in f["encoded"]):
        return True
    plain = _plain(text)
    if f["spaced"]:  # (the key's own escapes decode to whitespace or an invisible character: looked for as such)
        low = plain.lower()
        if any(w in low for w in f[f"plain{k}"]):
            return True
    # whitespace and invisible characters dropped: the key spaced, an invisible character between its letters,
    # fullwidth letters; what the key's windows match in ``plain`` they match here too
    squeezed = _squeeze(plain)
    low = squeezed.lower()
    if any(w in low for w in f[f"squeezed{k}"]) or any(w in squeezed for w in f["encoded"]):
        return True
    hexed = low.translate(_HEX_SEP).replace("0x", "")  # (hexadecimal digits separated: 6b:65, 0x6b 0x65)
    return hexed != low and any(w in hexed for w in f["hex"])


@functools.lru_cache(maxsize=4)
def _patterns(key: str) -> tuple[re.Pattern, re.Pattern]:
    """(the whole key in any of :func:`_char`'s encodings, character by character, in any case; any 6
    consecutive characters of it so encoded)."""
    chars = [_char(c) for c in key]
    whole = re.compile("".join(chars), re.IGNORECASE)
    six = (
        re.compile("|".join("".join(chars[i : i + 6]) for i in range(len(key) - 5)), re.IGNORECASE)
        if len(key) >= 6
        else re.compile("(?!)")
    )
    return whole, six


_WITHHELD = "*** (withheld: this text held the API key)"


def redact(text: str, key: str | None) -> str:
    """``text`` with ``key`` replaced by ``***``: the whole key in every form a server or a library may echo it in
    (in any case, character by character as such, backslash-escaped, \\u/\\x-escaped, URL-escaped or an HTML
    entity, in any mix), and any 6 consecutive characters of it so written (a server masking a key shows its
    ends: ``sk-abc*****wxyz``). A text that still holds part of the key after that (a base64 or hexadecimal
    copy, an encoding rewritten in no other way, whitespace or an invisible character between its letters,
    fullwidth letters) or that is over 4,000 characters long is withheld whole."""
    if not key or not _seen(text, key, 6):  # (the common case, found fast: no part of the key)
        return text
    if len(text) > 4000:
        return _WITHHELD
    whole, six = _patterns(key)
    out = six.sub("***", whole.sub("***", text))
    return out if not _seen(out, key, 6) else _WITHHELD


def holds_key(text: str, key: str | None) -> bool:
    """Whether ``text`` (a reply) holds ``key``, or 12 consecutive characters of it, in any case, once its escapes
    are undone (any mix of the forms :func:`redact` knows) or once whitespace and invisible characters are dropped,
    or 8 characters of its base64 or 12 of its hexadecimal encoding; keys shorter than ``MIN_SECRET`` are not looked for (``0`` or ``EMPTY``, the
    placeholders local servers take, are ordinary text), nor windows of fewer than 4 distinct characters."""
    if not key or len(key) < MIN_SECRET:
        return False
    return _seen(text, key, 12)
