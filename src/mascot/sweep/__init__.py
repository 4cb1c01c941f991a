"""Config-driven, chunked, resumable sweeps (local or Slurm) that write Parquet.

Reading and checking a config (:func:`load_config`, :func:`estimate_chunk_bytes`) loads neither JAX nor
pyarrow; the runner and the run directory load on first use."""

from mascot.sweep.config import ConfigError, SweepConfig, expand_grid, load_config, parse_config  # noqa: F401
from mascot.sweep.kinds import consensus_inputs, estimate_chunk_bytes  # noqa: F401

_LAZY = {
    "RunSummary": "runner",
    "parse_shard": "runner",
    "run_sweep": "runner",
    "MissingChunksError": "store",
    "RunDir": "store",
}
__all__ = [
    "ConfigError",
    "SweepConfig",
    "expand_grid",
    "load_config",
    "parse_config",
    "estimate_chunk_bytes",
    "consensus_inputs",
    *_LAZY,
]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"mascot.sweep.{_LAZY[name]}"), name)
    return _submodule(name)  # (mascot.sweep.store after import mascot)


from mascot import submodule_loader  # noqa: E402

_submodule = submodule_loader(__name__, __path__)
