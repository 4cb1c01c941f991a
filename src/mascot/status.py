"""One enumeration of how a consensus run ends, shared by the kernels, the theory references, the
deliberation harness and the reports (imports nothing of mascot).

The integer codes are those the kernels store (``ConsensusResult.status``, ``DeliberationResult.status``);
the labels are those written to run records and tables.
"""

from __future__ import annotations

import enum

__all__ = ["Status", "STATUS_NAMES"]


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
    def from_label(cls, label: str) -> "Status":
        for s, name in _LABELS.items():
            if name == label:
                return s
        raise ValueError(f"unknown status {label!r}; one of {', '.join(_LABELS.values())}")


_LABELS = {Status.CONSENSUS: "consensus", Status.BUDGET_FAIL: "BudgetFail", Status.MAX_ROUNDS: "max_rounds",
           Status.PREDICTED_BUDGET_FAIL: "predicted_BudgetFail"}

# code -> label, for table building (every status; Algorithm 1 itself only ends in the first three)
STATUS_NAMES = {int(s): s.label for s in Status}
