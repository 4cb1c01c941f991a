"""Honest numbers (issue 14, item 4): values that rest on carried-forward states or on priors are flagged in
Table 2, Table VIII and the estimates; statistics on degenerate data say why they are not defined; the echo and
random baselines run through the trial harness beside Table 2.

References: the exact rule of :mod:`mascot.theory.state_tracking` (Decimal arithmetic) for the echo baseline's
E_ceg and for a scripted perfect agent, ``scipy.stats.kruskal`` / ``spearmanr``, and counts of hand-scripted
parse failures."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from mascot.analysis import stats as st
from mascot.analysis import trials_baselines as tb
from mascot.analysis.trials_report import table2_notes, trial_metrics, write_report
from mascot.backends.base import Request, Response, Sampling
from mascot.protocols.state_tracking import prompts
from mascot.protocols.state_tracking.baselines import EchoBackend, RandomBackend, run_baselines, state_reply
from mascot.protocols.state_tracking.harness import TrialConfig, run_trials
from mascot.protocols.state_tracking.parsing import parse_state
from mascot.theory.state_tracking import apply_rules, perturb, trajectory


class Scripted:
    """A perfect agent (the exact rule on the input state of its prompt; judges and revisers too) that replies
    with prose instead of JSON wherever ``fail(meta)`` says so."""

    name, model = "scripted", "perfect-rule"

    def __init__(self, fail=lambda m: False):
        self.fail = fail

    def generate(self, reqs):
        out = []
        for r in reqs:
            if self.fail(r.meta):
                out.append(Response("I am not sure what the next state is.", 10, 8, finish_reason="stop"))
            else:
                task = prompts.read_prompt(r.messages)
                out.append(Response(state_reply(apply_rules(task.state)), 10, 8, finish_reason="stop"))
        return out

    def identity(self):
        return {"backend": self.name, "model": self.model}

    def describe(self):
        return {"name": self.name}


def _hand_echo_e_ceg(initial, steps):
    """sum_{t=1..T} |x*_t - x_0| from the exact reference trajectory."""
    ref = trajectory(initial, steps)
    return sum(abs(s["Value"] - initial["Value"]) for s in ref[1:])


# ----------------------------------------------------------------------------- baselines
def test_echo_baseline_matches_hand_computation(tmp_path):
    init = {"Value": 41.5, "Parity": "B", "Level": 6}
    cfg = TrialConfig(n_trials=2, steps=5, initial_state=(41.5, "B", 6), epsilon=7.25, log_requests="none")
    run_trials(cfg, tmp_path, EchoBackend(), progress=False)
    df = pd.read_parquet(tmp_path / "trials.parquet")
    assert not df.carried.any() and df.n_failed_attempts.sum() == 0
    # every state of every trial is the arm's initial state
    pert = perturb(init, 7.25)
    for arm, s0 in ((False, init), (True, pert)):
        d = df[df.perturbed == arm]
        assert (d.value == s0["Value"]).all() and (d.parity == s0["Parity"]).all() and (d.level == s0["Level"]).all()
    m = trial_metrics(df)
    hand = _hand_echo_e_ceg(init, 5)
    assert hand > 0
    np.testing.assert_allclose(m.E_ceg, hand, rtol=0, atol=1e-9)
    np.testing.assert_allclose(m.F_ps, 7.25, rtol=0, atol=1e-12)
    # star leaves and mesh revisions all agree: D_t = 0 everywhere
    assert (df[(df.step > 0) & (df.topology != "chain")].d_t == 0).all()


def test_random_baseline_deterministic_batch_independent_and_valid():
    be = RandomBackend(value_low=10.0, value_high=20.0, seed=5)
    msgs = prompts.agent_messages({"Value": 50.0, "Parity": "A", "Level": 3})
    reqs = [Request(msgs, Sampling(seed=i), meta={"seed64": (i * 0x9E3779B97F4A7C15) % 2**64}) for i in range(400)]
    full = [r.text for r in be.generate(reqs)]
    # the same requests in another order and in small batches: the same replies
    rev = [r.text for r in be.generate(reqs[::-1])][::-1]
    parts = [t.text for k in range(0, 400, 7) for t in be.generate(reqs[k : k + 7])]
    assert full == rev == parts
    states = [parse_state(t).state for t in full]
    assert all(s is not None for s in states)
    v = np.array([s["Value"] for s in states])
    assert v.min() >= 10.0 and v.max() <= 20.0 and np.all(np.round(v, 2) == v)
    # roughly uniform: every tenth of the range and every level is hit, both parities about half
    assert len(np.unique(np.minimum(((v - 10.0) / 1.0).astype(int), 9))) == 10
    assert {s["Level"] for s in states} == set(range(1, 10))
    assert 0.4 < np.mean([s["Parity"] == "A" for s in states]) < 0.6
    # another seed, other replies
    assert [r.text for r in RandomBackend(10.0, 20.0, seed=6).generate(reqs)] != full
    # a request that is not a state-tracking prompt is an error, not an answer
    bad = be.generate([Request([{"role": "user", "content": "hello"}])])[0]
    assert bad.error and bad.text == ""
    with pytest.raises(ValueError, match="value_low"):
        RandomBackend(value_low=3.0, value_high=1.0)


def test_report_baselines_beside_table2(tmp_path):
    # a perfect agent: E_ceg = 0 everywhere, which beats the echo (hand-computed) and the random agent
    cfg = TrialConfig(topologies=("chain", "star"), n_trials=3, steps=4, log_requests="none")
    run_trials(cfg, tmp_path, Scripted(), progress=False)
    tab, stats = write_report(tmp_path, figures=False, n_boot=50)
    assert "baselines" not in stats  # the report reads baselines, never runs them
    run_baselines(tmp_path)
    tab, stats = write_report(tmp_path, figures=False, n_boot=50)
    hand = _hand_echo_e_ceg({"Value": 50.0, "Parity": "A", "Level": 3}, 4)
    echo = stats["baselines"]["echo"]
    for t in ("chain", "star"):
        assert echo["metrics"]["E_ceg"]["mean"][t] == pytest.approx(hand, abs=1e-9)
        assert echo["E_ceg_vs_run"][t] == {
            "run": 0.0,
            "baseline": pytest.approx(hand, abs=1e-9),
            "beats": True,
            "trials_below": 3,
            "trials": 3,
        }
    # the random agent's Value range is the reference range of both arms
    ref = [s["Value"] for s in trajectory(None, 4) + trajectory(perturb(None, 15.0), 4)]
    opts = stats["baselines"]["random"]["backend"]["options"]
    assert (opts["value_low"], opts["value_high"]) == (min(ref), max(ref))
    assert (tmp_path / "baselines" / "echo" / "trials.parquet").exists()
    bcsv = pd.read_csv(tmp_path / "baselines.csv")
    assert set(bcsv.baseline) == {"echo", "random"} and len(bcsv) == 6
    md = (tmp_path / "table2.md").read_text()
    assert "| | echo baseline | " in md and "| | random baseline | " in md
    assert (
        f"Mean E_ceg below the echo baseline's: chain **yes** (ours 0.00, echo {hand:.2f}; 3 of 3 trials below)" in md
    )
    # echo's E_ceg is equal in every trial of both topologies: no H, p
    assert (
        f"| | echo baseline | {hand:.2f} ± 0.00 | n/a ± n/a | {hand:.2f} ± 0.00 | not defined: all values equal | — |"
        in md
    )
    assert "Carried-forward states: none" in md
    # a rerun resumes the finished baselines instead of running their steps again
    steps = sorted((tmp_path / "baselines" / "echo" / "steps").glob("step_*.parquet"))
    assert len(steps) == 4
    mtimes = [p.stat().st_mtime_ns for p in steps]
    write_report(tmp_path, figures=False, n_boot=50)
    assert [p.stat().st_mtime_ns for p in steps] == mtimes


def test_compare_hand_computed():
    run = pd.DataFrame({"topology": ["chain"] * 3 + ["star"] * 2, "E_ceg": [1.0, 5.0, 9.0, 2.0, math.nan]})
    base = pd.DataFrame({"topology": ["chain", "chain", "star"], "E_ceg": [4.0, 6.0, 1.0]})
    c = tb.compare(run, {"echo": base})["echo"]
    assert c["chain"] == {"run": 5.0, "baseline": 5.0, "beats": False, "trials_below": 1, "trials": 3}
    assert c["star"] == {"run": 2.0, "baseline": 1.0, "beats": False, "trials_below": 0, "trials": 1}


# ----------------------------------------------------------------------------- carried states
def _fail_chain_trial1_step2(m):
    return m["topology"] == "chain" and m["trial"] == 1 and m["step"] == 2 and not m["perturbed"]


def test_carried_states_are_flagged_in_table2(tmp_path):
    cfg = TrialConfig(topologies=("chain", "star"), n_trials=3, steps=4, retries=1, log_requests="none")
    run_trials(cfg, tmp_path, Scripted(_fail_chain_trial1_step2), progress=False)
    tab, stats = write_report(tmp_path, figures=False, n_boot=50, baselines=False)
    df = pd.read_parquet(tmp_path / "trials.parquet")
    assert df.carried.sum() == 1  # the one scripted node
    c = stats["carried"]
    assert c["chain"] == {
        "steps": 3 * 2 * 4,
        "carried_steps": 1,
        "carried_fraction": 1 / 24,
        "trials": 3,
        "affected": {"E_ceg": 1, "R_cdr": 1, "F_ps": 1},
    }
    assert c["star"]["carried_steps"] == 0 and c["star"]["affected"] == {"E_ceg": 0, "R_cdr": 0, "F_ps": 0}
    # trial 1 keeps x*_1 at step 2 and then follows the rule from there: its E_ceg is the hand-computed sum
    ref = trajectory(None, 4)
    wrong = [ref[1], ref[1], apply_rules(ref[1]), apply_rules(apply_rules(ref[1]))]
    hand = sum(abs(a["Value"] - b["Value"]) for a, b in zip(ref[1:], wrong))
    m = pd.read_csv(tmp_path / "metrics.csv").set_index(["topology", "trial"])
    assert m.loc[("chain", 1), "E_ceg"] == pytest.approx(hand, abs=1e-9) and hand > 0
    assert m.loc[("chain", 1), "carried_unperturbed"] == 1 and m.loc[("chain", 1), "carried_perturbed"] == 0
    assert stats["clean_means"]["E_ceg"]["chain"] == [0.0, 2]  # the other two trials are perfect
    md = (tmp_path / "table2.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| Error amplification (E_ceg) | ours |"))
    chain_cell, mesh_cell, star_cell = row.split(" | ")[2:5]
    assert chain_cell == f"{hand / 3:.2f} † ± {np.std([0, 0, hand], ddof=1):.2f}"  # the flag
    assert "†" not in star_cell
    assert "| | ours, trials without carried states | 0.00 (n = 2) | n/a | 0.00 (n = 3) | | | |" in md
    assert "chain: 1 of 24 steps carried (4.2%), E_ceg and R_cdr of 1 of 3 trials and F_ps of 1 of 3 rest on them" in md
    assert "| trials resting on a carried state (E_ceg, R_cdr) | 1 | n/a | 0 |" in md


def test_all_garbage_run_says_not_defined(tmp_path):
    # every reply is prose: every state is carried forward, every metric equal in every trial and topology
    cfg = TrialConfig(n_trials=2, steps=2, retries=0, log_requests="none")
    run_trials(cfg, tmp_path, Scripted(lambda m: True), progress=False)
    tab, stats = write_report(tmp_path, figures=False, n_boot=20, baselines=False)
    assert tab.H.isna().all() and tab.p.isna().all()
    for m in ("E_ceg", "F_ps"):
        assert stats["metrics"][m]["H_note"] == "not defined: all values equal"
        assert stats["metrics"][m]["r_s_note"] == "not defined: all values equal"
    md = (tmp_path / "table2.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| Error amplification (E_ceg) | ours |"))
    assert row.endswith("| not defined: all values equal | — | not defined: all values equal |")
    assert "† ±" in row and "steps carried (100.0%)" in md
    assert stats["carried"]["mesh"]["affected"]["E_ceg"] == 2


# ----------------------------------------------------------------------------- degenerate statistics
def test_kruskal_and_spearman_notes():
    from scipy.stats import kruskal, spearmanr

    assert st.kruskal_note([[math.nan], []]) == "not defined: no finite values"
    assert st.kruskal_note([[1.0, 2.0], [math.nan]]) == "not defined: fewer than 2 groups with data"
    assert st.kruskal_note([[3.0, 3.0], [3.0]]) == "not defined: all values equal"
    g = [[1.0, 3.0, 3.0], [3.0, 3.0]]  # ties, not all equal: defined
    assert st.kruskal_note(g) is None and st.kruskal(g) == pytest.approx(tuple(kruskal(*g)))
    assert st.spearman_note([1, 2], [3, 4], "topologies") == "not defined: fewer than 3 topologies"
    assert st.spearman_note([1, 2, 3], [5, 5, 5]) == "not defined: all values equal"
    assert st.spearman_note([1, 1, 1], [5, 6, 7]) == "not defined: all predictions equal"
    assert st.spearman_note([1, 2, 3], [5, 7, 6]) is None
    assert st.spearman([1, 2, 3], [5, 7, 6]) == pytest.approx(spearmanr([1, 2, 3], [5, 7, 6]).statistic)


def test_table2_notes_from_frames():
    preds = {
        "chain": {"rho": 1.0, "delta": 0.0, "kappa": 10.0},
        "mesh": {"rho": 10.0, "delta": 9.2, "kappa": 13.0},
        "star": {"rho": 10.0, "delta": 9.0, "kappa": 28.6},
    }
    m = pd.DataFrame(
        {
            "topology": ["chain", "chain", "star", "star"],
            "E_ceg": [4.0, 4.0, 4.0, 4.0],
            "R_cdr": [0.1, 0.2, 0.3, math.nan],
            "F_ps": [math.nan] * 4,
        }
    )
    n = table2_notes(m, preds)
    assert n["E_ceg"]["H_note"] == "not defined: all values equal"
    assert n["R_cdr"]["H_note"] is None
    assert n["R_cdr"]["r_s_note"] == "not defined: fewer than 3 topologies with data"
    assert n["F_ps"]["H_note"] == "not defined: no finite values"


# ----------------------------------------------------------------------------- deliberation: priors, unanswered rounds
class ProseRounds:
    """The deliberation surrogate, except that every agent replies with prose (unparsable) in ``rounds``."""

    def __init__(self, inner, rounds):
        self.inner, self.rounds = inner, set(rounds)
        self.name, self.model = inner.name, inner.model

    def generate(self, requests):
        out = self.inner.generate(requests)
        return [
            Response("I would rather not give numbers.", o.prompt_tokens, 7, finish_reason="stop")
            if r.meta.get("round") in self.rounds
            else o
            for r, o in zip(requests, out)
        ]

    def describe(self):
        return self.inner.describe()

    def options(self):
        return self.inner.options()


def _deliberate(tmp_path, rounds, **kw):
    from mascot.analysis.deliberation_report import write_report
    from mascot.protocols.deliberation import DeliberationConfig, SurrogateDeliberationBackend, run_deliberation

    cfg = DeliberationConfig(runs=1, b0=32_000, max_rounds=6, strategies=("complete",), retries=0)
    sur = SurrogateDeliberationBackend(seed=1, malformed=0.0)
    spec = {"name": "surrogate", "model": sur.model, "options": sur.options()}
    run_deliberation(cfg, tmp_path, ProseRounds(sur, rounds), backend_spec=spec, progress=False)
    rep = write_report([tmp_path], tmp_path, **kw)
    return cfg, rep


@pytest.mark.x64
def test_deliberation_d0_from_priors_and_unanswered_rounds_flagged(tmp_path):
    from mascot.protocols.deliberation import PAPER_ROLES, read_rounds
    from mascot.theory import disagreement

    cfg, rep = _deliberate(tmp_path, rounds={0, 2})
    rows = read_rounds(tmp_path)
    # round 0: every agent fell back to its role prior; D(0) is their disagreement
    priors = np.array([r.prior for r in PAPER_ROLES])
    assert rows[0]["D"] == pytest.approx(float(disagreement(priors)), abs=1e-12)
    t = rep["table"]
    assert bool(t.d0_from_priors.iloc[0]) and int(t.unanswered_rounds.iloc[0]) == 1
    md = (tmp_path / "table_viii.md").read_text()
    assert f"| D(0) | {rows[0]['D']:.4f} † |" in md  # the flag
    assert "| D(0) from priors (runs) | 1 |" in md and "| Rounds with no parsed reply | 1 |" in md
    assert "† Not measured: in 1 of 1 runs no agent's round-0 reply parsed" in md
    # rates: round 1 / round 0 (priors), round 2 / round 1 and round 3 / round 2 (round 2 unanswered) excluded
    n_rates = len(rows) - 1
    est = (tmp_path / "estimates.md").read_text()
    assert (
        f"3 of {n_rates} rates excluded (1 runs with D(0) from the priors, 1 later rounds with no parsed reply)" in est
    )
    e = rep["estimates"]
    assert int(e[(e.strategy == "complete")].n.sum()) == n_rates - 3
    kept = [rows[k]["D"] / rows[k - 1]["D"] for k in range(4, len(rows))]
    assert e[(e.strategy == "complete")].rate_mean.iloc[0] == pytest.approx(np.mean(kept), rel=1e-12)
    certs = pd.read_csv(tmp_path / "certificates.csv")
    assert bool(certs.d0_from_priors.iloc[0])
    # include_unanswered keeps them (and says so)
    _, rep2 = _deliberate(tmp_path / "incl", rounds={0, 2}, include_unanswered=True)
    assert int(rep2["estimates"].query("strategy == 'complete'").n.sum()) == n_rates
    assert (
        "3 of" in (tmp_path / "incl" / "estimates.md").read_text()
        and "**included**" in (tmp_path / "incl" / "estimates.md").read_text()
    )


@pytest.mark.x64
def test_deliberation_without_any_parsed_reply_has_no_rate(tmp_path):
    _, rep = _deliberate(tmp_path, rounds=set(range(0, 10)))
    est = (tmp_path / "estimates.md").read_text()
    assert "No empirical contraction rate" in est and len(rep["estimates"]) == 0
    md = (tmp_path / "table_viii.md").read_text()
    assert "†" in md and "‡" in md


# ----------------------------------------------------------------------------- the exported run (results/real-llm)
def test_export_run_counts_echoes_and_correct_replies(tmp_path):
    from mascot.analysis.trials_export import export_run, reply_statistics
    from mascot.io import read_jsonl

    def fail(m):  # the first attempt of every chain agent at step 1 is prose; the retry parses
        return m["topology"] == "chain" and m["step"] == 1 and m["attempt"] == 0

    cfg = TrialConfig(topologies=("chain", "star"), n_trials=2, steps=2, log_requests="all")
    run_trials(cfg, tmp_path / "perfect", Scripted(fail), progress=False, command=["mascot", "trials", "--demo"])
    with pytest.raises(ValueError, match="run them first"):  # an export reads the baselines; it runs nothing
        export_run(tmp_path / "perfect", tmp_path / "out", n_boot=20, title="Perfect agent")
    run_baselines(tmp_path / "perfect")
    res = export_run(tmp_path / "perfect", tmp_path / "out", n_boot=20, title="Perfect agent")
    rs = res["replies"]
    # agent nodes: chain 2 trials x 2 arms x 2 steps, star leaves 4 times that; 4 retries (chain, step 1)
    assert rs["agent"]["attempts"] == 8 + 32 + 4 and rs["agent"]["first_parsed"] == 40 - 4
    assert rs["agent"]["nodes"] == rs["agent"]["nodes_parsed"] == 8 + 32
    assert rs["agent"]["correct"] == rs["agent"]["parsed"] == 40 and rs["agent"]["echo"] == 0
    assert rs["agent"]["reasons"] == {"no_json": 4} and rs["judge"]["correct"] == 8
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "mascot trials --demo" in readme
    assert "| chain | 0.00 |" in readme and "yes (2 of 2 trials below)" in readme
    assert (tmp_path / "out" / "requests.jsonl").exists() and (tmp_path / "out" / "trials.parquet").exists()
    # the echo agent: every parsed reply is its input state
    run_trials(cfg, tmp_path / "echo", EchoBackend(), progress=False)
    es = reply_statistics(read_jsonl(tmp_path / "echo" / "requests.jsonl"))
    assert es["agent"]["echo"] == es["agent"]["parsed"] == 40 and es["judge"]["echo"] == 8
    assert es["agent"]["correct"] == 0  # x*_1 != x_0 and x*_2 != x*_1 from {50, A, 3}


def test_export_run_names_python_m_mascot_as_mascot_and_keeps_its_session_table_square(tmp_path):
    """Found by an outside tester: `python -m mascot` was shown as .../mascot/__main__.py, and a session that
    stopped early had one cell too few in the sessions table."""
    from mascot.analysis.trials_export import export_run

    cfg = TrialConfig(topologies=("chain", "star"), n_trials=2, steps=2, log_requests="all")
    argv = ["/usr/lib/python3/site-packages/mascot/__main__.py", "trials", "--demo"]
    run_trials(cfg, tmp_path / "r", Scripted(lambda m: False), progress=False, command=argv)
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    meta["sessions"].insert(
        0, dict(meta["sessions"][0], finished=False, steps_done=1, steps_done_before=0, requests=12)
    )
    (tmp_path / "r" / "run.json").write_text(json.dumps(meta))
    run_baselines(tmp_path / "r")
    export_run(tmp_path / "r", tmp_path / "out", n_boot=20, title="t")
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "\nmascot trials --demo\n" in readme and "__main__" not in readme
    table = readme.split("Sessions (")[1].split("\n\n")[1].splitlines()
    assert len(table) == 4 and {row.count("|") for row in table} == {7}, table
