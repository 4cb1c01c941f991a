"""State-tracking trials of "Predictive Maps of Multi-Agent Reasoning" (Sec. 4, Appendix C): prompts,
reply parsing, the surrogate backend, the batched/resumable harness, the metrics and Table 2.

All on CPU; the hf test runs the tiny random-weight Qwen2 of tests/tiny_model.py when transformers is
installed (its replies are garbage: every parse fails, is retried, and the state is carried forward).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from damage import flip_page_byte  # noqa: E402  (tests/damage.py)
from limits import HANG_S  # noqa: E402  (a hang guard, not a speed claim)
from mascot.analysis import stats as st
from mascot.analysis.trials_report import TABLE2_COLUMNS, table2, write_report
from mascot.backends.base import Request, Response, Sampling
from mascot.cli import main as cli_main
from mascot.protocols.state_tracking import prompts
from mascot.protocols.state_tracking.aggregation import plurality_vote
from mascot.protocols.state_tracking.harness import TrialConfig, derive_seeds, run_trials
from mascot.protocols.state_tracking.parsing import parse_state, validate_state_object
from mascot.protocols.state_tracking.surrogate import SurrogateBackend
from mascot.theory.state_tracking import BASE_PROMPT, RULES_TEXT, apply_rules, perturb, trajectory

EXACT = dict(sigma=0.0, parity_slip=0.0, level_slip=0.0, parse_fail=0.0)


# ----------------------------------------------------------------------------- parsing
GOOD = {"Value": 70.12, "Parity": "B", "Level": 2}


@pytest.mark.parametrize(
    "text, method",
    [
        ('{"Reasoning": "x", "Value": 70.12, "Parity": "B", "Level": 2}', "json"),
        ('```json\n{"Reasoning": "x", "Value": 70.12, "Parity": "B", "Level": 2}\n```', "fence"),
        ('Sure. The new state is:\n{"Value": 70.12, "Parity": "B", "Level": 2}\nHope this helps!', "scan"),
        ('{"Reasoning": "x", "Value": 70.12, "Parity": "B", "Level": 2,}', "repaired"),  # trailing comma
        ("{'Reasoning': 'it\\'s fine', 'Value': 70.12, 'Parity': 'B', 'Level': 2}", "repaired"),  # single quotes
        (
            '{"Reasoning": "V_raw = {50 * 1.25} + {3 * 2} = \\"68.5\\"; } {", "Value": 70.12, "Parity": "B", "Level": 2}',
            "json",
        ),  # braces and escaped quotes inside Reasoning
        (
            'Here:\n```\n{"Reasoning": "tau({\\"Value\\": 50})", "Value": 70.12, "Parity": "B", "Level": 2}\n```',
            "fence",
        ),
        (
            '{"Reasoning": "Parity is "A" so {x}", "Value": 70.12, "Parity": "B", "Level": 2}',
            "keys",
        ),  # unescaped quotes
        (
            'schema {"Value": <float>, "Parity": "<A or B>", "Level": <integer>} answer: '
            '{"Value": 70.12, "Parity": "B", "Level": 2}',
            "scan",
        ),  # the last valid object wins
        ('{"Value": "70.12", "Parity": " b ", "Level": "2"}', "json"),  # documented leniencies
        ('{"value": 70.12, "parity": "B", "level": 2.0}', "json"),
        ('{"state": {"Value": 70.12, "Parity": "B", "Level": 2}}', "json"),
        ('{"Reasoning": "step\none\ttab", "Value": 70.12, "Parity": "B", "Level": 2}', "json"),  # raw newline
    ],
)
def test_parse_accepts(text, method):
    r = parse_state(text)
    assert r.state == GOOD and r.reason == "ok" and r.method == method, r
    assert isinstance(r.state["Value"], float) and isinstance(r.state["Level"], int)


@pytest.mark.parametrize(
    "text, code",
    [
        ("", "empty"),
        ("   \n", "empty"),
        (None, "empty"),
        ("I cannot determine the new state.", "no_json"),
        ('{"Reasoning": "abc", "Value": 70.1, "Parity": "B", "Lev', "bad_json"),  # truncated
        ("[1, 2, 3]", "not_object"),
        ('{"Value": 70.1, "Parity": "B"}', "missing_field"),
        ('{"Value": NaN, "Parity": "B", "Level": 2}', "bad_value"),
        ('{"Value": Infinity, "Parity": "B", "Level": 2}', "bad_value"),
        ('{"Value": 1e300, "Parity": "B", "Level": 2}', "bad_value"),
        ('{"Value": true, "Parity": "B", "Level": 2}', "bad_value"),
        ('{"Value": "seventy", "Parity": "B", "Level": 2}', "bad_value"),
        ('{"Value": [70], "Parity": "B", "Level": 2}', "bad_value"),
        ('{"Value": 70.1, "Parity": "C", "Level": 2}', "bad_parity"),
        ('{"Value": 70.1, "Parity": 1, "Level": 2}', "bad_parity"),
        ('{"Value": 70.1, "Parity": "B", "Level": 12}', "bad_level"),
        ('{"Value": 70.1, "Parity": "B", "Level": 0}', "bad_level"),
        ('{"Value": 70.1, "Parity": "B", "Level": 2.5}', "bad_level"),
        ('{"Value": 70.1, "Parity": "B", "Level": "two"}', "bad_level"),
        ('{"Value": 70.1, "Parity": "B", "Level": false}', "bad_level"),
    ],
)
def test_parse_rejects_with_reason(text, code):
    r = parse_state(text)
    assert r.state is None and r.code == code, r
    assert r.reason.startswith(code + ":")


def test_parse_never_evaluates():
    # a Python expression is data: it is not evaluated (no eval/literal_eval anywhere)
    r = parse_state('{"Value": __import__("os").getpid(), "Parity": "A", "Level": 1}')
    assert r.state is None
    assert validate_state_object({"Value": 3, "Parity": "A", "Level": 9})[0] == {
        "Value": 3.0,
        "Parity": "A",
        "Level": 9,
    }


# ----------------------------------------------------------------------------- prompts
def test_prompts_verbatim_and_json_framing():
    s = {"Value": 50.0, "Parity": "A", "Level": 3}
    m = prompts.agent_messages(s)
    assert m == [
        {"role": "system", "content": BASE_PROMPT},
        {"role": "user", "content": "CURRENT STATE:\n" + json.dumps(s)},
    ]
    props = [
        {"Value": 70.12, "Parity": "B", "Level": 2, "Reasoning": "dropped"},
        {"Value": 69.5, "Parity": "A", "Level": 5},
    ]
    j = prompts.judge_prompt(props, s)
    assert j.startswith(
        "You are a judge agent responsible for determining the single correct JSON state.\n"
        "You have received proposals from 2 independent agents who each applied the same ruleset "
        "to the same input state.\nRULESET TO FOLLOW:\n" + RULES_TEXT
    )
    clean = [{k: p[k] for k in ("Value", "Parity", "Level")} for p in props]
    assert "PROPOSALS FROM LEAF AGENTS:\n" + json.dumps(clean, indent=2) + "\n" in j
    assert "CURRENT INPUT STATE (what all leaf agents received):\n" + json.dumps(s, indent=2) in j
    assert j.endswith(
        "Respond with ONLY a valid JSON object. No explanation, no extra text.\n"
        'Format: {"Value": <float>, "Parity": "<A or B>", "Level": <integer>}'
    )
    r = prompts.revision_prompt(props, s, 4)
    assert r.startswith(
        "You are a reasoning agent in a peer deliberation round. In the first round, you and 3 other "
        "agents independently applied the same ruleset to the same input state."
    )
    assert "INPUT STATE (what all agents received in round one):\n" + json.dumps(s, indent=2) in r
    assert "FIRST-ROUND PROPOSALS FROM ALL AGENTS:\n" + json.dumps(clean, indent=2) in r
    assert prompts.dumps_indent2([]) == json.dumps([], indent=2)
    rng = np.random.default_rng(0)
    for _ in range(300):
        L = [
            {
                "Value": float(rng.choice([rng.normal() * 1e3, 5.0, -0.0, 1e-7, 1e16])),
                "Parity": "AB"[rng.integers(2)],
                "Level": int(rng.integers(1, 10)),
            }
            for _ in range(rng.integers(0, 5))
        ]
        assert prompts.dumps_indent2(L) == json.dumps(L, indent=2)
        for x in L:
            assert prompts.state_json(x) == json.dumps(x)


def test_read_prompt_inverts_the_prompts_exactly():
    rng = np.random.default_rng(1)

    def state():
        v = float(rng.choice([rng.normal() * 1e3, 5.0, -0.0, 1e-7, 1e16, 0.1 + 0.2, math.nan, math.inf]))
        return {"Value": v, "Parity": "AB"[rng.integers(2)], "Level": int(rng.integers(1, 10))}

    def same(a, b):  # repr: exact floats, -0.0 and NaN included
        return [repr(a[k]) for k in ("Value", "Parity", "Level")] == [repr(b[k]) for k in ("Value", "Parity", "Level")]

    for _ in range(200):
        s, props = state(), [state() for _ in range(rng.integers(0, 5))]
        for role, msgs in (
            ("agent", prompts.agent_messages(s)),
            ("judge", prompts.judge_messages(props, s)),
            ("revision", prompts.revision_messages(props, s, 4)),
        ):
            r = prompts.read_prompt(msgs)
            assert r.role == role and same(r.state, s)
            assert len(r.proposals) == (0 if role == "agent" else len(props))
            assert all(same(a, b) for a, b in zip(r.proposals, props))
    for bad in ([], [{"role": "user", "content": "hi"}], [{"role": "user", "content": "CURRENT STATE:\n[1]"}]):
        with pytest.raises(ValueError):
            prompts.read_prompt(bad)
    # the surrogate answers the prompt it is sent, whatever meta says
    s0, other = {"Value": 50.0, "Parity": "A", "Level": 3}, {"Value": 80.0, "Parity": "B", "Level": 7}
    r = Request(prompts.agent_messages(s0), meta={"role": "judge", "state": other, "proposals": [other]})
    assert parse_state(SurrogateBackend(**EXACT).generate([r])[0].text).state == apply_rules(s0)


# ----------------------------------------------------------------------------- mesh vote
def test_plurality_vote_tie_rules():
    a = {"Value": 70.0, "Parity": "B", "Level": 2}
    b = {"Value": 68.5, "Parity": "A", "Level": 5}
    c = {"Value": 71.0, "Parity": "B", "Level": 2}
    d = {"Value": 10.0, "Parity": "A", "Level": 1}
    assert plurality_vote([b, a, a, c]) == (a, {"count": 2, "tied": 1})  # clear plurality
    assert plurality_vote([c, a, a, c])[0] == c  # 2-2 tie: c was proposed first (agent 0)
    assert plurality_vote([a, c, c, a])[0] == a
    assert plurality_vote([c, b, a, d]) == (c, {"count": 1, "tied": 4})  # all differ: agent 0
    # median rule: tied tuples sorted by Value (10, 68.5, 70, 71); lower middle of 4 is 68.5
    assert plurality_vote([c, b, a, d], tie="median")[0] == b
    assert plurality_vote([c, a, d], tie="median")[0] == a  # (10, 70, 71) -> 70
    assert plurality_vote([a, {"Value": 70, "Parity": "B", "Level": 2.0}])[1]["count"] == 2  # 70 == 70.0
    assert plurality_vote([]) == (None, {"count": 0, "tied": 0})
    with pytest.raises(ValueError, match="tie"):
        plurality_vote([a], tie="random")


# ----------------------------------------------------------------------------- metrics and statistics
def test_metrics_by_hand():
    true = np.array([70.0, 50.0, 66.0])
    est = np.array([71.0, 48.5, 66.0])
    assert st.cumulative_error(true, est) == pytest.approx(1.0 + 1.5 + 0.0)
    assert st.pairwise_disagreement([1.0, 2.0, 4.0]) == pytest.approx((1 + 3 + 2) / 3)  # 2/(3*2) * 6
    assert st.pairwise_disagreement([5.0, math.nan]) != st.pairwise_disagreement([5.0, math.nan])  # NaN (< 2)
    # R_cdr: D = (2, 1, 0, 4) -> floored (2, 1, 1e-6, 4): logs (log 1/2, log 1e-6, log 4e6)
    R, floored, terms = st.consensus_decay(np.array([2.0, 1.0, 0.0, 4.0]), floor=1e-6)
    assert R == pytest.approx((math.log(0.5) + math.log(1e-6) + math.log(4e6)) / 3)
    assert (floored, terms) == (1, 3)
    R, floored, terms = st.consensus_decay(np.array([2.0, math.nan, 1.0, 0.5]), floor=1e-6)
    assert R == pytest.approx(math.log(0.5)) and (floored, terms) == (0, 1)  # undefined D_t drops its terms
    R, _, terms = st.consensus_decay(np.full(4, math.nan))
    assert math.isnan(R) and terms == 0
    assert st.perturbation_sensitivity(75.84, 88.95) == pytest.approx(13.11)
    with pytest.raises(ValueError, match="floor"):
        st.consensus_decay([1.0, 2.0], floor=0.0)


def test_kruskal_spearman_bootstrap_against_scipy():
    from scipy.stats import kruskal, spearmanr

    g = [[1.0, 2.5, 3.0, 7.0], [4.0, 5.0, 6.5], [0.5, 8.0, 9.0, 10.0, 2.0]]
    ref = kruskal(*g)
    assert st.kruskal(g) == pytest.approx((ref.statistic, ref.pvalue))
    assert all(math.isnan(x) for x in st.kruskal([[1.0, 1.0], [1.0]]))  # all equal
    assert all(math.isnan(x) for x in st.kruskal([[1.0, 2.0]]))  # one group
    assert st.spearman([1, 10, 10], [2094.34, 1241.0, 1184.24]) == pytest.approx(
        spearmanr([1, 10, 10], [2094.34, 1241.0, 1184.24]).statistic
    )
    assert math.isnan(st.spearman([1, 2, 3], [5, 5, 5]))
    lo, hi = st.bootstrap_mean_ci(np.arange(100.0), n_boot=2000, seed=3)
    assert lo < 49.5 < hi and (lo, hi) == st.bootstrap_mean_ci(np.arange(100.0), n_boot=2000, seed=3)


def test_table2_conventions_on_hand_made_metrics():
    # chain worst E_ceg, star fastest consensus, star most sensitive: the paper's pattern
    m = pd.DataFrame(
        {
            "topology": ["chain"] * 3 + ["mesh"] * 3 + ["star"] * 3,
            "trial": [0, 1, 2] * 3,
            "E_ceg": [20, 21, 22, 10, 11, 12, 9, 10, 11.0],
            "R_cdr": [0.3, 0.2, 0.25, -1, -2, -1.5, -3, -4, -3.5],
            "F_ps": [1, 2, 3, 2, 3, 4, 5, 6, 7.0],
        }
    )
    preds = {
        "chain": {"rho": 1.0, "delta": 0.0, "kappa": 9.95},
        "star": {"rho": 10.0, "delta": 9.0, "kappa": 28.61},
        "mesh": {"rho": 10.0, "delta": 9.23, "kappa": 13.0},
    }
    t = table2(m, preds)
    assert list(t.columns) == TABLE2_COLUMNS and list(t.metric) == ["E_ceg", "R_cdr", "F_ps"]
    r = dict(zip(t.metric, t.r_s))
    assert r["E_ceg"] == pytest.approx(-math.sqrt(3) / 2)  # rho ties star/mesh: -0.866, as for the paper's means
    assert r["R_cdr"] == pytest.approx(0.5) and r["F_ps"] == pytest.approx(1.0)
    assert t.loc[0, "chain_mean"] == pytest.approx(21.0) and t.loc[0, "chain_sd"] == pytest.approx(1.0)


# ----------------------------------------------------------------------------- surrogate backend
def _agent_request(state, seed, trial=0, step=1):
    # the task is in the messages only; meta holds the ids (the surrogate keys its noise on them)
    return Request(
        messages=prompts.agent_messages(state),
        sampling=Sampling(seed=seed >> 33),
        meta={"topology": "chain", "trial": trial, "step": step, "seed_arm": 0, "seed64": seed},
    )


def test_surrogate_exact_deterministic_and_noisy():
    states = [s for s in trajectory(steps=12)] + trajectory(perturb(), 12)
    seeds = derive_seeds(0, 0, np.arange(len(states)), 0, 1, 0, 0, 0)
    reqs = [_agent_request(s, int(x)) for s, x in zip(states, seeds)]
    exact = SurrogateBackend(**EXACT).generate(reqs)
    for s, q, r in zip(states, reqs, exact):
        assert parse_state(r.text).state == apply_rules(s)
        assert r.completion_tokens == len(r.text.split())
        assert r.prompt_tokens == sum(len(m["content"].split()) for m in q.messages)
    b = SurrogateBackend(sigma=3.0, seed=5)
    t1 = [r.text for r in b.generate(reqs)]
    assert t1 == [r.text for r in SurrogateBackend(sigma=3.0, seed=5).generate(list(reversed(reqs)))][::-1]
    assert t1 != [r.text for r in SurrogateBackend(sigma=3.0, seed=6).generate(reqs)]
    # noise statistics: many requests at one state
    n = 4000
    s0 = {"Value": 50.0, "Parity": "A", "Level": 3}
    seeds = derive_seeds(1, 0, np.arange(n), 0, 1, 0, 0, 0)
    many = [_agent_request(s0, int(x), trial=i) for i, x in enumerate(seeds)]
    out = [
        parse_state(r.text)
        for r in SurrogateBackend(sigma=2.0, parity_slip=0.1, level_slip=0.2, parse_fail=0.05, seed=1).generate(many)
    ]
    ok = [o.state for o in out if o.ok]
    assert abs(1 - len(ok) / n - 0.05) < 0.015  # every malformed kind fails to parse
    v = np.array([o["Value"] for o in ok])
    assert abs(v.mean() - 70.0) < 0.15 and abs(v.std() - 2.0) < 0.15
    assert abs(np.mean([o["Parity"] == "A" for o in ok]) - 0.1) < 0.02
    assert abs(np.mean([o["Level"] != 2 for o in ok]) - 0.2) < 0.025
    with pytest.raises(ValueError, match="judge"):
        SurrogateBackend(judge="max")
    with pytest.raises(ValueError, match="rho_c"):
        SurrogateBackend(rho_c=1.5)
    bad = SurrogateBackend().generate([Request(messages=[{"role": "user", "content": "hi"}])])
    assert bad[0].error and bad[0].text == ""


def test_surrogate_judge_aggregation():
    s = {"Value": 50.0, "Parity": "A", "Level": 3}
    props = [
        {"Value": 70.0, "Parity": "B", "Level": 2},
        {"Value": 72.0, "Parity": "B", "Level": 2},
        {"Value": 74.0, "Parity": "A", "Level": 3},
        {"Value": 80.0, "Parity": "B", "Level": 3},
    ]

    def judge(kind, proposals):
        r = Request(messages=prompts.judge_messages(proposals, s), sampling=Sampling(seed=1), meta={"seed64": 1})
        return parse_state(SurrogateBackend(**EXACT, judge=kind).generate([r])[0].text).state

    assert judge("mean", props) == {"Value": 74.0, "Parity": "B", "Level": 2}  # Level tie 2-2 -> smallest
    assert judge("median", props) == {"Value": 73.0, "Parity": "B", "Level": 2}
    assert judge("vote", props) == props[0]  # all tuples differ: the earliest
    assert judge("mean", []) == apply_rules(s)  # no proposals: the judge applies the rule itself


# ----------------------------------------------------------------------------- the harness, end to end
@pytest.fixture(scope="module")
def exact_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("exact")
    res = run_trials(TrialConfig(n_trials=100, log_requests="failures"), out, SurrogateBackend(**EXACT), progress=False)
    write_report(out, figures=False)
    return out, res


@pytest.fixture(scope="module")
def noisy_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("noisy")
    res = run_trials(
        TrialConfig(n_trials=100, log_requests="all"),
        out,
        SurrogateBackend(sigma=10.0, rho_c=0.0, parse_fail=0.02, seed=1),
        progress=False,
    )
    write_report(out)
    return out, res


def test_exact_surrogate_reproduces_the_rule(exact_run):
    out, res = exact_run
    df = pd.read_parquet(out / "trials.parquet")
    assert len(df) == 3 * 100 * 2 * 13
    truth = {False: trajectory(steps=12), True: trajectory(perturb(), 12)}
    for pert, traj in truth.items():
        sub = df[df.perturbed == pert]
        for step, s in enumerate(traj):
            rows = sub[sub.step == step]
            assert (rows.value == s["Value"]).all() and (rows.parity == s["Parity"]).all()
            assert (rows.level == s["Level"]).all()
    assert (df.value == df.value_true).all() and (df.level == df.level_true).all()
    m = pd.read_csv(out / "metrics.csv")
    assert (m.E_ceg == 0).all()
    assert m.F_ps.to_numpy() == pytest.approx(abs(75.84 - 88.95))  # the exact trajectories' final gap
    t = pd.read_csv(out / "table2.csv")
    assert list(t.columns) == TABLE2_COLUMNS
    assert (t.loc[0, ["chain_mean", "mesh_mean", "star_mean"]] == 0).all()
    assert df.n_failed_attempts.sum() == 0 and not df.carried.any()
    # one backend call per stage: 100 trials x 2 arms x (1 chain + 4 leaves + 4 mesh) in stage 1
    step1 = df[df.step == 1]
    assert step1.n_requests.sum() == 200 * (1 + 5 + 8)
    assert (out / "requests.jsonl").read_text() == ""  # log_requests="failures" and nothing failed
    meta = json.loads((out / "run.json").read_text())
    assert meta["complete"] and meta["sessions"][0]["requests"] == res.requests == 12 * 200 * 14


def test_noisy_surrogate_table2_and_figures(noisy_run):
    out, res = noisy_run
    t = pd.read_csv(out / "table2.csv")
    assert list(t.columns) == TABLE2_COLUMNS and list(t.metric) == ["E_ceg", "R_cdr", "F_ps"]
    e = t.set_index("metric").loc["E_ceg"]
    # chain accumulates independent noise; the judge and the revisions average it (rho_c = 0)
    assert e.chain_mean > 1.3 * e.star_mean and e.chain_mean > 1.3 * e.mesh_mean
    assert e.p < 1e-3 and e.r_s == pytest.approx(-math.sqrt(3) / 2)  # the paper's inversion (tie in rho)
    for stem in (
        "fig2_cumulative_error",
        "fig3_consensus_decay",
        "fig4_perturbation_sensitivity",
        "fig5_stepwise_cumulative_error",
        "fig6_stepwise_consensus",
    ):
        for ext in ("png", "pdf"):
            assert (out / f"{stem}.{ext}").stat().st_size > 5000
    md = (out / "table2.md").read_text()
    assert "2094.34 ± 843.05" in md and "| paper |" in md
    stats = json.loads((out / "stats.json").read_text())
    ci = stats["metrics"]["E_ceg"]["ci95"]["chain"]
    assert ci[0] < e.chain_mean < ci[1]
    # every request is logged with its prompt, reply, tokens, parse result and ids
    df = pd.read_parquet(out / "trials.parquet")
    n_log = sum(1 for _ in open(out / "requests.jsonl"))
    assert n_log == res.requests == df.n_requests.sum()
    with open(out / "requests.jsonl") as f:
        recs = [json.loads(next(f)) for _ in range(3000)]
    keys = {
        "topology",
        "trial",
        "perturbed",
        "step",
        "stage",
        "role",
        "agent",
        "attempt",
        "seed",
        "messages",
        "text",
        "prompt_tokens",
        "completion_tokens",
        "latency_s",
        "parse_ok",
        "reason",
        "state",
    }
    assert keys <= set(recs[0])
    failed = [r for r in recs if not r["parse_ok"]]
    assert failed and all(r["reason"] != "ok" for r in failed)
    assert df.n_failed_attempts.sum() == sum(1 for line in open(out / "requests.jsonl") if '"parse_ok": false' in line)
    # paired seeds: both arms of a trial send the same seed for the same (step, role, agent, attempt)
    by = {}
    for r in recs:
        key = (r["topology"], r["trial"], r["step"], r["role"], r["agent"], r["attempt"])
        by.setdefault(key, {})[r["perturbed"]] = r["seed"]
    pairs = [v for v in by.values() if len(v) == 2]
    assert pairs and all(v[False] == v[True] for v in pairs)
    assert len({r["seed"] for r in recs}) > 0.3 * len(recs)
    # rerun of the finished run: nothing recomputed, same table; other parameters: a clear error
    again = run_trials(
        TrialConfig(n_trials=100, log_requests="all"),
        out,
        SurrogateBackend(sigma=10.0, rho_c=0.0, parse_fail=0.02, seed=1),
        progress=False,
    )
    assert again.steps_run == 0 and again.requests == 0
    write_report(out, figures=False)
    assert pd.read_csv(out / "table2.csv").equals(t)
    with pytest.raises(ValueError, match=r"different parameters.*sigma: 10.0 \(in run.json\) vs 9.0"):
        run_trials(TrialConfig(n_trials=100), out, SurrogateBackend(sigma=9.0, parse_fail=0.02, seed=1), progress=False)


class Flaky:
    """Wraps the exact surrogate; ``fail(meta)`` picks replies to replace with garbage."""

    name, model = "flaky", "flaky"

    def __init__(self, fail):
        self.inner = SurrogateBackend(**EXACT)
        self.fail = fail
        self.calls = []

    def generate(self, reqs):
        self.calls.append([(r.meta["step"], r.meta["stage"], r.meta["attempt"]) for r in reqs])
        out = self.inner.generate(reqs)
        return [Response("no idea, sorry", 10, 3) if self.fail(r.meta) else o for r, o in zip(reqs, out)]

    def describe(self):
        return {"name": "flaky"}


def test_retries_abstentions_and_carry_forward(tmp_path):
    def fail(m):
        if m["step"] != 1 or m["perturbed"]:
            return False
        t, i, role, agent, att = m["topology"], m["trial"], m["role"], m["agent"], m["attempt"]
        return (
            (t == "chain" and i == 0 and att < 2)  # recovers on the last retry
            or (t == "chain" and i == 1)  # never parses: carried
            or (t == "star" and i == 0 and role == "agent" and agent == 0)  # leaf abstains
            or (t == "star" and i == 1 and role == "judge")  # judge fails: carried
            or (t == "mesh" and i == 0 and role == "revision")  # all revisions fail: carried
            or (t == "mesh" and i == 1 and role == "revision" and agent in (0, 2))
        )  # 2 of 4 abstain

    b = Flaky(fail)
    run_trials(TrialConfig(n_trials=2, steps=2, retries=2), tmp_path, b, progress=False)
    write_report(tmp_path, figures=False)
    df = pd.read_parquet(tmp_path / "trials.parquet").set_index(["topology", "trial", "perturbed", "step"])
    s0 = {"Value": 50.0, "Parity": "A", "Level": 3}
    s1 = apply_rules(s0)

    def row(t, i):
        return df.loc[(t, i, False, 1)]

    def state(r):
        return {"Value": r.value, "Parity": r.parity, "Level": r.level}

    r = row("chain", 0)
    assert state(r) == s1 and not r.carried and r.n_failed_attempts == 2 and r.n_requests == 3 and r.n_abstained == 0
    r = row("chain", 1)
    assert state(r) == s0 and r.carried and r.n_failed_attempts == 3 and r.n_abstained == 1
    assert state(df.loc[("chain", 1, False, 2)]) == s1  # the carried state is stepped again
    r = row("star", 0)
    assert state(r) == s1 and not r.carried and r.n_abstained == 1 and r.n_failed_attempts == 3
    assert list(np.isnan(r.agent_values)) == [True, False, False, False]
    r = row("star", 1)
    assert state(r) == s0 and r.carried and r.n_failed_attempts == 3
    r = row("mesh", 0)
    assert state(r) == s0 and r.carried and r.n_abstained == 4 and r.n_failed_attempts == 12 and r.vote_count == 0
    assert math.isnan(r.d_t)  # no revisions: D_t undefined
    r = row("mesh", 1)
    assert state(r) == s1 and not r.carried and r.n_abstained == 2 and r.vote_count == 2
    # retries are batched: per stage one call, then one call per retry round holding only the failures
    step1 = [c for c in b.calls if c[0][0] == 1]
    assert [(c[0][1], c[0][2], len(c)) for c in step1] == [
        ("stage1", 0, 2 * 2 * 9),
        ("stage1", 1, 1 + 1 + 1),
        ("stage1", 2, 1 + 1 + 1),
        ("stage2", 0, 2 * 2 + 2 * 2 * 4),
        ("stage2", 1, 1 + 4 + 2),
        ("stage2", 2, 1 + 4 + 2),
    ]
    assert len([c for c in b.calls if c[0][0] == 2]) == 2  # step 2: no failures, no retry calls
    m = pd.read_csv(tmp_path / "metrics.csv").set_index(["topology", "trial"])
    assert m.loc[("chain", 1), "carried_steps"] == 1 and m.loc[("chain", 1), "n_failed_attempts"] == 3
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["bookkeeping"]["star"]["n_abstained"] == 1 + 1  # a leaf (trial 0), the judge (trial 1)


def test_structured_output_schemas_and_request_meta(tmp_path):
    seen = []

    class Recorder(Flaky):
        def generate(self, reqs):
            seen.extend(reqs)
            return self.inner.generate(reqs)

    run_trials(
        TrialConfig(n_trials=1, steps=1, structured_output=True, sampling=Sampling(0.3, 0.9, 64)),
        tmp_path,
        Recorder(lambda m: False),
        progress=False,
    )
    assert len(seen) == 2 * (1 + 5 + 8)
    for r in seen:
        assert r.json_schema == (prompts.AGENT_SCHEMA if r.meta["role"] == "agent" else prompts.FINAL_SCHEMA)
        seed = r.sampling.seed  # the request's own seed lives in its Sampling; the rest is the config's
        assert dataclasses.replace(r.sampling, seed=None) == Sampling(0.3, 0.9, 64)
        assert 0 <= seed < 2**31 and seed == r.meta["seed64"] >> 33
        task = prompts.read_prompt(r.messages)  # the task is in the messages, not in meta
        assert task.role == r.meta["role"] and "state" not in r.meta and "proposals" not in r.meta
        assert task.state["Value"] == (65.0 if r.meta["perturbed"] else 50.0)
        if r.meta["role"] != "agent":
            assert len(task.proposals) == 4 and len(r.messages) == 1 and r.messages[0]["role"] == "user"


def test_seeds_differ_by_component():
    base = dict(run_seed=0, topology_ids=1, trials=3, arms=0, step=2, roles=0, agents=1, attempt=0)
    s = int(derive_seeds(**base))
    for k in base:
        assert int(derive_seeds(**dict(base, **{k: base[k] + 1}))) != s, k
    assert int(derive_seeds(**base)) == s


class Crashing:
    """The surrogate, but the process 'dies' (an exception) in the middle of step ``at``."""

    name, model = "surrogate", "affine-noise"

    def __init__(self, at, **kw):
        self.inner = SurrogateBackend(**kw)
        self.at = at

    def generate(self, reqs):
        if reqs[0].meta["step"] == self.at and reqs[0].meta["stage"] == "stage2":
            raise KeyboardInterrupt("simulated crash")
        return self.inner.generate(reqs)

    def describe(self):
        return self.inner.describe()

    def identity(self):
        return self.inner.identity()


def _log_records(out):
    """requests.jsonl without the timing fields (call_s, latency_s), one tuple per record."""
    recs = []
    for line in open(out / "requests.jsonl"):
        r = json.loads(line)
        r.pop("call_s")
        r.pop("latency_s")
        recs.append(json.dumps(r, sort_keys=True))
    return recs


def test_resume_after_crash_or_lost_step_is_identical(tmp_path):
    cfg = TrialConfig(n_trials=30, steps=4, log_requests="all")
    kw = dict(sigma=4.0, parse_fail=0.05, seed=2)
    ref = tmp_path / "ref"
    run_trials(cfg, ref, SurrogateBackend(**kw), progress=False)
    ref_df = pd.read_parquet(ref / "trials.parquet")
    ref_log = _log_records(ref)
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_trials(cfg, run, Crashing(3, **kw), progress=False)
    assert sorted(p.name for p in (run / "steps").iterdir()) == [  # the failed step's partial log is removed
        "step_001.parquet",
        "step_001.requests.jsonl",
        "step_002.parquet",
        "step_002.requests.jsonl",
    ]
    res = run_trials(cfg, run, SurrogateBackend(**kw), progress=False)
    assert (res.steps_skipped, res.steps_run) == (2, 2)
    pd.testing.assert_frame_equal(ref_df, pd.read_parquet(run / "trials.parquet"))
    same_log = _log_records(run) == ref_log  # a bool: pytest's diff of two long logs would take minutes
    assert same_log
    meta = json.loads((run / "run.json").read_text())
    assert [s["steps_done_before"] for s in meta["sessions"]] == [0, 2] and meta["complete"]
    # a finished run that loses its last step part recomputes just that step, log records replaced
    (run / "steps" / "step_004.parquet").unlink()
    res = run_trials(cfg, run, SurrogateBackend(**kw), progress=False)
    assert (res.steps_skipped, res.steps_run) == (3, 1)
    pd.testing.assert_frame_equal(ref_df, pd.read_parquet(run / "trials.parquet"))
    same_log = _log_records(run) == ref_log  # a bool: pytest's diff of two long logs would take minutes
    assert same_log
    assert not list((run / "steps").glob("*.jsonl"))


def test_sigkill_mid_run_then_resume_is_identical(tmp_path):
    args = [
        "trials",
        "--n-trials",
        "100",  # (5 steps of about 0.7 s each on 2 cores: the kill lands between steps 2 and 5)
        "--steps",
        "5",
        "--sigma",
        "6",
        "--parse-fail",
        "0.03",
        "--seed",
        "4",
        "--no-figures",
        "--n-boot",
        "20",
    ]
    out = tmp_path / "killed"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mascot.cli", *args, "--out", str(out), "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + HANG_S
    while not (out / "steps" / "step_002.parquet").exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.time() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = sorted(p.name for p in (out / "steps").glob("step_*.parquet"))
    assert 2 <= len(done) < 5 and not (out / "trials.parquet").exists()
    assert cli_main([*args, "--out", str(out), "--quiet"]) == 0
    ref = tmp_path / "ref"
    assert cli_main([*args, "--out", str(ref), "--quiet"]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(ref / "trials.parquet"), pd.read_parquet(out / "trials.parquet"))
    assert pd.read_csv(ref / "table2.csv").equals(pd.read_csv(out / "table2.csv"))
    sess = json.loads((out / "run.json").read_text())["sessions"]
    assert len(sess) == 2 and sess[1]["steps_done_before"] == len(done) and sess[1]["command"]


def test_cli_errors(tmp_path, capsys):
    def err(*a):
        assert cli_main(["trials", "--out", str(tmp_path / "x"), *a]) == 2
        return capsys.readouterr().err

    assert "--sigma" in err("--backend", "vllm", "--sigma", "2")
    assert "--backend hf needs --model" in err("--backend", "hf")
    assert "--top-p" in err("--top-p", "0")
    assert "--n-trials" in err("--n-trials", "0")
    assert "--parity-slip must be a probability" in err("--parity-slip", "1.5")
    assert "--batch-size applies to --backend hf" in err("--batch-size", "4")
    assert "--structured-output applies" in err("--structured-output")
    assert "--model does not apply" in err("--model", "x")
    with pytest.raises(SystemExit):
        cli_main(["trials", "--topology", "ring"])
    capsys.readouterr()
    assert (
        cli_main(
            [
                "trials",
                "--out",
                str(tmp_path / "ok"),
                "--n-trials",
                "3",
                "--steps",
                "2",
                "--topology",
                "chain",
                "--topology",
                "star",
                "--no-figures",
                "--quiet",
                "--n-boot",
                "50",
            ]
        )
        == 0
    )
    t = pd.read_csv(tmp_path / "ok" / "table2.csv")
    assert list(t.columns) == TABLE2_COLUMNS and t.mesh_mean.isna().all() and t.r_s.isna().all()
    with pytest.raises(ValueError, match="unknown topology"):
        TrialConfig(topologies=("ring",))


def test_hf_backend_garbage_is_counted_and_carried(tmp_path):
    pytest.importorskip("transformers")
    tiny = Path(__file__).with_name("tiny_model.py")
    if not tiny.exists():
        pytest.skip("tests/tiny_model.py not present")
    sys.path.insert(0, str(tiny.parent))
    from mascot.backends import make_backend
    from tiny_model import build_tiny_qwen2

    path = build_tiny_qwen2(tmp_path / "tiny")
    backend = make_backend("hf", model=str(path), device="cpu", batch_size=64)
    cfg = TrialConfig(n_trials=2, steps=2, retries=1, sampling=Sampling(max_tokens=4), log_requests="all")
    res = run_trials(cfg, tmp_path / "run", backend, progress=False)
    write_report(tmp_path / "run", figures=False)
    df = pd.read_parquet(tmp_path / "run" / "trials.parquet")
    recs = [json.loads(line) for line in open(tmp_path / "run" / "requests.jsonl")]
    assert len(recs) == res.requests == df.n_requests.sum()
    n_bad = sum(not r["parse_ok"] for r in recs)
    assert n_bad == df.n_failed_attempts.sum() > 0
    assert all(r["reason"] != "ok" and r["completion_tokens"] >= 1 for r in recs if not r["parse_ok"])
    # garbage never parses: every decision node fails, so each state is carried forward unchanged
    if n_bad == len(recs):
        assert df[df.step > 0].carried.all()
        for pert, s in ((False, 50.0), (True, 65.0)):
            assert (df[df.perturbed == pert].value == s).all()
    m = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert (m.n_failed_attempts > 0).all()


def test_trials_config_file_equals_the_same_flags_and_flags_win(tmp_path, capsys):
    cfg = tmp_path / "t.toml"
    cfg.write_text(
        '[trials]\nbackend = "surrogate"\ntopology = ["chain", "star"]\nn_trials = 6\nsteps = 3\n'
        'seed = 4\nno_figures = true\nn_boot = 20\nunpaired = false\n\n[output]\ndir = "ignored"\n'
    )
    flags = [
        "--backend",
        "surrogate",
        "--topology",
        "chain",
        "--topology",
        "star",
        "--n-trials",
        "6",
        "--steps",
        "3",
        "--seed",
        "4",
        "--no-figures",
        "--n-boot",
        "20",
        "--quiet",
    ]
    assert cli_main(["trials", *flags, "--out", str(tmp_path / "flags")]) == 0
    assert cli_main(["trials", "--config", str(cfg), "--out", str(tmp_path / "file"), "--quiet"]) == 0
    a, b = (pd.read_parquet(tmp_path / d / "trials.parquet") for d in ("flags", "file"))
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert set(a.topology) == {"chain", "star"} and a.step.max() == 3
    # a command-line option comes after the file's, so it wins
    assert cli_main(["trials", f"--config={cfg}", "--steps", "2", "--out", str(tmp_path / "over"), "--quiet"]) == 0
    assert pd.read_parquet(tmp_path / "over" / "trials.parquet").step.max() == 2
    # found by an outside tester: a command-line --topology was added to the file's list (more requests than asked)
    args = ["trials", f"--config={cfg}", "--topology", "mesh", "--steps", "1", "--quiet"]
    assert cli_main([*args, "--out", str(tmp_path / "topo")]) == 0
    assert set(pd.read_parquet(tmp_path / "topo" / "trials.parquet").topology) == {"mesh"}
    capsys.readouterr()
    for text, msg in (
        ("[trials]\nn_trial = 5\n", "unknown key 'n_trial'"),
        ("[trials]\nno_figures = 1\n", "'no_figures' is a flag"),
        ('[trials]\nseed = 1\n[output]\ndir = "a"\nformat = "b"\n', "[output] takes only 'dir'"),
        ("[trial]\nseed = 1\n", "unknown table"),
        ("[trials\n", "invalid TOML"),
        # found by an outside tester: both were taken, the last one silently winning
        ("[trials]\ntemperature = 0.5\ntemp = 0.9\n", "'temp' and 'temperature' set the same option"),
        # a later tester: an empty list ran every topology; a bad value was named only as its option
        ("[trials]\ntopology = []\n", "'topology' is an empty list"),
        ('[trials]\ntopology = "ring"\n', "'topology' = 'ring': one of chain, star, mesh, all"),
        ("[trials]\nmax_tokens = 64.7\n", "t.toml: 'max_tokens' = 64.7: takes a whole number"),
        ("n_trials = 3\n[trials]\nseed = 1\n", "key(s) ['n_trials'] outside any table"),
        ("[trials]\nn_trials = true\n", "'n_trials' takes a whole number; got True"),
        ("[trials]\nseed = 1\n[output]\ndir = 5\n", "[output] dir must be a path (a string); got 5"),
        # a range checked after parsing names the file's key beside the option (a later tester)
        ("[trials]\nn_trials = 0\n", "--n-trials must be an integer >= 1; got 0 (set by 'n_trials' in "),
        ("[trials]\ntop_p = 0\n", "--top-p must be in (0, 1]; got 0.0 (set by 'top_p' in "),
    ):
        cfg.write_text(text)
        assert cli_main(["trials", "--config", str(cfg)]) == 2
        assert msg in capsys.readouterr().err
    cfg.write_text("[trials]\nn_trials = 0\n")  # the command line's value replaces it: nothing to name
    assert cli_main(["trials", "--config", str(cfg), "--n-trials", "-1"]) == 2
    assert capsys.readouterr().err.strip().endswith("got -1")
    with pytest.raises(SystemExit):  # (argparse: exit 2)
        cli_main(["trials", "--initial-state", "1e300,A,3"])
    assert "|VALUE| must be at most 1e9" in capsys.readouterr().err


def test_a_flag_the_config_sets_can_be_unset_on_the_command_line(tmp_path):
    # found by an outside tester: a flag set in a trials config could not be turned off for one run
    from mascot.cli.main import _with_trials_config, build_parser

    cfg = tmp_path / "t.toml"
    cfg.write_text(
        "[trials]\nunpaired = true\nstructured_output = true\nno_figures = true\nquiet = true\n"
        "no_probe = true\nenforce_eager = true\nallow_large = false\n"
    )

    def parse(*extra):
        parser = build_parser()
        return parser.parse_args(_with_trials_config(["trials", "--config", str(cfg), *extra], parser))

    a = parse()
    assert (a.unpaired, a.structured_output, a.no_figures, a.quiet, a.no_probe, a.enforce_eager, a.allow_large) == (
        True,
        True,
        True,
        True,
        True,
        True,
        False,
    )
    b = parse(
        "--no-unpaired", "--no-structured-output", "--figures", "--no-quiet", "--probe", "--no-enforce-eager",
        "--allow-large",
    )  # fmt: skip
    assert (b.unpaired, b.structured_output, b.no_figures, b.quiet, b.allow_large) == (False, False, False, False, True)
    assert not b.no_probe and not b.enforce_eager  # (False: the backend's default, as if never given)
    cfg.write_text("[trials]\nfigures = false\nprobe = false\n")  # the positive spelling, written false
    c = parse()
    assert c.no_figures is True and c.no_probe is True
    cfg.write_text("[trials]\nfigures = true\nno_figures = true\n")
    from mascot.errors import InputError

    with pytest.raises(InputError, match="'no_figures' and 'figures' set the same option"):
        parse()


def test_results_without_run_json_are_refused(tmp_path, capsys):
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "step_001.parquet").write_bytes(b"")
    assert (
        cli_main(["trials", "--n-trials", "2", "--steps", "1", "--no-figures", "--quiet", "--out", str(tmp_path)]) == 2
    )
    assert f"{tmp_path / 'steps'} exists but {tmp_path / 'run.json'} does not" in capsys.readouterr().err
    (tmp_path / "steps" / "step_001.parquet").unlink()  # an empty steps/ folder is no evidence of a run
    assert (
        cli_main(["trials", "--n-trials", "2", "--steps", "1", "--no-figures", "--quiet", "--out", str(tmp_path)]) == 0
    )


# ----------------------------------------------------------------------------- the initial state is mascot's choice
def test_initial_state_option_flag_and_config(tmp_path, capsys):
    from mascot.cli.trials_config import parse_initial_state

    assert parse_initial_state("50,A,3") == (50.0, "A", 3)
    assert parse_initial_state(" 40.5 , B , 7 ") == (40.5, "B", 7)
    for bad in ("50,A", "50,C,3", "50,A,10", "x,A,3", "50,A,3.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_initial_state(bad)
    with pytest.raises(SystemExit):
        cli_main(["trials", "--initial-state", "50,C,3", "--out", str(tmp_path / "bad")])
    capsys.readouterr()
    common = ["--topology", "chain", "--n-trials", "3", "--steps", "2", "--no-figures", "--n-boot", "10", "--quiet"]
    assert cli_main(["trials", *common, "--initial-state", "40,B,7", "--out", str(tmp_path / "flag")]) == 0
    run = json.loads((tmp_path / "flag" / "run.json").read_text())
    assert run["identity"]["config"]["initial_state"] == [40.0, "B", 7]
    df = pd.read_parquet(tmp_path / "flag" / "trials.parquet")
    s0 = df[(df.step == 0) & ~df.perturbed]
    assert (s0.value == 40.0).all() and (s0.parity == "B").all() and (s0.level == 7).all()
    md = (tmp_path / "flag" / "table2.md").read_text()
    assert "Initial state: {Value 40, Parity B, Level 7} (set with --initial-state" in md
    assert json.loads((tmp_path / "flag" / "stats.json").read_text())["initial_state"] == [40.0, "B", 7]
    # the default is said to be mascot's choice
    assert cli_main(["trials", *common, "--out", str(tmp_path / "default")]) == 0
    assert (
        "Initial state: {Value 50, Parity A, Level 3} (mascot's choice: the SR paper does not give"
        in (tmp_path / "default" / "table2.md").read_text()
    )
    # trials configs take it as a string or a list, and give the same run as the flag
    for i, val in enumerate(('"40,B,7"', '[40, "B", 7]')):
        cfg = tmp_path / f"c{i}.toml"
        cfg.write_text(f'[trials]\nbackend = "surrogate"\ninitial_state = {val}\n')
        assert cli_main(["trials", "--config", str(cfg), *common, "--out", str(tmp_path / f"file{i}")]) == 0
        pd.testing.assert_frame_equal(df, pd.read_parquet(tmp_path / f"file{i}" / "trials.parquet"), check_exact=True)
    cfg.write_text('[trials]\ninitial_state = [40, "B"]\n')
    assert cli_main(["trials", "--config", str(cfg)]) == 2
    assert "'initial_state' takes [VALUE, PARITY, LEVEL]" in capsys.readouterr().err


def test_ordering_findings_from_stats():
    from mascot.analysis.trials_report import ordering
    from mascot.studies.trials import ordering_findings

    assert ordering({"chain": 3.0, "mesh": 1.0, "star": 2.0}) == "chain > star > mesh"
    assert ordering({"chain": 1.0, "mesh": 1.0, "star": 2.0}) == "star > chain = mesh"
    assert ordering({"chain": float("nan"), "mesh": 1.0, "star": 2.0}) == "star > mesh"

    def entry(means, half=1.0):
        return {
            "mean": means,
            "ci95": {t: [m - half, m + half] for t, m in means.items()},
            "H": 1.0,
            "p": 0.5,
            "r_s": 0.0,
        }

    stats = {
        "metrics": {
            "E_ceg": entry({"chain": 2000.0, "mesh": 1300.0, "star": 1000.0}),
            "R_cdr": entry({"chain": 0.2, "mesh": 0.0, "star": 0.01}, half=0.05),
            "F_ps": entry({"chain": 50.0, "mesh": 40.0, "star": 30.0}),
        },
        "r_s_of_paper_means": {"E_ceg": -0.87, "R_cdr": 0.5, "F_ps": 1.0},
    }
    f = {x["metric"]: x for x in ordering_findings(stats)}
    assert f["E_ceg"]["reproduced"] and f["E_ceg"]["paper_order"] == "chain > mesh > star"
    assert all(sep for _, _, sep in f["E_ceg"]["pairs"])
    assert not f["R_cdr"]["reproduced"]  # star above mesh, the paper has mesh above star
    assert [n for n, same, _ in f["R_cdr"]["pairs"] if not same] == ["mesh vs star"]
    assert ("mesh vs star", False, False) in f["R_cdr"]["pairs"]  # CIs overlap
    assert not f["F_ps"]["reproduced"] and f["F_ps"]["paper_order"] == "star > mesh > chain"
    assert f["E_ceg"]["within_paper_sd"] == ["chain", "mesh", "star"]


def test_reproduce_trials_small(tmp_path):
    from mascot.studies.trials import reproduce

    res = reproduce(tmp_path / "out", tmp_path / "runs", n_trials=8, n_boot=20)
    out = tmp_path / "out"
    for name in (
        "README.md",
        "table2.md",
        "table2.csv",
        "stats.json",
        "metrics.csv",
        "fig2_cumulative_error.png",
        "fig6_stepwise_consensus.pdf",
        "unpaired/table2.md",
    ):
        assert (out / name).exists(), name
    assert not (out / "unpaired" / "fig2_cumulative_error.png").exists()
    readme = (out / "README.md").read_text()
    assert "{Value 50, Parity A, Level 3}" in readme and "**mascot's choice**" in readme
    assert "Reproduced (every pair of topology means ordered as in the paper's Table 2):" in readme
    stats = res["paired"][1]
    assert stats["paired_seeds"] is True and res["unpaired"][1]["paired_seeds"] is False
    assert list(res["paired"][0].columns) == TABLE2_COLUMNS
    before = (out / "README.md").read_text()
    reproduce(tmp_path / "out", tmp_path / "runs", n_trials=8, n_boot=20)  # resumes; same output
    assert (out / "README.md").read_text() == before


class ServerDown:
    """The surrogate behind a 'server' that goes down from step ``at`` on: every request gets a transport
    error (what the openai backend returns after its own retries), never an answer."""

    name, model = "surrogate", "affine-noise"

    def __init__(self, at, **kw):
        self.inner = SurrogateBackend(**kw)
        self.at = at

    def generate(self, reqs):
        if reqs[0].meta["step"] >= self.at:
            return [Response("", 0, 0, error="HTTP 503: connection refused") for _ in reqs]
        return self.inner.generate(reqs)

    def describe(self):
        return {**self.inner.describe(), "base_url": "http://127.0.0.1:9/v1"}

    def identity(self):
        return self.inner.identity()


def test_transport_failures_are_never_committed_and_a_rerun_redoes_them(tmp_path):
    """Issue 14: a dead backend is not an answer. The step whose requests went unanswered (after the retries) is
    not committed, the run is not complete, the error names the endpoint, and once the backend is back the rerun
    redoes exactly that step and ends identical to a run that never failed."""
    from mascot.protocols.state_tracking import BackendFailure

    cfg = TrialConfig(n_trials=20, steps=3, log_requests="all")
    kw = dict(sigma=4.0, parse_fail=0.05, seed=2)
    ref = tmp_path / "ref"
    run_trials(cfg, ref, SurrogateBackend(**kw), progress=False)
    run = tmp_path / "run"
    with pytest.raises(BackendFailure, match=r"127\.0\.0\.1:9.*step 2 \(stage1\).*HTTP 503"):
        run_trials(cfg, run, ServerDown(2, **kw), progress=False)
    assert sorted(p.name for p in (run / "steps").glob("*.parquet")) == ["step_001.parquet"]
    meta = json.loads((run / "run.json").read_text())
    assert not meta.get("complete") and meta["steps_done"] == 1
    assert not (run / "trials.parquet").exists()
    res = run_trials(cfg, run, SurrogateBackend(**kw), progress=False)
    assert (res.steps_skipped, res.steps_run) == (1, 2)
    pd.testing.assert_frame_equal(pd.read_parquet(ref / "trials.parquet"), pd.read_parquet(run / "trials.parquet"))
    assert (pd.read_parquet(run / "trials.parquet").n_backend_errors == 0).all()


def test_transient_backend_errors_are_retried_and_counted_apart(tmp_path):
    """An error answered on a retry is not a parse failure: it is counted in n_backend_errors."""

    class OneError:
        name, model = "surrogate", "affine-noise"

        def __init__(self):
            self.inner, self.done = SurrogateBackend(seed=1), False

        def generate(self, reqs):
            out = self.inner.generate(reqs)
            if not self.done:
                self.done = True
                out[0] = Response("", 0, 0, error="timeout after 120 s")
            return out

        def describe(self):
            return self.inner.describe()

        def identity(self):
            return self.inner.identity()

    cfg = TrialConfig(n_trials=5, steps=1, topologies=("chain",), log_requests="all")
    run_trials(cfg, tmp_path / "r", OneError(), progress=False)
    df = pd.read_parquet(tmp_path / "r" / "trials.parquet")
    assert df.n_backend_errors.sum() == 1 and df.n_failed_attempts.sum() == 0


def test_cli_dead_openai_server_exits_nonzero(tmp_path, capsys, dead_port):
    out = tmp_path / "dead"
    url = f"http://127.0.0.1:{dead_port}/v1"
    rc = cli_main(
        [
            "trials",
            "--backend",
            "openai",
            "--base-url",
            url,
            "--model",
            "x",
            "--topology",
            "chain",
            "--n-trials",
            "1",
            "--steps",
            "1",
            "--retries",
            "0",
            "--max-retries",
            "0",
            "--timeout",
            "5",
            "--no-figures",
            "--quiet",
            "--no-probe",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and f"127.0.0.1:{dead_port}" in err and "not committed" in err
    assert not (out / "trials.parquet").exists()
    assert not json.loads((out / "run.json").read_text()).get("complete")
    # with the probe (the default) a server nobody runs is named at once
    rc = cli_main(
        [
            "trials",
            "--backend",
            "openai",
            "--base-url",
            url,
            "--model",
            "x",
            "--topology",
            "chain",
            "--n-trials",
            "1",
            "--steps",
            "1",
            "--no-figures",
            "--quiet",
            "--out",
            str(tmp_path / "dead2"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and f"{url}) cannot be reached" in err and "Connection refused" in err
    assert not (tmp_path / "dead2" / "trials.parquet").exists()


def test_zero_valued_backend_options_are_given_not_dropped():
    """--max-retries 0 reaches the openai backend (0 == False in Python: it was dropped as 'not given')."""
    import argparse

    from mascot.cli.backend_args import add_backend_args, build_backend

    p = argparse.ArgumentParser()
    add_backend_args(p)
    args = p.parse_args(
        [
            "--backend",
            "openai",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--max-retries",
            "0",
            "--no-probe",
        ]
    )
    factory, spec = build_backend(args, None)
    assert factory().max_retries == 0
    args = p.parse_args(["--backend", "hf", "--max-retries", "0"])
    with pytest.raises(ValueError, match="--max-retries applies to --backend openai only"):
        build_backend(args, None)


def test_a_damaged_step_file_is_recomputed_with_the_steps_after_it(tmp_path, capsys):
    """A byte flipped on disk in a committed step (page payload: the file still parses) fails its page
    checksum on resume; that step and the later ones are recomputed, and the result equals the original."""
    cfg = TrialConfig(n_trials=10, steps=4)
    kw = dict(sigma=4.0, parse_fail=0.05, seed=2)
    run = tmp_path / "run"
    run_trials(cfg, run, SurrogateBackend(**kw), progress=False)
    ref_df = pd.read_parquet(run / "trials.parquet")
    flip_page_byte(run / "steps" / "step_002.parquet", "value")
    res = run_trials(cfg, run, SurrogateBackend(**kw), progress=True)
    assert (res.steps_skipped, res.steps_run) == (1, 3)
    assert "removing step_002.parquet: damaged" in capsys.readouterr().err
    pd.testing.assert_frame_equal(ref_df, pd.read_parquet(run / "trials.parquet"))


class ErrorsFirst:
    """The surrogate, but the first ``k`` calls answer every third request with a transport error (what a
    briefly overloaded server looks like after the openai backend's own retries)."""

    name, model = "surrogate", "affine-noise"

    def __init__(self, k, **kw):
        self.inner, self.k, self.failed = SurrogateBackend(**kw), k, set()

    def generate(self, reqs):
        out = self.inner.generate(reqs)
        if self.k > 0:  # each chosen request fails once, then is answered
            self.k -= 1
            for j, r in enumerate(reqs):
                key = (r.sampling.seed, json.dumps(r.messages))
                if j % 3 == 0 and key not in self.failed:
                    self.failed.add(key)
                    out[j] = Response("", 0, 0, error="HTTP 503: busy")
        return out

    def describe(self):
        return self.inner.describe()

    def identity(self):
        return self.inner.identity()


def test_a_transient_backend_error_leaves_the_results_unchanged(tmp_path):
    """A request that got no answer is asked again with the same seed and does not use up a parse retry, so
    the committed values equal a run without the errors (10 of 72 values changed before)."""
    cfg = TrialConfig(n_trials=6, steps=3, log_requests="all")
    kw = dict(sigma=4.0, parse_fail=0.3, seed=5)  # parse failures too: the retry budget is in play
    run_trials(cfg, tmp_path / "ref", SurrogateBackend(**kw), progress=False)
    run_trials(cfg, tmp_path / "err", ErrorsFirst(4, **kw), progress=False)
    ref, err = (pd.read_parquet(tmp_path / d / "trials.parquet") for d in ("ref", "err"))
    assert err.n_backend_errors.sum() > 0 and ref.n_backend_errors.sum() == 0
    same = [c for c in ref.columns if c not in ("n_backend_errors", "n_requests")]
    pd.testing.assert_frame_equal(ref[same], err[same])
    assert (err.n_requests - err.n_backend_errors).equals(ref.n_requests)

    def answered(d):
        return sorted(
            (
                r["topology"],
                r["trial"],
                r["perturbed"],
                r["step"],
                r["stage"],
                r["role"],
                r["agent"],
                r["attempt"],
                r["seed"],
            )
            for r in map(json.loads, open(tmp_path / d / "requests.jsonl"))
            if not r["error"]
        )

    assert answered("ref") == answered("err")


def test_a_run_that_never_committed_takes_new_parameters(tmp_path):
    """A run stopped before its first step (a wrong model name, a bad option, a dead server) does not pin its
    directory to those parameters: the corrected command starts it over."""
    from mascot.backends import BackendFailure

    cfg = TrialConfig(n_trials=2, steps=1, topologies=("chain",))

    class Dead(ErrorsFirst):
        def __init__(self):
            super().__init__(10**9, seed=9)

        def generate(self, reqs):
            return [Response("", 0, 0, error="HTTP 400: no such model") for _ in reqs]

    with pytest.raises(BackendFailure):
        run_trials(cfg, tmp_path, Dead(), progress=False)
    res = run_trials(cfg, tmp_path, SurrogateBackend(seed=1), progress=False)
    assert res.steps_run == 1 and not list((tmp_path / "steps").glob("*.tmp"))
    with pytest.raises(ValueError, match="different parameters"):  # once a step is committed, it is pinned
        run_trials(
            TrialConfig(n_trials=2, steps=2, topologies=("chain",)), tmp_path, SurrogateBackend(seed=2), progress=False
        )


def test_cli_warns_when_most_steps_carry_their_input_forward(tmp_path, capsys):
    rc = cli_main(
        [
            "trials",
            "--topology",
            "chain",
            "--n-trials",
            "2",
            "--steps",
            "2",
            "--parse-fail",
            "1.0",
            "--no-figures",
            "--quiet",
            "--n-boot",
            "10",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert rc == 0
    assert "carried their input state forward" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, match",
    [
        (["--backend", "openai", "--model", "m", "--api-key-env", "MASCOT_UNSET_VARIABLE"], "is not set"),
        (["--backend", "openai", "--model", "m", "--timeout", "inf"], "--timeout must be > 0 seconds and finite"),
        (["--backend", "openai", "--model", "m", "--base-url", "ftp://x/v1"], "base_url must be an http"),
        (["--backend", "openai", "--model", "m", "--api-key-env", "sk-PASTED-KEY"], "NAME of an environment variable"),
        (["--temperature", "inf"], "temperature"),
    ],
)
def test_cli_refuses_bad_backend_options_before_writing_anything(tmp_path, capsys, monkeypatch, flags, match):
    monkeypatch.delenv("MASCOT_UNSET_VARIABLE", raising=False)
    out = tmp_path / "r"
    rc = cli_main(
        [
            "trials",
            *flags,
            "--topology",
            "chain",
            "--n-trials",
            "1",
            "--steps",
            "1",
            "--no-figures",
            "--quiet",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and match in err and "PASTED" not in err
    assert not out.exists()


def test_calibrate_trials_refuses_an_unfinished_run(tmp_path):
    from mascot.calibrate.trials_fit import observed_from_run as load_run

    run = tmp_path / "r"
    run_trials(TrialConfig(n_trials=2, steps=1), run, SurrogateBackend(seed=1), progress=False)
    load_run(run)  # finished: fine
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(dict(meta, complete=False)))
    with pytest.raises(ValueError, match="not a finished run"):
        load_run(run)


def test_another_steps_file_copied_over_a_step_is_recomputed(tmp_path, capsys):
    cfg = TrialConfig(n_trials=4, steps=3)
    run = tmp_path / "run"
    run_trials(cfg, run, SurrogateBackend(seed=2), progress=False)
    ref = pd.read_parquet(run / "trials.parquet")
    (run / "steps" / "step_002.parquet").write_bytes((run / "steps" / "step_001.parquet").read_bytes())
    res = run_trials(cfg, run, SurrogateBackend(seed=2), progress=True)
    assert (res.steps_skipped, res.steps_run) == (1, 2)
    assert "holds step(s) [1], not step 2" in capsys.readouterr().err
    pd.testing.assert_frame_equal(ref, pd.read_parquet(run / "trials.parquet"))


def test_calibrate_trials_refuses_a_damaged_trials_file(tmp_path):
    from mascot.calibrate.trials_fit import observed_from_run

    run = tmp_path / "r"
    run_trials(TrialConfig(n_trials=2, steps=1), run, SurrogateBackend(seed=1), progress=False)
    flip_page_byte(run / "trials.parquet", "value")
    with pytest.raises(ValueError, match="is damaged"):
        observed_from_run(run)
    run_trials(TrialConfig(n_trials=2, steps=1), run, SurrogateBackend(seed=1), progress=False)  # rebuilds it
    observed_from_run(run)


def test_vllm_without_vllm_is_refused_before_a_run_directory_is_written(tmp_path, capsys):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    out = tmp_path / "v"
    assert cli_main(["trials", "--backend", "vllm", "--n-trials", "1", "--steps", "1", "--out", str(out)]) == 2
    assert "--backend vllm needs vLLM" in capsys.readouterr().err and not out.exists()


def test_the_progress_line_counts_every_outcome_of_the_call(tmp_path, capsys):
    """Found by an outside tester: with --retries 0 the line said "0 unparsed, 0 backend errors" before "100% of
    the steps carried" (it counted only the requests to be asked again)."""
    cfg = TrialConfig(n_trials=2, steps=1, topologies=("chain",), retries=0)
    run_trials(cfg, tmp_path / "r", SurrogateBackend(parse_fail=1.0, seed=1), progress=True)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "stage1:" in ln]
    n = int(lines[0].split(": ")[2].split()[0])
    assert n > 0 and lines[0].endswith(f"{n} unparsed, 0 backend errors")
