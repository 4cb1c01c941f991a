"""The consensus paper's budgeted LLM deliberation (Sec. V-C) on any backend.

Modules: ``config`` (roles, axes, strategies, :class:`DeliberationConfig`), ``prompts``, ``parsing`` (reading a
reply's vector), ``surrogate`` (agents without an LLM), ``records`` (``rounds.jsonl`` and the estimates made
from it) and ``harness`` (:func:`run_deliberation`). The budget monitor's numerics are
:mod:`mascot.theory.monitor`; the report is :mod:`mascot.analysis.deliberation_report`.
"""

from mascot.protocols.deliberation.config import (
    PAPER_AXES,
    PAPER_ROLES,
    PAPER_TASK,
    STATUSES,
    STRATEGIES,
    Axis,
    DeliberationConfig,
    MonitorConfig,
    Role,
    load_deliberation_config,
)
from mascot.protocols.deliberation.harness import DeliberationRun, run_deliberation
from mascot.protocols.deliberation.parsing import VectorParse, parse_vector
from mascot.protocols.deliberation.prompts import initial_messages, round_messages, system_prompt
from mascot.protocols.deliberation.records import (
    claude_example,
    lane_summaries,
    mode_statistics,
    posthoc_certificates,
    read_rounds,
)
from mascot.protocols.deliberation.surrogate import SurrogateDeliberationBackend, count_tokens
from mascot.theory.monitor import BudgetMonitor, strategy_budget

__all__ = [
    "Role",
    "Axis",
    "PAPER_ROLES",
    "PAPER_AXES",
    "PAPER_TASK",
    "MonitorConfig",
    "DeliberationConfig",
    "load_deliberation_config",
    "VectorParse",
    "parse_vector",
    "system_prompt",
    "initial_messages",
    "round_messages",
    "BudgetMonitor",
    "strategy_budget",
    "SurrogateDeliberationBackend",
    "run_deliberation",
    "DeliberationRun",
    "read_rounds",
    "lane_summaries",
    "mode_statistics",
    "posthoc_certificates",
    "claude_example",
    "STRATEGIES",
    "STATUSES",
    "count_tokens",
]

from mascot import submodule_loader  # noqa: E402

__getattr__ = submodule_loader(__name__, __path__)  # (mascot.protocols.deliberation.MODULE after import mascot)
