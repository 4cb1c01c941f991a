"""Design before you spend: choose consensus weights and budgets for a topology before running any LLM.
``fastest_weights``: the fastest-contraction symmetric doubly stochastic weights on a graph (an interior-point
method for the fastest-mixing SDP, each answer with a certified optimality gap). ``budget_risk``: P(BudgetFail) and the budget for a
target risk by Monte Carlo of Algorithm 1, beside Theorem 1's worst case."""

from mascot import submodule_loader  # noqa: E402
from mascot.design.budget import BudgetRisk, budget_risk  # noqa: F401
from mascot.design.policy import CertificateChoice, certificate_best_eta, threshold_frontier  # noqa: F401
from mascot.design.weights import WeightsResult, contraction_rate_sym, fastest_weights, support_edges  # noqa: F401

__getattr__ = submodule_loader(__name__, __path__)  # (mascot.design.MODULE after import mascot)
