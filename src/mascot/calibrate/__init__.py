"""Calibration of the surrogate agent models to real runs and to the papers' tables (simulated method of
moments with optax). ``fit`` holds the optimiser; ``trials`` and ``deliberation`` the two protocols."""
