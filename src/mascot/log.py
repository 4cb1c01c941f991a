"""mascot's messages to the user go through :mod:`logging`, never ``print`` (imports nothing of mascot).

Every module logs to a child of the ``"mascot"`` logger (``logging.getLogger(__name__)``): warnings as
``WARNING``, and progress, when a function is called with ``progress=True``, at the level
:data:`PROGRESS` (25, between ``INFO`` and ``WARNING``). The ``"mascot"`` logger has one handler of its own
(like ``transformers``'), which writes to the current ``sys.stderr``: warnings as ``mascot: warning: ...``,
progress as is, a progress line that will be replaced (``extra={"transient": True}``) rewritten in place on a
terminal. It does not propagate to the root logger, so a program's own logging set-up sees mascot's
messages only if it asks for them (``logging.getLogger("mascot").propagate = True``).

What is shown is the caller's choice: ``progress=False`` sends nothing, and
``logging.getLogger("mascot").setLevel(logging.WARNING)`` (what ``mascot ... --quiet`` does) hides progress
everywhere, ``logging.ERROR`` warnings too.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["PROGRESS", "get_logger", "printable", "progress", "set_quiet", "want_compile_notice", "compile_listener"]

PROGRESS = 25
logging.addLevelName(PROGRESS, "PROGRESS")


def printable(text: str) -> str:
    """``text`` safe for a terminal: control and format characters (escape sequences, NUL, carriage returns,
    bidirectional overrides) written as escapes (``\\x1b``, ``\\u202e``); newlines and tabs kept. A server's or
    a model's text reaches the user only through this (an error body with ``ESC]0;...BEL`` retitles a terminal)."""
    import unicodedata

    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii") if ord(ch) > 0xFF else f"\\x{ord(ch):02x}")
    return "".join(out)


class _StderrHandler(logging.Handler):
    """Writes to ``sys.stderr`` as it is when the record is emitted (a test's capture, a redirected stream)."""

    def __init__(self):
        super().__init__(PROGRESS)
        self._open_line = None  # the stream a transient line was left on, unterminated

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            msg = printable(record.getMessage())
            if record.levelno >= logging.WARNING:
                msg = f"mascot: {record.levelname.lower()}: {msg}"
            tty = getattr(stream, "isatty", lambda: False)()
            if getattr(record, "transient", False) and tty:
                stream.write("\r" + msg + "\033[K")
                self._open_line = stream
            else:
                if self._open_line is stream:
                    stream.write("\r" if getattr(record, "replaces", False) else "\n")
                stream.write(msg + ("\033[K" if tty and self._open_line is stream else "") + "\n")
                self._open_line = None
            stream.flush()
        except Exception:  # noqa: BLE001  (logging's contract: a failing handler never raises)
            self.handleError(record)


_ROOT = logging.getLogger("mascot")
if not any(isinstance(h, _StderrHandler) for h in _ROOT.handlers):
    _ROOT.addHandler(_StderrHandler())
    _ROOT.setLevel(PROGRESS)
    _ROOT.propagate = False


def get_logger(name: str) -> logging.Logger:
    """The logger of module ``name`` (``__name__``), a child of ``"mascot"``."""
    return logging.getLogger(name if name.startswith("mascot") else f"mascot.{name}")


def progress(logger: logging.Logger, msg: str, *, transient: bool = False, replaces: bool = False) -> None:
    """Log ``msg`` at :data:`PROGRESS`; ``transient``: the next progress line replaces it on a terminal;
    ``replaces``: this line replaces a transient one (else it starts a new line)."""
    logger.log(PROGRESS, msg, extra={"transient": transient, "replaces": replaces})


def set_quiet(quiet: bool) -> None:
    """Hide (``True``) or show (``False``) progress from every mascot module; warnings stay."""
    _ROOT.setLevel(logging.WARNING if quiet else PROGRESS)


# ----------------------------------------------------------------------------- the first compile
_COMPILE = {"wanted": False, "said": False}


def want_compile_notice(on: bool = True) -> None:
    """Say once, on stderr, when a JAX program took a while to compile (the command line asks for it: a first call
    that compiles for 16 s should not look like a hang). Library use stays silent unless asked."""
    _COMPILE["wanted"] = bool(on)


def compile_listener(event: str, duration_secs: float, **_) -> None:
    """A ``jax.monitoring`` duration listener (registered when :mod:`mascot.kernels` is imported): the notice of
    :func:`want_compile_notice`, once per process, for the first compile step over 1 s."""
    if _COMPILE["wanted"] and not _COMPILE["said"] and event.startswith("/jax/core/compile/") and duration_secs >= 1.0:
        _COMPILE["said"] = True
        _ROOT.log(
            PROGRESS,
            f"mascot: compiling JAX programs for this shape (one step took {duration_secs:.1f} s); later calls "
            "reuse them, and later runs read them from the compile cache unless it is off",
        )
