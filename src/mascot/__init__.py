"""mascot: Multi-Agent Spectral Consensus Toolkit.

JAX-accelerated switched-system consensus simulation, consensus-budget certificates, successor-
representation spectra, affine-noise Monte Carlo and sweeps for multi-agent LLM systems. The public API is re-exported here; implementations live in subpackages.
"""

from mascot.kernels import (  # noqa: F401
    ConsensusResult,
    affine_noise_error,
    sr_spectra,
    complete_weights,
    paper_modes,
    ring_weights,
    simulate_consensus,
)
from mascot.theory import (  # noqa: F401
    algorithm1,
    apply_rules,
    contraction_rate,
    corollary1,
    disagreement,
    in_certificate_region,
    theorem1,
)

__version__ = "0.1.0"
