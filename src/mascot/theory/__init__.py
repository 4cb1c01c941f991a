"""Closed forms in float64 numpy: the ground truth that :mod:`mascot.kernels` is tested against."""

from mascot import submodule_loader  # noqa: E402
from mascot.theory.consensus import (  # noqa: F401
    STATUS_NAMES,
    Algorithm1Result,
    Certificate,
    Corollary,
    algorithm1,
    certificate_budget,
    circulant_contraction_rate,
    contraction_rate,
    corollary1,
    disagreement,
    in_certificate_region,
    is_circulant,
    rounds_to_reach,
    theorem1,
    theorem1_batch,
    validate_doubly_stochastic,
)
from mascot.theory.noise import (  # noqa: F401
    aggregated_variance,
    bias_aware_gain,
    ceg_ratio,
    drift_corrected_gain,
    expected_ceg,
    infer_rho_c,
)
from mascot.theory.spectra import (  # noqa: F401
    SRDiagnostics,
    cap_influence,
    closed_form_diagnostics,
    malicious_leaf_bound,
    malicious_leaf_mu2,
    sr_diagnostics,
    successor_representation,
)
from mascot.theory.state_tracking import apply_rules  # noqa: F401

__getattr__ = submodule_loader(__name__, __path__)  # (mascot.theory.MODULE after import mascot)
