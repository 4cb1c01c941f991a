"""Pure JAX kernels (jit/vmap-ready, no I/O) and the topology builders they run on."""

from mascot.kernels.consensus import (  # noqa: F401
    STRATEGIES,
    ConsensusResult,
    common_eigenbasis,
    noise_draws,
    simulate_consensus,
)
from mascot.kernels.topology import circulant, complete_weights, paper_modes, ring_weights  # noqa: F401
