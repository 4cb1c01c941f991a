"""Design before you spend: choose consensus weights (and, later, switching thresholds and budgets) for a
topology before running any LLM. ``fastest_weights``: the fastest-contraction symmetric doubly stochastic
weights on a graph (optax on an exactly feasible parameterisation; checked against the SDP optimum)."""

from mascot.design.weights import WeightsResult, contraction_rate_sym, fastest_weights, support_edges  # noqa: F401
