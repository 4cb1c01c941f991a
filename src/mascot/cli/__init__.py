"""The ``mascot`` command: the only place that sets process-wide switches (``jax_enable_x64``, BLAS thread
limits, the matplotlib backend)."""

from mascot.cli.main import main  # noqa: F401
