"""Host drivers around the pure kernels: validation, set-up caches, chunking, devices, host threads and
conversion to numpy. ``simulate_consensus`` (Algorithm 1 rollouts) and ``affine_noise_error`` /
``rule_noise_error`` (affine-noise Monte Carlo) are the public entry points."""

from mascot import submodule_loader  # noqa: E402
from mascot.execute.consensus import ConsensusResult, simulate_consensus  # noqa: F401
from mascot.execute.noise import affine_noise_error, rule_noise_error  # noqa: F401
from mascot.execute.spectra import sr_spectra  # noqa: F401

__getattr__ = submodule_loader(__name__, __path__)  # (mascot.execute.MODULE after import mascot)
