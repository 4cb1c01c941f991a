"""Paper tables, figures and statistics built from kernel outputs (the I/O shell around the kernels)."""

from mascot import submodule_loader  # noqa: E402

__getattr__ = submodule_loader(__name__, __path__)  # (mascot.analysis.MODULE after import mascot)
