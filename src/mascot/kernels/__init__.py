"""Pure JAX kernels (jit/vmap-ready, no I/O) and the topology builders they run on."""

from mascot.kernels.consensus import (  # noqa: F401
    STRATEGIES,
    ConsensusResult,
    common_eigenbasis,
    noise_draws,
    simulate_consensus,
)
from mascot.kernels.noise import affine_noise_error, rule_noise_error  # noqa: F401
from mascot.kernels.spectra import (  # noqa: F401
    SRSpectra,
    TimeVaryingKappa,
    gat_transition,
    sr_spectra,
    time_varying_kappa,
    time_varying_sr,
)
from mascot.kernels.state_tracking import rule_step, rule_trajectory  # noqa: F401
from mascot.kernels.topology import (  # noqa: F401
    chain,
    circulant,
    complete_self,
    complete_weights,
    erdos_renyi,
    from_spec,
    malicious_star,
    mesh,
    paper_modes,
    random_regular,
    ring,
    ring_weights,
    row_normalize,
    star,
    watts_strogatz,
)
