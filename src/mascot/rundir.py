"""Run directories: the one format every mascot run writes, and what opens one.

Every run directory (a sweep's chunked Parquet, the LLM harnesses' records) holds a ``run.json``::

    {"kind": "mascot-sweep" | "mascot-trials" | "mascot-deliberation" | "mascot-debate" | ...,
     "identity": {...},   # what makes a rerun the same run: it resumes only when this matches
     "created": "...",    # UTC, ISO 8601
     ...}                 # the kind's own keys (the harnesses' sessions, completion, summaries)

:func:`read_run_json` reads it (naming the file when it is corrupt or of another kind), :func:`lock_run_dir`
keeps a second writer out while one runs, and :func:`begin_run` is what every LLM protocol does first:
lock, resolve the backend, and open or resume the directory against its identity. The sweep's chunk store
(:class:`mascot.sweep.store.RunDir`) keeps its plan as the identity of the same file."""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from mascot.errors import InputError
from mascot.io import DirLock, canonical, lock_dir, remove_stale_temps, utc_now  # noqa: F401 (utc_now re-exported)

#: the file every run directory holds
RUN_JSON = "run.json"

_HELD: weakref.WeakValueDictionary[str, DirLock] = weakref.WeakValueDictionary()


def lock_run_dir(out) -> DirLock:
    """Take ``out``'s exclusive run lock (creating the directory) and remove the temporary files a killed
    writer left there. Keep the returned lock referenced while writing: a second process opening the same
    directory gets ``mascot.io.DirectoryLocked`` naming the directory and this process's pid; the OS
    releases the lock when this process exits or dies, so a crash never leaves a stale lock.

    Within one process the lock is re-entrant (a lock this process still holds for ``out``, e.g. kept alive
    by a caught exception's traceback, is returned again): it keeps other processes out, not the caller."""
    key = os.path.realpath(out)
    held = _HELD.get(key)
    if held is not None and held.fd is not None:
        return held
    lock = lock_dir(out)
    remove_stale_temps(out)
    _HELD[key] = lock
    return lock


def read_run_json(
    path: Path,
    *,
    kind: str | None = None,
    error: type[Exception] = InputError,
    kind_optional: bool = False,
    hint: str = "use another --out, or delete the directory",
) -> dict | None:
    """The ``run.json`` at ``path`` as a dict, or ``None`` when there is none. Raises ``error`` naming the file
    when it does not parse or is not an object (followed by ``hint``, what to do), and, given ``kind``, when it
    belongs to a run of another kind (``kind_optional``: a file without a ``kind``, as older versions of some
    runs wrote, is accepted)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        meta = json.loads(path.read_bytes())
    except (ValueError, OSError) as e:
        raise error(f"{path} is corrupt ({e}); {hint}") from None
    if not isinstance(meta, dict):
        raise error(f"{path} is corrupt (not an object); {hint}")
    if kind is not None and meta.get("kind") != kind and not (kind_optional and "kind" not in meta):
        raise error(
            f"{path.parent} is not a {kind.replace('-', ' ')} directory (its run.json is of "
            f"kind {meta.get('kind')!r}); use another --out"
        )
    return meta


def identity_diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    """Differences between a stored identity ``a`` and the current one ``b``, as ``key: old (in
    run.json) vs new (now)`` lines (nested keys dotted, values shortened to 60 characters)."""
    out = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k, "<absent>"), b.get(k, "<absent>")
        if isinstance(va, dict) and isinstance(vb, dict):
            out += identity_diff(va, vb, prefix + k + ".")
        elif va != vb:
            out.append(f"{prefix}{k}: {repr(va)[:60]} (in run.json) vs {repr(vb)[:60]} (now)")
    return out


def has_results(path: Path) -> bool:
    """Whether ``path`` (a records file, or a folder of them) holds committed results: a non-empty file, or
    a folder with a file that is not a writer's temporary (``*.tmp``, dot-files)."""
    if path.is_dir():
        return any(p.is_file() and not p.name.startswith(".") and not p.name.endswith(".tmp") for p in path.iterdir())
    return path.is_file() and path.stat().st_size > 0


def not_a_run_dir(out, what: str) -> None:
    """Refuse ``out`` as the output folder of ``what`` (a report, reproduction, design or calibration) when it
    is a run directory: its files would land among a run's records (a sweep's run.json, or the plan.json of an
    earlier 0.2 sweep). Raises :class:`~mascot.errors.RunDirError`."""
    from mascot.errors import RunDirError

    for name in (RUN_JSON, "plan.json"):
        if (Path(out) / name).is_file():
            raise RunDirError(
                f"{out} is a run directory (it holds {name}); {what} writes its files elsewhere: choose another --out"
            )


def orphan_message(out: Path, results: str) -> str | None:
    """The refusal for a directory holding ``results`` (a file or non-empty folder) but no ``run.json``."""
    path = out / results
    present = path.exists() and (not path.is_dir() or any(path.iterdir()))
    if present and not (out / RUN_JSON).exists():
        return f"{path} exists but {out / RUN_JSON} does not; use another --out"
    return None


def resolve_backend(backend, backend_spec: dict | None, spec_of: Callable) -> tuple[Callable | None, dict]:
    """``(factory, backend_spec)``: a zero-argument factory (called only when work remains; it needs an
    explicit ``backend_spec``) or ``None`` for a ready backend, whose spec defaults to ``spec_of(backend)``."""
    if callable(backend) and not hasattr(backend, "generate"):
        if backend_spec is None:
            raise InputError("pass backend_spec when backend is a factory")
        return backend, backend_spec
    return None, backend_spec if backend_spec is not None else spec_of(backend)


def open_run_dir(
    out: Path,
    *,
    kind: str,
    identity: dict,
    label: str,
    orphan: str | None,
    fresh: dict,
    n_diffs: int = 6,
    check_kind: bool = True,
    results: str | None = None,
) -> dict:
    """Create ``out`` and return its ``run.json`` metadata: the stored one when the identity matches, else
    ``fresh`` for a new directory. Raises ``ValueError`` for a directory of another kind, another identity
    (naming up to ``n_diffs`` differences), or results without ``run.json`` (``orphan``: the message). A
    directory whose run never committed anything (no ``results``: e.g. it stopped on a bad option, a wrong
    model name or an unreachable server) starts over with the new parameters instead of refusing them.
    ``check_kind=False``: a ``run.json`` without a ``kind`` is accepted (one of another kind never is)."""
    out.mkdir(parents=True, exist_ok=True)
    meta = read_run_json(out / RUN_JSON, kind=kind, kind_optional=not check_kind)
    if meta is not None:
        if meta.get("identity") != identity and results is not None and not has_results(out / results):
            return fresh
        if meta.get("identity") != identity:
            diffs = identity_diff(meta.get("identity", {}), identity)
            raise InputError(
                f"{out} holds {label} with different parameters ({'; '.join(diffs[:n_diffs])}); "
                "use another --out, or delete the directory to start over"
            )
        return meta
    if orphan is not None:
        raise InputError(orphan)
    return fresh


def surrogate_aware_spec(backend, surrogate_cls) -> dict:
    """A backend's run-identity spec: name and model, plus the options of a ``surrogate_cls`` instance (the
    protocol's own surrogate, whose options change its answers)."""
    spec = {"name": getattr(backend, "name", type(backend).__name__), "model": getattr(backend, "model", None)}
    if isinstance(backend, surrogate_cls):
        spec["options"] = backend.options()
    return spec


class RunStart(NamedTuple):
    lock: object  # keep referenced while writing (the directory's exclusive lock)
    factory: Callable | None
    backend_spec: dict
    identity: dict
    meta: dict


def begin_run(
    out: Path,
    *,
    kind: str,
    label: str,
    config_identity: dict,
    backend,
    backend_spec: dict | None,
    spec_of: Callable,
    results: str,
    fresh_extra: Callable | None = None,
    n_diffs: int = 6,
    check_kind: bool = True,
) -> RunStart:
    """What every LLM protocol does first: lock ``out``, resolve the backend (or factory) and its spec, build
    the run identity ``{"config", "backend"}`` and open (or resume) the directory (:func:`open_run_dir`);
    ``results`` names the records whose presence without ``run.json`` makes the directory an orphan;
    ``fresh_extra(identity)`` gives extra keys for a new directory's ``run.json``."""
    lock = lock_run_dir(out)
    factory, backend_spec = resolve_backend(backend, backend_spec, spec_of)
    identity = canonical({"config": config_identity, "backend": backend_spec})
    extra = fresh_extra(identity) if fresh_extra is not None else {}
    fresh = {"kind": kind, "identity": identity, **extra, "created": utc_now(), "sessions": []}
    meta = open_run_dir(
        out,
        kind=kind,
        identity=identity,
        label=label,
        orphan=orphan_message(out, results),
        fresh=fresh,
        n_diffs=n_diffs,
        check_kind=check_kind,
        results=results,
    )
    return RunStart(lock, factory, backend_spec, identity, meta)
