"""Calibration of the surrogate agent models to real runs and to the papers' tables (simulated method of
moments with optax). ``fit`` holds the optimiser; ``trials`` and ``deliberation`` the two protocols."""

from mascot import submodule_loader  # noqa: E402

__getattr__ = submodule_loader(__name__, __path__)  # (mascot.calibrate.MODULE after import mascot)
