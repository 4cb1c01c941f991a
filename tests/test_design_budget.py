"""mascot design budget against independent references: the plain float64 Algorithm 1 loop
(mascot.theory.algorithm1) run trajectory by trajectory with the budget in question, and hand-computed
binomial intervals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mascot.design.budget import budget_risk, wilson
from mascot.graphs import paper_modes
from mascot.theory.consensus import algorithm1


def test_wilson_hand_values():
    # every run failed: the upper end is exactly 1 (an outside tester saw 0.9999999999999999 in the JSON)
    assert wilson(2000, 2000)[1] == 1.0 and wilson(0, 7)[0] == 0.0
    lo, hi = wilson(0, 100)
    z2 = 1.959963984540054**2
    assert lo == pytest.approx(0.0, abs=1e-15) and hi == pytest.approx(z2 / (100 + z2), rel=1e-12)  # k = 0
    lo, hi = wilson(50, 100)
    assert (lo, hi) == pytest.approx((0.403832, 0.596168), abs=1e-6)


@pytest.mark.parametrize("b0", [700.0, 800.0, 1000.0])
def test_one_simulation_gives_every_budget(b0):
    """P(BudgetFail | b0) from the unlimited-budget token needs equals the fraction of BudgetFail (or
    max_rounds) outcomes of Algorithm 1 run with budget b0 itself."""
    W1, W2 = paper_modes()
    rng = np.random.default_rng(3)
    X0 = np.clip(rng.normal(0.5, 0.15, size=(300, 5, 6)), 0, 1)
    r = budget_risk(W1, W2, c1=600, c2=100, eta=0.1, eps=0.03, b0=b0, X0=X0, max_rounds=64)
    ref_need = np.array([algorithm1(x, W1, W2, 600, 100, 0.1, 0.03, 1e9).tokens for x in X0])
    np.testing.assert_array_equal(r.tokens, ref_need)
    fails = [algorithm1(x, W1, W2, 600, 100, 0.1, 0.03, b0).status != 0 for x in X0]
    assert r.p_fail == pytest.approx(np.mean(fails), abs=0)
    k = int(np.ceil(0.95 * 300)) - 1
    assert r.budget_for_alpha == np.sort(ref_need)[k]
    assert np.mean(ref_need > r.budget_for_alpha) <= 0.05 < np.mean(ref_need >= r.budget_for_alpha)


@pytest.mark.parametrize("n, q", [(100, 0.999), (100, 0.95), (1000, 0.99), (37, 0.3), (5000, 0.999), (150, 0.02)])
def test_quantile_interval_is_the_binomial_order_statistics(n, q):
    """The budget's interval against ranks computed by hand from the binomial law (K ~ Bin(n, q) runs below
    the quantile): t_(r), r the largest rank with P(K <= r - 1) <= 2.5%, and t_(s), s the smallest with
    P(K <= s - 1) >= 97.5%; beyond the sample the bound is inf (0 below). Found by an outside tester: a normal
    approximation clipped to the sample called the maximum of 100 runs a 95% interval for the 0.999 quantile."""
    from scipy.stats import binom

    from mascot.design.budget import _quantile_ci

    t = np.sort(np.random.default_rng(n).exponential(size=n))
    cdf = binom.cdf(np.arange(n + 1), n, q)
    r = int(np.flatnonzero(cdf <= 0.025).max()) + 1 if cdf[0] <= 0.025 else 0
    s = int(np.flatnonzero(cdf >= 0.975).min()) + 1
    want = (t[r - 1] if r >= 1 else 0.0, t[s - 1] if s <= n else np.inf)
    assert _quantile_ci(t, q) == want
    if (n, q) == (100, 0.999):
        assert want[1] == np.inf and want[0] == t[98]


def test_too_few_runs_for_the_risk_say_so(capsys):
    from mascot.cli import main

    assert main(["design", "budget", "--runs", "100", "--alpha", "0.001", "--noise", "0.01"]) == 0
    out = capsys.readouterr().out
    assert ".. inf)" in out and "cannot bound the 0.999 quantile from above" in out and "3,688 runs" in out
    assert main(["design", "budget", "--runs", "100", "--alpha", "0.001", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["budget_ci95"][1] is None  # strict JSON: no upper bound, and why
    assert "cannot bound the 0.999 quantile from above" in got["budget_ci95_unbounded"]
    assert main(["design", "budget", "--runs", "200", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["budget_ci95_unbounded"] is None
    assert main(["design", "budget", "--max-rounds", "0"]) == 2
    # a later tester: with enough runs, an infinite limit comes from runs that never reach consensus; raising
    # --runs cannot help, and the message said it would
    capsys.readouterr()
    assert main(["design", "budget", "--runs", "200", "--max-rounds", "4"]) == 0
    out = capsys.readouterr().out
    assert "upper 95% limit is a run that never reached D <= eps within 4 rounds" in out and "raise --runs" not in out
    assert main(["design", "budget", "--runs", "200", "--alpha", "1e-9"]) == 0
    assert "the 0.999999999 quantile" in capsys.readouterr().out


def test_noise_needs_more_budget_and_cli(capsys):
    from mascot.cli import main

    assert main(["design", "budget", "--runs", "2000", "--b0", "800", "--json"]) == 0
    calm = json.loads(capsys.readouterr().out)
    assert main(["design", "budget", "--runs", "2000", "--b0", "800", "--noise", "0.01", "--json"]) == 0
    noisy = json.loads(capsys.readouterr().out)
    assert noisy["p_fail"] > calm["p_fail"] and noisy["budget_for_alpha"] >= calm["budget_for_alpha"]
    lo, hi = calm["p_fail_ci95"]
    assert lo <= calm["p_fail"] <= hi
    assert calm["theorem1_b_star_max_d0"] >= calm["theorem1_b_star_median_d0"]
    assert main(["design", "budget", "--runs", "50"]) == 2  # too few runs: a clear error
    assert main(["design", "budget", "--w1", "x.npy"]) == 2  # one mode given without the other


@pytest.mark.parametrize(
    "case",
    [
        (0.3009, 0.03, 0.25, 0.7236, 600, 100),
        (0.5, 0.02, 0.4, 0.9, 300, 50),
        (0.9, 0.05, 0.1, 0.6, 1000, 10),
        (0.2, 0.01, 0.6, 0.8, 100, 90),
    ],
)
def test_certificate_best_eta_is_exact(case):
    """Breakpoint enumeration finds the same minimum of B*(D0; eta) as a brute-force scan of 20,001 etas."""
    from mascot.design.policy import certificate_best_eta
    from mascot.theory.consensus import theorem1

    d0, eps, l1, l2, c1, c2 = case
    ch = certificate_best_eta(d0, eps, l1, l2, c1, c2)
    grid = np.linspace(eps, d0, 20_001)
    brute = min(theorem1(d0, e, eps, l1, l2, c1, c2).B_star for e in grid)
    assert ch.b_star == brute
    assert theorem1(d0, ch.eta, eps, l1, l2, c1, c2).B_star == ch.b_star


def test_frontier_matches_the_reference_loop():
    from mascot.design.policy import threshold_frontier

    W1, W2 = paper_modes()
    rng = np.random.default_rng(5)
    X0 = np.clip(rng.normal(0.5, 0.15, size=(120, 5, 6)), 0, 1)
    fr = threshold_frontier(W1, W2, c1=600, c2=100, eps=0.03, etas=[0.1, 0.3], X0=X0, b0=1000, max_rounds=64)
    for _, row in fr.iterrows():
        ref = [algorithm1(x, W1, W2, 600, 100, row.eta, 0.03, 1e9) for x in X0]
        assert row.mean_tokens == pytest.approx(np.mean([r.tokens for r in ref]), abs=1e-9)
        assert row.mean_rounds == pytest.approx(np.mean([r.rounds for r in ref]), abs=1e-12)
        assert row.p_fail == np.mean([r.tokens > 1000 for r in ref])
    with pytest.raises(ValueError, match="> eps"):
        threshold_frontier(W1, W2, c1=600, c2=100, eps=0.03, etas=[0.02], X0=X0)


def test_design_cli_refuses_bad_input(capsys):
    from mascot.cli import main

    for argv in (
        ["design", "policy", "--runs", "5"],
        ["design", "policy", "--alpha", "2"],
        ["design", "policy", "--d0", "inf"],
        ["design", "policy", "--max-mean-rounds", "0"],
        ["design", "policy", "--etas", "0.01,0.2"],
        ["design", "budget", "--runs", "1000000000000"],
        ["design", "weights", "--topology", "ring:3000"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("mascot: error: ") and err.count("\n") == 1, (argv, err)


def test_design_json_is_strict_json(capsys):
    """An unlimited --max-mean-rounds (inf) was printed and written as bare Infinity, which strict JSON parsers
    refuse; non-finite numbers are null."""
    import json

    from mascot.cli import main

    def refuse(const):
        raise AssertionError(f"{const} is not JSON")

    assert main(["design", "policy", "--runs", "200", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert obj["constraints"]["max_mean_rounds"] is None and obj["frontier"][0]["mean_tokens"] > 0


def test_design_cli_names_what_is_wrong(tmp_path, capsys):
    """Found by an outside tester: thresholds below eps silently dropped or defaulted, a missing costs file
    called an adjacency file, the Python API's strategy= advice, --seed -1 without the flag's name, a
    non-contracting mode refused only after the whole simulation (with a numpy warning)."""
    from mascot.cli import main
    from mascot.graphs import paper_modes

    np.savetxt(tmp_path / "W1.csv", paper_modes()[0], delimiter=",")
    np.savetxt(tmp_path / "I.csv", np.eye(5), delimiter=",")
    sched = [
        "design",
        "schedule",
        "--lambda1",
        "0.5",
        "--lambda2",
        "0.85",
        "--c1",
        "6000",
        "--c2",
        "3500",
        "--eps",
        "0.05",
        "--d0",
        "0.75",
    ]
    for argv, says in (
        (sched + ["--paper-eta", "0.01"], "--paper-eta must be a finite threshold > --eps"),
        (sched + ["--paper-eta", "nan"], "--paper-eta must be a finite threshold > --eps"),
        (["design", "policy", "--etas", ""], "--etas must be comma-separated numbers"),
        (
            [
                "design",
                "weights",
                "--topology",
                "complete:5:0.4",
                "--costs",
                str(tmp_path / "no.csv"),
                "--cost-weight",
                "0.05",
            ],
            "--costs: file not found",
        ),
        (["design", "budget", "--eta", "0.01"], "--eta must be > --eps"),
        (
            ["design", "policy", "--w1", str(tmp_path / "W1.csv"), "--w2", str(tmp_path / "I.csv")],
            "both modes must contract",
        ),
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1 and "strategy=" not in err, (argv, err)
    with pytest.raises(SystemExit):
        main(["design", "budget", "--seed", "-1"])
    assert "argument --seed" in capsys.readouterr().err


def test_design_policy_exits_1_when_no_eta_meets_the_constraints(capsys):
    """As design schedule does: a script can tell an infeasible design from a found one."""
    from mascot.cli import main

    assert main(["design", "policy", "--runs", "200", "--max-mean-rounds", "3", "--b0", "1000"]) == 1
    assert "no eta meets the constraints" in capsys.readouterr().out
    assert main(["design", "policy", "--runs", "200", "--max-mean-rounds", "3", "--b0", "1000", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["best_eta"] is None
    # found by an outside tester: one column mixed "2.613e+04" and "8256"; each column now has one format
    assert main(["design", "policy", "--runs", "200", "--c1", "6000", "--c2", "1000", "--b0", "10000"]) == 0
    table = capsys.readouterr().out.splitlines()[1:16]
    assert table[0].split() == ["eta", "mean_tokens", "p95_tokens", "mean_rounds", "p_fail"]
    rows = [r.split() for r in table[1:]]
    assert all("e+" not in v for r in rows for v in r[1:])
    assert all(len(r[1].rsplit(".", 1)[1]) == 1 and "." not in r[2] and len(r[3].split(".")[1]) == 3 for r in rows)


def test_design_policy_never_recommends_an_eta_whose_runs_never_reach_consensus(capsys):
    """Found by an outside tester: without --b0 an eta at which no run reached consensus (inf tokens, 200
    rounds) was "the cheapest meeting the constraints", exit 0; its p95 printed NaN."""
    from mascot.cli import main

    assert main(["design", "policy", "--runs", "100", "--noise", "0.5", "--etas", "0.1,0.2"]) == 1
    out = capsys.readouterr().out
    assert (
        "no eta meets the constraints (runs that never reach consensus within 200 rounds: 0.1: 100%, 0.2: 100%)" in out
    )
    assert "NaN" not in out and "nan" not in out
    assert main(["design", "policy", "--runs", "100", "--noise", "0.5", "--etas", "0.1,0.2", "--json"]) == 1
    obj = json.loads(capsys.readouterr().out)
    assert obj["best_eta"] is None and all(r["no_consensus"] == 1.0 for r in obj["frontier"])
