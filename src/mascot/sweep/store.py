"""Run directories: one Parquet file per chunk, written atomically, with provenance; merge and status.

Layout of a run directory::

    run.json                  {"kind": "mascot-sweep", "identity": PLAN, "created": ...} (mascot.rundir's format);
                              PLAN: identity version, experiment hash, kind, name, n_points, chunk_size, n_chunks
    config.toml               the config text the run was started from
    chunks/chunk-000017.parquet   rows of grid points [17 * chunk_size, 18 * chunk_size)

A chunk file exists only once it is complete (written to a temporary name, flushed, renamed), so a
killed run loses at most the chunks in flight and a rerun skips every chunk already on disk. A chunk
counts as complete only when its Parquet footer and mascot metadata read back and match the plan
(experiment hash, chunk index, point range, at least one row): a truncated, foreign or misplaced file is
recomputed by ``run``, named by ``status`` and refused by ``merge``. Files in ``chunks/`` that are not
``chunk-NNNNNN.parquet`` of this plan are named and ignored.

Directories written before the plan moved into ``run.json`` hold it as ``plan.json`` (the same object): they
are read, resumed, checked and merged as they are; no ``run.json`` is added to them.

Locks: a runner holds ``.mascot-shard-I-of-N.lock`` exclusively (the same shard twice is refused, naming
the holder's pid) and ``.mascot.lock`` shared (shards run side by side); the first runner to find no other
removes the temporary files killed writers left behind.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mascot.errors import InputError, MissingChunksError, NotFoundError, RunDirError
from mascot.io import (
    DirectoryLocked,
    DirLock,
    atomic_path,
    atomic_write_text,
    lock_dir,
    read_text_file,
    remove_stale_temps,
    utc_now,
)
from mascot.log import get_logger
from mascot.rundir import RUN_JSON, read_run_json
from mascot.sweep.config import IDENTITY

_log = get_logger(__name__)

__all__ = ["RunDir", "MissingChunksError", "write_table_atomic", "provenance", "status_labels"]

META_KEY = b"mascot"


ROW_SUBKEYS = ("trajectory", "graph", "trial")  # second sort keys of the kinds' rows, where present
_CHUNK_NAME = re.compile(r"^chunk-(\d{6})\.parquet$")
_OWN_FILES = (RUN_JSON, "plan.json", "config.toml", ".mascot.lock")
#: run.json's kind for a sweep
SWEEP_KIND = "mascot-sweep"
#: where directories written before run.json kept the plan (read, never written)
_LEGACY_PLAN = "plan.json"


def _ranges(ids: list[int]) -> str:
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(f"{ids[i]}" if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ", ".join(out)


def _nullability(table: pa.Table, required=()) -> pa.Table:
    """``table`` (zero-copy) with the fields named in ``required`` non-nullable (Parquet ``required``
    columns; a null in one is an error naming it) and every other field nullable."""
    required = set(required)
    for name in required:
        if table.column(name).null_count:
            raise InputError(f"column {name!r} must not hold nulls; it holds {table.column(name).null_count}")
    fields = [f.with_nullable(f.name not in required) for f in table.schema]
    return pa.Table.from_arrays(table.columns, schema=pa.schema(fields, metadata=table.schema.metadata))


def write_table_atomic(table: pa.Table, path: Path, metadata: dict | None = None, required=()) -> None:
    """Write ``table`` to ``path`` via a temporary file, fsync and rename (never a partial file).

    ``required``: the columns written as Parquet ``required`` columns (never null: no definition levels to
    encode, which halved the write time of a consensus chunk, 5.4 -> 2.6 ms for 36,000 rows x 26 columns;
    readers see those fields as non-nullable). Which columns are required is the sweep kind's fixed choice
    (``Kind.required``), never read off the data, so every chunk of a run has one schema and a directory of
    chunks reads as one dataset."""
    path = Path(path)
    table = _nullability(table, required)
    if metadata is not None:  # with the row count and column types: a footer damaged on disk (no page checksum
        # covers it) can change either and still read; check_chunk compares them with what it reads back
        metadata = {**metadata, "rows": table.num_rows, "columns": _fingerprint(table.schema)}
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), META_KEY: json.dumps(metadata)})
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            # lz4 without dictionaries: a sweep's parameter columns repeat per trajectory and lz4 alone
            # shrinks them; dictionary encoding doubled the write time (zstd took 16% of a sweep's time)
            # for files half the size (4.7 vs 2.4 MB per 10^6 consensus rows); statistics only on the row
            # keys (what readers filter on), 15% faster than on every column
            keys = [k for k in ("point", *ROW_SUBKEYS) if k in table.column_names]
            # page checksums (CRC32 of every data page): a chunk damaged on disk fails verification when it
            # is scanned or merged, and is redone, instead of merging wrong numbers
            pq.write_table(
                table,
                f,
                compression="lz4",
                use_dictionary=False,
                write_statistics=keys or False,
                write_page_checksum=True,
            )
    except OSError as e:  # disk full, quota, permissions: one line naming the file (nothing partial is left)
        raise OSError(e.errno, f"cannot write {path}: {os.strerror(e.errno) if e.errno else e}") from None


_CHUNK_NAME = re.compile(r"chunk-(\d{6})\.parquet")


def refuse_chunks_folder(path, option: str = "--out") -> None:
    """Refuse a path inside a sweep run directory's ``chunks/`` (it holds only chunks; a figure or a report written
    there was named a stray file by every later command: outside testers). ``path`` a file or a directory."""
    p = Path(path).resolve()
    for d in (p, *p.parents):
        if d.name == "chunks" and ((d.parent / RUN_JSON).is_file() or (d.parent / ".mascot.lock").exists()):
            raise InputError(
                f"{option} {path} is inside a sweep's chunks/ folder, which holds only its chunks; give another path"
            )


def _chunk_of(p: Path, cfg) -> bool:
    """Whether ``p`` (in a run directory's ``chunks/``) is a complete chunk of a run of ``cfg``, by the footer and
    metadata check a run makes of its chunks (:meth:`RunDir.check_chunk` without reading the data)."""
    m = _CHUNK_NAME.fullmatch(p.name)
    return bool(m) and RunDir(p.parent.parent)._read_chunk(int(m.group(1)), _plan_of(cfg), data=False)[0] is None


def _ours_before_plan(p: Path, cfg) -> bool:
    """Whether ``p`` may stand in a run directory of ``cfg`` that has no run.json (yet, or any more): our locks,
    chunks/ holding nothing but chunks of this run (a lost or deleted run.json is written again; each chunk
    carries its experiment hash), the Slurm log folder, an atomic write in flight, or the config.toml another
    shard of the same run wrote just before its plan."""
    name = p.name
    if name.startswith(".mascot") and name.endswith(".lock"):
        return True
    if name.startswith(".") and name.endswith(".tmp"):
        return True
    if name == "chunks":  # files that are no chunk-NNNNNN.parquet are ignored there, as a run ignores them
        return p.is_dir() and all(_chunk_of(q, cfg) for q in p.iterdir() if _CHUNK_NAME.fullmatch(q.name))
    if name == "slurm":  # `mascot slurm submit` makes the array tasks' log folder before they start
        return p.is_dir()
    if name == "merged.parquet":  # this run's merged dataset (a run.json lost after the merge)
        meta = merged_metadata(p) if p.is_file() else None
        return meta is not None and meta["plan"].get("hash") == cfg.hash
    if name == "config.toml":
        try:
            return p.is_file() and p.read_text() == cfg.text
        except (OSError, UnicodeDecodeError):
            return False
    return False


# what to do about a damaged run.json: the chunks prove which run the directory holds
_REBUILD = (
    "delete it and run the same config (with the same overrides) into this directory again: it is written anew "
    "and the chunks already there are kept (each carries its experiment hash)"
)


def _plan_of(cfg) -> dict:
    """The plan of a run of ``cfg`` (run.json's identity): what identifies the run and how its points split into chunks."""
    return dict(
        identity=IDENTITY,
        hash=cfg.hash,
        kind=cfg.kind,
        name=cfg.name,
        n_points=cfg.n_points,
        chunk_size=cfg.chunk_size,
        n_chunks=cfg.n_chunks,
    )


def merged_metadata(path) -> dict | None:
    """The metadata ``mascot merge`` wrote into a merged dataset (its plan, chunk list and rows), or None when
    ``path`` is not one (another file, a chunk: a chunk's metadata holds its own index, not a plan)."""
    try:
        meta = json.loads((pq.read_metadata(path).metadata or {}).get(META_KEY, b"null"))
    except (OSError, ValueError, pa.ArrowException):
        return None
    ok = isinstance(meta, dict) and isinstance(meta.get("plan"), dict) and "chunks" in meta
    return meta if ok else None


def status_labels(path) -> dict[int, str]:
    """The labels of a merged consensus file's ``status`` codes (``{0: "consensus", 1: "BudgetFail", ...}``, the
    ``labels`` metadata of the field, from the kind's :attr:`~mascot.sweep.schema.Kind.codes`); empty for another
    file."""
    schema = pq.read_schema(path)
    field = schema.field("status") if "status" in schema.names else None
    raw = (field.metadata or {}).get(b"labels") if field is not None else None
    return {int(k): v for k, v in json.loads(raw).items()} if raw else {}


def _fingerprint(schema: pa.Schema) -> list[str]:
    return [f"{f.name}:{f.type}" for f in schema]


def _read_verified(path) -> pa.Table:
    """The whole table, every data page checked against its CRC32 (where the writer stored one)."""
    return pq.ParquetFile(path, page_checksum_verification=True).read()


def _git_commit() -> str | None:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def provenance() -> dict:
    import jax

    import mascot

    return dict(
        mascot_version=mascot.__version__,
        git_commit=_git_commit(),
        jax_version=jax.__version__,
        devices=[str(d) for d in jax.devices()],
    )


#: a merged file's row groups hold about this many bytes of chunks (a few chunks, or one large one)
_ROW_GROUP_BYTES = 128 << 20


class _ChunkLost(Exception):
    """A chunk that passed the footer scan failed its data verification during a merge."""


class RunDir:
    """A sweep's output directory.

    Arguments: ``path`` the directory (created when a run starts; ``chunks/``, ``config.toml``, ``run.json`` and
    ``merged.parquet`` live in it).
    """

    def __init__(self, path):
        self.path = Path(path)
        self.chunks = self.path / "chunks"

    def chunk_path(self, c: int) -> Path:
        return self.chunks / f"chunk-{c:06d}.parquet"

    def refuse_links(self) -> None:
        """Refuse a run directory whose own components are symbolic links: ``chunks/`` (a link sent every chunk
        outside the run directory), ``run.json`` (or an older directory's ``plan.json``), ``config.toml``, the
        locks and ``merged.parquet``. The run directory itself may be a link: the user chose where it lives."""
        if not self.path.is_dir():
            return
        names = ["chunks", RUN_JSON, _LEGACY_PLAN, "config.toml", "merged.parquet", ".mascot.lock"]
        names += [p.name for p in self.path.glob(".mascot-shard-*.lock")]
        for name in names:
            p = self.path / name
            if p.is_symlink():
                kind = "directory" if name == "chunks" else "file"
                raise RunDirError(
                    f"{p} is a symbolic link (to {os.readlink(p)}); mascot writes only inside the run directory: "
                    f"make it a real {kind}, or use another --out"
                )

    # -- locks --------------------------------------------------------------------------------
    def acquire(self, shard=(0, 1), wait_s: float = 30.0) -> list[DirLock]:
        """Locks for running ``shard`` (``(I, N)``) here; keep them referenced while running (see the
        module docstring). Raises ``DirectoryLocked`` naming the holder when this shard is already running."""
        if self.path.exists() and not self.path.is_dir():
            raise InputError(f"--out {self.path} is a file, not a run directory; give a directory")
        self.refuse_links()
        deadline = time.monotonic() + wait_s
        try:
            shared = lock_dir(self.path, what="sweep run directory")  # alone: clean up, then share
            remove_stale_temps(self.path)
            remove_stale_temps(self.chunks)
            shared.share()
        except DirectoryLocked:
            shared = self._shared_lock(deadline)  # other runners share it
        i, n = shard
        mine = lock_dir(self.path, f".mascot-shard-{i}-of-{n}.lock", what="sweep run directory")
        try:
            self._refuse_overlapping_shards(i, n)
        except BaseException:
            mine.release()
            shared.release()
            raise
        return [shared, mine]

    def _refuse_overlapping_shards(self, i: int, n: int) -> None:
        """A runner of another shard count whose chunks can meet ours (``c % n == i`` and ``c % m == j`` for some
        ``c``: ``i = j`` modulo gcd(n, m)) is refused: both would compute those chunks (a whole run beside
        ``--shard 1/2`` did; an outside tester). Checked after taking our own shard lock, so of two such runners
        starting together at least one sees the other."""
        import math

        for p in sorted(self.path.glob(".mascot-shard-*-of-*.lock")):
            got = re.fullmatch(r"\.mascot-shard-(\d+)-of-(\d+)\.lock", p.name)
            if got is None:
                continue
            j, m = int(got[1]), int(got[2])
            if m == n or (i - j) % math.gcd(n, m):
                continue
            try:
                lock_dir(self.path, p.name, what="sweep run directory").release()  # free: a runner that has ended
            except DirectoryLocked:
                whole = "the whole run" if m == 1 else f"shard {j}/{m}"
                raise DirectoryLocked(
                    f"{self.path} is being run as {whole} by another mascot process ({p}); shards of another count "
                    f"would compute some of its chunks again: wait for it, or run the same shard count (--shard I/{m})"
                ) from None

    def _shared_lock(self, deadline: float) -> DirLock:
        """``.mascot.lock`` shared (a runner's brief exclusive clean-up of stale temporary files is waited out;
        a merge holds it so that no clean-up removes the merged file it is writing)."""
        while True:
            try:
                return lock_dir(self.path, shared=True, what="sweep run directory")
            except DirectoryLocked:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    # -- plan ---------------------------------------------------------------------------------
    def plan_file(self) -> Path:
        """The file holding the plan: ``run.json``, or ``plan.json`` in a directory written before run.json
        (when it has no run.json)."""
        legacy = self.path / _LEGACY_PLAN
        return legacy if legacy.exists() and not (self.path / RUN_JSON).exists() else self.path / RUN_JSON

    def init(self, cfg) -> None:
        """Create the directory for ``cfg`` or check that it belongs to the same experiment."""
        plan = _plan_of(cfg)
        if self.path.exists() and not self.path.is_dir():
            raise RunDirError(f"--out {self.path} is a file, not a run directory; give a directory")
        self.refuse_links()
        pf = self.plan_file()
        if not pf.exists():  # a new run: never into a directory holding anything but our locks and chunks/
            # (another shard of this run may write run.json meanwhile: it is checked below like any plan)
            other = [p.name for p in self.path.iterdir() if p.name != RUN_JSON and not _ours_before_plan(p, cfg)]
            # chunks of this run prove the directory is its own: the user's files beside them (a figure plotted
            # into it) do not stop the run.json being written again (they did: an outside tester)
            proven = (
                "chunks" not in other
                and self.chunks.is_dir()
                and any(_CHUNK_NAME.fullmatch(q.name) for q in self.chunks.iterdir())
            )
            if (
                other and not proven and not pf.exists()
            ):  # (a runner started beside this one may have just published its plan
                # and config.toml: then its plan is checked below and this run refused as a different run)
                raise RunDirError(
                    f"--out {self.path} is not empty and is not a mascot run directory (no run.json; "
                    f"it holds {', '.join(sorted(other)[:3])}{', ...' if len(other) > 3 else ''}): "
                    "give a new or empty directory"
                    + (
                        ", or, for a run whose run.json was lost, the config, overrides and chunk size it was run "
                        "with (its chunks are of another experiment or chunk size)"
                        if "chunks" in other
                        else ""
                    )
                )
        self.chunks.mkdir(parents=True, exist_ok=True)
        if not pf.exists():
            try:  # published only if no other runner's plan got there first (runners started together)
                meta = {"kind": SWEEP_KIND, "identity": plan, "created": utc_now()}
                atomic_write_text(pf, json.dumps(meta, indent=2) + "\n", exclusive=True)
            except FileExistsError:
                pass  # checked below like any plan
            else:
                atomic_write_text(self.path / "config.toml", cfg.text)
                return
        old = self._read_plan(pf)
        shape = lambda p: f"{p.get('n_points')} points in {p.get('n_chunks')} chunks of {p.get('chunk_size')}"  # noqa: E731
        if old.get("hash") != plan["hash"] or old.get("chunk_size") != plan["chunk_size"]:
            ov = self._started_with()
            started = (
                f" It was started with the overrides {ov!r} (its config.toml holds the whole config): give the same "
                "overrides to resume it."
                if ov
                else ""
            )
            if old.get("hash") == plan["hash"]:
                raise RunDirError(
                    f"{self.path} holds this experiment in chunks of {old.get('chunk_size')} points ({shape(old)}); "
                    f"this config asks for chunks of {plan['chunk_size']} ({shape(plan)}): a run keeps the chunking "
                    f"it started with. Resume it with experiment.chunk_size = {old.get('chunk_size')}, or use another "
                    f"--out directory.{started}"
                )
            raise RunDirError(
                f"{self.path} holds a different run (experiment hash {old.get('hash')}, {shape(old)}); this config "
                f"has hash {plan['hash']}, {shape(plan)} (a different config, or a mascot version whose results for it "
                f"differ). Use another --out directory.{started}"
            )
        if old["n_points"] != plan["n_points"] or old["n_chunks"] != plan["n_chunks"]:  # the same experiment and
            # chunk size cannot have another grid: run.json was edited or damaged
            raise RunDirError(
                f"{pf} does not match this config ({shape(old)} there, {shape(plan)} here, under the same experiment "
                "hash): run.json was edited or damaged and the run directory cannot be trusted: use another --out"
            )
        if not (self.path / "config.toml").exists():  # lost (or its writer was killed): the same experiment's
            atomic_write_text(self.path / "config.toml", cfg.text)  # text restores it
        self._check_config(old)  # run.json and config.toml agree (a hand-edited kind or name), as status checks

    def _started_with(self) -> str:
        """The command-line overrides the run was started with (its config.toml's first line), or ``""``."""
        try:
            first = (self.path / "config.toml").read_text().split("\n", 1)[0]
        except (OSError, UnicodeDecodeError):
            return ""
        marker = "with the command-line overrides: "
        return first.split(marker, 1)[1] if marker in first else ""

    @staticmethod
    def _read_plan(pf: Path) -> dict:
        current = pf.name == RUN_JSON  # (else plan.json of a directory written before run.json: the plan itself)
        meta = read_run_json(pf, kind=SWEEP_KIND if current else None, error=RunDirError, hint=_REBUILD)
        if meta is None:
            raise RunDirError(f"{pf} vanished while it was read; the run directory cannot be trusted")
        plan = meta.get("identity") if current else meta
        counts = ("n_points", "chunk_size", "n_chunks")
        ok = (
            isinstance(plan, dict)
            and isinstance(plan.get("hash"), str)
            and all(type(plan.get(k)) is int and plan[k] >= 1 for k in counts)
        )
        if not ok:
            raise RunDirError(
                f"{pf} is corrupt (needs a string hash and integers >= 1 for {', '.join(counts)}); {_REBUILD}"
            )
        if isinstance(plan.get("identity"), int) and plan["identity"] > IDENTITY:
            raise RunDirError(
                f"{pf} was written by a newer mascot (run identity {plan['identity']}; this version makes "
                f"identity {IDENTITY}): use that version for it, or run the config again into a new --out"
            )
        if plan.get("identity") != IDENTITY:
            raise RunDirError(
                f"{pf} was written by mascot 0.1, whose experiment hashes (so every seed) came from grid "
                "values computed on the processor; this version seeds from the config as written and "
                "would draw different numbers, so it does not resume, check or merge that directory: "
                "run the config again into a new --out (mascot 0.1 still reads the old one)"
            )
        if plan["n_chunks"] != -(-plan["n_points"] // plan["chunk_size"]):
            raise RunDirError(
                f"{pf} is corrupt: n_chunks = {plan['n_chunks']} but {plan['n_points']} points in chunks "
                f"of {plan['chunk_size']} make {-(-plan['n_points'] // plan['chunk_size'])}; use another "
                "--out or delete the directory"
            )
        return plan

    def _check_config(self, plan: dict) -> str:
        """The run's config.toml text, checked against the plan in run.json (a plan edited by hand, or a config.toml
        replaced, would otherwise be trusted by status and merge)."""
        from mascot.sweep.config import ConfigError, parse_config

        f, pf = self.path / "config.toml", self.plan_file()
        if not f.exists():
            raise RunDirError(
                f"{f} is missing; rerun `mascot run CONFIG --out {self.path}` with the run's config to restore it"
            )
        text = read_text_file(f, "run directory's config.toml")
        try:
            cfg = parse_config(text, str(f), check_points=False, values=False)
        except ConfigError as e:
            raise RunDirError(f"{f} is not a valid config ({e}); the run directory cannot be trusted") from None
        mine = _plan_of(cfg)
        if any(plan.get(k) != v for k, v in mine.items()):
            diff = ", ".join(f"{k} {plan.get(k)} there, {v} in the config" for k, v in mine.items() if plan.get(k) != v)
            raise RunDirError(
                f"{pf} does not match {f} ({diff}): one of them was edited. If the chunks are of the config "
                f"the run was started with, {_REBUILD.replace('delete it', f'delete {pf.name}')}; else run the "
                "config again into a new --out"
            )
        return text

    def plan(self) -> dict:
        if self.path.exists() and not self.path.is_dir():
            raise RunDirError(f"{self.path} is a file, not a mascot run directory")
        pf = self.plan_file()
        if not self.path.exists():
            raise NotFoundError(f"{self.path} does not exist (give the run directory `mascot run --out` wrote)")
        self.refuse_links()
        if not pf.exists():
            raise NotFoundError(f"{self.path} is not a mascot run directory (no run.json)")
        return self._read_plan(pf)

    # -- chunks -------------------------------------------------------------------------------
    def check_chunk(self, c: int, plan: dict) -> str | None:
        """Why chunk ``c``'s file is not a complete chunk of ``plan`` (None: it is). Its data are read with
        page-checksum verification (a byte damaged on disk; chunks written before checksums were added are
        only decoded)."""
        return self._read_chunk(c, plan)[0]

    def _read_chunk(self, c: int, plan: dict, data: bool = True) -> tuple[str | None, pa.Table | None, int]:
        """``(why chunk c is not complete, None, 0)`` or ``(None, its verified table, its rows)``: see
        :meth:`check_chunk`. ``data=False``: the footer and metadata only (row count and columns from the
        footer; no table)."""
        path = self.chunk_path(c)
        try:
            md = pq.read_metadata(path)
        except (OSError, ValueError, pa.ArrowException) as e:
            return f"unreadable Parquet ({str(e).splitlines()[0][:160]})", None, 0
        try:
            meta = json.loads((md.metadata or {}).get(META_KEY, b"null"))
        except ValueError:
            meta = None
        if not isinstance(meta, dict):
            return "no mascot metadata", None, 0
        start = c * plan["chunk_size"]
        want = [start, min(start + plan["chunk_size"], plan["n_points"])]
        if meta.get("config_hash") != plan["hash"]:
            return (
                f"experiment hash {meta.get('config_hash')} is not this run's {plan['hash']} (another config)",
                None,
                0,
            )
        if meta.get("chunk") != c or meta.get("points") != want:
            return (
                (
                    f"holds chunk {meta.get('chunk')} (points {meta.get('points')}), not chunk {c} (points {want}): "
                    "a copied or renamed file"
                ),
                None,
                0,
            )
        if md.num_rows < 1:
            return "no rows", None, 0
        table = None
        if data:
            try:
                table = _read_verified(path)
            except (OSError, ValueError, pa.ArrowException) as e:
                return f"damaged data ({str(e).splitlines()[0][:120]})", None, 0
        rows = md.num_rows if table is None else table.num_rows
        if "rows" in meta and not (meta["rows"] == rows == md.num_rows):  # (older chunks: not recorded)
            where = "in the footer" if table is None else "read"
            return f"damaged footer ({rows} rows {where}, {meta['rows']} written)", None, 0
        try:
            schema = md.schema.to_arrow_schema() if table is None else table.schema
        except (ValueError, pa.ArrowException):
            return "damaged footer (its schema does not read back)", None, 0
        if "columns" in meta and meta["columns"] != _fingerprint(schema):
            return "damaged footer (the columns read back are not the columns written)", None, 0
        return None, table, rows

    def scan(
        self, only=None, tables: dict | None = None, data: bool = True, rows: dict | None = None
    ) -> tuple[set[int], dict[Path, str], list[Path]]:
        """``(complete chunk indices, {bad chunk file: why}, foreign files in chunks/)`` against the plan;
        ``only``: check only these chunk indices (a shard's), data included; ``tables``: a dict that receives
        each complete chunk's verified table (so a merge reads every chunk once), ``rows`` its row count;
        ``data=False``: footers and metadata only (``mascot status --quick``: a damaged data page is not found)."""
        plan = self.plan()
        done, bad, foreign = set(), {}, []
        if not self.chunks.exists():
            return done, bad, foreign
        for p in sorted(self.chunks.iterdir()):
            m = _CHUNK_NAME.fullmatch(p.name)
            if p.name.startswith(".") and p.name.endswith(".tmp"):
                continue  # a writer's temporary (in flight, or removed when a runner starts alone)
            if m is None or int(m.group(1)) >= plan["n_chunks"] or not p.is_file():
                foreign.append(p)
                continue
            if only is not None and int(m.group(1)) not in only:
                continue
            why, table, n_rows = self._read_chunk(int(m.group(1)), plan, data)
            if why is None:
                done.add(int(m.group(1)))
                if tables is not None:
                    tables[int(m.group(1))] = table
                if rows is not None:
                    rows[int(m.group(1))] = n_rows
            else:
                bad[p] = why
        return done, bad, foreign

    def done(self, only=None) -> set[int]:
        """Indices of the complete chunks (see :meth:`check_chunk`; ``only``: among these)."""
        if not self.plan_file().exists():
            return set()
        return self.scan(only)[0]

    def missing(self) -> list[int]:
        n = self.plan()["n_chunks"]
        done = self.done()
        return [c for c in range(n) if c not in done]

    # -- status and merge -----------------------------------------------------------------------
    def status(self, quick: bool = False) -> dict:
        """Progress against the plan. Every complete chunk's data pages are verified unless ``quick`` (footers
        and metadata only: much faster on large runs, but a damaged data page counts as complete until a run
        or merge reads it)."""
        plan = self.plan()
        self._check_config(plan)
        counts: dict[int, int] = {}
        done, bad, foreign = self.scan(data=not quick, rows=counts)
        rows = sum(counts.values())
        missing = [c for c in range(plan["n_chunks"]) if c not in done]
        return dict(
            plan,
            chunks_done=len(done),
            rows=rows,
            missing=len(missing),
            verified="footers" if quick else "data",
            missing_chunks=_ranges(missing),
            complete=not missing,
            bad_chunks={str(p): why for p, why in bad.items()},
            foreign_files=[str(p) for p in foreign],
        )

    def _check_merge_out(self, out: Path) -> None:
        ro, rd = out.resolve(), self.path.resolve()
        if out.exists() and out.is_dir():
            eg = (
                out / "merged.parquet"
                if not (ro == rd / "chunks" or ro.is_relative_to(rd / "chunks"))
                else self.path / "merged.parquet"
            )
            raise InputError(f"--out {out} is a directory; give the merged file's path (e.g. {eg})")
        if any(p.exists() and not p.is_dir() for p in out.parents):
            raise InputError(
                f"--out {out}: {next(p for p in out.parents if p.exists() and not p.is_dir())} is a "
                "file, not a directory"
            )
        own = ro.parent == rd and (ro.name in _OWN_FILES or ro.name.endswith((".lock", ".tmp")))
        if ro.is_relative_to(rd / "chunks") or own:
            raise InputError(
                f"--out {out} would overwrite the run directory's own files; write the merged dataset "
                f"to {self.path / 'merged.parquet'} or outside {self.path}"
            )
        if out.exists():  # replace an earlier merged dataset of this experiment, never another file
            meta = merged_metadata(out)
            if meta is None:
                raise InputError(
                    f"--out {out} exists and is not a merged mascot dataset; remove it or give another path"
                )
            plan = self.plan()
            if meta["plan"].get("hash") != plan["hash"]:
                raise InputError(
                    f"--out {out} holds the merged dataset of another experiment ({meta['plan'].get('name')!r}, "
                    f"hash {meta['plan'].get('hash')}; this run is {plan['name']!r}, hash {plan['hash']}): "
                    "remove it or give another path"
                )
        if out.suffix.lower() != ".parquet":
            # (outside testers: --out m.csv wrote Parquet under a .csv name; a name without one, plot then refused)
            raise InputError(f"--out {out}: the merged dataset is a Parquet file; name it .parquet")

    def merge(self, out=None) -> Path:
        """Check completeness and write one Parquet file sorted by (point, ...)."""
        out = Path(out) if out else self.path / "merged.parquet"
        self._check_merge_out(out)
        plan = self.plan()
        config = self._check_config(plan)
        try:  # no runner's clean-up removes our temporary file
            lock = self._shared_lock(time.monotonic() + 30.0)
        except OSError as e:
            if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            lock = None  # a run directory nobody can write to: no runner cleans it up either
        try:
            return self._merge(out, plan, config)
        finally:
            if lock is not None:
                lock.release()

    def _merge(self, out: Path, plan: dict, config: str) -> Path:
        """Stream the chunks into ``out`` in point order, one verified chunk in memory at a time (plus a row group
        being filled): memory is bounded by the chunk size, never by the run's rows."""
        done, bad, foreign = self.scan(data=False)  # footers: completeness, schemas and metadata, no data
        for p in foreign:
            _log.warning(f"ignoring {p}: not a chunk of this run")
        n = plan["n_chunks"]
        if len(done) < n:  # name every unusable chunk at once: the other chunks' data pages are checked too
            done, bad, _ = self.scan()
        self._refuse_missing(done, bad, n)
        footers = [pq.read_metadata(self.chunk_path(c)) for c in range(n)]
        meta = [json.loads(md.metadata[META_KEY]) for md in footers]
        schemas = [md.schema.to_arrow_schema() for md in footers]
        # every field nullable except those required in every chunk (chunks written before a kind's columns
        # became required still merge)
        required = set.intersection(*({f.name for f in sc if not f.nullable} for sc in schemas))
        fields = [f.with_nullable(f.name not in required) for f in schemas[0]]
        from mascot.sweep.kinds import KINDS

        kind = KINDS.get(plan.get("kind")) if isinstance(plan, dict) else None
        codes = kind.codes if kind is not None else {}
        fields = [f.with_metadata({b"labels": json.dumps(codes[f.name])}) if f.name in codes else f for f in fields]
        merged_meta = dict(
            plan=plan,
            config=config,
            chunks=[{k: m.get(k) for k in ("chunk", "shard", "start", "end", "devices")} for m in meta],
            **provenance(),
        )
        schema = pa.schema(fields)
        merged_meta.update(rows=sum(md.num_rows for md in footers), columns=_fingerprint(schema))
        schema = schema.with_metadata({META_KEY: json.dumps(merged_meta)})
        keys = [("point", "ascending")] + [(k, "ascending") for k in ROW_SUBKEYS if k in schema.names]
        out.parent.mkdir(parents=True, exist_ok=True)
        # a killed earlier merge into the same file left its temporary beside it (in the run directory, opening
        # it removes them; elsewhere only a merge to the same path knows they are ours)
        for left in out.parent.glob(f".{glob.escape(out.name)}.*.tmp"):
            if re.fullmatch(rf"\.{re.escape(out.name)}\.[A-Za-z0-9_]{{8}}\.tmp", left.name) and not left.is_symlink():
                left.unlink(missing_ok=True)
        try:
            with atomic_path(out) as tmp:
                with pq.ParquetWriter(
                    tmp,
                    schema,
                    compression="lz4",
                    use_dictionary=False,
                    write_statistics=[k for k, _ in keys],
                    write_page_checksum=True,
                ) as writer:
                    buf, size = [], 0
                    for c in range(n):
                        why, table, _ = self._read_chunk(c, plan)  # every data page verified
                        if why is not None:
                            raise _ChunkLost(f"chunk {c} ({self.chunk_path(c)}): {why}")
                        for name in required:
                            if table.column(name).null_count:
                                raise InputError(f"{self.chunk_path(c)}: column {name!r} must not hold nulls")
                        # chunks cover disjoint, increasing point ranges: sorting each one (a stable sort)
                        # gives the order of sorting them all
                        table = table.sort_by(keys).replace_schema_metadata(None)
                        buf.append(pa.Table.from_arrays(table.columns, schema=schema))
                        size += table.nbytes
                        if size >= _ROW_GROUP_BYTES or c == n - 1:
                            writer.write_table(pa.concat_tables(buf), row_group_size=1 << 62)
                            buf, size = [], 0
        except _ChunkLost as lost:  # damaged since the footer scan: name every unusable chunk, as a full scan does
            done, bad, _ = self.scan()
            self._refuse_missing(done, bad, n)
            raise MissingChunksError(f"{lost} (run `mascot run` again to compute it)") from None
        except OSError as e:  # disk full, quota, permissions: one line naming the file (nothing partial is left)
            raise OSError(e.errno, f"cannot write {out}: {os.strerror(e.errno) if e.errno else e}") from None
        return out

    def _refuse_missing(self, done: set, bad: dict, n: int) -> None:
        missing = [c for c in range(n) if c not in done]
        if missing:
            why = "".join(f"; invalid {p}: {w}" for p, w in list(bad.items())[:5])
            raise MissingChunksError(
                f"{len(missing)} of {n} chunks missing: {_ranges(missing)}{why} "
                "(run `mascot run` again to compute them)"
            )
