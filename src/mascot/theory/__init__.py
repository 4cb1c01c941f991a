"""Closed forms in float64 numpy: the ground truth that :mod:`mascot.kernels` is tested against."""

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
