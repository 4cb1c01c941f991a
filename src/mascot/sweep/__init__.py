"""Config-driven, chunked, resumable sweeps (local or Slurm) that write Parquet."""

from mascot.sweep.config import ConfigError, SweepConfig, expand_grid, load_config, parse_config  # noqa: F401
from mascot.sweep.runner import RunSummary, estimate_chunk_bytes, parse_shard, run_sweep  # noqa: F401
from mascot.sweep.store import MissingChunksError, RunDir  # noqa: F401
