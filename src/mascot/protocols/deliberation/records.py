"""A deliberation run's records and the estimates made from them (consensus paper, Sec. V-C).

``rounds.jsonl`` holds one line per lane (strategy x repeated run) and round; :func:`read_rounds` reads it,
:func:`group_lanes` groups it by lane, :func:`lane_summaries` gives Table VIII's numbers per lane,
:func:`mode_statistics` the per-mode empirical contraction rates and costs, :func:`posthoc_certificates`
the paper's post-hoc certificate check per lane and :func:`claude_example` recomputes the paper's own
post-hoc check of the Claude complete-only deployment from its printed numbers.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from mascot import papers
from mascot.io import read_jsonl
from mascot.theory.consensus import in_certificate_region, rounds_to_reach, theorem1
from mascot.theory.monitor import STRATEGIES, strategy_eta, strategy_modes

__all__ = ["read_rounds", "group_lanes", "lane_summaries", "mode_statistics", "posthoc_certificates", "claude_example"]


def read_rounds(out) -> list[dict]:
    """The ``rounds.jsonl`` records of a run directory (in file order).

    Arguments: ``out`` the run directory.

    Returns: a list of dicts.
    """
    return read_jsonl(Path(out) / "rounds.jsonl")


def group_lanes(rows: list[dict]) -> dict[tuple[str, int], list[dict]]:
    """``rounds.jsonl`` rows by lane: ``{(strategy, run): rows sorted by round}``, lanes in order of first
    appearance."""
    lanes: dict[tuple, list[dict]] = {}
    for r in rows:
        lanes.setdefault((r["strategy"], r["run"]), []).append(r)
    return {k: sorted(v, key=lambda r: r["round"]) for k, v in lanes.items()}


def lane_summaries(rows: list[dict], b0: float | None = None) -> list[dict]:
    """One summary per lane from ``rounds.jsonl`` rows: strategy, run, rounds, tokens (= b0 - b_final,
    the charged input tokens), d0, d_final, status (None while running), failures (replies carried forward
    after all retries), parse_errors (failed attempts, retried ones included), completion tokens.

    Returns: a list of dicts, one per lane.
    """
    out = []
    for (s, run), rs in group_lanes(rows).items():
        first, last = rs[0], rs[-1]
        start_b = b0 if b0 is not None else first["b"] + first.get("cost", 0.0)
        out.append(
            {
                "strategy": s,
                "run": run,
                "rounds": last["round"],
                "tokens": float(start_b - last["b"]),
                "d0": first["D"],
                "d_final": last["D"],
                "status": last.get("status"),
                "b_final": last["b"],
                "failures": sum(r.get("failures", 0) for r in rs),
                "parse_errors": sum(r.get("parse_errors", 0) for r in rs),
                "completion_tokens": int(sum(sum(r.get("completion_tokens", [])) for r in rs)),
            }
        )
    order = {s: i for i, s in enumerate(STRATEGIES)}
    return sorted(out, key=lambda x: (order.get(x["strategy"], 9), x["run"]))


def mode_statistics(rows: list[dict], by_strategy: bool = True) -> list[dict]:
    """Per-mode empirical contraction rates ``D(k)/D(k-1)`` and round costs from ``rounds.jsonl`` rows.

    One record per (strategy, mode) (and ``strategy = "all"`` pooled): n, rate_mean, rate_geomean, rate_std,
    rate_min, rate_max, share_expanding (rates > 1), cost_mean, cost_std.

    Arguments: ``rows`` records of :func:`read_rounds`; ``by_strategy`` one record per strategy and mode (False:
    pooled only).

    Returns: a list of dicts as above.
    """
    acc: dict[tuple, dict] = {}
    for (s, _), rs in group_lanes(rows).items():
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
        out.append(
            {
                "strategy": s,
                "mode": m,
                "n": int(r.size),
                "rate_mean": float(r.mean()),
                "rate_geomean": float(np.exp(np.mean(np.log(np.maximum(r, 1e-300))))),
                "rate_std": float(r.std(ddof=1)) if r.size > 1 else 0.0,
                "rate_min": float(r.min()),
                "rate_max": float(r.max()),
                "share_expanding": float(np.mean(r > 1)),
                "cost_mean": float(c.mean()),
                "cost_std": float(c.std(ddof=1)) if c.size > 1 else 0.0,
            }
        )
    return out


def posthoc_certificates(rows: list[dict], eta: float, eps: float, b0: float) -> list[dict]:
    """The paper's post-hoc check per lane: lambda_sigma and c_sigma = that lane's average rate and cost per
    mode (the paper averaged the rates of the Claude complete-only run), ``B*(D(0))`` for its strategy, and
    whether ``(X0, b0)`` was certified; a mode the lane never used falls back to the pooled estimate.
    ``theorem2_holds``: certified implies the lane reached Omega_eps (consensus with b >= 0).

    Arguments: ``rows`` records of :func:`read_rounds`; ``eta``, ``eps`` the thresholds; ``b0`` the budget.

    Returns: a list of dicts, one per lane.
    """
    pooled = {m["mode"]: m for m in mode_statistics(rows, by_strategy=False)}
    out = []
    for (s, run), rs in group_lanes(rows).items():
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
        needed = strategy_modes(s)
        rec = {
            "strategy": s,
            "run": run,
            "d0": rs[0]["D"],
            "lambda1": lam[0],
            "lambda2": lam[1],
            "c1": cost[0],
            "c2": cost[1],
            "source": src,
            "status": rs[-1].get("status"),
        }
        if any(math.isnan(lam[m - 1]) for m in needed):
            rec.update(B_star=None, K_star=None, certified=None, theorem2_holds=None)
        else:
            L = [x if not math.isnan(x) else 0.5 for x in lam]
            C = [x if not math.isnan(x) else 1.0 for x in cost]
            e = strategy_eta(s, rs[0]["D"], eta, eps)
            cert = theorem1(rs[0]["D"], e, eps, L[0], L[1], C[0], C[1])
            certified = cert.certifies(b0)
            reached = rs[-1].get("status") == "consensus"
            rec.update(
                B_star=None if math.isinf(cert.B_star) else cert.B_star,
                K_star=None if math.isinf(cert.K_star) else cert.K_star,
                certified=certified,
                theorem2_holds=(not certified) or reached,
            )
        out.append(rec)
    return out


_CLAUDE = papers.TABLE_VIII[("Claude Opus-4.8", "complete")]
_CLAUDE_EST = papers.CLAUDE_COMPLETE_ESTIMATES


def claude_example(
    d0: float = _CLAUDE["d0"],
    lambda1: float = _CLAUDE_EST["lambda1"],
    c1: float = _CLAUDE_EST["c1"],
    eta: float = _CLAUDE_EST["eta"],
    eps: float = _CLAUDE_EST["eps"],
    b0: float = papers.DELIBERATION_SETTINGS["b0"],
) -> dict:
    """Recompute the paper's post-hoc certificate of the Claude complete-only deployment (Sec. V-C).

    ``D(0) = 0.6864`` (Table VIII), ``lambda1 ~ 0.7574``, ``c1 ~ 12025``, ``eta = eps = 0.05`` (mode 2 is
    never selected, so ``lambda2``/``c2`` do not enter; they are passed as ``lambda1``/``c1``). Also the
    implied values from Table VIII itself: rate ``(D_final/D0)^(1/9)`` and ``tokens/9``.

    Arguments: ``d0`` D(0); ``lambda1``, ``c1`` the rate and round cost; ``eta``, ``eps`` the thresholds; ``b0``
    the budget.

    Returns: a dict of the recomputed certificate (K_star, B_star, certified) and the implied values.
    """
    t = _CLAUDE
    cert = theorem1(d0, eta, eps, lambda1, lambda1, c1, c1)
    k1_exact = math.log(eta / d0) / math.log(lambda1)
    implied_rate = (t["d_final"] / t["d0"]) ** (1 / t["rounds"])
    return {
        "d0": d0,
        "lambda1": lambda1,
        "c1": c1,
        "eta": eta,
        "eps": eps,
        "b0": b0,
        "K1_exact": k1_exact,
        "K1": cert.K1,
        "K2": cert.K2,
        "K_star": cert.K_star,
        "B_star": cert.B_star,
        "in_certificate_region": in_certificate_region(d0, b0, eta, eps, lambda1, lambda1, c1, c1),
        "margin": cert.margin(b0),
        "reason": cert.reason,
        "bound_D9": lambda1 ** t["rounds"] * d0,
        "table_viii": {
            "rounds": t["rounds"],
            "tokens": t["tokens"],
            "d_final": t["d_final"],
            "implied_rate": implied_rate,
            "implied_c1": t["tokens"] / t["rounds"],
        },
        "rounds_at_implied_rate": rounds_to_reach(d0, eps, implied_rate),
    }
