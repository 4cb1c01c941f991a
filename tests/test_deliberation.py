"""LLM deliberation under a token budget (consensus paper, Sec. V-C), its JAX surrogate kernel, the
certificate monitor, and voting / debate (the voting-and-debate article)."""

import argparse
import json
import math
import sys
from decimal import Decimal
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from mascot.graphs import complete_weights, ring_weights
from mascot.io import read_jsonl
from mascot.kernels.deliberation import (
    CLAUDE_CALIBRATION,
    certificate_budget_jax,
    neighbor_degrees,
    round_draws,
    simulate_deliberation,
)
from mascot.protocols.debate import (
    Ballot,
    DebateAgent,
    DebateConfig,
    SurrogateDebateBackend,
    agreed_decision,
    article_consensus,
    majority_vote,
    parse_decision,
    run_debate,
    weighted_vote,
)
from mascot.protocols.deliberation import (
    PAPER_ROLES,
    Axis,
    BudgetMonitor,
    DeliberationConfig,
    Role,
    SurrogateDeliberationBackend,
    claude_example,
    load_deliberation_config,
    mode_statistics,
    parse_vector,
    posthoc_certificates,
    read_rounds,
    strategy_budget,
)
from mascot.studies.deliberation import deliberate as run_deliberation  # the harness, then its report
from mascot.theory import disagreement, in_certificate_region, rounds_to_reach, theorem1

pytestmark = pytest.mark.x64  # the kernels are checked against float64 references (as before: the suite ran in x64)

sys.path.insert(0, str(Path(__file__).resolve().parent))


class Counting:
    """Wraps a backend and records the size of every generate call."""

    def __init__(self, inner):
        self.inner = inner
        self.name, self.model = inner.name, inner.model
        self.calls = []

    def generate(self, requests):
        self.calls.append([(r.meta.get("round"), r.meta.get("attempt")) for r in requests])
        return self.inner.generate(requests)

    def describe(self):
        return self.inner.describe()


def _spec(be):
    return {"name": "surrogate", "model": be.model, "options": be.options()}


# ----------------------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    "text, vec, code",
    [
        ('{"vector": [0.1, 0.2, 0.3], "reasoning": "ok"}', [0.1, 0.2, 0.3], "ok"),
        ('Sure! ```json\n{"vector": [1, 0, 0.5], "reasoning": "a {brace} \\"q\\""}\n```', [1, 0, 0.5], "ok"),
        ('{"vector": [0.1, 0.2, 0.3,], "reasoning": "x",}', [0.1, 0.2, 0.3], "ok"),
        ('{"vector": [-0.2, 1.7, "0.4"]}', [0.0, 1.0, 0.4], "ok"),
        ('{"proposal": {"vector": [0.1, 0.1, 0.1]}}', [0.1, 0.1, 0.1], "ok"),
        ('schema {"vector": [0, 0, 0]} answer {"vector": [0.9, 0.8, 0.7]}', [0.9, 0.8, 0.7], "ok"),
        ("vector: [0.2, 0.3, 0.4] because", [0.2, 0.3, 0.4], "ok"),
        ('{"vector": [0.1, 0.2]}', None, "bad_length"),
        ('{"vector": [0.1, "high", 0.2]}', None, "bad_value"),
        ('{"vector": [0.1, NaN, 0.2]}', None, "bad_value"),
        ("I agree with the architect.", None, "no_json"),
        ('{"reasoning": "no vector here"}', None, "no_vector"),
        ("", None, "empty"),
    ],
)
def test_parse_vector(text, vec, code):
    p = parse_vector(text, 3)
    assert p.reason.split(":")[0] == code
    if vec is None:
        assert p.vector is None
    else:
        assert p.vector == pytest.approx(vec)
        assert all(0 <= v <= 1 for v in p.vector)


# ----------------------------------------------------------------------------- text harness on the surrogate
def _check_lane_bookkeeping(rows, cfg):
    lanes = {}
    for r in rows:
        lanes.setdefault((r["strategy"], r["run"]), []).append(r)
    for (s, _run), rs in lanes.items():
        rs.sort(key=lambda r: r["round"])
        assert [r["round"] for r in rs] == list(range(len(rs)))
        assert rs[0]["b"] == cfg.b0  # round 0 not charged
        for prev, cur in zip(rs, rs[1:]):
            # the budget falls by exactly the measured prompt tokens of the round (retries included)
            assert cur["cost"] == sum(cur["prompt_tokens"]) == cur["prompt_tokens_raw"]
            assert cur["b"] == pytest.approx(prev["b"] - cur["cost"])
            assert cur["sigma"] == prev["next_sigma"]
            if s == "adaptive":
                assert cur["sigma"] == (1 if prev["D"] > cfg.eta else 2)
        for r in rs:
            X = np.array(r["X"])
            assert X.shape == (cfg.n, cfg.d)
            assert r["D"] == pytest.approx(float(disagreement(X)), abs=1e-12)  # Definition 5 on the logged vectors
            assert np.allclose(X, [rep["vector"] for rep in r["replies"]])
        # never spent past the rule: b < 0 only on the last line, which then says BudgetFail
        assert all(r["b"] >= 0 for r in rs[:-1])
        last = rs[-1]
        assert last["status"] in ("consensus", "BudgetFail", "max_rounds", "predicted_BudgetFail")
        if last["b"] < 0:
            assert last["status"] == "BudgetFail"
        if last["status"] == "consensus":
            assert last["D"] <= cfg.eps and last["b"] >= 0
        assert all(r.get("status") is None for r in rs[:-1])
    return lanes


def test_surrogate_end_to_end(tmp_path, capsys):
    cfg = DeliberationConfig(runs=2, b0=32_000, max_rounds=25)
    be = Counting(SurrogateDeliberationBackend(malformed=0.08, seed=3))
    res = run_deliberation(cfg, tmp_path, be, backend_spec=_spec(be.inner), progress=True)
    rows = read_rounds(tmp_path)
    lanes = _check_lane_bookkeeping(rows, cfg)
    assert len(lanes) == 6
    statuses = {x["status"] for x in res.summaries}
    assert "BudgetFail" in statuses and "consensus" in statuses
    # shared round 0: every strategy of a run starts from the same X0
    for run in range(2):
        x0s = [lanes[(s, run)][0]["X"] for s in cfg.strategies]
        assert x0s[0] == x0s[1] == x0s[2]
    # ... and progress gives each run's D(0) once (it showed run 0's twice: an outside tester)
    said = ", ".join(f"{lanes[(cfg.strategies[0], run)][0]['D']:.4f}" for run in range(2))
    assert f"D(0) = {said}\n" in capsys.readouterr().err
    # parse failures are recorded; retries happened; every request is logged
    assert sum(x["parse_errors"] for x in res.summaries) > 0
    assert len(read_jsonl(tmp_path / "requests.jsonl")) == res.requests == sum(len(c) for c in be.calls)
    # batching: one first-attempt call per round for all lanes, retries only for the failed agents
    first = [c for c in be.calls if c[0][1] == 0]
    assert len(first) == max(x["rounds"] for x in res.summaries) + 1
    assert len(first[1]) == 6 * cfg.n
    # reports
    for f in ("table_viii.csv", "table_viii.md", "fig4.png", "fig4.pdf", "estimates.csv", "certificates.csv"):
        assert (tmp_path / f).exists(), f
    est = mode_statistics(rows)
    assert {(e["strategy"], e["mode"]) for e in est} >= {("complete", 1), ("ring", 2), ("adaptive", 1), ("all", 2)}


def test_predicted_budget_rule(tmp_path):
    cfg = DeliberationConfig(b0=12_000, strategies=("complete",), budget_rule="predicted", max_rounds=10)
    be = SurrogateDeliberationBackend(malformed=0.0)
    run_deliberation(cfg, tmp_path, be, progress=False, report=False)
    rows = sorted(read_rounds(tmp_path), key=lambda r: r["round"])
    last = rows[-1]
    assert last["status"] == "BudgetFail" and "predicted cost" in last["status_reason"]
    assert last["b"] >= 0 and last["predicted_cost"][0] > last["b"]
    for prev, cur in zip(rows, rows[1:]):  # every round that ran was predicted to fit, and the predictions are close
        assert prev["predicted_cost"][cur["sigma"] - 1] <= prev["b"]
        if cur["round"] >= 2:
            assert cur["cost"] == pytest.approx(prev["predicted_cost"][cur["sigma"] - 1], rel=0.05)


def test_monitor_stops_early_and_was_right(tmp_path):
    base = dict(strategies=("complete",), b0=14_000, max_rounds=20)
    be = SurrogateDeliberationBackend(malformed=0.0, compliance=0.3)
    free = run_deliberation(DeliberationConfig(**base), tmp_path / "free", be, progress=False, report=False)
    mon = run_deliberation(
        DeliberationConfig(**base, monitor=load_deliberation_config(None, {"monitor_enabled": True})[0].monitor),
        tmp_path / "mon",
        be,
        progress=False,
        report=False,
    )
    f, m = free.summaries[0], mon.summaries[0]
    assert f["status"] == "BudgetFail"
    assert m["status"] == "predicted_BudgetFail"
    assert 2 <= m["rounds"] < f["rounds"] and m["tokens"] < f["tokens"]
    rows_m = read_rounds(tmp_path / "mon")
    assert rows_m[-1]["b"] >= 0 and rows_m[-1]["monitor"]["flag"]
    # the unmonitored run logged the same verdict in shadow mode at the same round
    rows_f = sorted(read_rounds(tmp_path / "free"), key=lambda r: r["round"])
    first_flag = next(r["round"] for r in rows_f if (r.get("monitor") or {}).get("flag"))
    assert first_flag == m["rounds"]


def test_resume_after_deleting_last_round(tmp_path):
    cfg = DeliberationConfig(runs=1, b0=40_000, strategies=("adaptive", "ring"), max_rounds=8)
    be = SurrogateDeliberationBackend(malformed=0.1, seed=1)
    run_deliberation(cfg, tmp_path, be, progress=False, report=False)
    path = tmp_path / "rounds.jsonl"
    full = read_jsonl(path)
    n_req = len(read_jsonl(tmp_path / "requests.jsonl"))
    last_round = max(r["round"] for r in full)
    kept = [r for r in full if r["round"] != last_round]
    path.write_text("".join(json.dumps(r) + "\n" for r in kept) + '{"strategy": "ring", "run": 0, "rou')  # + torn line
    counting = Counting(be)
    run_deliberation(cfg, tmp_path, counting, backend_spec=_spec(be), progress=False, report=False)
    again = read_jsonl(path)
    assert len(again) == len(full)
    key = lambda r: (r["strategy"], r["round"])  # noqa: E731
    for a, b in zip(sorted(full, key=key), sorted(again, key=key)):
        assert (a["X"], a["D"], a["b"], a["status"]) == (b["X"], b["D"], b["b"], b["status"])
    assert {r for c in counting.calls for r, _ in c} == {last_round}  # only the deleted round was redone
    # the deleted round's old request records go (they would count its tokens twice); the rerun logs it anew
    recs = read_jsonl(tmp_path / "requests.jsonl")
    assert len(recs) == n_req and sum(r["round"] == last_round for r in recs) == sum(len(c) for c in counting.calls)
    # a finished run does nothing (the factory is never called); other parameters are refused
    run_deliberation(
        cfg, tmp_path, lambda: pytest.fail("backend built"), backend_spec=_spec(be), progress=False, report=False
    )
    with pytest.raises(ValueError, match="different parameters"):
        run_deliberation(
            DeliberationConfig(runs=1, b0=50_000, strategies=("adaptive", "ring"), max_rounds=8),
            tmp_path,
            be,
            progress=False,
            report=False,
        )


def test_config_validation():
    with pytest.raises(ValueError, match="doubly stochastic"):
        DeliberationConfig(W1=((0.5, 0.5, 0.0), (0.5, 0.5, 0.0), (0.2, 0.2, 0.6)), roles=PAPER_ROLES[:3])
    with pytest.raises(ValueError, match="strategies"):
        DeliberationConfig(strategies=("star",))
    with pytest.raises(ValueError, match="unknown override"):
        load_deliberation_config(None, {"bogus": 1})
    cfg = DeliberationConfig(n_agents=7)
    assert [r.name for r in cfg.agent_roles()][5:] == ["Planner 2", "Architect 2"]
    W1, W2 = cfg.weights()
    assert W1.shape == W2.shape == (7, 7)


# ----------------------------------------------------------------------------- certificates
def test_claude_example_recomputed():
    c = claude_example()
    assert c["K1_exact"] == pytest.approx(9.4262, abs=1e-3)
    assert (c["K1"], c["K2"], c["K_star"]) == (10, 0, 10)
    assert c["B_star"] == pytest.approx(120_250)
    assert c["B_star"] > c["b0"] and not c["in_certificate_region"]
    assert c["table_viii"]["implied_c1"] == pytest.approx(12025.2, abs=0.1)
    assert c["table_viii"]["implied_rate"] == pytest.approx(0.7553, abs=1e-3)


def test_certificate_region_in_and_out():
    lam1, lam2 = 0.25, 0.7236
    # Sec. V-A numbers: B* = 1000, so b0 = 2000 is certified and the tight b0 = 650 is not
    assert theorem1(0.3009, 0.1, 0.03, lam1, lam2, 600, 100).B_star == 1000
    assert in_certificate_region(0.3009, 2000, 0.1, 0.03, lam1, lam2, 600, 100)
    assert not in_certificate_region(0.3009, 650, 0.1, 0.03, lam1, lam2, 600, 100)
    # per-strategy B*: complete-only and ring-only use one mode down to eps
    k1 = rounds_to_reach(0.7, 0.05, 0.75)
    assert strategy_budget("complete", 0.7, 0.2, 0.05, 0.75, 0.8, 12000, 6000) == k1 * 12000
    assert strategy_budget("ring", 0.7, 0.2, 0.05, 0.75, 0.8, 12000, 6000) == rounds_to_reach(0.7, 0.05, 0.8) * 6000
    assert strategy_budget("adaptive", 0.04, 0.2, 0.05, 0.75, 0.8, 1, 1) == 0
    assert math.isinf(strategy_budget("ring", 0.7, 0.2, 0.05, 0.75, 1.02, 1, 1))
    frac = strategy_budget("complete", 0.7, 0.2, 0.05, 0.75, 0.8, 100, 1, ceil=False)
    assert frac == pytest.approx(100 * math.log(0.05 / 0.7) / math.log(0.75))
    # the JAX version agrees (float64), for each strategy and for a contracting and a non-contracting mode
    Ds = np.array([0.04, 0.15, 0.3, 0.7])
    for s in ("adaptive", "complete", "ring"):
        for lam2 in (0.8, 1.05):
            got = np.asarray(certificate_budget_jax(jnp.asarray(Ds), 0.2, 0.05, 0.75, lam2, 12000.0, 6000.0, s))
            ref = np.array([strategy_budget(s, D, 0.2, 0.05, 0.75, lam2, 12000, 6000) for D in Ds])
            np.testing.assert_array_equal(got, ref)


def test_posthoc_certificate_on_claude_like_lane():
    d0, lam, c = 0.6864, 0.7574, 12025.0
    rows = [
        {
            "strategy": "complete",
            "run": 0,
            "round": k,
            "D": d0 * lam**k,
            "b": 100_000 - k * c,
            "cost": 0.0 if k == 0 else c,
            "sigma": None if k == 0 else 1,
            "status": "BudgetFail" if k == 9 else None,
        }
        for k in range(10)
    ]
    (p,) = posthoc_certificates(rows, eta=0.05, eps=0.05, b0=100_000)
    assert p["lambda1"] == pytest.approx(lam) and p["c1"] == pytest.approx(c)
    assert p["K_star"] == 10 and p["B_star"] == pytest.approx(120_250)
    assert p["certified"] is False and p["theorem2_holds"] is True
    (m,) = [m for m in mode_statistics(rows) if m["strategy"] == "complete"]
    assert m["n"] == 9 and m["rate_mean"] == pytest.approx(lam) and m["share_expanding"] == 0


# ----------------------------------------------------------------------------- JAX surrogate kernel
_KW = dict(
    eta=0.2,
    eps=0.05,
    noise=0.01,
    expand=(0.45, 0.1),
    d_expand=0.15,
    cost_base=98.6,
    cost_per_neighbor=576.6,
    cost_noise=0.2,
    warmup=2,
    n0=1.0,
)
_R = 16
_MAXR = 30


def _reference(X0, b0, seed, W1, W2, strategy, budget_rule, monitor_stop, prior_lam, prior_cost):
    """Plain float64 loop of the kernel's model (module docstring of mascot.kernels.deliberation)."""
    k = _KW
    B, N, d = X0.shape
    deg = {1: neighbor_degrees(W1), 2: neighbor_degrees(W2)}
    draws = [
        tuple(np.asarray(a, dtype=np.float64) for a in round_draws(seed, jnp.arange(B), r, N, d, jnp.float64))
        for r in range(_MAXR)
    ]
    out = []
    for b in range(B):
        X, bud, r, status, mon_round = X0[b].copy(), float(b0[b]), 0, None, -1
        mon = BudgetMonitor(strategy, k["eta"], k["eps"], prior_lam, k["n0"], k["warmup"])
        Ds, bs = [], []
        while True:
            D = float(disagreement(X))
            Ds.append(D)
            bs.append(bud)
            if D <= k["eps"]:
                status = 0
                break
            if r >= _MAXR:
                status = 2
                break
            sig = {"adaptive": 1 if D > k["eta"] else 2, "complete": 1, "ring": 2}[strategy]
            chk = mon.check(r, D, bud, prior_cost)
            if chk.flag and mon_round < 0:
                mon_round = r
            if monitor_stop and chk.flag:
                status = 3
                break
            if budget_rule == "predicted" and mon.estimates(prior_cost)[1][sig - 1] > bud:
                status = 1
                break
            z, zc = draws[r][0][b], draws[r][1][b]
            W = W1 if sig == 1 else W2
            s = min(max(1 - D / k["d_expand"], 0.0), 1.0)
            Xn = np.clip(W @ X + k["expand"][sig - 1] * s * (X - X.mean(0)) + k["noise"] * z, 0, 1)
            per_agent = (k["cost_base"] + k["cost_per_neighbor"] * deg[sig]) * (1 + k["cost_noise"] * zc)
            cost = float(np.sum(np.maximum(per_agent, 0)))
            mon.observe(sig, D, float(disagreement(Xn)), cost)
            X, bud, r = Xn, bud - cost, r + 1
            if bud < 0:
                Ds.append(float(disagreement(X)))
                bs.append(bud)
                status = 1
                break
        out.append((status, r, np.array(Ds), np.array(bs), mon_round))
    return out


@pytest.fixture(scope="module")
def kernel_setup():
    cal = CLAUDE_CALIBRATION
    W1, W2 = complete_weights(5, cal["complete_self"]), ring_weights(5, cal["ring_self"])
    prior = np.array([r.prior for r in PAPER_ROLES])
    rng = np.random.default_rng(0)
    X0 = np.clip(prior[None] + 0.05 * rng.standard_normal((_R, 5, 6)), 0, 1)
    b0 = np.linspace(40_000, 130_000, _R)
    return W1, W2, X0, b0


@pytest.mark.parametrize(
    "strategy, budget_rule, monitor_stop",
    [("adaptive", "spent", False), ("complete", "predicted", False), ("ring", "spent", True)],
)
def test_kernel_matches_float64_reference(kernel_setup, strategy, budget_rule, monitor_stop):
    W1, W2, X0, b0 = kernel_setup
    res = simulate_deliberation(
        7,
        X0,
        W1,
        W2,
        strategy=strategy,
        b0=b0,
        max_rounds=_MAXR,
        budget_rule=budget_rule,
        monitor_stop=monitor_stop,
        **_KW,
    )
    from mascot.kernels.deliberation import expected_round_cost
    from mascot.theory import contraction_rate

    prior_lam = (contraction_rate(W1), contraction_rate(W2))
    prior_cost = (expected_round_cost(W1, 98.6, 576.6), expected_round_cost(W2, 98.6, 576.6))
    ref = _reference(X0, b0, 7, W1, W2, strategy, budget_rule, monitor_stop, prior_lam, prior_cost)
    statuses = set()
    for i, (status, rounds, Ds, bs, mon_round) in enumerate(ref):
        statuses.add(status)
        assert res.status[i] == status and res.rounds[i] == rounds, i
        n = len(Ds)
        np.testing.assert_allclose(res.d_trace[i, :n], Ds, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(res.b_trace[i, :n], bs, rtol=1e-9, atol=1e-6)
        assert np.all(np.isnan(res.d_trace[i, n:]))
        assert res.monitor_round[i] == mon_round
        assert res.tokens[i] == pytest.approx(b0[i] - bs[-1])
    if budget_rule == "predicted":  # some runs stopped before the round predicted to overspend
        assert any(st == 1 and bs[-1] >= 0 for st, _, _, bs, _ in ref)
    else:
        assert len(statuses) >= 2  # the batch covers more than one outcome


def test_kernel_monitor_early_stop(kernel_setup):
    W1, W2, X0, _ = kernel_setup
    key = 3
    kw = {**_KW, "expand": (0.0, 0.0), "noise": 0.005, "cost_noise": 0.1}
    free = simulate_deliberation(key, X0, W1, W2, strategy="complete", b0=100_000.0, max_rounds=_MAXR, **kw)
    stop = simulate_deliberation(
        key, X0, W1, W2, strategy="complete", b0=100_000.0, max_rounds=_MAXR, monitor_stop=True, **kw
    )
    # Claude calibration, complete-only, b0 = 1e5: BudgetFail (as in Table VIII); the monitor sees it coming
    assert np.all(free.status == 1)
    assert np.all(stop.status == 3)
    assert np.all(stop.rounds == free.monitor_round) and np.all(stop.rounds >= 2)
    assert np.all(stop.tokens < free.tokens)
    assert np.all(stop.b_trace[np.arange(_R), stop.rounds] >= 0)
    ring = simulate_deliberation(key, X0, W1, W2, strategy="ring", b0=100_000.0, max_rounds=_MAXR, **kw)
    assert np.all(ring.status == 0) and np.all(ring.monitor_round == -1)


# ----------------------------------------------------------------------------- voting
def test_parse_decision_strict():
    assert parse_decision("  [DECISION: PASS] fine") == Ballot("PASS", None, "ok (no confidence tag)")
    b = parse_decision("[DECISION: FAIL] [CONFIDENCE: 0.85] eval is unsafe")
    assert (b.decision, b.confidence) == ("FAIL", Decimal("0.85"))
    assert parse_decision("[DECISION: FAIL] [CONFIDENCE: 1.5] x").confidence is None
    for text in (
        "I say [DECISION: PASS]",
        "[decision: pass] ok",
        "[DECISION:PASS]",
        "[DECISION: MAYBE]",
        "",
        None,
        "Reason first. [DECISION: FAIL]",
    ):
        assert parse_decision(text).decision == "NONE"


def test_majority_vote_hand_computed():
    assert majority_vote(["PASS", "FAIL", "PASS"]) == ("PASS", 2, 1, 0, None)
    assert majority_vote(["PASS", "FAIL"]).outcome == "TIE"
    r = majority_vote(["PASS", "NONE", "FAIL", "maybe", None])
    assert (r.outcome, r.pass_votes, r.fail_votes, r.abstentions) == ("TIE", 1, 1, 3)
    assert majority_vote(["FAIL", "NONE", "NONE"]) == ("FAIL", 0, 1, 2, None)  # abstentions do not count
    assert majority_vote(["NONE", None]).outcome == "NONE"
    assert majority_vote([]).outcome == "NONE"


def test_weighted_vote_hand_computed():
    r = weighted_vote([("PASS", 0.9), ("FAIL", 0.6), ("FAIL", 0.4)])  # 0.9 - 0.6 - 0.4 = -0.1
    assert (r.outcome, r.score) == ("FAIL", pytest.approx(-0.1))
    r = weighted_vote([("PASS", 0.1), ("PASS", 0.2), ("FAIL", 0.3)])  # exactly 0, not 5.6e-17
    assert (r.outcome, r.score, r.pass_votes, r.fail_votes) == ("TIE", 0.0, 2, 1)
    r = weighted_vote(
        [
            ("PASS", 0.7),
            ("FAIL", 1.5),
            ("FAIL", float("nan")),
            ("FAIL", None),
            ("NONE", 1.0),
            ("FAIL", "x"),
            ("FAIL", 0),
        ]
    )
    assert (r.outcome, r.pass_votes, r.fail_votes, r.abstentions, r.score) == ("PASS", 1, 1, 5, pytest.approx(0.7))
    assert weighted_vote([("PASS", 0), ("FAIL", 0.0)]).outcome == "TIE"  # valid votes with zero weight
    assert weighted_vote([("NONE", 0.9)]).outcome == "NONE"
    assert (
        weighted_vote(
            [parse_decision("[DECISION: FAIL] [CONFIDENCE: 0.3]"), parse_decision("[DECISION: PASS] [CONFIDENCE: 0.2]")]
        ).outcome
        == "FAIL"
    )


def test_article_consensus_erratum():
    texts = ["[DECISION: PASS] looks fine", "I have no strong view.", "Probably fine overall."]
    assert article_consensus(texts)  # one tagged agent + two untagged = "consensus" in the article
    assert agreed_decision([parse_decision(t) for t in texts]) is None  # strict: untagged replies block it
    assert agreed_decision([parse_decision("[DECISION: FAIL] a"), parse_decision(" [DECISION: FAIL] b")]) == "FAIL"


# ----------------------------------------------------------------------------- debate
def _debate(tmp_path, priors, persuasion=0.0, malformed=0.0, **kw):
    agents = tuple(DebateAgent(n, f"Focuses on {n.lower()}.", p) for n, p in priors.items())
    cfg = DebateConfig(agents=agents, **kw)
    be = Counting(SurrogateDebateBackend(priors=priors, persuasion=persuasion, malformed=malformed))
    return (
        cfg,
        be,
        run_debate(
            cfg,
            tmp_path,
            be,
            backend_spec={"name": "surrogate", "model": "x", "options": be.inner.options()},
            progress=False,
        ),
    )


def test_debate_stops_at_max_rounds(tmp_path):
    cfg, be, res = _debate(tmp_path, {"Security": 0.0, "Performance": 1.0, "Quality": 1.0}, max_rounds=4, runs=3)
    for o in res.outcomes:
        assert (o["rounds"], o["consensus"], o["decision"]) == (4, False, "PASS")  # majority 2:1 at max_rounds
    assert len(be.calls) == 4 and all(len(c) == 9 for c in be.calls)  # one call per round for 3 debates x 3 agents
    lines = read_jsonl(tmp_path / "transcript.jsonl")
    assert sum(ln["type"] == "reply" for ln in lines) == 36 and sum(ln["type"] == "round" for ln in lines) == 12
    rep = next(ln for ln in lines if ln["type"] == "reply" and ln["round"] == 2 and ln["agent"] == "Security")
    assert "Performance wrote: [DECISION: PASS]" in rep["user"] and "Security wrote" not in rep["user"]
    assert o["tokens"] == sum(
        ln["prompt_tokens"] + ln["completion_tokens"] for ln in lines if ln["type"] == "reply" and ln["run"] == 2
    )


def test_debate_consensus_and_untagged(tmp_path):
    _, _, res = _debate(tmp_path / "a", {"A": 1.0, "B": 1.0, "C": 1.0}, max_rounds=3)
    assert {"rounds": 1, "consensus": True, "decision": "PASS"}.items() <= res.outcomes[0].items()
    _, _, res = _debate(tmp_path / "b", {"A": 0.0, "B": 0.0, "C": 0.0}, persuasion=0.0, malformed=1.0, max_rounds=2)
    o = res.outcomes[0]
    assert (o["rounds"], o["consensus"], o["decision"], o["untagged"]) == (2, False, "NONE", 6)
    # persuasion towards the majority ends a 2:1 split in round 2
    _, _, res = _debate(tmp_path / "c", {"A": 0.0, "B": 1.0, "C": 1.0}, persuasion=1.0, max_rounds=5)
    assert {"rounds": 2, "consensus": True, "decision": "PASS"}.items() <= res.outcomes[0].items()


def test_debate_resume(tmp_path):
    priors = {"A": 0.0, "B": 1.0, "C": 0.5}
    _, _, first = _debate(tmp_path, priors, persuasion=0.3, malformed=0.2, max_rounds=4, runs=2)
    path = tmp_path / "transcript.jsonl"
    lines = read_jsonl(path)
    last = max(ln["round"] for ln in lines)
    path.write_text("".join(json.dumps(ln) + "\n" for ln in lines if ln["round"] != last))
    _, be, again = _debate(tmp_path, priors, persuasion=0.3, malformed=0.2, max_rounds=4, runs=2)
    assert again.outcomes == first.outcomes
    assert {r for c in be.calls for r, _ in c} == {last}


# ----------------------------------------------------------------------------- hf tiny model through the harness
def test_hf_tiny_model_garbage_is_recorded(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    if not (Path(__file__).parent / "tiny_model.py").exists():
        pytest.skip("tests/tiny_model.py not present")
    from mascot.backends import Sampling, make_backend
    from tiny_model import build_tiny_qwen2

    model = build_tiny_qwen2(tmp_path / "tiny")
    be = make_backend("hf", model=model, batch_size=8, device="cpu")
    roles = tuple(Role(n, n, "", f"You are the {n}.", (0.2 * i, 0.9 - 0.2 * i)) for i, n in enumerate(["A", "B", "C"]))
    axes = (Axis("x", "lo", "hi"), Axis("y", "lo", "hi"))
    cfg = DeliberationConfig(
        name="tiny",
        task="Pick a plan.",
        roles=roles,
        axes=axes,
        strategies=("ring",),
        max_rounds=1,
        retries=1,
        b0=1e6,
        sampling=Sampling(temperature=0.0, top_p=1.0, max_tokens=6),
    )
    res = run_deliberation(cfg, tmp_path / "run", be, progress=False, report=False)
    (s,) = res.summaries
    assert s["status"] == "max_rounds" and s["rounds"] == 1
    assert s["failures"] == 6 and s["parse_errors"] == 12  # every garbage reply: retried once, then carried forward
    rows = read_rounds(tmp_path / "run")
    assert rows[0]["X"] == [list(r.prior) for r in roles]  # round 0 fell back to the role priors
    assert rows[1]["cost"] > 0 and all(t > 0 for t in rows[1]["prompt_tokens"])  # tokens from the real tokenizer
    reqs = read_jsonl(tmp_path / "run" / "requests.jsonl")
    assert len(reqs) == 12 and all(not r["parse"]["ok"] for r in reqs)
    dcfg = DebateConfig(
        agents=(DebateAgent("A", "a."), DebateAgent("B", "b.")),
        max_rounds=1,
        sampling=Sampling(temperature=0.0, top_p=1.0, max_tokens=6),
    )
    d = run_debate(dcfg, tmp_path / "debate", be, progress=False)
    assert d.outcomes[0]["decision"] == "NONE" and not d.outcomes[0]["consensus"]


# ----------------------------------------------------------------------------- CLI
def _cli(argv):
    from mascot.cli.deliberation import add_parsers

    p = argparse.ArgumentParser(prog="mascot")
    add_parsers(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


def test_cli_json_keys(tmp_path, capsys):
    assert (
        _cli(
            [
                "deliberate",
                "--out",
                str(tmp_path / "d"),
                "--json",
                "--quiet",
                "--runs",
                "2",
                "--no-report",
                "--strategy",
                "ring",
                "--b0",
                "20000",
            ]
        )
        == 0
    )
    obj = json.loads(capsys.readouterr().out)
    assert list(obj) == ["ring"] and len(obj["ring"]) == 2
    for o in obj["ring"]:
        assert set(o) == {"rounds", "tokens", "d0", "d_final", "status", "d0_from_priors", "unanswered_rounds"}
    assert (
        _cli(
            [
                "debate",
                str(Path(__file__).parents[1] / "configs/debate/code_review.toml"),
                "--out",
                str(tmp_path / "b"),
                "--json",
                "--quiet",
            ]
        )
        == 0
    )
    cap = capsys.readouterr()
    o = json.loads(cap.out)
    assert set(o) == {"rounds", "consensus", "decision", "tokens"} and "untagged" not in cap.err
    # --dry-run: the size before a request, nothing written; the run then stays within it
    assert _cli(["deliberate", "--runs", "1", "--dry-run", "--out", str(tmp_path / "dry")]) == 0
    plan = capsys.readouterr().out
    assert "at most 455 requests at their first tries (5 in round 0" in plan and not (tmp_path / "dry").exists()
    assert "at most b0 = 100,000 per lane plus the round that crosses it, over 3 lanes: 300,000 plus 3 such" in plan
    # (5 agents in round 0, then 3 strategies x 5 agents x 30 rounds at most: 5 + 450)
    with pytest.raises(ValueError, match="300,000,000 lanes .* pass --allow-large"):  # --runs 1e8 sat building lanes
        _cli(["deliberate", "--runs", "100000000", "--out", str(tmp_path / "big")])
    with pytest.raises(ValueError, match="200,000 debates"):
        _cli(["debate", str(Path(__file__).parents[1] / "configs/debate/code_review.toml"), "--runs", "200000"])
    # ... and the dry run refuses what the run refuses (it planned them: an outside tester)
    with pytest.raises(ValueError, match="300,000,000 lanes .* pass --allow-large"):
        _cli(["deliberate", "--runs", "100000000", "--dry-run"])
    with pytest.raises(ValueError, match="200,000 debates"):
        _cli(
            [
                "debate",
                str(Path(__file__).parents[1] / "configs/debate/code_review.toml"),
                "--runs",
                "200000",
                "--dry-run",
            ]
        )
    with pytest.raises(ValueError, match="--timeout must be > 0"):
        _cli(["deliberate", "--backend", "openai", "--model", "m", "--timeout", "0", "--dry-run"])
    assert not (tmp_path / "big").exists()
    # the console table: charged tokens beside round 0's uncharged ones, the accounting rule stated (issue 33)
    assert _cli(["deliberate", "--runs", "1", "--out", str(tmp_path / "dl"), "--quiet", "--no-report"]) == 0
    out = capsys.readouterr().out
    rows = [json.loads(x) for x in (tmp_path / "dl" / "rounds.jsonl").read_text().splitlines()]
    r0 = next(r for r in rows if r["round"] == 0)
    assert r0["cost"] == 0 and f"{r0['prompt_tokens_raw']:,}" in out and "not charged (charge_initial = false)" in out
    # every reply untagged (a model that ignores the tag format): said on stderr, as trials says carried states
    code_review = str(Path(__file__).parents[1] / "configs/debate/code_review.toml")
    argv = ["debate", code_review, "--out", str(tmp_path / "u"), "--quiet", "--surrogate-malformed", "1"]
    assert _cli(argv) == 0
    err = capsys.readouterr().err
    assert "mascot: warning: " in err and "replies in" in err and "carry no [DECISION: PASS/FAIL] tag" in err
    with pytest.raises(ValueError, match="--runs"):
        _cli(["deliberate", "--out", str(tmp_path / "x"), "--runs", "0"])
    with pytest.raises(ValueError, match="needs --model"):
        _cli(["debate", "--backend", "openai", "--out", str(tmp_path / "y")])
    with pytest.raises(ValueError, match="not found"):
        _cli(["deliberate", str(tmp_path / "missing.toml")])


# ----------------------------------------------------------------------------- issue 12: seed examples and figures
def test_fig4_helpers_tick_labels_and_mode_switch():
    from mascot.analysis.deliberation_report import _k_ticks, _k_tokens, _mode_runs, _switches

    # found by an outside tester: at b0 = 12,000 the ticks at 12,500, 7,500 and 2,500 read 12k, 8k and 2k
    assert [_k_ticks(v) for v in (12_500.0, 7_500.0, 2_500.0, -2_500.0, 0.0, 20_000.0, 500.0)] == [
        "12.5k",
        "7.5k",
        "2.5k",
        "-2.5k",
        "0",
        "20k",
        "500",
    ]

    assert [_k_tokens(v) for v in (0.0, 1e-9, -0.0, 20_000.0, 100_000.0, -10_000.0, 500.0)] == [
        "0",
        "0",
        "0",
        "20k",
        "100k",
        "-10k",
        "500",
    ]
    sigma = [None, 1, 1, 1, 2, 2, 2]  # round 0 has no mode; switch after round 3
    assert _mode_runs(sigma) == [(0, 3, 1), (3, 6, 2)]
    assert _switches(sigma) == [3]
    assert _mode_runs([None, 2, 2]) == [(0, 2, 2)] and _switches([None, 2, 2]) == []
    assert _switches([None, 1, 2, 1, 2]) == [1, 3]


def test_weighted_vote_example_of_issue_12():
    from mascot.studies.debate import WEIGHTED_VOTE_EXAMPLE

    r = weighted_vote(WEIGHTED_VOTE_EXAMPLE)
    assert (r.outcome, r.score, r.pass_votes, r.fail_votes, r.abstentions) == ("FAIL", -0.5, 1, 2, 0)


def test_reproduce_debate_small(tmp_path):
    from mascot.studies.debate import reproduce as reproduce_debate

    s = reproduce_debate(tmp_path / "out", tmp_path / "runs", runs=5)
    am = s["article_mock"]
    # the article's mock agents never agree: no consensus at max_rounds = 3, majority FAIL, as the article's loop says
    assert (am["consensus"], am["rounds"], am["decision"]) == (False, 3, "FAIL")
    assert am["decisions_by_round"] == [["FAIL", "PASS", "FAIL"]] * 3 and am["article_result"] == [3, False]
    assert s["weighted_vote_example"]["score"] == -0.5 and s["weighted_vote_example"]["outcome"] == "FAIL"
    assert s["surrogate"]["debates"] == 5 and sum(s["surrogate"]["rounds"].values()) == 5
    assert s["scenario"]["max_rounds"] == 3 and len(s["scenario"]["agents"]) == 3
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "score = - 0.9 + 0.6 - 0.2 = -0.5  ->  FAIL" in readme
    assert "Consensus achieved? False in 3 rounds" in readme
    assert (tmp_path / "out" / "example_transcript.md").exists() and (tmp_path / "out" / "debates.csv").exists()
    # the article's prose puts the other agents' drafts in the system context, its code in the user prompt:
    # 3 agents x rounds 2 and 3, every draft in the user message, none in the system message
    assert am["drafts_placement"] == {"requests": 6, "in_system": 0, "in_user": 6}
    assert "in the user message of 6 of them and in the system message of 0" in readme


def test_drafts_placement_counts_where_the_other_drafts_are(tmp_path):
    import json

    from mascot.studies.debate import drafts_placement

    def reply(rnd, agent, text, system="role", user="task"):
        return {"type": "reply", "run": 0, "round": rnd, "agent": agent, "reply": text, "system": system, "user": user}

    rows = [reply(1, "a", "A1"), reply(1, "b", "B1"), reply(1, "c", "C1")]
    rows += [
        reply(2, "a", "A2", system="role B1 C1"),  # both drafts in the system message
        reply(2, "b", "B2", user="task A1 C1"),  # both in the user message
        reply(2, "c", "C2", user="task A1"),  # only one of the two: counted nowhere
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [{"type": "round"}, *rows]))
    assert drafts_placement(path) == {"requests": 3, "in_system": 1, "in_user": 1}


def test_table_vii_mapping_resolves(tmp_path):
    from mascot.studies.deliberation import TABLE_VII, _exists, table_vii_mapping

    rows = table_vii_mapping(tmp_path / "t7.md")
    assert len(rows) == 8 and all(r["resolves"] for r in rows)
    assert [r[1] for r in TABLE_VII][-1] == "offline certificate before compile"
    assert not _exists("config:no_such_key") and not _exists("mascot.theory:no_such_function")
    assert "| Thm. 2 | should_continue guard |" in (tmp_path / "t7.md").read_text()


def test_token_scaling_study_small(tmp_path):
    from mascot.studies.deliberation import PAPER_TOKEN_SCALES, token_scaling_study

    assert PAPER_TOKEN_SCALES == {"GPT-5.4-Mini": 1.0, "Gemini 2.5-Flash": 0.75, "Claude Opus-4.8": 0.45}
    summ = token_scaling_study(tmp_path / "ts", tmp_path / "runs", runs=1)
    import pandas as pd

    df = pd.read_csv(tmp_path / "ts" / "scaling.csv")
    assert np.allclose(df.charged_tokens, df.token_scale * df.raw_tokens)
    assert set(df.token_scale) == {1.0, 0.75, 0.45}
    # same dynamics, different charge: rounds agree across the three surrogate models
    assert (df.groupby(["strategy", "run"]).rounds.nunique() == 1).all()
    assert summ["surrogate-claude-like"]["complete"]["raw_per_round_vs_gpt_like"] > 1.5
    readme = (tmp_path / "ts" / "README.md").read_text()
    assert "| Claude Opus-4.8 | complete | 108,227 | 0.45 | 240,504 | yes |" in readme
    assert (tmp_path / "ts" / "fig4.png").exists() and (tmp_path / "ts" / "table_viii.md").exists()


def test_consensus_sweep_tightness_coverage_and_dominance_header(tmp_path):
    import pandas as pd

    from mascot.analysis.consensus_sweep import _readme, tightness_coverage

    s = pd.DataFrame(
        {
            "strategy": ["adaptive"] * 3 + ["ring"],
            "n": [5, 5, 128, 5],
            "rounds_over_K": [0.5, 0.4, np.nan, 0.9],
            "tokens_over_B": [0.6, 0.5, np.nan, 0.9],
            "success": [1.0, 1.0, 0.1, 1.0],
            "rounds": [2.0, 3.0, 9.0, 6.0],
            "tokens": [1.0, 2.0, 3.0, 4.0],
        }
    )
    cov = tightness_coverage(s)
    assert cov.to_dict("list") == {"n": [5, 128], "points": [2, 1], "points_with_tightness": [2, 0]}
    dom = pd.DataFrame({"corollary_condition": [True, True, False], "adaptive_between": [True, False, False]})
    text = _readme(3, 3, s, dom, 2 / 3)
    assert (
        "| Corollary 1 condition (rows) \\ adaptive between, measured (columns) | not between | between | total |"
        in text
    )
    assert "| condition holds | 1 | 1 | 2 |" in text and "| condition fails | 1 | 0 | 1 |" in text
    assert "N = 128: no adaptive grid point has a certified trajectory" in text


class DownFrom:
    """A backend that stops answering from round ``at`` on: transport errors, as the openai backend returns them
    after its own retries (what a dead server looks like to a protocol)."""

    def __init__(self, inner, at):
        self.inner, self.at = inner, at
        self.name, self.model = inner.name, inner.model

    def generate(self, requests):
        from mascot.backends import Response

        if requests[0].meta.get("round", 0) >= self.at:
            return [Response("", 0, 0, error="connection refused") for _ in requests]
        return self.inner.generate(requests)

    def describe(self):
        return {"base_url": "http://127.0.0.1:9/v1"}

    def options(self):
        return self.inner.options()


def test_deliberation_never_commits_an_unanswered_round(tmp_path):
    from mascot.backends import BackendFailure
    from mascot.protocols.deliberation import run_deliberation as harness

    cfg = DeliberationConfig(runs=2, b0=32_000, max_rounds=25)
    ref = tmp_path / "ref"
    harness(cfg, ref, SurrogateDeliberationBackend(seed=3), progress=False)
    sur = SurrogateDeliberationBackend(seed=3)
    run = tmp_path / "run"
    with pytest.raises(BackendFailure, match=r"127\.0\.0\.1:9.*round 3.*connection refused"):
        harness(cfg, run, DownFrom(sur, 3), backend_spec=_spec(sur), progress=False)
    assert max(r["round"] for r in read_rounds(run)) == 2
    assert not json.loads((run / "run.json").read_text())["complete"]
    with pytest.raises(BackendFailure, match="round 0"):  # dead from the start: no D(0) made up from priors
        harness(cfg, tmp_path / "dead", DownFrom(sur, 0), backend_spec=_spec(sur), progress=False)
    assert read_rounds(tmp_path / "dead") == []
    res = harness(cfg, run, SurrogateDeliberationBackend(seed=3), progress=False)
    assert res.summaries == harness(cfg, ref, SurrogateDeliberationBackend(seed=3), progress=False).summaries


def test_debate_never_turns_an_unanswered_reply_into_a_ballot(tmp_path):
    from mascot.backends import BackendFailure
    from mascot.protocols.debate import load_debate_config

    cfg, _ = load_debate_config(None, {"runs": 2})
    ref = run_debate(cfg, tmp_path / "ref", SurrogateDebateBackend(seed=1), progress=False)
    sur = SurrogateDebateBackend(seed=1)
    with pytest.raises(BackendFailure, match=r"round 2.*connection refused"):
        run_debate(cfg, tmp_path / "run", DownFrom(sur, 2), backend_spec=_spec(sur), progress=False)
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert not meta.get("complete")
    assert all(r["round"] == 1 for r in read_jsonl(tmp_path / "run" / "transcript.jsonl"))
    done = run_debate(cfg, tmp_path / "run", SurrogateDebateBackend(seed=1), progress=False)
    assert done.outcomes == ref.outcomes


class OnceDown:
    """Each request chosen by ``pick(meta)`` gets a transport error the first time it is sent, then an answer."""

    def __init__(self, inner, pick):
        self.inner, self.pick, self.failed = inner, pick, set()
        self.name, self.model = inner.name, inner.model

    def generate(self, requests):
        from mascot.backends import Response

        out = self.inner.generate(requests)
        for j, r in enumerate(requests):
            key = (r.sampling.seed, json.dumps(r.messages))
            if self.pick(r.meta) and key not in self.failed:
                self.failed.add(key)
                out[j] = Response("", 0, 0, error="HTTP 503: busy")
        return out

    def describe(self):
        return {"base_url": "http://127.0.0.1:9/v1"}

    def options(self):
        return self.inner.options()


def _strip(rows):
    return [{k: v for k, v in r.items() if k not in ("time", "session", "wall_s")} for r in rows]


def test_deliberation_transient_errors_leave_the_rounds_unchanged(tmp_path):
    """A request that got no answer is asked again the same way (same seed, no retry prompt) and does not
    use up a parse retry: the committed rounds equal a run without the errors."""
    from mascot.protocols.deliberation import run_deliberation as harness

    cfg = DeliberationConfig(runs=2, b0=32_000, max_rounds=12)
    harness(cfg, tmp_path / "ref", SurrogateDeliberationBackend(seed=3), progress=False)
    sur = SurrogateDeliberationBackend(seed=3)
    flaky = OnceDown(sur, lambda m: (m.get("agent", 0) + m.get("round", 0)) % 2 == 0)
    harness(cfg, tmp_path / "err", flaky, backend_spec=_spec(sur), progress=False)
    assert flaky.failed
    assert _strip(read_rounds(tmp_path / "err")) == _strip(read_rounds(tmp_path / "ref"))


def test_deliberation_resume_keeps_one_set_of_request_records_per_round(tmp_path):
    from mascot.backends import BackendFailure
    from mascot.protocols.deliberation import run_deliberation as harness

    cfg = DeliberationConfig(runs=2, b0=32_000, max_rounds=25)
    sur = SurrogateDeliberationBackend(seed=3)
    with pytest.raises(BackendFailure):
        harness(cfg, tmp_path, DownFrom(sur, 3), backend_spec=_spec(sur), progress=False)
    harness(cfg, tmp_path, SurrogateDeliberationBackend(seed=3), progress=False)
    keys = [
        (r["strategy"], r["run"], r["round"], r["agent"], r["attempt"]) for r in read_jsonl(tmp_path / "requests.jsonl")
    ]
    assert len(keys) == len(set(keys))
    done = {(r["strategy"], r["run"], r["round"]) for r in read_rounds(tmp_path) if r["round"] > 0}
    assert {k[:3] for k in keys if k[2] > 0} == done  # (round 0's proposals are logged once, for every strategy)


def test_debate_asks_an_unanswered_request_again(tmp_path):
    from mascot.protocols.debate import load_debate_config

    cfg, _ = load_debate_config(None, {"runs": 2})
    ref = run_debate(cfg, tmp_path / "ref", SurrogateDebateBackend(seed=1), progress=False)
    sur = SurrogateDebateBackend(seed=1)
    flaky = OnceDown(sur, lambda m: m.get("agent_index", 0) == 1)
    done = run_debate(cfg, tmp_path / "run", flaky, backend_spec=_spec(sur), progress=False)
    assert flaky.failed and done.outcomes == ref.outcomes


def test_the_committed_deliberation_readme_is_generated_from_its_summary(tmp_path):
    """results/deliberation/README.md was hand-written (its numbers typed, and it said it was generated); it is
    now written by reproduce() from summary.json: the committed file is what the generator makes of the
    committed summary, and a changed summary changes it."""
    import copy

    from mascot.studies.deliberation import PAPER_TOKEN_SCALES
    from mascot.studies.deliberation_readme import write_readme

    d = Path(__file__).resolve().parents[1] / "results" / "deliberation"
    summary = json.loads((d / "summary.json").read_text())
    made = write_readme(tmp_path, summary, PAPER_TOKEN_SCALES, "runs/deliberation-reproduce")
    assert made.read_text() == (d / "README.md").read_text()
    other = copy.deepcopy(summary)
    other["text_harness"]["surrogate_b100k"]["ring"]["tokens_mean"] = 12345.4
    other["text_harness_monitor"]["all"]["precision"] = 0.5
    text = write_readme(tmp_path, other, PAPER_TOKEN_SCALES, "runs/x").read_text()
    assert "| Tokens (mean) | 34,704 | 30,566 | 12,345 |" in text and "(precision 0.50)" in text


def test_debate_prompt_is_the_articles_word_for_word():
    """An outside tester saw "Looks for injections.." and took it for a bug; it is the article's template (a period
    after the description, whose own personas end theirs with one), kept word for word and documented."""
    from mascot.protocols.debate.prompts import debate_system_prompt

    p = debate_system_prompt(DebateAgent("Security Agent", "Focuses on injections."), ask_confidence=False)
    assert p == (
        "Role: Security Agent. Description: Focuses on injections.. "
        "Always prefix your output with [DECISION: PASS] or [DECISION: FAIL]."
    )
