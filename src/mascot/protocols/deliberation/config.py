"""Configuration of an LLM deliberation run (consensus paper, Sec. V-C): roles, axes, topologies, strategies,
budget and stopping rules, sampling and the online monitor; read from TOML by :func:`load_deliberation_config`.

The default scenario is the paper's (:mod:`mascot.papers`): Table II's five roles, the six architectural
axes, the emergency-app task, ``eta = 0.2``, ``eps = 0.05``, ``b0 = 100,000``. Strategies keep the
deliberation's labels ``adaptive``/``complete``/``ring`` in configs and records; the modes they use are
:data:`mascot.theory.monitor.STRATEGY_MODE` (complete = mode 1, ring = mode 2).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from mascot import papers
from mascot.backends.base import Sampling
from mascot.errors import InputError
from mascot.graphs import complete_weights, ring_weights
from mascot.io import read_toml
from mascot.limits import check_int
from mascot.status import Status
from mascot.theory.consensus import validate_doubly_stochastic
from mascot.theory.monitor import STRATEGIES, STRATEGY_MODE

__all__ = [
    "STRATEGIES",
    "STRATEGY_MODE",
    "STATUSES",
    "Role",
    "Axis",
    "PAPER_ROLES",
    "PAPER_AXES",
    "PAPER_TASK",
    "MonitorConfig",
    "DeliberationConfig",
    "load_deliberation_config",
    "check_int",
    "check_float",
]

#: How a lane can end, as written to ``rounds.jsonl`` (the labels of :class:`mascot.status.Status`).
STATUSES = tuple(s.label for s in Status)


@dataclass(frozen=True)
class Role:
    """One agent role (Table II): ``prompt`` is the role sentence of its system prompt; ``prior`` the
    role's typical vector (used by the surrogate and as the fallback when round 0 fails to parse).

    Fields: ``name`` a unique key; ``title`` how prompts call the agent; ``bias`` a short description of its
    leaning; ``prompt``, ``prior`` as above.
    """

    name: str
    title: str
    bias: str
    prompt: str
    prior: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Axis:
    name: str
    low: str
    high: str


PAPER_TASK = papers.DELIBERATION_TASK
PAPER_AXES = tuple(Axis(*a) for a in papers.DELIBERATION_AXES)
PAPER_ROLES = tuple(Role(**r) for r in papers.DELIBERATION_ROLES)


@dataclass(frozen=True)
class MonitorConfig:
    """Online certificate monitor. ``prior_lambda1/2`` default to the contraction rates of ``W1``/``W2``
    (Def. 6); ``n0`` is the prior's weight in pseudo-rounds; no stop before round ``warmup``; ``ceil``:
    check Theorem 1's ``B*`` (True) or the fractional point estimate of the spend (False).

    Fields: ``enabled`` stop a lane when the monitor's budget check fails; ``n0``, ``warmup``, ``ceil``,
    ``prior_lambda1``, ``prior_lambda2`` as above.
    """

    enabled: bool = False
    n0: float = 1.0
    warmup: int = 2
    ceil: bool = True
    prior_lambda1: float | None = None
    prior_lambda2: float | None = None


def check_float(name, v, *, lo=None, hi=None, lo_open=False) -> float:
    """``v`` as a finite float in the range (``lo_open``: ``> lo``); ``ValueError`` naming ``name`` otherwise."""
    if isinstance(v, (bool, str)):  # (a TOML "0.05" is text: a typo to name, not a number to guess)
        raise InputError(f"{name} must be a number; got {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number; got {v!r}") from None
    if not math.isfinite(f):
        raise InputError(f"{name} must be finite; got {v!r}")
    if lo is not None and (f <= lo if lo_open else f < lo):
        raise InputError(f"{name} must be {'>' if lo_open else '>='} {lo}; got {v!r}")
    if hi is not None and f > hi:
        raise InputError(f"{name} must be <= {hi}; got {v!r}")
    return f


@dataclass(frozen=True)
class DeliberationConfig:
    """Everything that defines a deliberation run (its identity; see :func:`load_deliberation_config`).

    ``W1``/``W2`` default to Table III generalised to N agents (``complete_weights(N, 0.4)``,
    ``ring_weights(N, 0.6)``). ``n_agents`` larger than the number of roles cycles the roles (``Planner 2``).

    Fields: ``name`` the study's name; ``task`` the project the agents plan; ``roles``, ``axes`` the agents and
    the preference axes; ``n_agents`` the number of agents (default: one per role); ``W1``, ``W2`` full weight
    matrices; ``complete_self``, ``ring_self`` the self-weights of the default matrices; ``strategies`` the
    policies run (adaptive, complete, ring); ``eta``, ``eps`` the switching threshold and tolerance; ``b0`` the
    token budget; ``max_rounds`` the round limit; ``budget_rule`` "spent" (stop when the tokens spent exceed b0)
    or "predicted" (refuse a round the remaining budget cannot pay); ``retries`` re-asks of an agent whose reply
    did not parse; ``runs`` independent runs per strategy; ``seed`` the run's seed; ``charge_initial`` count
    round 0's tokens against the budget; ``shared_initial`` every strategy starts from the same round-0 replies;
    ``token_scale`` a factor on counted tokens (a model's price ratio); ``structured_output`` ask the backend
    for JSON-schema output; ``x0`` fixed initial vectors instead of round 0; ``sampling`` the decoding
    parameters; ``monitor`` the online certificate monitor (:class:`MonitorConfig`).
    """

    name: str = "paper"
    task: str = PAPER_TASK
    roles: tuple[Role, ...] = PAPER_ROLES
    axes: tuple[Axis, ...] = PAPER_AXES
    n_agents: int | None = None
    W1: tuple | None = None
    W2: tuple | None = None
    complete_self: float = 0.4
    ring_self: float = 0.6
    strategies: tuple[str, ...] = STRATEGIES
    eta: float = papers.DELIBERATION_SETTINGS["eta"]
    eps: float = papers.DELIBERATION_SETTINGS["eps"]
    b0: float = papers.DELIBERATION_SETTINGS["b0"]
    max_rounds: int = 30
    budget_rule: str = "spent"
    retries: int = 2
    runs: int = 1
    seed: int = 0
    charge_initial: bool = False
    shared_initial: bool = True
    token_scale: float = 1.0
    structured_output: bool = False
    x0: tuple | None = None
    sampling: Sampling = field(default_factory=lambda: Sampling(temperature=0.7, top_p=1.0, max_tokens=300))
    monitor: MonitorConfig = field(default_factory=MonitorConfig)

    def __post_init__(self):
        if not self.roles:
            raise InputError("roles must list at least one role")
        names = [r.name for r in self.roles]
        if len(set(names)) != len(names):
            raise InputError(f"role names must be unique; got {names}")
        if self.n_agents is None and len(self.roles) < 2:  # (agents are the roles unless n_agents is given)
            raise InputError(
                f"a deliberation needs at least 2 agents: give 2 or more roles, or n_agents >= 2 (roles cycle); got "
                f"{len(self.roles)} role"
            )
        n = self.n_agents if self.n_agents is not None else len(self.roles)
        check_int("n_agents", n, 2)
        if len(self.axes) < 1:
            raise InputError("axes must list at least one axis")
        axis_names = [a.name for a in self.axes]
        blank = [i + 1 for i, a in enumerate(axis_names) if not isinstance(a, str) or not a.strip()]
        if blank:  # the prompt would read "2. : 0 = ..., 1 = ..."
            raise InputError(f"axis names must be non-empty text; axis {blank[0]} has {axis_names[blank[0] - 1]!r}")
        if len(set(axis_names)) != len(axis_names):
            raise InputError(f"axis names must be unique; got {axis_names}")
        if not isinstance(self.task, str) or not self.task.strip():
            raise InputError(f"task must be a non-empty text; got {self.task!r}")
        if not isinstance(self.structured_output, bool):
            raise InputError(f"structured_output must be true or false; got {self.structured_output!r}")
        for r in self.roles:
            if r.prior is not None and len(r.prior) != len(self.axes):
                raise InputError(
                    f"role {r.name!r}: prior has {len(r.prior)} entries but there are {len(self.axes)} axes"
                )
            if r.prior is not None and not all(0 <= float(v) <= 1 for v in r.prior):
                raise InputError(f"role {r.name!r}: prior entries must be in [0, 1]")
        if not self.strategies or any(s not in STRATEGIES for s in self.strategies):
            raise InputError(
                f"strategies must be a non-empty subset of {', '.join(STRATEGIES)}; got {self.strategies!r}"
            )
        if len(set(self.strategies)) != len(self.strategies):
            raise InputError(f"strategies has duplicates: {self.strategies!r}")
        check_float("eta", self.eta, lo=0, lo_open=True)
        check_float("eps", self.eps, lo=0, lo_open=True)
        if self.eta < self.eps and "adaptive" in self.strategies:  # the fixed strategies never read eta
            raise InputError(
                f"eta = {self.eta} < eps = {self.eps}: the adaptive strategy would never switch to mode 2 "
                "before consensus (Algorithm 1 needs eta >= eps when adaptive runs)"
            )
        check_float("b0", self.b0, lo=0, lo_open=True)
        check_int("max_rounds", self.max_rounds, 1)
        check_int("retries", self.retries, 0)
        check_int("runs", self.runs, 1)
        check_int("seed", self.seed, 0)
        check_float("token_scale", self.token_scale, lo=0, lo_open=True)
        check_float("complete_self", self.complete_self, lo=0, hi=1)
        check_float("ring_self", self.ring_self, lo=0, hi=1)
        if self.budget_rule not in ("spent", "predicted"):
            raise InputError(f"budget_rule must be 'spent' or 'predicted'; got {self.budget_rule!r}")
        m = self.monitor
        check_float("monitor.n0", m.n0, lo=0)
        check_int("monitor.warmup", m.warmup, 0)
        for nm in ("prior_lambda1", "prior_lambda2"):
            if getattr(m, nm) is not None:
                check_float(f"monitor.{nm}", getattr(m, nm), lo=0, lo_open=True)
        self.weights()  # validates W1, W2
        if self.x0 is not None:
            x0 = np.asarray(self.x0, dtype=np.float64)
            if x0.shape != (n, len(self.axes)):
                raise InputError(f"x0 must be an (N, d) = ({n}, {len(self.axes)}) matrix; got shape {x0.shape}")
            if not np.all((x0 >= 0) & (x0 <= 1)):
                raise InputError("x0 entries must be in [0, 1]")

    # -- derived --------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.n_agents if self.n_agents is not None else len(self.roles)

    @property
    def d(self) -> int:
        return len(self.axes)

    def agent_roles(self) -> list[Role]:
        """The role of each of the N agents (cycled, with a numeric suffix from the second cycle on)."""
        out = []
        for i in range(self.n):
            r = self.roles[i % len(self.roles)]
            c = i // len(self.roles)
            out.append(r if c == 0 else replace(r, name=f"{r.name} {c + 1}", title=f"{r.title} {c + 1}"))
        return out

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """``(W1, W2)``: the configured matrices, else Table III generalised to N agents (validated)."""
        n = self.n
        W1 = np.asarray(self.W1, dtype=np.float64) if self.W1 is not None else complete_weights(n, self.complete_self)
        if self.W2 is not None:
            W2 = np.asarray(self.W2, dtype=np.float64)
        elif n >= 3:
            W2 = ring_weights(n, self.ring_self)
        else:
            raise InputError("the default ring needs n_agents >= 3; give weights.W2")
        for nm, W in (("weights.W1", W1), ("weights.W2", W2)):
            if W.shape != (n, n):
                raise InputError(f"{nm} must be {n} x {n} (one row per agent); got shape {W.shape}")
            validate_doubly_stochastic(W, nm)
        return W1, W2

    def identity(self) -> dict:
        W1, W2 = self.weights()
        d = asdict(self)
        d["W1"], d["W2"] = W1.round(12).tolist(), W2.round(12).tolist()
        d.pop("complete_self")
        d.pop("ring_self")
        return json.loads(json.dumps(d, default=list))


_TOP_KEYS = {
    "name",
    "task",
    "roles",
    "axes",
    "n_agents",
    "weights",
    "strategies",
    "eta",
    "eps",
    "b0",
    "max_rounds",
    "budget_rule",
    "retries",
    "runs",
    "seed",
    "charge_initial",
    "shared_initial",
    "token_scale",
    "structured_output",
    "x0",
    "sampling",
    "monitor",
    "surrogate",
}
_SURROGATE_KEYS = {"noise", "compliance", "initial_spread", "malformed", "reasoning_words", "seed", "fenced"}


def _unknown(where: str, got: dict, known: set):
    bad = sorted(set(got) - known)
    if bad:
        raise InputError(f"{where}: unknown key(s) {', '.join(bad)}; known: {', '.join(sorted(known))}")


def load_deliberation_config(path=None, overrides: dict | None = None) -> tuple[DeliberationConfig, dict]:
    """Read a deliberation TOML file (``None``: the paper's scenario) -> ``(config, surrogate options)``.

    Top-level keys: name, task, strategies, eta, eps, b0, max_rounds, budget_rule ("spent"|"predicted"),
    retries, runs, seed, charge_initial, shared_initial, token_scale, structured_output, n_agents, x0;
    ``[[roles]]`` (name, title, bias, prompt, prior), ``[[axes]]`` (name, low, high), ``[weights]``
    (complete_self, ring_self, or full matrices W1, W2), ``[sampling]`` (temperature, top_p, max_tokens),
    ``[monitor]`` (enabled, n0, warmup, ceil, prior_lambda1, prior_lambda2), ``[surrogate]`` (options of
    :class:`SurrogateDeliberationBackend`). ``overrides`` (top-level keys, e.g. from the command line)
    replace the file's values.

    Arguments: ``path`` the TOML file or None; ``overrides`` as above.
    """
    raw: dict = read_toml(path) if path is not None else {}
    where = str(path) if path is not None else "config"
    _unknown(where, raw, _TOP_KEYS)
    for k, v in (overrides or {}).items():
        if v is None:
            continue
        if k == "monitor_enabled":
            raw.setdefault("monitor", {})["enabled"] = bool(v)
        elif k in ("temperature", "top_p", "max_tokens"):
            raw.setdefault("sampling", {})[k] = v
        elif k in _TOP_KEYS:
            raw[k] = v
        else:
            raise InputError(f"unknown override {k!r}; known: {', '.join(sorted(_TOP_KEYS))}")
    kw: dict[str, Any] = {}
    for k in (
        "name",
        "task",
        "n_agents",
        "eta",
        "eps",
        "b0",
        "max_rounds",
        "budget_rule",
        "retries",
        "runs",
        "seed",
        "charge_initial",
        "shared_initial",
        "token_scale",
        "structured_output",
    ):
        if k in raw:
            kw[k] = raw[k]
    if "strategies" in raw:
        s = raw["strategies"]
        kw["strategies"] = tuple([s] if isinstance(s, str) else s)
    if path is not None and "task" not in raw:  # a file of one's own deliberates its own task
        raise InputError(
            f"{where}: no task; give the task the roles deliberate on, as configs/deliberation/paper.toml does"
        )
    if path is not None and "roles" not in raw:  # a file of one's own: its roles are its own, never the paper's
        raise InputError(
            f"{where}: no [[roles]]; give at least one (name, prompt, optional title, bias, prior), as "
            "configs/deliberation/paper.toml does"
        )
    if "roles" in raw:
        roles = []
        for i, r in enumerate(raw["roles"]):
            if not isinstance(r, dict):
                raise InputError(f"{where}: roles[{i}] must be a table")
            _unknown(f"{where}: roles[{i}]", r, {"name", "title", "bias", "prompt", "prior"})
            if "name" not in r or "prompt" not in r:
                raise InputError(f"{where}: roles[{i}] needs at least 'name' and 'prompt'")
            prior = r.get("prior")
            roles.append(
                Role(
                    str(r["name"]),
                    str(r.get("title", r["name"])),
                    str(r.get("bias", "")),
                    str(r["prompt"]),
                    None if prior is None else tuple(float(x) for x in prior),
                )
            )
        kw["roles"] = tuple(roles)
    if "axes" in raw:
        axes = []
        for i, a in enumerate(raw["axes"]):
            if isinstance(a, str):
                axes.append(Axis(a, "low", "high"))
                continue
            _unknown(f"{where}: axes[{i}]", a, {"name", "low", "high"})
            axes.append(Axis(str(a["name"]), str(a.get("low", "low")), str(a.get("high", "high"))))
        kw["axes"] = tuple(axes)
    if "weights" in raw:
        w = raw["weights"]
        _unknown(f"{where}: [weights]", w, {"complete_self", "ring_self", "W1", "W2"})
        for k in ("complete_self", "ring_self"):
            if k in w:
                kw[k] = w[k]
        for k in ("W1", "W2"):
            if k in w:
                kw[k] = tuple(tuple(float(x) for x in row) for row in w[k])
    if "x0" in raw:
        kw["x0"] = tuple(tuple(float(x) for x in row) for row in raw["x0"])
    if "sampling" in raw:
        s = raw["sampling"]
        _unknown(f"{where}: [sampling]", s, {"temperature", "top_p", "max_tokens", "seed"})
        base = DeliberationConfig().sampling
        kw["sampling"] = Sampling(**{**asdict(base), **s})
    if "monitor" in raw:
        m = raw["monitor"]
        _unknown(f"{where}: [monitor]", m, {"enabled", "n0", "warmup", "ceil", "prior_lambda1", "prior_lambda2"})
        kw["monitor"] = MonitorConfig(**m)
    surrogate = dict(raw.get("surrogate", {}))
    _unknown(f"{where}: [surrogate]", surrogate, _SURROGATE_KEYS)
    try:
        cfg = DeliberationConfig(**kw)
    except TypeError as e:
        raise InputError(f"{where}: {e}") from None
    return cfg, surrogate
