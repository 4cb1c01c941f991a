"""One enumeration of how a consensus run ends, and one vocabulary of switching strategies, shared by the
kernels, the theory references, the drivers, the sweeps, the deliberation harness and the reports (imports
nothing of mascot).

The integer codes are those the kernels store (``ConsensusResult.status``, ``DeliberationResult.status``);
the labels are those written to run records and tables.
"""

from __future__ import annotations

import enum

from mascot.errors import InputError

__all__ = ["Status", "STATUS_NAMES", "STRATEGIES", "STRATEGY_ALIASES", "canonical_strategy"]

#: How a run chooses its mode each round: Algorithm 1's norm-threshold rule, or one mode throughout.
STRATEGIES = ("adaptive", "mode1", "mode2")
#: The consensus paper's names of the fixed strategies (mode 1 = complete K_N, mode 2 = ring C_N), accepted
#: everywhere a strategy is (Python API, sweeps, command line, deliberation).
STRATEGY_ALIASES = {"complete": "mode1", "ring": "mode2"}


def canonical_strategy(name) -> str:
    """``"adaptive"``, ``"mode1"`` or ``"mode2"`` for a strategy or its alias; ``ValueError`` otherwise."""
    canon = STRATEGY_ALIASES.get(name, name) if isinstance(name, str) else name
    if canon not in STRATEGIES:
        raise InputError(f"strategy must be one of adaptive, complete (= mode1), ring (= mode2); got {name!r}")
    return canon


class Status(enum.IntEnum):
    """How a trajectory / lane stopped (Algorithm 1 of the consensus paper, plus the online monitor)."""

    CONSENSUS = 0  # D(k) <= eps
    BUDGET_FAIL = 1  # b_k < c_sigma before a round (Algorithm 1) or b_k < 0 after one (the live rule)
    MAX_ROUNDS = 2  # still above eps after max_rounds rounds
    PREDICTED_BUDGET_FAIL = 3  # the online monitor stopped the lane: b_k < B*(D(k)) with estimated rates

    @property
    def label(self) -> str:
        """The name written to run records and tables: consensus, BudgetFail, max_rounds, predicted_BudgetFail."""
        return _LABELS[self]

    @classmethod
    def from_label(cls, label: str) -> Status:
        for s, name in _LABELS.items():
            if name == label:
                return s
        raise InputError(f"unknown status {label!r}; one of {', '.join(_LABELS.values())}")


_LABELS = {
    Status.CONSENSUS: "consensus",
    Status.BUDGET_FAIL: "BudgetFail",
    Status.MAX_ROUNDS: "max_rounds",
    Status.PREDICTED_BUDGET_FAIL: "predicted_BudgetFail",
}

# code -> label, for table building (every status; Algorithm 1 itself only ends in the first three)
STATUS_NAMES = {int(s): s.label for s in Status}
