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
* strategies ``adaptive`` (Def. 8: mode 1 while ``D(k) > eta``, else mode 2), ``complete`` (mode 1 only)
  and ``ring`` (mode 2 only), decided by :func:`mascot.kernels.switching.choose_mode`;
* stopping, checked after each round ``k`` in this order: ``b_k < 0`` -> **BudgetFail** (the paper's live
  rule; a state with ``b < 0`` is outside Omega_eps even if ``D <= eps``); ``D(k) <= eps`` -> consensus;
  ``k = max_rounds`` -> max_rounds; the **monitor** (only with ``monitor.enabled``) -> predicted_BudgetFail;
  ``budget_rule = "predicted"`` and the predicted cost of round ``k + 1`` exceeds ``b_k`` -> BudgetFail
  (Algorithm 1's ``b_k < c_sigma``, with the cost predicted from the prompts' characters times the lane's
  measured tokens per character, prior 0.25).

Parsing (:func:`~mascot.protocols.deliberation.parsing.parse_vector`): the JSON object is extracted from prose
or code fences, ``vector`` must hold exactly ``d`` finite numbers, which are clipped to ``[0, 1]``; anything
else is a parse failure. A failed
agent is asked again (with a note naming the problem) up to ``retries`` times, batched; after that its
previous vector is carried forward (round 0: its role prior, else 0.5 on every axis) and the failure is
counted. Backend errors are failures too.

Logs in the run directory: ``rounds.jsonl`` (one line per lane and round: ``X_k``, ``D``, ``b``, mode,
per-agent prompt/completion tokens, replies, failures, monitor, status), ``requests.jsonl`` (every request
and response), ``run.json`` (identity and sessions). Reruns resume: rounds already in ``rounds.jsonl`` are
not redone (request seeds are derived from (seed, strategy, run, round, agent, attempt), so a redone round
reproduces on deterministic backends); a rerun with different parameters raises ``ValueError``. Batched: one
backend call per round serves every agent of every running lane (plus one call per retry attempt).

The **online monitor** (:class:`mascot.theory.monitor.BudgetMonitor`) re-checks ``b_k >= B*(D(k))`` after
every round with running estimates of the modes' rates and costs, shrunk to priors (contraction rates of
``W`` and the predicted round costs) -- the same estimator as the JAX kernel :mod:`mascot.kernels.deliberation`.
It is always computed and logged; with ``monitor.enabled`` it stops a lane early with ``predicted_BudgetFail``.

:class:`~mascot.protocols.deliberation.surrogate.SurrogateDeliberationBackend` answers deliberation requests
without an LLM, so this exact harness runs on CPU. The harness writes records only: the Table VIII / Fig. 4 /
estimates report is :func:`mascot.analysis.deliberation_report.write_report`, which the CLI calls afterwards.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mascot import log
from mascot.backends.base import BackendFailure, CutWatch, Request, attach_progress, endpoint, stop_if_down
from mascot.backends.cache import AnswerCache, keep_answers
from mascot.errors import BackendError, InputError
from mascot.io import append_jsonl, atomic_write_text, json_default, jsonl_line, read_jsonl, utc_now
from mascot.protocols.deliberation.config import STRATEGIES, DeliberationConfig
from mascot.protocols.deliberation.parsing import VectorParse, parse_vector
from mascot.protocols.deliberation.prompts import (
    initial_messages,
    json_schema,
    prompt_chars,
    retry_messages,
    round_messages,
)
from mascot.protocols.deliberation.records import lane_summaries
from mascot.protocols.deliberation.surrogate import SurrogateDeliberationBackend
from mascot.rundir import begin_run, surrogate_aware_spec
from mascot.seeds import seed64
from mascot.status import Status
from mascot.theory.consensus import contraction_rate, disagreement
from mascot.theory.monitor import BudgetMonitor

_log = log.get_logger(__name__)

__all__ = ["run_deliberation", "DeliberationRun"]

_TOKENS_PER_CHAR_PRIOR = 0.25
_CONSENSUS, _BUDGET_FAIL = Status.CONSENSUS.label, Status.BUDGET_FAIL.label
_MAX_ROUNDS, _PREDICTED_BUDGET_FAIL = Status.MAX_ROUNDS.label, Status.PREDICTED_BUDGET_FAIL.label


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
    return surrogate_aware_spec(backend, SurrogateDeliberationBackend)


class _Harness:
    def __init__(self, cfg: DeliberationConfig, out: Path, progress: bool):
        self.cfg = cfg
        self.out = out
        self.progress = progress
        self.roles = cfg.agent_roles()
        self.W = cfg.weights()
        self.lams = (contraction_rate(self.W[0], "W1"), contraction_rate(self.W[1], "W2"))
        m = cfg.monitor
        self.prior_lambda = (
            m.prior_lambda1 if m.prior_lambda1 is not None else self.lams[0],
            m.prior_lambda2 if m.prior_lambda2 is not None else self.lams[1],
        )
        if not all(p > 0 for p in self.prior_lambda):  # e.g. lambda = 0 for a complete graph with equal weights
            self.prior_lambda = tuple(max(p, 1e-6) for p in self.prior_lambda)
        self.backend = None
        self.n_requests = 0
        self.call_s = 0.0
        self.cuts = CutWatch(cfg.sampling.max_tokens)  # warns when most replies stop at max_tokens
        self.session = 0
        self.fallback = [list(r.prior) if r.prior is not None else [0.5] * cfg.d for r in self.roles]
        # Algorithm 1's switching rule, shared with the kernels (imported here: it loads JAX, the config does not)
        from mascot.kernels.switching import choose_mode

        self.choose_mode = choose_mode

    def say(self, msg: str) -> None:
        if self.progress:
            log.progress(_log, f"[deliberate] {msg}")

    def new_lanes(self) -> list[_Lane]:
        c = self.cfg
        return [
            _Lane(
                s,
                STRATEGIES.index(s),
                r,
                BudgetMonitor(s, c.eta, c.eps, self.prior_lambda, c.monitor.n0, c.monitor.warmup, c.monitor.ceil),
            )
            for s in c.strategies
            for r in range(c.runs)
        ]

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
        results = [
            {"parse": None, "prompt_tokens": 0, "completion_tokens": 0, "attempts": 0, "prompt_chars": 0, "reasons": []}
            for _ in slots
        ]
        pending = list(range(len(slots)))
        # attempt numbers (seeds, retry prompts) count the model's answers only: a request the backend did not
        # answer is asked again the same way, so a transient error leaves the results unchanged
        answered = [0] * len(slots)
        errs_in_row = [0] * len(slots)
        while pending:
            reqs = []
            for i in pending:
                s = slots[i]
                attempt = answered[i]
                msgs = (
                    s["messages"] if attempt == 0 else retry_messages(s["messages"], results[i]["reasons"][-1], cfg.d)
                )
                seed = seed64(cfg.seed, *s["seed"], attempt)
                reqs.append(
                    Request(
                        messages=msgs,
                        sampling=replace(cfg.sampling, seed=seed),
                        json_schema=json_schema(cfg.d) if cfg.structured_output else None,
                        meta={**s["meta"], "attempt": attempt},
                    )
                )
            t0 = time.perf_counter()
            resps = self.backend.generate(reqs)
            stop_if_down(self.backend, f"round {reqs[0].meta.get('round', '?')}")
            self.call_s += time.perf_counter() - t0
            if len(resps) != len(reqs):
                raise BackendError(f"backend returned {len(resps)} responses for {len(reqs)} requests")
            self.n_requests += len(reqs)
            log, still = [], []
            for i, req, resp in zip(pending, reqs, resps):
                r = results[i]
                p = (
                    VectorParse(None, "", f"backend_error: {resp.error}")
                    if resp.error
                    else parse_vector(resp.text, cfg.d)
                )
                r["parse"] = p
                if resp.error:  # no answer: not an attempt of the model's (requests.jsonl keeps the error)
                    errs_in_row[i] += 1
                    if errs_in_row[i] <= cfg.retries:
                        still.append(i)
                else:
                    r["attempts"] += 1
                    r["prompt_tokens"] += int(resp.prompt_tokens or 0)
                    r["completion_tokens"] += int(resp.completion_tokens or 0)
                    r["prompt_chars"] += prompt_chars(req.messages)
                    errs_in_row[i] = 0
                    answered[i] += 1
                    if not p.ok:
                        r["reasons"].append(p.reason)
                        if answered[i] <= cfg.retries:
                            still.append(i)
                meta = req.meta
                log.append(
                    {
                        "session": self.session,
                        "time": utc_now(),
                        "strategy": meta.get("strategy"),
                        "run": meta["run"],
                        "round": meta["round"],
                        "agent": meta["agent"],
                        "attempt": meta["attempt"],
                        "seed": req.sampling.seed,
                        "messages": req.messages,
                        "response": resp.to_dict() if hasattr(resp, "to_dict") else asdict(resp),
                        "parse": {"ok": p.ok, "reason": p.reason, "clipped": p.clipped},
                    }
                )
            append_jsonl(self.out / "requests.jsonl", log)
            self.cuts.add(resps, [results[i]["parse"].ok for i in pending])
            pending = still
        failed = [
            i
            for i, r in enumerate(results)
            if r["parse"] is not None and not r["parse"].ok and r["parse"].reason.startswith("backend_error: ")
        ]
        if failed:
            meta = slots[failed[0]]["meta"]
            raise BackendFailure(
                f"{endpoint(self.backend)}: {len(failed)} of {len(slots)} requests of round {meta['round']} got no "
                f"answer after {cfg.retries + 1} tries in a row; first error: "
                f"{results[failed[0]]['parse'].reason[len('backend_error: ') :][:600]}. The round was not committed; "
                "rerun the same command to resume from it"
            )
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
            replies.append(
                {
                    "vector": p.vector if ok else list(prev[i]),
                    "reasoning": p.reasoning if ok else (ln.replies[i]["reasoning"] if ln.replies else ""),
                    "ok": ok,
                    "carried": not ok,
                    "attempts": r["attempts"],
                    "reasons": r["reasons"],
                    "clipped": p.clipped if ok else 0,
                }
            )
            ptoks.append(r["prompt_tokens"])
            ctoks.append(r["completion_tokens"])
            raw += r["prompt_tokens"]
            chars += r["prompt_chars"]
        return replies, {
            "prompt_tokens": ptoks,
            "completion_tokens": ctoks,
            "failures": fails,
            "parse_errors": sum(len(r["reasons"]) for r in res),
            "prompt_tokens_raw": raw,
            "prompt_chars": chars,
        }

    # -- decisions after a round -------------------------------------------------------------------
    def _inputs(self, ln: _Lane, i: int, W: np.ndarray) -> list[dict]:
        order = [i] + [j for j in range(self.cfg.n) if j != i]
        return [
            {
                "agent": j,
                "title": self.roles[j].title,
                "self": j == i,
                "vector": ln.replies[j]["vector"],
                "reasoning": ln.replies[j]["reasoning"],
                "weight": float(W[i, j]),
            }
            for j in order
            if W[i, j] > 0
        ]

    def _round_slots(self, ln: _Lane, sigma: int) -> list[dict]:
        W = self.W[sigma - 1]
        k = ln.k + 1
        slots = []
        for i, role in enumerate(self.roles):
            inputs = self._inputs(ln, i, W)
            slots.append(
                {
                    "messages": round_messages(self.cfg, role, k, inputs),
                    "seed": (ln.sidx, ln.run, k, i),
                    "meta": {
                        "kind": "deliberation",
                        "strategy": ln.strategy,
                        "run": ln.run,
                        "round": k,
                        "agent": i,
                        "role": role.name,
                        "title": role.title,
                        "sigma": sigma,
                        "d": self.cfg.d,
                        "prior": self.fallback[i],
                        "inputs": inputs,
                        "D": ln.D,
                        "mode_rate": self.lams[sigma - 1],
                    },
                }
            )
        return slots

    def _sigma(self, ln: _Lane) -> int:
        """The mode of the lane's next round (Def. 8; ``complete``/``ring`` fix mode 1/2)."""
        return 1 if bool(self.choose_mode(ln.D, self.cfg.eta, ln.strategy)) else 2

    def decide(self, ln: _Lane) -> dict:
        """Status after round ``ln.k`` (see the module docstring) and the monitor's check, as row fields."""
        cfg = self.cfg
        if ln.b < 0:
            return {"status": _BUDGET_FAIL, "status_reason": f"budget spent: b = {ln.b:.0f} < 0"}
        if ln.D <= cfg.eps:
            return {"status": _CONSENSUS, "status_reason": f"D = {ln.D:.4f} <= eps = {cfg.eps}"}
        if ln.k >= cfg.max_rounds:
            return {"status": _MAX_ROUNDS, "status_reason": f"{cfg.max_rounds} rounds without consensus"}
        sigma = self._sigma(ln)
        tpc = ln.tokens_per_char()
        pred = tuple(
            cfg.token_scale * tpc * sum(prompt_chars(s["messages"]) for s in self._round_slots(ln, m)) for m in (1, 2)
        )
        chk = ln.monitor.check(ln.k, ln.D, ln.b, pred)
        fields = {"next_sigma": sigma, "predicted_cost": list(pred), "monitor": chk.to_dict()}
        if cfg.monitor.enabled and chk.flag:
            fields.update(
                status=_PREDICTED_BUDGET_FAIL, status_reason=f"monitor: b = {ln.b:.0f} < B*(D) = {chk.B_star:.0f}"
            )
        elif cfg.budget_rule == "predicted" and pred[sigma - 1] > ln.b:
            fields.update(
                status=_BUDGET_FAIL,
                status_reason=f"predicted cost {pred[sigma - 1]:.0f} of the next round > b = {ln.b:.0f}",
            )
        return fields

    def _row(self, ln: _Lane, sigma, cost, replies, extra) -> dict:
        row = {
            "strategy": ln.strategy,
            "run": ln.run,
            "round": ln.k,
            "sigma": sigma,
            "D": ln.D,
            "b": ln.b,
            "cost": cost,
            "X": ln.X.tolist(),
            "replies": replies,
            "time": utc_now(),
            "session": self.session,
            "status": None,
            **extra,
        }
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
                replies = [
                    {
                        "vector": list(map(float, X0[i])),
                        "reasoning": "(given initial proposal)",
                        "ok": True,
                        "carried": False,
                        "attempts": 0,
                        "reasons": [],
                        "clipped": 0,
                    }
                    for i in range(cfg.n)
                ]
                row = self._finish_round0(
                    ln,
                    replies,
                    {
                        "prompt_tokens": [0] * cfg.n,
                        "completion_tokens": [0] * cfg.n,
                        "failures": 0,
                        "parse_errors": 0,
                        "prompt_tokens_raw": 0,
                        "prompt_chars": 0,
                    },
                    0.0,
                )
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
                slots.append(
                    {
                        "messages": initial_messages(cfg, role),
                        "seed": (sidx, lns[0].run, 0, i),
                        "meta": {
                            "kind": "deliberation",
                            "strategy": None if cfg.shared_initial else lns[0].strategy,
                            "run": lns[0].run,
                            "round": 0,
                            "agent": i,
                            "role": role.name,
                            "title": role.title,
                            "sigma": None,
                            "d": cfg.d,
                            "prior": self.fallback[i],
                            "inputs": [],
                        },
                    }
                )
            owners.append((key, lns))
        res = self.ask(slots)
        for g, (_key, lns) in enumerate(owners):
            part = res[g * cfg.n : (g + 1) * cfg.n]
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
        return self._book(ln, None, cost, replies, stats)

    def _book(self, ln: _Lane, sigma, cost, replies, stats) -> dict:
        """Book a round's replies and counts on ``ln``, decide what comes next and return its record."""
        ln.replies = [{"vector": r["vector"], "reasoning": r["reasoning"]} for r in replies]
        ln.failures += stats["failures"]
        ln.ptok += stats["prompt_tokens_raw"]
        ln.pchars += stats["prompt_chars"]
        extra = self.decide(ln)
        ln.status = extra.get("status")
        ln.next_sigma = extra.get("next_sigma")
        return self._row(ln, sigma, cost, replies, {**stats, **extra})

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
            replies, stats = self._apply_results(ln, ln.k + 1, res[g * n : (g + 1) * n], prev)
            cost = self.cfg.token_scale * stats["prompt_tokens_raw"]
            X = np.array([r["vector"] for r in replies], dtype=np.float64)
            D = float(disagreement(X))
            ln.monitor.observe(sigma, ln.D, D, cost)
            ln.k += 1
            ln.X, ln.D, ln.b = X, D, ln.b - cost
            rows.append(self._book(ln, sigma, cost, replies, stats))
        return rows


def _drop_uncommitted_requests(path: Path, rounds: list[dict]) -> None:
    """Keep only the request records of committed lane-rounds: a round that failed (or was killed) logged
    requests that its rerun logs again, which would count its tokens and parse failures twice."""
    if not path.exists():
        return
    done = {(r.get("strategy"), r.get("run"), r.get("round")) for r in rounds}
    shared = {(r.get("run"), r.get("round")) for r in rounds}  # round 0's proposals serve every strategy
    recs = read_jsonl(path, repair=True)
    keep = [
        r
        for r in recs
        if (r.get("strategy"), r.get("run"), r.get("round")) in done
        or (r.get("strategy") is None and (r.get("run"), r.get("round")) in shared)
    ]
    if len(keep) != len(recs):
        atomic_write_text(path, "".join(jsonl_line(r) for r in keep))


def run_deliberation(
    config: DeliberationConfig,
    out,
    backend,
    *,
    backend_spec: dict | None = None,
    progress: bool = True,
    command: Sequence[str] | None = None,
) -> DeliberationRun:
    """Run (or resume) the deliberation of ``config`` in directory ``out``; see the module docstring.

    ``backend``: a backend or a zero-argument factory (called only when rounds remain; pass ``backend_spec``
    with a factory). ``backend_spec`` (name, model, results-relevant options) is part of the run's
    identity. Writes records only (``rounds.jsonl``, ``requests.jsonl``, ``run.json``); the report is
    :func:`mascot.analysis.deliberation_report.write_report`.

    Arguments: ``config`` a :class:`DeliberationConfig`; ``out`` the run directory; ``backend``,
    ``backend_spec`` as above; ``progress`` print progress; ``command`` the command line recorded in the run's
    provenance. Returns a :class:`DeliberationRun`.
    """
    if not isinstance(config, DeliberationConfig):
        raise InputError("config must be a DeliberationConfig")
    out = Path(out)
    start = begin_run(
        out,
        kind="mascot-deliberation",
        label="a deliberation run",
        config_identity=config.identity(),
        backend=backend,
        backend_spec=backend_spec,
        spec_of=_spec_of,
        results="rounds.jsonl",
    )
    factory, meta = start.factory, start.meta
    run_json = out / "run.json"
    h = _Harness(config, out, progress)
    h.session = len(meta["sessions"])
    lanes = h.new_lanes()
    rows = read_jsonl(out / "rounds.jsonl", repair=True)
    h.restore(lanes, rows)
    _drop_uncommitted_requests(out / "requests.jsonl", rows)
    done_before = sum(max(ln.k, -1) + 1 for ln in lanes)
    session = {"started": utc_now(), "command": list(command) if command else None, "rounds_done_before": done_before}
    meta["sessions"].append(session)
    meta["complete"] = False
    atomic_write_text(run_json, json.dumps(meta, indent=2, default=json_default) + "\n")
    t_start = time.perf_counter()
    rounds_run = 0
    if any(ln.status is None for ln in lanes):
        if done_before:
            h.say(f"resuming {out}: {done_before} lane-rounds already logged")
        h.backend = keep_answers(factory() if factory is not None else backend, out)  # resume at the request
        attach_progress(h.backend, h.say)  # requests done/total inside a round (hf, openai)
        session["backend"] = _spec_of(h.backend)
        new = h.round0(lanes)
        append_jsonl(out / "rounds.jsonl", new)
        rounds_run += len(new)
        if new:  # one D(0) per run where the strategies share their initial beliefs, else one per lane
            # (the first rows were one run under several strategies: "D(0) = 0.4785, 0.4785" for two runs)
            d0 = {}
            for r in new:
                d0.setdefault(r["run"] if config.shared_initial else f"{r['strategy']}#{r['run']}", r["D"])
            h.say(
                "round 0 (every agent's first reply; role priors stand in for replies that did not parse): D(0) = "
                + ", ".join(f"{v:.4f}" if config.shared_initial else f"{k} {v:.4f}" for k, v in d0.items())
            )
        while any(ln.status is None for ln in lanes):
            t0 = time.perf_counter()
            new = h.round_k(lanes)
            append_jsonl(out / "rounds.jsonl", new)
            rounds_run += len(new)
            ks = sorted({r["round"] for r in new})
            msg = "; ".join(
                f"{r['strategy']}#{r['run']} k={r['round']} D={r['D']:.4f} b={r['b']:.0f}"
                + (f" -> {r['status']}" if r.get("status") else "")
                for r in new[:6]
            )
            h.say(
                f"round {','.join(map(str, ks))} ({len(new)} lanes, {time.perf_counter() - t0:.1f} s): {msg}"
                + (" ..." if len(new) > 6 else "")
            )
    h.cuts.finish()  # a run too short for the warning on the way says it now
    wall = time.perf_counter() - t_start
    all_rows = read_jsonl(out / "rounds.jsonl")
    summaries = lane_summaries(all_rows, config.b0)
    session.update(
        finished=utc_now(),
        wall_s=round(wall, 3),
        requests=h.n_requests,
        lane_rounds_run=rounds_run,
        backend_call_s=round(h.call_s, 3),
    )
    if h.backend is not None and hasattr(h.backend, "describe"):  # provenance, after the run: the openai probe's
        session["backend"] = {**session["backend"], "describe": h.backend.describe()}  # findings are in it by now
    if isinstance(h.backend, AnswerCache):  # every round is committed: its answers are in rounds.jsonl
        session["replayed"] = h.backend.replayed
        h.backend.clear()
    meta["complete"] = True
    meta["summary"] = summaries
    atomic_write_text(run_json, json.dumps(meta, indent=2, default=json_default) + "\n")
    return DeliberationRun(out, summaries, rounds_run, h.n_requests, wall)
