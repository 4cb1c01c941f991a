"""Pure JAX kernels (jit/vmap-ready, no I/O, no host threads): the switching rule, consensus rollouts, SR
spectra, affine noise, the state-tracking rule and the surrogate deliberation. The host driver that chunks
consensus batches over devices is :mod:`mascot.execute`; topology builders are in :mod:`mascot.graphs`."""

from mascot.kernels.consensus import STRATEGIES, ConsensusResult, common_eigenbasis, noise_draws  # noqa: F401
from mascot.kernels.noise import affine_noise_point, rule_noise_point  # noqa: F401
from mascot.kernels.spectra import (  # noqa: F401
    SRSpectra,
    TimeVaryingKappa,
    gat_transition,
    sr_spectra,
    time_varying_kappa,
    time_varying_sr,
)
from mascot.kernels.state_tracking import rule_step, rule_trajectory  # noqa: F401


def _listen_for_compiles() -> None:
    """mascot.log's first-compile notice hears JAX's compile events (silent unless the command line asks)."""
    import jax.monitoring

    from mascot.log import compile_listener

    jax.monitoring.register_event_duration_secs_listener(compile_listener)


_listen_for_compiles()

from mascot import submodule_loader  # noqa: E402

__getattr__ = submodule_loader(__name__, __path__)  # (mascot.kernels.MODULE after import mascot)
