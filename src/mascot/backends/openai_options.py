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

__all__ = [
    "check_options",
    "contains_key",
    "redact",
    "holds_key",
    "is_secret",
    "MIN_SECRET",
    "MIN_REPLY_SECRET",
    "MAX_CHECKED",
]

# Keys shorter than MIN_SECRET are placeholders (0, EMPTY, none, ollama): not looked for anywhere (masking "0"
# garbled every error). Keys shorter than MIN_REPLY_SECRET (anything, lm-studio, not-needed, token-abc123: the
# placeholders servers document; every provider's key is longer: OpenAI 51+, Hugging Face 37, UUIDs 36) are
# masked in errors as written or escaped, and not looked for in replies, which they match as ordinary words
# (an outside tester: "anything" refused "There are many things to weigh"). Longer keys are looked for in every
# form below, in errors and in replies.
MIN_SECRET = 8
MIN_REPLY_SECRET = 16
MAX_CHECKED = 1_000_000  # characters of one reply checked for the key; a longer reply is refused (openai.py)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_CHARS = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what an HTTP header value carries unchanged


def contains_key(text: str, key: str | None) -> bool:
    """Whether ``text`` (an option's value) holds the API key ``key`` whole (under any escaping, in any case; a
    reply is checked more thoroughly, for fragments too: :func:`holds_key`); keys under
    ``MIN_SECRET`` characters are never looked for (placeholders such as ``EMPTY``)."""
    return key is not None and len(key) >= MIN_SECRET and key.lower() in _plain(str(text)).lower()


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
    if isinstance(base_url, str):
        if contains_key(base_url, key):  # (any escape; host names ignore case)
            # (every later message names the URL, and run.json records it)
            raise InputError(
                f"base_url holds the value of ${api_key_env} (the API key; the URL is not shown): give the "
                f"server's address only: the key is sent in the Authorization header from ${api_key_env}"
            )
    if isinstance(model, str) and is_secret(key) and contains_key(model, key):  # (placeholders are no secret)
        # (an outside tester: the key given as --model named the run directory, reached run.json twice and the
        # "does not serve model" error)
        raise InputError(
            f"model holds the value of ${api_key_env} (the API key; the name is not shown): give the served "
            "model's name (the server's /v1/models lists them)"
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


# providers' public key prefixes: the same in every key, so no secret (an outside tester: "task project" and
# "disk-provisioning" held sk-proj-'s windows, and an error was withheld)
_PUBLIC_PREFIXES = ("sk-ant-api03-", "sk-svcacct-", "sk-admin-", "sk-proj-", "gsk_", "hf_", "sk-")


def _public_prefix(key: str) -> str:
    """The provider's public prefix ``key`` starts with (``sk-proj-``), or ``""``."""
    return next((p for p in _PUBLIC_PREFIXES if key.startswith(p)), "")


def _windows(s: str, k: int, skip: int = 0) -> tuple[str, ...]:
    """``s``'s windows of ``k`` characters that hold at least 4 distinct ones (a placeholder key's ``000000000000``
    or ``xxxxxxxxxxxx`` is ordinary text), or ``s`` itself when none does."""
    found = {s[i : i + k] for i in range(max(0, skip - k + 1), len(s) - k + 1)}  # (none inside the first skip)
    return tuple(w for w in found if len(set(w)) >= 4 and not _steady(w.encode())) or (s,)


def _steady(data: bytes) -> bool:
    """Whether ``data`` steps by one constant (``123456``, ``abcdef``): a placeholder's run, which counting
    text holds (an outside tester: the numbers 30 31 32 ... held sk-1234567890abcdef's hex ``313233343536``)."""
    return len({b - a for a, b in zip(data, data[1:])}) <= 1


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


def _random_looking(key: str) -> bool:
    """Whether ``key`` looks like a secret rather than a placeholder made of words (llama.cpp's
    ``sk-no-key-required``, whose words ordinary replies hold): it holds a digit, or a run of 12 or more
    characters between separators (``hf_`` and 34 letters)."""
    return any(c.isdigit() for c in key) or max(map(len, re.split(r"[-_.:/]", key))) >= 12


@functools.lru_cache(maxsize=4)
def _forms(key: str) -> dict:
    """What marks the key in a text, lower-cased where case does not matter: its windows of 12 and of 6
    characters as written (``raw``), with its own escape-like parts undone as :func:`_plain` undoes them in a text
    (``plain``: a key holding ``%2F`` or ``\\x`` reads otherwise there) and its letters and digits alone
    (``alnum``); windows of 8 characters of its base64 encodings (at any offset, of it alone or inside a longer
    encoded text; ``wide``: of its UTF-16) and of 12 of its hexadecimal digits (``hex``: UTF-8 and UTF-16)."""
    low, plain = key.lower(), _plain(key).lower()
    alnum = _visible(plain).lower().translate(_KEEP_ALNUM)
    pub = _public_prefix(key)
    pub_alnum = pub.lower().translate(_KEEP_ALNUM)

    def hex_windows(data: bytes, step: int) -> set[str]:  # (an echo of 9 or more bytes holds one)
        h = data.hex()
        found = {h[i : i + 2 * step] for i in range(0, len(h) - 2 * step + 1, step)}
        return {w for w in found if not _steady(bytes.fromhex(w).replace(b"\0", b""))}

    hexes = hex_windows(key.encode(), 6)
    wide = {w for enc in ("utf-16-le", "utf-16-be") for w in hex_windows(key.encode(enc), 12)}
    return {
        "b64": tuple(_b64_windows(key.encode())),
        "b64 wide": tuple(_b64_windows(key.encode("utf-16-le")) | _b64_windows(key.encode("utf-16-be"))),
        "hex": tuple(hexes | wide),
        "secret": len(key) >= MIN_REPLY_SECRET and _random_looking(key),
        **{f"{w}{k}": _windows(v, k, len(pub)) for w, v in (("raw", low), ("plain", plain)) for k in (12, 6)},
        # letters and digits alone: 9 stand for a reply's 12 characters (a UUID's 12 hold up to 3 dashes)
        "alnum12": _windows(alnum, 9, len(pub_alnum)),
        "alnum6": _windows(alnum, 6, len(pub_alnum)),
    }


# one backslash each (the loop in _plain undoes escaped backslashes first): a run of backslashes before
# a failing alternative cost the square of its length with \\+
_U = re.compile(r"\\(?:u\{([0-9a-fA-F]{1,6})\}|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2}))")
_OCT = re.compile(r"\\([0-3][0-7]{2})")
_JSON_ESC = re.compile(r"\\([bfnrt])")  # (JSON's \\b is a backspace, not the letter b)
_JSON_CHAR = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_BS = re.compile(r"\\(.)", re.S)
# a decimal character reference of 8+ digits, leading zeros too (html.unescape's int() of 4,301 digits raised)
_LONG_ENTITY = re.compile(r"&#([0-9]{8,});?")


def _short_entity(m: re.Match) -> str:
    digits = m[1].lstrip("0") or "0"
    return f"&#{digits};" if len(digits) <= 7 else "\ufffd"


_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")  # terminal colour codes
_NOT_VISIBLE = re.compile(r"[^\x21-\x7e]+")
# deletion tables for ASCII text (str.translate: several times faster than a regex's sub)
_DROP_INVISIBLE = str.maketrans("", "", "".join(map(chr, [*range(33), 127])))
_KEEP_ALNUM = str.maketrans("", "", "".join(chr(c) for c in range(128) if not chr(c).isalnum() or chr(c).isupper()))
_KEEP_HEX = str.maketrans("", "", "".join(chr(c) for c in range(128) if chr(c) not in "0123456789abcdef"))
_NUMBER = re.compile(r"[0-9]+")


def _code(m: re.Match) -> str:
    n = int(next(g for g in m.groups() if g is not None), 16)
    return chr(n) if n < 0x110000 else m[0]


_LEVELS = 16  # nested escapes undone, at most (each level that changes the text shortens it; bounded: linear time)


def _plain(text: str, json_escapes: bool = False) -> str:
    """``text`` with its escapes undone, nested ones too (HTML entities, %XX, \\uXXXX, \\u{X}, \\UXXXXXXXX, \\xXX,
    octal, backslashes) and zero-width characters dropped: what a key anywhere in it reads as. A backslash before
    any other character is dropped (``\\b`` reads ``b``: a key with every character escaped); ``json_escapes``
    reads JSON's ``\\b \\f \\n \\r \\t`` as the control characters instead (a key with a backspace between its
    characters). For finding the key only: never shown."""
    for _ in range(_LEVELS):
        before = text
        text = html.unescape(_LONG_ENTITY.sub(_short_entity, urllib.parse.unquote(text))).translate(_INVISIBLE)
        text = _OCT.sub(lambda m: chr(int(m[1], 8)), _U.sub(_code, text))
        if json_escapes:
            text = _JSON_ESC.sub(lambda m: _JSON_CHAR[m[1]], text)
        text = _BS.sub(r"\1", text)
        if text == before:
            break
    return text


def _visible(text: str) -> str:
    """The visible ASCII characters of ``text`` in NFKD (``ｓ`` and ``ś`` read ``s``), terminal colour codes
    removed: a key with anything between its letters that is not visible ASCII (spaces, NULs of UTF-16, control
    or invisible characters, combining marks) reads as itself here."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if text.isascii():
        return text.translate(_DROP_INVISIBLE)
    return _NOT_VISIBLE.sub("", unicodedata.normalize("NFKD", text))


def _bytes_view(text: str) -> str:
    """The numbers 0..255 in ``text`` read as bytes, decimal (``[115, 107, 45]``: Node's Buffer.toJSON, Java's
    Arrays.toString, Go's %v) and then octal (``163 153 055``), lower-cased."""
    nums = _NUMBER.findall(text)
    if len(nums) < 6:
        return ""
    dec = "".join(chr(int(n)) for n in nums if len(n) <= 3 and int(n) < 256)
    # octal with or without leading zeros (Go's %o prints 55 for "-"), or 0o-prefixed (Python's oct())
    octs = _NUMBER.findall(text.replace("0o", " ")) if "0o" in text else nums
    octal = "".join(chr(int(n, 8)) for n in octs if len(n) <= 4 and "8" not in n and "9" not in n and int(n, 8) < 256)
    # (UTF-16's NUL bytes and a byte-order mark dropped: a key's UTF-16 bytes read as the key; an outside tester)
    return (dec.translate(_DROP_INVISIBLE) + "\n" + octal.translate(_DROP_INVISIBLE)).lower()


def _any(text: str, windows: tuple[str, ...]) -> bool:
    """Whether any of ``windows`` (of 6 characters or more) is in ``text``. A long text against many windows (a
    long bearer token) is searched once for its 6-character pieces instead of once per window."""
    if len(text) * len(windows) <= 8_000_000:
        return any(w in text for w in windows)
    grams = {text[i : i + 6] for i in range(len(text) - 5)}
    return any(w[:6] in grams and w in text for w in windows)


def _seen(text: str, key: str, k: int) -> bool:
    """Whether ``text`` holds ``k`` consecutive characters of ``key`` (in any case) as written or once escapes are
    undone in both, or 8 characters of its base64 or 12 of its hexadecimal encoding. For a key of
    ``MIN_REPLY_SECRET`` characters or more also: with anything that is not visible ASCII between its characters,
    in compatibility forms (fullwidth), its letters and digits with anything between them (``s,k,-,p``,
    ``['s', 'k']``), hexadecimal with separators (``6b:65``, ``0x6b 0x65``, ``=6B``, UTF-16), base64 spaced or of
    its UTF-16, and its bytes as decimal or octal numbers."""
    f = _forms(key)
    if _any(text.lower(), f[f"raw{k}"]):
        return True
    plain = _plain(text)
    if _any(plain.lower(), f[f"plain{k}"]):
        return True
    if not f["secret"]:  # (a shorter key: as written or escaped only)
        return False
    # what is not visible ASCII dropped, JSON's \\b etc. read as letters and, where the text has a backslash, as
    # control characters too (a base64 or hexadecimal run of the text runs on here: each is looked for here only)
    for vis in (_visible(plain), *([_visible(_plain(text, json_escapes=True))] if "\\" in text else [])):
        vlow = vis.lower()
        if _any(vis, f["b64"]) or _any(vis, f["b64 wide"]) or _any(vlow, f[f"raw{k}"]):
            return True
        if _any(vlow.translate(_KEEP_ALNUM), f[f"alnum{k}"]):
            return True
        if _any(vlow.replace("0x", "").translate(_KEEP_HEX), f["hex"]):
            return True
    b = _bytes_view(plain)
    return _any(b, f[f"raw{k}"]) or _any(b.translate(_KEEP_ALNUM), f[f"alnum{k}"])


@functools.lru_cache(maxsize=4)
def _patterns(key: str) -> tuple[re.Pattern, re.Pattern]:
    """(the whole key in any of :func:`_char`'s encodings, character by character, in any case; a lookahead at
    each of its windows of 6 characters so encoded, to find every place such a window starts, overlaps
    included)."""
    chars = [_char(c) for c in key]
    whole = re.compile("".join(chars), re.IGNORECASE)
    skip = max(0, len(_public_prefix(key)) - 5)  # (no window inside the public prefix)
    six = (
        re.compile(
            "(?=(" + "|".join("".join(chars[i : i + 6]) for i in range(skip, len(key) - 5)) + "))", re.IGNORECASE
        )
        if len(key) - 5 > skip
        else re.compile("(?!)")
    )
    return whole, six


_WITHHELD = "*** (withheld: this text held the API key)"
_LONGEST_REWRITTEN = 256  # a longer key (a JWT) is not rewritten in place: its pattern took seconds to compile


def redact(text: str, key: str | None) -> str:
    """``text`` with ``key`` replaced by ``***``: the whole key in every form a server or a library may echo it in
    (in any case, character by character as such, backslash-escaped, \\u/\\x-escaped, URL-escaped or an HTML
    entity, in any mix), and every run of 6 or more consecutive characters of it so written (a server masking a
    key shows its ends: ``sk-abc*****wxyz``; a key split over several fields). A text that still holds part of the
    key after that (a base64 or hexadecimal copy, an encoding rewritten in no other way, anything between its
    letters; see :func:`_seen`), a text over 4,000 characters long, or any text holding part of a key over 256
    characters long is withheld whole. Keys shorter than ``MIN_SECRET`` are placeholders and are not looked for."""
    if not key or len(key) < MIN_SECRET:
        return text
    if not is_secret(key):  # a placeholder: masked whole, as written or escaped ("everything" held "anything"'s run)
        return _patterns(key)[0].sub("***", text) if len(text) <= 100_000 else text
    if not _seen(text, key, 6):  # (the common case: no part of the key)
        return text
    if len(text) > 4000 or len(key) > _LONGEST_REWRITTEN:
        return _WITHHELD
    whole, six = _patterns(key)
    out = whole.sub("***", text)
    spans: list[list[int]] = []
    for m in six.finditer(out):  # every window's start, overlapping ones too: runs of the key masked whole
        a, b = m.start(1), m.end(1)
        if spans and a <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], b)
        else:
            spans.append([a, b])
    for a, b in reversed(spans):
        out = out[:a] + "***" + out[b:]
    return out if not _seen(out, key, 6) else _WITHHELD


def holds_key(text: str, key: str | None) -> bool:
    """Whether ``text`` (a reply) holds ``key``, or 12 consecutive characters of it, in any form :func:`_seen`
    knows (in any case; escapes undone, in any mix; with anything between its characters; base64, hexadecimal,
    decimal or octal bytes). Keys shorter than ``MIN_REPLY_SECRET``, or made of words (``sk-no-key-required``),
    are not looked for (placeholders such as ``EMPTY``, ``anything`` or ``token-abc123`` are ordinary text:
    ``{"Value": 50}`` and "many things" held them), nor windows of fewer than 4 distinct characters."""
    if not is_secret(key):
        return False
    return _seen(text, key, 12)


def is_secret(key: str | None) -> bool:
    """Whether replies are checked for ``key``: ``MIN_REPLY_SECRET`` characters or more, and not a placeholder
    made of words (a digit, or 12 or more characters between separators)."""
    return bool(key) and _forms(key)["secret"]
