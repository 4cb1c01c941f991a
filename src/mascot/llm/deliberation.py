"""LLM consensus deliberation under a token budget (consensus paper, Sec. V-C), on any backend.

N role agents (Table II's Planner, Architect, Security Reviewer, Cost Optimizer and DevOps Engineer by
default) each hold a design-preference vector ``x_i in [0, 1]^d`` (``d = 6`` architectural axes). Every
round the active topology ``W_sigma`` (Table III: mode 1 = complete K5 with ``w_ii = 0.4, w_ij = 0.15``,
mode 2 = ring C5 with ``w_ii = 0.6, w_{i,i+-1} = 0.2``; any doubly stochastic pair can be configured)
decides whose previous reply goes into whose prompt: agent ``i`` reads agent ``j`` iff ``W[i, j] > 0``
(Def. 2), and sees ``j``'s vector, reasoning and the influence weight ``w_ij`` -- its own previous proposal
with ``w_ii`` included. Agents answer with JSON ``{"vector": [...], "reasoning": "..."}``; the harness does
no algebra on the vectors (the weights are instructions, as in the paper).

Bookkeeping per lane (one lane = one strategy x one repeated run):

* ``D(k)`` = :func:`mascot.theory.disagreement` of the parsed vectors (Def. 5);
* round cost = the **measured input (prompt) tokens** of every request of the round, retries included,
  times ``token_scale`` (the paper's rule: ``b_k = b_{k-1} - tokens of round k``);
* round 0 = every agent's first reply from its role prompt (or ``x0`` from the config). It is **shared by
  all strategies of a run** (``shared_initial = true``: the strategies start from the same ``X0``, which
  makes them comparable; the paper's deployments each had their own ``D(0)``) and is **not charged**
  (``charge_initial = false``: the budget ``b0`` is the budget of the certificate ``(X0, b0)``);
* strategies ``adaptive`` (Def. 8: mode 1 while ``D(k) > eta``, else mode 2), ``complete`` and ``ring``;
* stopping, checked after each round ``k`` in this order: ``b_k < 0`` -> **BudgetFail** (the paper's live
  rule; a state with ``b < 0`` is outside Omega_eps even if ``D <= eps``); ``D(k) <= eps`` -> consensus;
  ``k = max_rounds`` -> max_rounds; the **monitor** (only with ``monitor.enabled``) -> predicted_BudgetFail;
  ``budget_rule = "predicted"`` and the predicted cost of round ``k + 1`` exceeds ``b_k`` -> BudgetFail
  (Algorithm 1's ``b_k < c_sigma``, with the cost predicted from the prompts' characters times the lane's
  measured tokens per character, prior 0.25).

Parsing (:func:`parse_vector`): the JSON object is extracted from prose or code fences, ``vector`` must hold
exactly ``d`` finite numbers, which are clipped to ``[0, 1]``; anything else is a parse failure. A failed
agent is asked again (with a note naming the problem) up to ``retries`` times, batched; after that its
previous vector is carried forward (round 0: its role prior, else 0.5 on every axis) and the failure is
counted. Backend errors are failures too.

Logs in the run directory: ``rounds.jsonl`` (one line per lane and round: ``X_k``, ``D``, ``b``, mode,
per-agent prompt/completion tokens, replies, failures, monitor, status), ``requests.jsonl`` (every request
and response), ``run.json`` (identity and sessions). Reruns resume: rounds already in ``rounds.jsonl`` are
not redone (request seeds are derived from (seed, strategy, run, round, agent, attempt), so a redone round
reproduces on deterministic backends); a rerun with different parameters raises ``ValueError``. Batched: one
backend call per round serves every agent of every running lane (plus one call per retry attempt).

The **online monitor** (:class:`BudgetMonitor`) re-checks ``b_k >= B*(D(k))`` after every round with
running estimates of the modes' rates and costs, shrunk to priors (contraction rates of ``W`` and the
predicted round costs) -- the same estimator as the JAX kernel :mod:`mascot.kernels.deliberation`. It is
always computed and logged; with ``monitor.enabled`` it stops a lane early with ``predicted_BudgetFail``.

:class:`SurrogateDeliberationBackend` answers deliberation requests without an LLM, so this exact
harness runs on CPU; :func:`claude_example` recomputes the paper's post-hoc certificate check.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np

from mascot.llm.base import Request, Response, Sampling
from mascot.llm.parsing import json_object_spans
from mascot.files import atomic_write_text, read_toml
from mascot.llm.rundir import open_run_dir, orphan_message, resolve_backend, utc_now
from mascot.theory.consensus import (
    contraction_rate, disagreement, in_certificate_region, rounds_to_reach, theorem1, validate_doubly_stochastic,
)

__all__ = [
    "Role", "Axis", "PAPER_ROLES", "PAPER_AXES", "PAPER_TASK", "MonitorConfig", "DeliberationConfig",
    "load_deliberation_config", "VectorParse", "parse_vector", "system_prompt", "initial_messages",
    "round_messages", "BudgetMonitor", "strategy_budget", "SurrogateDeliberationBackend", "run_deliberation",
    "DeliberationRun", "read_rounds", "lane_summaries", "mode_statistics", "posthoc_certificates",
    "claude_example", "STRATEGIES", "STATUSES", "count_tokens",
]

STRATEGIES = ("adaptive", "complete", "ring")
STATUSES = ("consensus", "BudgetFail", "max_rounds", "predicted_BudgetFail")
_TOKENS_PER_CHAR_PRIOR = 0.25


# ============================================================================ configuration
@dataclass(frozen=True)
class Role:
    """One agent role (Table II): ``prompt`` is the role sentence of its system prompt; ``prior`` the
    role's typical vector (used by the surrogate and as the fallback when round 0 fails to parse)."""

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


PAPER_AXES = (
    Axis("service coupling", "a single monolith", "fine-grained microservices"),
    Axis("API style", "simple synchronous REST", "event-driven asynchronous messaging (queues, gRPC streams)"),
    Axis("database strategy", "one relational SQL database", "distributed NoSQL stores"),
    Axis("deployment", "managed PaaS / serverless", "self-managed Kubernetes clusters"),
    Axis("authentication", "basic login", "zero-trust, MFA and full regulatory compliance"),
    Axis("observability", "basic logs", "full metrics, distributed tracing and alerting"),
)

PAPER_TASK = (
    "Plan the cloud software architecture for an emergency medical tracking app. The app must launch in "
    "two weeks, on a tiny infrastructure budget, while serving millions of requests, and it stores "
    "top-secret patient data that needs maximum security."
)

PAPER_ROLES = (
    Role("Planner", "Project Planner", "Balanced; timeline feasibility",
         "You are the Project Planner. You demand compromises in scalability to meet the deadline, and you "
         "favour a balanced plan the team can actually ship in two weeks.",
         (0.30, 0.40, 0.40, 0.30, 0.50, 0.40)),
    Role("Architect", "Software Architect", "Microservices, containers, scalability",
         "You are the Software Architect. You insist on microservices, containers and an architecture that "
         "scales to millions of requests.",
         (0.95, 0.85, 0.70, 0.90, 0.60, 0.70)),
    Role("Security", "Security Reviewer", "Authentication, compliance, tracing",
         "You are the Security Reviewer. You demand strong authentication, regulatory compliance for "
         "top-secret medical data, and end-to-end tracing of every access.",
         (0.40, 0.30, 0.20, 0.50, 1.00, 0.95)),
    Role("CostOptimizer", "Cost Optimizer", "Simpler stack, NoSQL, lower cost",
         "You are the Cost Optimizer. You push for the simplest and cheapest stack, NoSQL storage and the "
         "lowest possible infrastructure bill.",
         (0.05, 0.10, 0.90, 0.05, 0.30, 0.10)),
    Role("DevOps", "DevOps Engineer", "CI/CD, observability, K8s",
         "You are the DevOps Engineer. You insist on CI/CD pipelines, Kubernetes and full observability.",
         (0.70, 0.60, 0.50, 1.00, 0.60, 1.00)),
)


@dataclass(frozen=True)
class MonitorConfig:
    """Online certificate monitor. ``prior_lambda1/2`` default to the contraction rates of ``W1``/``W2``
    (Def. 6); ``n0`` is the prior's weight in pseudo-rounds; no stop before round ``warmup``; ``ceil``:
    check Theorem 1's ``B*`` (True) or the fractional point estimate of the spend (False)."""

    enabled: bool = False
    n0: float = 1.0
    warmup: int = 2
    ceil: bool = True
    prior_lambda1: float | None = None
    prior_lambda2: float | None = None


def _check_int(name, v, lo):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}; got {v!r}")
    return int(v)


def _check_float(name, v, *, lo=None, hi=None, lo_open=False):
    if isinstance(v, bool):
        raise ValueError(f"{name} must be a number; got {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number; got {v!r}") from None
    if not math.isfinite(f):
        raise ValueError(f"{name} must be finite; got {v!r}")
    if lo is not None and (f <= lo if lo_open else f < lo):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}; got {v!r}")
    if hi is not None and f > hi:
        raise ValueError(f"{name} must be <= {hi}; got {v!r}")
    return f


@dataclass(frozen=True)
class DeliberationConfig:
    """Everything that defines a deliberation run (its identity; see :func:`load_deliberation_config`).

    ``W1``/``W2`` default to Table III generalised to N agents (``complete_weights(N, 0.4)``,
    ``ring_weights(N, 0.6)``). ``n_agents`` larger than the number of roles cycles the roles (``Planner 2``).
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
    eta: float = 0.2
    eps: float = 0.05
    b0: float = 100_000.0
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
            raise ValueError("roles must list at least one role")
        n = self.n_agents if self.n_agents is not None else len(self.roles)
        _check_int("n_agents", n, 2)
        if len(self.axes) < 1:
            raise ValueError("axes must list at least one axis")
        for r in self.roles:
            if r.prior is not None and len(r.prior) != len(self.axes):
                raise ValueError(f"role {r.name!r}: prior has {len(r.prior)} entries but there are "
                                 f"{len(self.axes)} axes")
            if r.prior is not None and not all(0 <= float(v) <= 1 for v in r.prior):
                raise ValueError(f"role {r.name!r}: prior entries must be in [0, 1]")
        if not self.strategies or any(s not in STRATEGIES for s in self.strategies):
            raise ValueError(f"strategies must be a non-empty subset of {', '.join(STRATEGIES)}; "
                             f"got {self.strategies!r}")
        if len(set(self.strategies)) != len(self.strategies):
            raise ValueError(f"strategies has duplicates: {self.strategies!r}")
        _check_float("eta", self.eta, lo=0, lo_open=True)
        _check_float("eps", self.eps, lo=0, lo_open=True)
        _check_float("b0", self.b0, lo=0, lo_open=True)
        _check_int("max_rounds", self.max_rounds, 1)
        _check_int("retries", self.retries, 0)
        _check_int("runs", self.runs, 1)
        _check_int("seed", self.seed, 0)
        _check_float("token_scale", self.token_scale, lo=0, lo_open=True)
        _check_float("complete_self", self.complete_self, lo=0, hi=1)
        _check_float("ring_self", self.ring_self, lo=0, hi=1)
        if self.budget_rule not in ("spent", "predicted"):
            raise ValueError(f"budget_rule must be 'spent' or 'predicted'; got {self.budget_rule!r}")
        m = self.monitor
        _check_float("monitor.n0", m.n0, lo=0)
        _check_int("monitor.warmup", m.warmup, 0)
        for nm in ("prior_lambda1", "prior_lambda2"):
            if getattr(m, nm) is not None:
                _check_float(f"monitor.{nm}", getattr(m, nm), lo=0, lo_open=True)
        self.weights()  # validates W1, W2
        if self.x0 is not None:
            x0 = np.asarray(self.x0, dtype=np.float64)
            if x0.shape != (n, len(self.axes)):
                raise ValueError(f"x0 must be an (N, d) = ({n}, {len(self.axes)}) matrix; got shape {x0.shape}")
            if not np.all((x0 >= 0) & (x0 <= 1)):
                raise ValueError("x0 entries must be in [0, 1]")

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
        from mascot.kernels.topology import complete_weights, ring_weights

        n = self.n
        W1 = np.asarray(self.W1, dtype=np.float64) if self.W1 is not None else complete_weights(n, self.complete_self)
        if self.W2 is not None:
            W2 = np.asarray(self.W2, dtype=np.float64)
        elif n >= 3:
            W2 = ring_weights(n, self.ring_self)
        else:
            raise ValueError("the default ring needs n_agents >= 3; give weights.W2")
        for nm, W in (("weights.W1", W1), ("weights.W2", W2)):
            if W.shape != (n, n):
                raise ValueError(f"{nm} must be {n} x {n} (one row per agent); got shape {W.shape}")
            validate_doubly_stochastic(W, nm)
        return W1, W2

    def identity(self) -> dict:
        W1, W2 = self.weights()
        d = asdict(self)
        d["W1"], d["W2"] = W1.round(12).tolist(), W2.round(12).tolist()
        d.pop("complete_self")
        d.pop("ring_self")
        return json.loads(json.dumps(d, default=list))


_TOP_KEYS = {"name", "task", "roles", "axes", "n_agents", "weights", "strategies", "eta", "eps", "b0", "max_rounds",
             "budget_rule", "retries", "runs", "seed", "charge_initial", "shared_initial", "token_scale",
             "structured_output", "x0", "sampling", "monitor", "surrogate"}
_SURROGATE_KEYS = {"noise", "compliance", "initial_spread", "malformed", "reasoning_words", "seed", "fenced"}


def _unknown(where: str, got: dict, known: set):
    bad = sorted(set(got) - known)
    if bad:
        raise ValueError(f"{where}: unknown key(s) {', '.join(bad)}; known: {', '.join(sorted(known))}")


def load_deliberation_config(path=None, overrides: dict | None = None) -> tuple[DeliberationConfig, dict]:
    """Read a deliberation TOML file (``None``: the paper's scenario) -> ``(config, surrogate options)``.

    Top-level keys: name, task, strategies, eta, eps, b0, max_rounds, budget_rule ("spent"|"predicted"),
    retries, runs, seed, charge_initial, shared_initial, token_scale, structured_output, n_agents, x0;
    ``[[roles]]`` (name, title, bias, prompt, prior), ``[[axes]]`` (name, low, high), ``[weights]``
    (complete_self, ring_self, or full matrices W1, W2), ``[sampling]`` (temperature, top_p, max_tokens),
    ``[monitor]`` (enabled, n0, warmup, ceil, prior_lambda1, prior_lambda2), ``[surrogate]`` (options of
    :class:`SurrogateDeliberationBackend`). ``overrides`` (top-level keys, e.g. from the command line)
    replace the file's values.
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
            raise ValueError(f"unknown override {k!r}; known: {', '.join(sorted(_TOP_KEYS))}")
    kw: dict[str, Any] = {}
    for k in ("name", "task", "n_agents", "eta", "eps", "b0", "max_rounds", "budget_rule", "retries", "runs", "seed",
              "charge_initial", "shared_initial", "token_scale", "structured_output"):
        if k in raw:
            kw[k] = raw[k]
    if "strategies" in raw:
        s = raw["strategies"]
        kw["strategies"] = tuple([s] if isinstance(s, str) else s)
    if "roles" in raw:
        roles = []
        for i, r in enumerate(raw["roles"]):
            if not isinstance(r, dict):
                raise ValueError(f"{where}: roles[{i}] must be a table")
            _unknown(f"{where}: roles[{i}]", r, {"name", "title", "bias", "prompt", "prior"})
            if "name" not in r or "prompt" not in r:
                raise ValueError(f"{where}: roles[{i}] needs at least 'name' and 'prompt'")
            prior = r.get("prior")
            roles.append(Role(str(r["name"]), str(r.get("title", r["name"])), str(r.get("bias", "")), str(r["prompt"]),
                              None if prior is None else tuple(float(x) for x in prior)))
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
        raise ValueError(f"{where}: {e}") from None
    return cfg, surrogate


# ============================================================================ parsing
class VectorParse(NamedTuple):
    """``vector`` (clipped to [0, 1]) or ``None``; ``reason`` is ``"ok"`` or ``"<code>: <detail>"`` with code
    one of empty, no_json, bad_json, no_vector, bad_length, bad_value, backend_error; ``clipped`` counts the
    entries that were outside [0, 1]."""

    vector: list[float] | None
    reasoning: str
    reason: str
    clipped: int = 0

    @property
    def ok(self) -> bool:
        return self.vector is not None


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_VEC_RE = re.compile(r"""["']?vector["']?\s*[:=]\s*\[([^\[\]]*)\]""", re.I)
_REASON_RE = re.compile(r""""reasoning"\s*:\s*"((?:[^"\\]|\\.)*)""", re.I | re.S)


def _repair(s: str) -> str:
    s = re.sub(r",\s*([}\]])", r"\1", s)
    return re.sub(r"\b(True|False|None)\b", lambda m: {"True": "true", "False": "false", "None": "null"}[m.group(1)], s)


def _num(x) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        f = float(x)
    elif isinstance(x, str):
        try:
            f = float(x.strip())
        except ValueError:
            return None
    else:
        return None
    return f if math.isfinite(f) else None


def _vector_from(values, d: int) -> tuple[list[float] | None, str, int]:
    if not isinstance(values, (list, tuple)):
        return None, f"bad_value: vector is not a list ({type(values).__name__})", 0
    if len(values) != d:
        return None, f"bad_length: vector has {len(values)} entries, expected {d}", 0
    out = []
    for v in values:
        f = _num(v)
        if f is None:
            return None, f"bad_value: vector entry {v!r:.30} is not a finite number", 0
        out.append(f)
    clipped = sum(1 for f in out if f < 0 or f > 1)
    return [min(1.0, max(0.0, f)) for f in out], "ok", clipped


def _find_vector_key(obj: dict):
    for k, v in obj.items():
        if isinstance(k, str) and k.lower() == "vector":
            return v, obj
    for v in obj.values():  # one level of nesting: {"proposal": {"vector": ...}}
        if isinstance(v, dict):
            for k2, v2 in v.items():
                if isinstance(k2, str) and k2.lower() == "vector":
                    return v2, v
    return None, None


_SPECIFICITY = {"bad_length": 5, "bad_value": 4, "no_vector": 3, "bad_json": 2, "no_json": 1, "empty": 0}


def parse_vector(text: str | None, d: int) -> VectorParse:
    """Extract ``{"vector": [d numbers], "reasoning": "..."}`` from a reply (see the module docstring).

    Candidates, last first (a model that echoes the schema before answering is judged by its final
    object): the whole reply, each code fence, each balanced ``{...}`` span; each tried as is and after
    small repairs (trailing commas, Python literals). Fallback: the last ``"vector": [...]`` list in the text.
    Model output is data: parsed with ``json.loads`` only.
    """
    if text is None or not text.strip():
        return VectorParse(None, "", "empty: no text")
    cands = [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)] + json_object_spans(text)
    best = "no_json: no JSON object in the reply"
    seen = set()
    for cand in reversed(cands):
        for c in (cand, _repair(cand)):
            if c in seen or not c.startswith("{"):
                continue
            seen.add(c)
            try:
                obj = json.loads(c, strict=False)
            except json.JSONDecodeError:
                reason = "bad_json: an object that is not valid JSON"
            else:
                if not isinstance(obj, dict):
                    continue
                vals, holder = _find_vector_key(obj)
                if holder is None:
                    reason = "no_vector: JSON object without a 'vector' key"
                else:
                    vec, reason, clipped = _vector_from(vals, d)
                    if vec is not None:
                        r = next((v for k, v in holder.items() if isinstance(k, str) and k.lower() == "reasoning"), "")
                        return VectorParse(vec, r if isinstance(r, str) else json.dumps(r), "ok", clipped)
            if _SPECIFICITY[reason.split(":")[0]] > _SPECIFICITY[best.split(":")[0]]:
                best = reason
    m = list(_VEC_RE.finditer(text))
    if m:
        parts = [p for p in m[-1].group(1).split(",") if p.strip()]
        vec, reason, clipped = _vector_from([p.strip().strip("'\"") for p in parts], d)
        if vec is not None:
            rm = list(_REASON_RE.finditer(text))
            return VectorParse(vec, rm[-1].group(1) if rm else "", "ok", clipped)
        if _SPECIFICITY[reason.split(":")[0]] > _SPECIFICITY[best.split(":")[0]]:
            best = reason
    return VectorParse(None, "", best)


# ============================================================================ prompts
def _fmt_vec(v) -> str:
    return "[" + ", ".join(f"{float(x):.3f}" for x in v) + "]"


def system_prompt(cfg: DeliberationConfig, role: Role) -> str:
    axes = "\n".join(f"{i + 1}. {a.name}: 0 = {a.low}, 1 = {a.high}" for i, a in enumerate(cfg.axes))
    return (
        f"{role.prompt}\n\n"
        f"You are one of {cfg.n} specialists who must agree on one plan for this project:\n{cfg.task}\n\n"
        f"You state your position as a design-preference vector of {cfg.d} numbers between 0 and 1, one per axis:\n"
        f"{axes}\n\n"
        "In every round you see proposals from the previous round -- your own and some colleagues' -- each "
        "with an influence weight. The weights sum to 1; use them as a guideline for how strongly each "
        "proposal should pull your new vector. Move toward consensus in every round without compromising "
        "your core values.\n\n"
        "Reply with one JSON object and nothing else:\n"
        f'{{"vector": [{cfg.d} numbers between 0 and 1], "reasoning": "<at most two sentences>"}}'
    )


def initial_messages(cfg: DeliberationConfig, role: Role) -> list[dict[str, str]]:
    return [{"role": "system", "content": system_prompt(cfg, role)},
            {"role": "user", "content": f"Round 0. As the {role.title}, state your initial position on the "
                                        "project. Reply with the JSON object only."}]


def round_messages(cfg: DeliberationConfig, role: Role, k: int, inputs: list[dict]) -> list[dict[str, str]]:
    """Prompt of round ``k`` for one agent; ``inputs``: ``[{"agent": j, "title": ..., "self": bool,
    "vector": [...], "reasoning": "...", "weight": w_ij}, ...]`` (own proposal first)."""
    lines = [f"Round {k}. Proposals from round {k - 1}:"]
    for x in inputs:
        who = "Your own previous proposal" if x["self"] else x["title"]
        reasoning = json.dumps(x.get("reasoning") or "", ensure_ascii=False)
        lines.append(f"- {who} (influence weight {x['weight']:.2f}): vector {_fmt_vec(x['vector'])}; "
                     f"reasoning: {reasoning}")
    lines.append("\nUpdate your design-preference vector. Reply with the JSON object only.")
    return [{"role": "system", "content": system_prompt(cfg, role)}, {"role": "user", "content": "\n".join(lines)}]


def _retry_messages(messages: list[dict], reason: str, d: int) -> list[dict]:
    note = (f"\n\n(Your previous reply could not be used: {reason}. Reply with only the JSON object "
            f'{{"vector": [{d} numbers between 0 and 1], "reasoning": "..."}}.)')
    out = [dict(m) for m in messages]
    out[-1]["content"] += note
    return out


def _json_schema(d: int) -> dict:
    return {"type": "object",
            "properties": {"vector": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1},
                                      "minItems": d, "maxItems": d},
                           "reasoning": {"type": "string"}},
            "required": ["vector", "reasoning"]}


def _chars(messages) -> int:
    return sum(len(m["content"]) for m in messages)


# ============================================================================ certificate monitor
def _rtr_frac(start, target, lam):
    if start <= target:
        return 0.0
    if lam <= 0:
        return 1.0
    if lam >= 1:
        return math.inf
    return max(math.log(target / start) / math.log(lam), 0.0)


def strategy_budget(strategy: str, D: float, eta: float, eps: float, lam1: float, lam2: float, c1: float, c2: float,
                    ceil: bool = True) -> float:
    """``B*(D)`` for a strategy from :func:`mascot.theory.theorem1` (``ceil=True``).

    adaptive: Theorem 1 as is; complete: ``eta := eps`` (mode 2 is never selected, as the paper does for
    the Claude example); ring: ``eta := max(D, eps)`` (no mode-1 phase). ``ceil=False``: the same round
    counts without ceilings (a point estimate, not a bound).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    e = {"adaptive": eta, "complete": eps, "ring": max(D, eps)}[strategy]
    if ceil:
        return theorem1(D, e, eps, lam1, lam2, c1, c2).B_star
    e = max(e, eps)
    if D <= eps:
        return 0.0
    if D <= e:
        k1, k2 = 0.0, _rtr_frac(D, eps, lam2)
    else:
        k1, k2 = _rtr_frac(D, e, lam1), _rtr_frac(e, eps, lam2)
    if math.isinf(k1) or math.isinf(k2):
        return math.inf
    return k1 * c1 + k2 * c2


class MonitorCheck(NamedTuple):
    k: int
    D: float
    b: float
    lambda_hat: tuple[float, float]
    c_hat: tuple[float, float]
    B_star: float
    certified: bool
    flag: bool  # not certified and k >= warmup

    def to_dict(self) -> dict:
        return {"k": self.k, "lambda_hat": list(self.lambda_hat), "c_hat": list(self.c_hat),
                "B_star": None if math.isinf(self.B_star) else self.B_star, "certified": self.certified,
                "flag": self.flag}


class BudgetMonitor:
    """Online ``b_k >= B*(D(k))`` check with running, prior-shrunk estimates (per mode sigma = 1, 2):

    ``log lambda_hat = (n0 log lambda_prior + sum log(D(k+1)/D(k))) / (n0 + n)``, ``c_hat = (n0 c_prior +
    sum c) / (n0 + n)`` over this lane's rounds in that mode (the prior alone when ``n0 + n = 0``).
    Identical to the estimator of :func:`mascot.kernels.deliberation.simulate_deliberation`.
    """

    def __init__(self, strategy: str, eta: float, eps: float, prior_lambda: tuple[float, float], n0: float = 1.0,
                 warmup: int = 2, ceil: bool = True):
        self.strategy, self.eta, self.eps = strategy, float(eta), float(eps)
        self.prior_lambda = tuple(float(x) for x in prior_lambda)
        self.n0, self.warmup, self.ceil = float(n0), int(warmup), bool(ceil)
        self.sum_log = [0.0, 0.0]
        self.n = [0, 0]
        self.sum_cost = [0.0, 0.0]

    def observe(self, mode: int, d_before: float, d_after: float, cost: float) -> None:
        if d_before <= 0:
            return
        i = int(mode) - 1
        self.sum_log[i] += math.log(max(d_after, sys.float_info.min) / d_before)
        self.n[i] += 1
        self.sum_cost[i] += float(cost)

    def estimates(self, prior_cost: tuple[float, float]) -> tuple[tuple[float, float], tuple[float, float]]:
        lam, cost = [], []
        for i in range(2):
            w = self.n0 + self.n[i]
            if w > 0:
                lam.append(math.exp((self.n0 * math.log(self.prior_lambda[i]) + self.sum_log[i]) / w))
                cost.append((self.n0 * float(prior_cost[i]) + self.sum_cost[i]) / w)
            else:
                lam.append(self.prior_lambda[i])
                cost.append(float(prior_cost[i]))
        return (lam[0], lam[1]), (cost[0], cost[1])

    def check(self, k: int, D: float, b: float, prior_cost: tuple[float, float]) -> MonitorCheck:
        lam, cost = self.estimates(prior_cost)
        bstar = strategy_budget(self.strategy, D, self.eta, self.eps, lam[0], lam[1], cost[0], cost[1], self.ceil)
        certified = bool(b >= bstar)
        return MonitorCheck(int(k), float(D), float(b), lam, cost, bstar, certified,
                            bool(not certified and k >= self.warmup))


# ============================================================================ surrogate backend
def count_tokens(text: str) -> int:
    """The surrogates' deterministic token count: ``ceil(len(text) / 4)`` (about 4 characters per BPE token)."""
    return (len(text) + 3) // 4


def _rng(seed: int, req: Request) -> np.random.Generator:
    s = req.seed if req.seed is not None else _crc32(json.dumps(req.messages))
    return np.random.default_rng([int(seed) & 0x7FFFFFFF, int(s) & 0xFFFFFFFFFFFFFFFF])


def _crc32(s: str) -> int:
    import zlib

    return zlib.crc32(s.encode())


class SurrogateDeliberationBackend:
    """Answers deliberation requests without an LLM, from the state the harness puts in ``request.meta``.

    Round 0 (``meta["inputs"]`` empty): ``x = clip(prior + initial_spread z)`` (the role prior, else 0.5).
    Round k: the weighted average ``m = sum_j w_ij x_j`` of the proposals in the prompt (their weights and
    vectors are in ``meta["inputs"]``), then ``x = clip(x_own + compliance (m - x_own) + noise z)``, rounded
    to 3 decimals: ``compliance = 1`` is the paper's algebraic step (eq. 5) plus noise; ``compliance < 1``
    makes agents move only part of the way (effective mode ``(1 - c) I + c W``, still doubly stochastic).
    The reply is ``{"vector": [...], "reasoning": "..."}`` (``reasoning_words`` words), wrapped in a
    ```` ```json ```` fence after a short preamble with probability ``fenced`` (exercises the extraction); with
    probability ``malformed`` it is unusable instead (equally often: prose without JSON, a vector of the
    wrong length, truncated JSON).

    Token counts are deterministic: ``prompt_tokens = sum over messages of count_tokens(content) + 4``,
    ``completion_tokens = count_tokens(reply)`` (:func:`count_tokens`: ceil(chars / 4)). Draws depend only on
    ``seed`` and the request's seed (not on batching). Requests without ``meta["kind"] == "deliberation"``
    get an error response.
    """

    name = "surrogate"

    def __init__(self, noise: float = 0.005, compliance: float = 0.5, initial_spread: float = 0.05,
                 malformed: float = 0.02, reasoning_words: int = 60, fenced: float = 0.2, seed: int = 0,
                 model: str = "surrogate-deliberation"):
        self.noise = _check_float("surrogate.noise", noise, lo=0)
        self.compliance = _check_float("surrogate.compliance", compliance, lo=0, hi=1)
        self.initial_spread = _check_float("surrogate.initial_spread", initial_spread, lo=0)
        self.malformed = _check_float("surrogate.malformed", malformed, lo=0, hi=1)
        self.fenced = _check_float("surrogate.fenced", fenced, lo=0, hi=1)
        self.reasoning_words = _check_int("surrogate.reasoning_words", reasoning_words, 0)
        self.seed = _check_int("surrogate.seed", seed, 0)
        self.model = model

    def options(self) -> dict:
        return {"noise": self.noise, "compliance": self.compliance, "initial_spread": self.initial_spread,
                "malformed": self.malformed, "reasoning_words": self.reasoning_words, "fenced": self.fenced,
                "seed": self.seed}

    def describe(self) -> dict:
        return {"backend": self.name, "model": self.model, **self.options()}

    def _reasoning(self, meta: dict, rng) -> str:
        title = meta.get("title", "agent")
        words = (f"As the {title} I move toward the weighted proposals of the team while keeping my priorities; "
                 "the plan must ship on time, stay secure and remain affordable for the launch").split()
        out = []
        while len(out) < self.reasoning_words:
            out.extend(words)
        return " ".join(out[: self.reasoning_words])

    def generate(self, requests: list[Request]) -> list[Response]:
        out = []
        for req in requests:
            t0 = time.perf_counter()
            meta = req.meta or {}
            ptok = sum(count_tokens(m.get("content", "")) + 4 for m in req.messages)
            if meta.get("kind") != "deliberation":
                out.append(Response("", ptok, 0, error="surrogate deliberation backend: request has no "
                                    "meta['kind'] == 'deliberation'", latency_s=0.0))
                continue
            rng = _rng(self.seed, req)
            d = int(meta["d"])
            inputs = meta.get("inputs") or []
            z = rng.standard_normal(d)
            if inputs:
                w = np.array([x["weight"] for x in inputs], dtype=np.float64)
                V = np.array([x["vector"] for x in inputs], dtype=np.float64)
                m = (w[:, None] * V).sum(axis=0) / w.sum()
                own = np.asarray(next((x["vector"] for x in inputs if x.get("self")), m), dtype=np.float64)
                x = own + self.compliance * (m - own) + self.noise * z
            else:
                prior = meta.get("prior")
                p = np.full(d, 0.5) if prior is None else np.asarray(prior, dtype=np.float64)
                x = p + self.initial_spread * z
            x = np.round(np.clip(x, 0.0, 1.0), 3)
            reasoning = self._reasoning(meta, rng)
            u_bad, u_fence, kind = rng.random(), rng.random(), int(rng.integers(3))
            body = json.dumps({"vector": [float(v) for v in x], "reasoning": reasoning})
            if u_bad < self.malformed:
                if kind == 0:
                    text = f"I think we should mostly keep the current plan. {reasoning}"
                elif kind == 1:
                    text = json.dumps({"vector": [float(v) for v in x[:-1]], "reasoning": reasoning})
                else:
                    text = body[: len(body) // 2]
            elif u_fence < self.fenced:
                text = f"Here is my updated proposal.\n```json\n{body}\n```"
            else:
                text = body
            out.append(Response(text, ptok, count_tokens(text), finish_reason="stop",
                                latency_s=time.perf_counter() - t0))
        return out


# ============================================================================ the harness
_now = utc_now


def _append_lines(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False, default=_json_default) + "\n" for r in rows))
        f.flush()
        os.fsync(f.fileno())


def _json_default(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def _canon(x):
    return json.loads(json.dumps(x, sort_keys=True, default=_json_default))


def _seed64(*parts) -> int:
    h = hashlib.sha256(repr(tuple(int(p) for p in parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def read_jsonl(path: Path, repair: bool = False) -> list[dict]:
    """Lines of a JSONL file; a damaged trailing line (interrupted write) is dropped (and cut off the file
    when ``repair``)."""
    path = Path(path)
    if not path.exists():
        return []
    raw = path.read_bytes().split(b"\n")
    rows = []
    for i, line in enumerate(raw):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if repair:
                keep = b"\n".join(raw[:i])
                path.write_bytes(keep + (b"\n" if keep else b""))
            break
    return rows


def read_rounds(out) -> list[dict]:
    """The ``rounds.jsonl`` records of a run directory (in file order)."""
    return read_jsonl(Path(out) / "rounds.jsonl")


@dataclass
class _Lane:
    strategy: str
    sidx: int
    run: int
    monitor: BudgetMonitor
    k: int = -1
    X: np.ndarray | None = None
    b: float = 0.0
    D: float = math.nan
    replies: list[dict] = field(default_factory=list)
    status: str | None = None
    failures: int = 0
    ptok: int = 0
    pchars: int = 0
    next_sigma: int | None = None

    def tokens_per_char(self) -> float:
        return self.ptok / self.pchars if self.pchars > 0 else _TOKENS_PER_CHAR_PRIOR


class DeliberationRun(NamedTuple):
    out: Path
    summaries: list[dict]  # one per lane (strategy, run): rounds, tokens, d0, d_final, status, ...
    rounds_run: int
    requests: int
    wall_s: float


def _spec_of(backend) -> dict:
    spec = {"name": getattr(backend, "name", type(backend).__name__), "model": getattr(backend, "model", None)}
    if isinstance(backend, SurrogateDeliberationBackend):
        spec["options"] = backend.options()
    return spec


class _Harness:
    def __init__(self, cfg: DeliberationConfig, out: Path, progress: bool):
        self.cfg = cfg
        self.out = out
        self.progress = progress
        self.roles = cfg.agent_roles()
        self.W = cfg.weights()
        self.lams = (contraction_rate(self.W[0], "W1"), contraction_rate(self.W[1], "W2"))
        m = cfg.monitor
        self.prior_lambda = (m.prior_lambda1 if m.prior_lambda1 is not None else self.lams[0],
                             m.prior_lambda2 if m.prior_lambda2 is not None else self.lams[1])
        if not all(p > 0 for p in self.prior_lambda):  # e.g. lambda = 0 for a complete graph with equal weights
            self.prior_lambda = tuple(max(p, 1e-6) for p in self.prior_lambda)
        self.backend = None
        self.n_requests = 0
        self.call_s = 0.0
        self.session = 0
        self.fallback = [list(r.prior) if r.prior is not None else [0.5] * cfg.d for r in self.roles]

    def say(self, msg: str) -> None:
        if self.progress:
            print(f"[deliberate] {msg}", file=sys.stderr, flush=True)

    def new_lanes(self) -> list[_Lane]:
        c = self.cfg
        return [_Lane(s, STRATEGIES.index(s), r,
                      BudgetMonitor(s, c.eta, c.eps, self.prior_lambda, c.monitor.n0, c.monitor.warmup, c.monitor.ceil))
                for s in c.strategies for r in range(c.runs)]

    # -- restore from rounds.jsonl ---------------------------------------------------------------
    def restore(self, lanes: list[_Lane], rows: list[dict]) -> None:
        by = {(ln.strategy, ln.run): ln for ln in lanes}
        for row in rows:
            ln = by.get((row.get("strategy"), row.get("run")))
            if ln is None or row["round"] != ln.k + 1:
                continue  # foreign or duplicate line
            self._apply_row(ln, row)

    def _apply_row(self, ln: _Lane, row: dict) -> None:
        X_new = np.asarray(row["X"], dtype=np.float64)
        if row["round"] >= 1:
            ln.monitor.observe(row["sigma"], ln.D, row["D"], row["cost"])
        ln.k = row["round"]
        ln.X = X_new
        ln.D = row["D"]
        ln.b = row["b"]
        ln.replies = [{"vector": r["vector"], "reasoning": r.get("reasoning", "")} for r in row["replies"]]
        ln.status = row.get("status")
        ln.failures += row.get("failures", 0)
        ln.ptok += row.get("prompt_tokens_raw", 0)
        ln.pchars += row.get("prompt_chars", 0)
        ln.next_sigma = row.get("next_sigma")

    # -- requests ----------------------------------------------------------------------------------
    def ask(self, slots: list[dict]) -> list[dict]:
        """Query the backend for ``slots`` (each: messages, meta, seed parts), with batched retries.

        Returns per slot: parse (VectorParse), prompt_tokens (summed over attempts), completion_tokens,
        attempts, prompt_chars, reasons (one per failed attempt).
        """
        cfg = self.cfg
        results = [{"parse": None, "prompt_tokens": 0, "completion_tokens": 0, "attempts": 0, "prompt_chars": 0,
                    "reasons": []} for _ in slots]
        pending = list(range(len(slots)))
        for attempt in range(cfg.retries + 1):
            if not pending:
                break
            reqs = []
            for i in pending:
                s = slots[i]
                msgs = (s["messages"] if attempt == 0
                        else _retry_messages(s["messages"], results[i]["reasons"][-1], cfg.d))
                reqs.append(Request(messages=msgs, sampling=cfg.sampling, seed=_seed64(cfg.seed, *s["seed"], attempt),
                                    json_schema=_json_schema(cfg.d) if cfg.structured_output else None,
                                    meta={**s["meta"], "attempt": attempt}))
            t0 = time.perf_counter()
            resps = self.backend.generate(reqs)
            self.call_s += time.perf_counter() - t0
            if len(resps) != len(reqs):
                raise RuntimeError(f"backend returned {len(resps)} responses for {len(reqs)} requests")
            self.n_requests += len(reqs)
            log, still = [], []
            for i, req, resp in zip(pending, reqs, resps):
                r = results[i]
                r["attempts"] += 1
                r["prompt_tokens"] += int(resp.prompt_tokens or 0)
                r["completion_tokens"] += int(resp.completion_tokens or 0)
                r["prompt_chars"] += _chars(req.messages)
                p = (VectorParse(None, "", f"backend_error: {resp.error}") if resp.error
                     else parse_vector(resp.text, cfg.d))
                r["parse"] = p
                if not p.ok:
                    r["reasons"].append(p.reason)
                    still.append(i)
                meta = req.meta
                log.append({"session": self.session, "time": _now(), "strategy": meta.get("strategy"),
                            "run": meta["run"], "round": meta["round"], "agent": meta["agent"], "attempt": attempt,
                            "seed": req.seed, "messages": req.messages,
                            "response": resp.to_dict() if hasattr(resp, "to_dict") else asdict(resp),
                            "parse": {"ok": p.ok, "reason": p.reason, "clipped": p.clipped}})
            _append_lines(self.out / "requests.jsonl", log)
            pending = still
        return results

    def _apply_results(self, ln: _Lane, k: int, res: list[dict], prev: list[list[float]]) -> tuple[list, dict]:
        replies, ptoks, ctoks = [], [], []
        fails = 0
        raw = chars = 0
        for i, r in enumerate(res):
            p = r["parse"]
            ok = p is not None and p.ok
            if not ok:
                fails += 1
            replies.append({"vector": p.vector if ok else list(prev[i]),
                            "reasoning": p.reasoning if ok else (ln.replies[i]["reasoning"] if ln.replies else ""),
                            "ok": ok, "carried": not ok, "attempts": r["attempts"], "reasons": r["reasons"],
                            "clipped": p.clipped if ok else 0})
            ptoks.append(r["prompt_tokens"])
            ctoks.append(r["completion_tokens"])
            raw += r["prompt_tokens"]
            chars += r["prompt_chars"]
        return replies, {"prompt_tokens": ptoks, "completion_tokens": ctoks, "failures": fails,
                         "parse_errors": sum(len(r["reasons"]) for r in res),
                         "prompt_tokens_raw": raw, "prompt_chars": chars}

    # -- decisions after a round -------------------------------------------------------------------
    def _inputs(self, ln: _Lane, i: int, W: np.ndarray) -> list[dict]:
        order = [i] + [j for j in range(self.cfg.n) if j != i]
        return [{"agent": j, "title": self.roles[j].title, "self": j == i, "vector": ln.replies[j]["vector"],
                 "reasoning": ln.replies[j]["reasoning"], "weight": float(W[i, j])}
                for j in order if W[i, j] > 0]

    def _round_slots(self, ln: _Lane, sigma: int) -> list[dict]:
        W = self.W[sigma - 1]
        k = ln.k + 1
        slots = []
        for i, role in enumerate(self.roles):
            inputs = self._inputs(ln, i, W)
            slots.append({"messages": round_messages(self.cfg, role, k, inputs),
                          "seed": (ln.sidx, ln.run, k, i),
                          "meta": {"kind": "deliberation", "strategy": ln.strategy, "run": ln.run, "round": k,
                                   "agent": i, "role": role.name, "title": role.title, "sigma": sigma,
                                   "d": self.cfg.d, "prior": self.fallback[i], "inputs": inputs}})
        return slots

    def _sigma(self, ln: _Lane) -> int:
        if ln.strategy == "complete":
            return 1
        if ln.strategy == "ring":
            return 2
        return 1 if ln.D > self.cfg.eta else 2

    def decide(self, ln: _Lane) -> dict:
        """Status after round ``ln.k`` (see the module docstring) and the monitor's check, as row fields."""
        cfg = self.cfg
        if ln.b < 0:
            return {"status": "BudgetFail", "status_reason": f"budget spent: b = {ln.b:.0f} < 0"}
        if ln.D <= cfg.eps:
            return {"status": "consensus", "status_reason": f"D = {ln.D:.4f} <= eps = {cfg.eps}"}
        if ln.k >= cfg.max_rounds:
            return {"status": "max_rounds", "status_reason": f"{cfg.max_rounds} rounds without consensus"}
        sigma = self._sigma(ln)
        tpc = ln.tokens_per_char()
        pred = tuple(cfg.token_scale * tpc * sum(_chars(s["messages"]) for s in self._round_slots(ln, m))
                     for m in (1, 2))
        chk = ln.monitor.check(ln.k, ln.D, ln.b, pred)
        fields = {"next_sigma": sigma, "predicted_cost": list(pred), "monitor": chk.to_dict()}
        if cfg.monitor.enabled and chk.flag:
            fields.update(status="predicted_BudgetFail",
                          status_reason=f"monitor: b = {ln.b:.0f} < B*(D) = {chk.B_star:.0f}")
        elif cfg.budget_rule == "predicted" and pred[sigma - 1] > ln.b:
            fields.update(status="BudgetFail",
                          status_reason=f"predicted cost {pred[sigma - 1]:.0f} of the next round > b = {ln.b:.0f}")
        return fields

    def _row(self, ln: _Lane, sigma, cost, replies, extra) -> dict:
        row = {"strategy": ln.strategy, "run": ln.run, "round": ln.k, "sigma": sigma, "D": ln.D, "b": ln.b,
               "cost": cost, "X": ln.X.tolist(), "replies": replies, "time": _now(), "session": self.session,
               "status": None, **extra}
        return row

    # -- the two kinds of round ----------------------------------------------------------------------
    def round0(self, lanes: list[_Lane]) -> list[dict]:
        cfg = self.cfg
        todo = [ln for ln in lanes if ln.k < 0]
        if not todo:
            return []
        rows = []
        if cfg.x0 is not None:
            X0 = np.asarray(cfg.x0, dtype=np.float64)
            for ln in todo:
                replies = [{"vector": list(map(float, X0[i])), "reasoning": "(given initial proposal)", "ok": True,
                            "carried": False, "attempts": 0, "reasons": [], "clipped": 0} for i in range(cfg.n)]
                row = self._finish_round0(ln, replies, {"prompt_tokens": [0] * cfg.n, "completion_tokens": [0] * cfg.n,
                                                        "failures": 0, "parse_errors": 0, "prompt_tokens_raw": 0,
                                                        "prompt_chars": 0}, 0.0)
                rows.append(row)
            return rows
        groups: dict[tuple, list[_Lane]] = {}
        for ln in todo:
            key = ("shared", ln.run) if cfg.shared_initial else (ln.strategy, ln.run)
            groups.setdefault(key, []).append(ln)
        slots, owners = [], []
        for key, lns in groups.items():
            sidx = 255 if cfg.shared_initial else lns[0].sidx
            for i, role in enumerate(self.roles):
                slots.append({"messages": initial_messages(cfg, role), "seed": (sidx, lns[0].run, 0, i),
                              "meta": {"kind": "deliberation",
                                       "strategy": None if cfg.shared_initial else lns[0].strategy,
                                       "run": lns[0].run, "round": 0, "agent": i, "role": role.name,
                                       "title": role.title, "sigma": None, "d": cfg.d, "prior": self.fallback[i],
                                       "inputs": []}})
            owners.append((key, lns))
        res = self.ask(slots)
        for g, (key, lns) in enumerate(owners):
            part = res[g * cfg.n:(g + 1) * cfg.n]
            for ln in lns:
                replies, stats = self._apply_results(ln, 0, part, self.fallback)
                cost = cfg.token_scale * stats["prompt_tokens_raw"] if cfg.charge_initial else 0.0
                rows.append(self._finish_round0(ln, replies, stats, cost))
        return rows

    def _finish_round0(self, ln: _Lane, replies, stats, cost) -> dict:
        ln.k = 0
        ln.X = np.array([r["vector"] for r in replies], dtype=np.float64)
        ln.D = float(disagreement(ln.X))
        ln.b = float(self.cfg.b0) - cost
        ln.replies = [{"vector": r["vector"], "reasoning": r["reasoning"]} for r in replies]
        ln.failures += stats["failures"]
        ln.ptok += stats["prompt_tokens_raw"]
        ln.pchars += stats["prompt_chars"]
        extra = self.decide(ln)
        ln.status = extra.get("status")
        ln.next_sigma = extra.get("next_sigma")
        return self._row(ln, None, cost, replies, {**stats, **extra})

    def round_k(self, lanes: list[_Lane]) -> list[dict]:
        active = [ln for ln in lanes if ln.status is None]
        slots, owners = [], []
        for ln in active:
            sigma = ln.next_sigma or self._sigma(ln)
            s = self._round_slots(ln, sigma)
            slots += s
            owners.append((ln, sigma))
        res = self.ask(slots)
        rows = []
        n = self.cfg.n
        for g, (ln, sigma) in enumerate(owners):
            prev = [r["vector"] for r in ln.replies]
            replies, stats = self._apply_results(ln, ln.k + 1, res[g * n:(g + 1) * n], prev)
            cost = self.cfg.token_scale * stats["prompt_tokens_raw"]
            X = np.array([r["vector"] for r in replies], dtype=np.float64)
            D = float(disagreement(X))
            ln.monitor.observe(sigma, ln.D, D, cost)
            ln.k += 1
            ln.X, ln.D, ln.b = X, D, ln.b - cost
            ln.replies = [{"vector": r["vector"], "reasoning": r["reasoning"]} for r in replies]
            ln.failures += stats["failures"]
            ln.ptok += stats["prompt_tokens_raw"]
            ln.pchars += stats["prompt_chars"]
            extra = self.decide(ln)
            ln.status = extra.get("status")
            ln.next_sigma = extra.get("next_sigma")
            rows.append(self._row(ln, sigma, cost, replies, {**stats, **extra}))
        return rows


def lane_summaries(rows: list[dict], b0: float | None = None) -> list[dict]:
    """One summary per lane from ``rounds.jsonl`` rows: strategy, run, rounds, tokens (= b0 - b_final,
    the charged input tokens), d0, d_final, status (None while running), failures (replies carried forward
    after all retries), parse_errors (failed attempts, retried ones included), completion tokens."""
    lanes: dict[tuple, list[dict]] = {}
    for r in rows:
        lanes.setdefault((r["strategy"], r["run"]), []).append(r)
    out = []
    for (s, run), rs in lanes.items():
        rs = sorted(rs, key=lambda r: r["round"])
        first, last = rs[0], rs[-1]
        start_b = b0 if b0 is not None else first["b"] + first.get("cost", 0.0)
        out.append({"strategy": s, "run": run, "rounds": last["round"], "tokens": float(start_b - last["b"]),
                    "d0": first["D"], "d_final": last["D"], "status": last.get("status"),
                    "b_final": last["b"], "failures": sum(r.get("failures", 0) for r in rs),
                    "parse_errors": sum(r.get("parse_errors", 0) for r in rs),
                    "completion_tokens": int(sum(sum(r.get("completion_tokens", [])) for r in rs))})
    order = {s: i for i, s in enumerate(STRATEGIES)}
    return sorted(out, key=lambda x: (order.get(x["strategy"], 9), x["run"]))


def run_deliberation(config: DeliberationConfig, out, backend, *, backend_spec: dict | None = None,
                     progress: bool = True, command: Sequence[str] | None = None,
                     report: bool = True) -> DeliberationRun:
    """Run (or resume) the deliberation of ``config`` in directory ``out``; see the module docstring.

    ``backend``: a backend or a zero-argument factory (called only when rounds remain; pass ``backend_spec``
    with a factory). ``backend_spec`` (name, model, results-relevant options) is part of the run's
    identity. With ``report`` the Table VIII / Fig. 4 / estimates report is written into ``out``.
    """
    if not isinstance(config, DeliberationConfig):
        raise ValueError("config must be a DeliberationConfig")
    out = Path(out)
    factory, backend_spec = resolve_backend(backend, backend_spec, _spec_of)
    identity = _canon({"config": config.identity(), "backend": backend_spec})
    meta = open_run_dir(out, kind="mascot-deliberation", identity=identity, label="a deliberation run",
                        orphan=orphan_message(out, "rounds.jsonl"),
                        fresh={"kind": "mascot-deliberation", "identity": identity, "created": _now(), "sessions": []})
    run_json = out / "run.json"
    h = _Harness(config, out, progress)
    h.session = len(meta["sessions"])
    lanes = h.new_lanes()
    rows = read_jsonl(out / "rounds.jsonl", repair=True)
    h.restore(lanes, rows)
    done_before = sum(max(ln.k, -1) + 1 for ln in lanes)
    session = {"started": _now(), "command": list(command) if command else None, "rounds_done_before": done_before}
    meta["sessions"].append(session)
    meta["complete"] = False
    atomic_write_text(run_json, json.dumps(meta, indent=2, default=_json_default) + "\n")
    t_start = time.perf_counter()
    rounds_run = 0
    if any(ln.status is None for ln in lanes):
        if done_before:
            h.say(f"resuming {out}: {done_before} lane-rounds already logged")
        h.backend = factory() if factory is not None else backend
        session["backend"] = _spec_of(h.backend)
        new = h.round0(lanes)
        _append_lines(out / "rounds.jsonl", new)
        rounds_run += len(new)
        if new:
            h.say("round 0: D(0) = " + ", ".join(f"{r['D']:.4f}" for r in new[: config.runs]))
        while any(ln.status is None for ln in lanes):
            t0 = time.perf_counter()
            new = h.round_k(lanes)
            _append_lines(out / "rounds.jsonl", new)
            rounds_run += len(new)
            ks = sorted({r["round"] for r in new})
            msg = "; ".join(f"{r['strategy']}#{r['run']} k={r['round']} D={r['D']:.4f} b={r['b']:.0f}"
                            + (f" -> {r['status']}" if r.get("status") else "") for r in new[:6])
            h.say(f"round {','.join(map(str, ks))} ({len(new)} lanes, {time.perf_counter() - t0:.1f} s): {msg}"
                  + (" ..." if len(new) > 6 else ""))
    wall = time.perf_counter() - t_start
    all_rows = read_jsonl(out / "rounds.jsonl")
    summaries = lane_summaries(all_rows, config.b0)
    session.update(finished=_now(), wall_s=round(wall, 3), requests=h.n_requests, lane_rounds_run=rounds_run,
                   backend_call_s=round(h.call_s, 3))
    meta["complete"] = True
    meta["summary"] = summaries
    atomic_write_text(run_json, json.dumps(meta, indent=2, default=_json_default) + "\n")
    if report:
        from mascot.analysis.deliberation_report import write_report

        write_report([out], out)
    return DeliberationRun(out, summaries, rounds_run, h.n_requests, wall)


# ============================================================================ estimation from real runs
def _lanes(rows):
    lanes: dict[tuple, list[dict]] = {}
    for r in rows:
        lanes.setdefault((r["strategy"], r["run"]), []).append(r)
    return {k: sorted(v, key=lambda r: r["round"]) for k, v in lanes.items()}


def mode_statistics(rows: list[dict], by_strategy: bool = True) -> list[dict]:
    """Per-mode empirical contraction rates ``D(k)/D(k-1)`` and round costs from ``rounds.jsonl`` rows.

    One record per (strategy, mode) (and ``strategy = "all"`` pooled): n, rate_mean, rate_geomean, rate_std,
    rate_min, rate_max, share_expanding (rates > 1), cost_mean, cost_std.
    """
    acc: dict[tuple, dict] = {}
    for (s, _), rs in _lanes(rows).items():
        for prev, cur in zip(rs, rs[1:]):
            if cur.get("sigma") is None or prev["D"] <= 0:
                continue
            for key in ((s, cur["sigma"]), ("all", cur["sigma"])) if by_strategy else (("all", cur["sigma"]),):
                a = acc.setdefault(key, {"rates": [], "costs": []})
                a["rates"].append(cur["D"] / prev["D"])
                a["costs"].append(cur["cost"])
    out = []
    order = {s: i for i, s in enumerate(STRATEGIES + ("all",))}
    for (s, m), a in sorted(acc.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])):
        r = np.asarray(a["rates"])
        c = np.asarray(a["costs"])
        out.append({"strategy": s, "mode": m, "n": int(r.size), "rate_mean": float(r.mean()),
                    "rate_geomean": float(np.exp(np.mean(np.log(np.maximum(r, 1e-300))))),
                    "rate_std": float(r.std(ddof=1)) if r.size > 1 else 0.0, "rate_min": float(r.min()),
                    "rate_max": float(r.max()), "share_expanding": float(np.mean(r > 1)),
                    "cost_mean": float(c.mean()), "cost_std": float(c.std(ddof=1)) if c.size > 1 else 0.0})
    return out


def posthoc_certificates(rows: list[dict], eta: float, eps: float, b0: float) -> list[dict]:
    """The paper's post-hoc check per lane: lambda_sigma and c_sigma = that lane's average rate and cost per
    mode (the paper averaged the rates of the Claude complete-only run), ``B*(D(0))`` for its strategy, and
    whether ``(X0, b0)`` was certified; a mode the lane never used falls back to the pooled estimate.
    ``theorem2_holds``: certified implies the lane reached Omega_eps (consensus with b >= 0)."""
    pooled = {m["mode"]: m for m in mode_statistics(rows, by_strategy=False)}
    out = []
    for (s, run), rs in _lanes(rows).items():
        own: dict[int, dict] = {}
        for prev, cur in zip(rs, rs[1:]):
            if cur.get("sigma") is None or prev["D"] <= 0:
                continue
            a = own.setdefault(cur["sigma"], {"r": [], "c": []})
            a["r"].append(cur["D"] / prev["D"])
            a["c"].append(cur["cost"])
        lam, cost, src = [math.nan, math.nan], [math.nan, math.nan], ["none", "none"]
        for m in (1, 2):
            if m in own:
                lam[m - 1], cost[m - 1], src[m - 1] = float(np.mean(own[m]["r"])), float(np.mean(own[m]["c"])), "lane"
            elif m in pooled:
                lam[m - 1], cost[m - 1], src[m - 1] = pooled[m]["rate_mean"], pooled[m]["cost_mean"], "pooled"
        needed = {"adaptive": (1, 2), "complete": (1,), "ring": (2,)}[s]
        rec = {"strategy": s, "run": run, "d0": rs[0]["D"], "lambda1": lam[0], "lambda2": lam[1], "c1": cost[0],
               "c2": cost[1], "source": src, "status": rs[-1].get("status")}
        if any(math.isnan(lam[m - 1]) for m in needed):
            rec.update(B_star=None, K_star=None, certified=None, theorem2_holds=None)
        else:
            L = [x if not math.isnan(x) else 0.5 for x in lam]
            C = [x if not math.isnan(x) else 1.0 for x in cost]
            e = {"adaptive": eta, "complete": eps, "ring": max(rs[0]["D"], eps)}[s]
            cert = theorem1(rs[0]["D"], e, eps, L[0], L[1], C[0], C[1])
            certified = cert.certifies(b0)
            reached = rs[-1].get("status") == "consensus"
            rec.update(B_star=None if math.isinf(cert.B_star) else cert.B_star,
                       K_star=None if math.isinf(cert.K_star) else cert.K_star, certified=certified,
                       theorem2_holds=(not certified) or reached)
        out.append(rec)
    return out


def claude_example(d0: float = 0.6864, lambda1: float = 0.7574, c1: float = 12025.0, eta: float = 0.05,
                   eps: float = 0.05, b0: float = 100_000.0) -> dict:
    """Recompute the paper's post-hoc certificate of the Claude complete-only deployment (Sec. V-C).

    ``D(0) = 0.6864`` (Table VIII), ``lambda1 ~ 0.7574``, ``c1 ~ 12025``, ``eta = eps = 0.05`` (mode 2 is
    never selected, so ``lambda2``/``c2`` do not enter; they are passed as ``lambda1``/``c1``). Also the
    implied values from Table VIII itself: rate ``(D_final/D0)^(1/9)`` and ``tokens/9``.
    """
    cert = theorem1(d0, eta, eps, lambda1, lambda1, c1, c1)
    k1_exact = math.log(eta / d0) / math.log(lambda1)
    return {
        "d0": d0, "lambda1": lambda1, "c1": c1, "eta": eta, "eps": eps, "b0": b0,
        "K1_exact": k1_exact, "K1": cert.K1, "K2": cert.K2, "K_star": cert.K_star, "B_star": cert.B_star,
        "in_certificate_region": in_certificate_region(d0, b0, eta, eps, lambda1, lambda1, c1, c1),
        "margin": cert.margin(b0), "reason": cert.reason,
        "bound_D9": lambda1 ** 9 * d0,
        "table_viii": {"rounds": 9, "tokens": 108227, "d_final": 0.0549,
                       "implied_rate": (0.0549 / 0.6864) ** (1 / 9), "implied_c1": 108227 / 9},
        "rounds_at_implied_rate": rounds_to_reach(d0, eps, (0.0549 / 0.6864) ** (1 / 9)),
    }
