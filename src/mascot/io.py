"""File helpers shared by every layer (imports nothing of mascot): atomic writes, JSON Lines, canonical JSON,
TOML reading and UTC timestamps."""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import math
import os
import re
import tempfile
import tomllib
from pathlib import Path

from mascot.errors import DirectoryLocked, InputError

__all__ = [
    "atomic_path",
    "file_in_the_way",
    "atomic_write_text",
    "atomic_write_bytes",
    "write_csv",
    "read_toml",
    "utc_now",
    "json_default",
    "canonical",
    "append_jsonl",
    "jsonl_line",
    "read_jsonl",
    "DirectoryLocked",
    "DirLock",
    "lock_dir",
    "remove_stale_temps",
    "read_text_file",
    "significant",
    "json_clean",
    "read_parquet_verified",
]


def significant(x, digits: int):
    """``x`` with every finite float rounded to ``digits`` significant digits (nested dicts, lists and
    tuples become dicts and lists; anything else is kept): reported numbers whose last bits depend on the
    CPU's BLAS kernels come out the same on every machine."""
    if isinstance(x, dict):
        return {k: significant(v, digits) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [significant(v, digits) for v in x]
    if isinstance(x, float) and x == x and abs(x) != float("inf"):
        return float(f"{x:.{digits}g}")
    return x


def json_clean(x):
    """``x`` with numpy scalars as Python numbers and non-finite floats as ``None`` (JSON has no NaN or
    Infinity: ``json.dumps`` would write bare ``NaN``, which strict parsers refuse), in nested dicts, lists and
    tuples."""
    import numpy as np

    if isinstance(x, dict):
        return {k: json_clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_clean(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once at import (single-threaded): new files get the usual 0o666 & ~umask


@contextlib.contextmanager
def atomic_path(path, exclusive: bool = False):
    """The one way mascot writes a file: yield a fresh temporary path beside ``path``, then fsync it and
    rename it over ``path``; on any error the temporary file is removed and ``path`` is untouched.
    ``exclusive``: publish it only if ``path`` does not exist (a hard link, which fails atomically with
    ``FileExistsError`` when another writer got there first).

    The temporary file is created by :func:`tempfile.mkstemp` (``O_CREAT | O_EXCL``: a unique name that did not
    exist, so a planted file or symlink is never followed), in ``path``'s own directory (so the rename is
    atomic), named ``.NAME.XXXX.tmp``. The rename replaces a symlink at ``path`` itself, never its target.
    """
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        os.close(fd)
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        if exclusive:
            os.link(tmp, path)
            tmp.unlink()
        else:
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path, data: bytes, exclusive: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (:func:`atomic_path`)."""
    with atomic_path(path, exclusive) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path, text: str, exclusive: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_path`): never a partial file."""
    atomic_write_bytes(path, text.encode("utf-8"), exclusive)


def read_text_file(path, what: str = "config file") -> str:
    """A UTF-8 text file's content; ``ValueError`` naming the file when it is missing, a directory, not
    readable or not UTF-8."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} not found: {path}")
    if p.is_dir():
        raise InputError(f"{path}: is a directory, not a {what}")
    try:
        return p.read_bytes().decode("utf-8").removeprefix("\ufeff")  # (a byte-order mark some editors write)
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read {what} ({e.strerror or e})") from None


def read_toml(path) -> dict:
    """A TOML file as a dict; ``ValueError`` naming the file when it is missing, not UTF-8 or not valid TOML."""
    text = read_text_file(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: invalid TOML: {e}") from None
    except RecursionError:
        raise InputError(f"{path}: invalid TOML: arrays or tables nested too deeply to read") from None


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second (run records' timestamps)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def json_default(x):
    """``json.dumps(default=...)``: numpy integers, floats and arrays as JSON numbers and lists, else ``str``."""
    import numpy as np

    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def canonical(x):
    """``x`` as plain JSON data (keys sorted, numpy values converted): what a record's identity compares."""
    return json.loads(json.dumps(x, sort_keys=True, default=json_default))


def jsonl_line(row) -> str:
    """One JSON line, UTF-8 as written; a string UTF-8 cannot hold (a lone surrogate such as "\\ud800", valid in
    JSON and sent by a server) makes the line ASCII-escaped instead, so it still reads back the same."""
    line = json.dumps(row, ensure_ascii=False, default=json_default)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(row, default=json_default)
    return line + "\n"


def append_jsonl(path, rows: list[dict]) -> None:
    """Append ``rows`` as JSON lines and fsync (a crash leaves at most one damaged trailing line)."""
    if not rows:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(jsonl_line(r) for r in rows))
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path, repair: bool = False) -> list[dict]:
    """Lines of a JSONL file; a damaged trailing line (interrupted write) is dropped (and cut off the file
    when ``repair``)."""
    path = Path(path)
    if not path.exists():
        return []
    raw = path.read_bytes().split(b"\n")
    rows = []
    for i, line in enumerate(raw):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if repair:
                keep = b"\n".join(raw[:i])
                os.truncate(path, len(keep) + (1 if keep else 0))  # cut the damaged tail in place
            break
    return rows


def write_csv(df, path, **to_csv) -> None:
    """``df.to_csv(path, **to_csv)`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, **to_csv)


# ----------------------------------------------------------------------------- run-directory locks
_TEMP_NAME = re.compile(r"^\..+\.[^./]+\.tmp$")  # atomic_path's temporaries: .NAME.XXXXXXXX.tmp


class DirLock:
    """An ``fcntl.flock`` held on a lock file; released by :meth:`release`, on leaving a ``with`` block,
    when the object is garbage-collected, or by the OS when the process dies (so a lock is never stale)."""

    def __init__(self, fd: int, path: Path):
        self.fd, self.path = fd, path

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)  # closing the descriptor drops the flock

    def share(self) -> None:
        """Convert this (exclusive) lock to a shared one."""
        fcntl.flock(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __del__(self):
        self.release()


def lock_dir(directory, name: str = ".mascot.lock", *, shared: bool = False, what: str = "run directory") -> DirLock:
    """Create ``directory`` if needed and take a non-blocking ``flock`` on ``directory/name`` (exclusive, or
    ``shared``). Raises :class:`DirectoryLocked` naming the directory and the holder's pid when another
    process holds it, and ``ValueError`` when ``directory`` is a file. An exclusive holder writes its pid
    into the lock file. The lock file is opened with ``O_NOFOLLOW`` (a planted symlink is refused)."""
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise InputError(f"{d} is a file, not a {what}; give a directory")
    d.mkdir(parents=True, exist_ok=True)
    lp = d / name
    try:
        fd = os.open(lp, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666 & ~_UMASK)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise InputError(f"{lp} is a symlink; refusing to use it as a lock file") from None
        raise
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        finally:
            os.close(fd)
        raise DirectoryLocked(
            f"{d} is in use by another mascot process (pid {holder}, lock {lp}); wait for it "
            "to finish, or use another output directory"
        ) from None
    if not shared:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return DirLock(fd, lp)


def remove_stale_temps(directory) -> list[Path]:
    """Remove the ``.NAME.XXXX.tmp`` files :func:`atomic_path` leaves behind when its process is killed
    (call it only while holding the directory's exclusive lock); never follows a symlink. Returns them."""
    d = Path(directory)
    gone = []
    if not d.is_dir():
        return gone
    for entry in os.scandir(d):
        if _TEMP_NAME.fullmatch(entry.name) and not entry.is_dir(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                gone.append(Path(entry.path))
    return gone


def read_parquet_verified(path, damaged: str = "", columns=None):
    """A Parquet file as a ``pyarrow.Table`` (only ``columns`` when given), every data page checked against the
    CRC32 its writer stored (mascot writes them; files without are only decoded). A damaged or unreadable file
    raises ``ValueError`` naming it, followed by ``damaged`` (what to do about it) when given."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path, page_checksum_verification=True).read(columns=columns)
    except (OSError, pa.ArrowException) as e:
        if isinstance(e, (FileNotFoundError, IsADirectoryError, PermissionError)):
            raise
        raise InputError(f"{path}: unreadable or damaged Parquet data ({e}){damaged}") from None


def parquet_columns(path, damaged: str = "") -> list[str]:
    """The column names of a Parquet file, read from its footer (errors as :func:`read_parquet_verified`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return list(pq.read_schema(path).names)
    except (OSError, pa.ArrowException) as e:
        if isinstance(e, (FileNotFoundError, IsADirectoryError, PermissionError)):
            raise
        raise InputError(f"{path}: unreadable or damaged Parquet data ({e}){damaged}") from None


def iter_parquet_verified(path, columns, damaged: str = "", batch_rows: int = 1 << 19):
    """The ``columns`` of a Parquet file as ``pyarrow.RecordBatch``es of at most ``batch_rows`` rows, every data
    page checked as :func:`read_parquet_verified` does: memory stays bounded by one batch, whatever the file's
    size. A damaged page raises ``ValueError`` naming the file when the reader reaches it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # pre_buffer off: with it, pyarrow keeps every row group it has read ahead (a 10^8-row file's report
        # peaked at 2.1 GB; 0.4 GB without)
        pf = pq.ParquetFile(path, page_checksum_verification=True, pre_buffer=False)
        yield from pf.iter_batches(batch_size=batch_rows, columns=columns)
    except (OSError, pa.ArrowException) as e:
        if isinstance(e, (FileNotFoundError, IsADirectoryError, PermissionError)):
            raise
        raise InputError(f"{path}: unreadable or damaged Parquet data ({e}){damaged}") from None


def file_in_the_way(path) -> str | None:
    """The first part of ``path`` (``path`` included) that exists and is not a directory: what a "File exists"
    or "Not a directory" error about making or entering ``path`` is about (``--out notes.txt/fig.png`` said
    only "notes.txt: File exists"), or None."""
    if not path:
        return None
    p = Path(os.fsdecode(path))
    return next((str(q) for q in [*reversed(p.parents), p] if q.exists() and not q.is_dir()), None)
