"""The `mascot` command: the consensus reproduction and the certificate calculator, end to end."""

import csv
import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mascot.cli import main
from mascot.graphs import paper_modes


@pytest.fixture(scope="module")
def repro(tmp_path_factory):
    out = tmp_path_factory.mktemp("consensus")
    assert main(["reproduce", "consensus", "--out", str(out)]) == 0
    return out


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_reproduce_writes_every_output(repro):
    for name in (
        "table_iv.csv",
        "table_v.csv",
        "table_vi.csv",
        "ring_search.csv",
        "theorem1.json",
        "errata.md",
        "README.md",
        "fig3a_disagreement.png",
        "fig3a_disagreement.pdf",
        "fig3b_budget.png",
        "fig3b_budget.pdf",
    ):
        assert (repro / name).stat().st_size > 0, name
    for png in repro.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(repro.glob("*.tmp"))  # atomic writes leave no temp files


# The paper's printed numbers, typed here from the paper (Tables V and VI) as the test's specification.
PAPER_V = [
    (0, "0.3009", 600, 2000, "D > eta: complete K5"),
    (1, "0.0752", 100, 1400, "D <= eta: ring C5"),
    (2, "0.0381", 100, 1300, "D > eps: ring continues"),
    (3, "0.0254", None, 1200, "D <= eps: consensus"),
]
PAPER_VI = {
    "adaptive": (3, 800, "0.0254", "consensus"),
    "complete-only": (2, 1200, "0.0188", "consensus"),
    "ring-only": (6, 600, "0.0274", "consensus"),
    "tight": (None, 600, "0.0752", "BudgetFail"),
}
TEXT_RING = "a1-a2-a3-a4-a5"


def _edges(order):
    """Undirected edge set of a cycle given as 0-based indices or as a name 'a1-a3-...'."""
    if isinstance(order, str):
        order = [int(a[1:]) - 1 for a in order.split("-")]
    return frozenset(frozenset((order[i], order[(i + 1) % len(order)])) for i in range(len(order)))


def _brute_force_orders(X):
    """Independent search in plain numpy: every ring order, Algorithm 1 written out, compared with the paper."""
    n = 5
    W1 = np.full((n, n), 0.15) + np.eye(n) * 0.25
    found, seen = set(), set()
    for perm in itertools.permutations(range(n)):
        e = _edges(perm)
        if e in seen:
            continue
        seen.add(e)
        W2 = np.eye(n) * 0.6
        for a, b in (tuple(x) for x in e):
            W2[a, b] = W2[b, a] = 0.2

        def run(mode, b0, W2=W2):
            Y, b, Ds, bs, costs = X.copy(), b0, [], [b0], []
            D = np.linalg.norm(Y - Y.mean(0)) / np.sqrt(n)
            Ds.append(D)
            while D > 0.03:
                m = mode if mode else (1 if D > 0.1 else 2)
                c = 600 if m == 1 else 100
                if b < c:
                    return Ds, bs, costs, "BudgetFail"
                Y, b = (W1 if m == 1 else W2) @ Y, b - c
                D = np.linalg.norm(Y - Y.mean(0)) / np.sqrt(n)
                Ds.append(D), bs.append(b), costs.append(c)
            return Ds, bs, costs, "consensus"

        ok = True
        Ds, bs, costs, st = run(None, 2000)
        ok &= len(Ds) == 4 and st == "consensus"
        for k, D, c, b, _dec in PAPER_V:
            ok &= len(Ds) > k and f"{Ds[k]:.4f}" == D and bs[k] == b and (k >= len(costs) or costs[k] == c)
        for name, (mode, b0) in {
            "adaptive": (None, 2000),
            "complete-only": (1, 2000),
            "ring-only": (2, 2000),
            "tight": (None, 650),
        }.items():
            Ds, bs, costs, st = run(mode, b0)
            rounds, tokens, D, status = PAPER_VI[name]
            ok &= (rounds is None or len(Ds) - 1 == rounds) and b0 - bs[-1] == tokens
            ok &= f"{Ds[-1]:.4f}" == D and st == status
        if ok:
            found.add(e)
    assert len(seen) == 12
    return found


def test_ring_search_finds_what_an_independent_brute_force_finds(repro):
    from mascot.studies.consensus import initial_states

    rows = _rows(repro / "ring_search.csv")
    assert len(rows) == 24 and len({r["order"] for r in rows}) == 12
    assert len({_edges(r["order"]) for r in rows}) == 12  # 12 distinct undirected cycles
    for x0name, X in initial_states().items():
        searched = {_edges(r["order"]) for r in rows if r["x0"] == x0name and r["all_rows"] == "True"}
        assert searched == _brute_force_orders(X), x0name
    rescaled = {_edges(r["order"]) for r in rows if r["x0"] == "rescaled" and r["all_rows"] == "True"}
    assert rescaled == {_edges("a1-a3-a4-a5-a2")}  # the order the independent check of issue 12 names
    assert not any(r["all_rows"] == "True" for r in rows if r["x0"] == "printed")
    text = [r for r in rows if r["order"] == TEXT_RING]
    assert all(r["text_ring"] == "True" for r in text) and all(r["all_rows"] == "False" for r in text)


def test_reconstructed_ring_reproduces_every_printed_number(repro):
    t5 = [
        r
        for r in _rows(repro / "table_v.csv")
        if r["ring_source"].startswith("reconstructed") and r["x0"] == "rescaled"
    ]
    assert {r["ring"] for r in t5} == {"a1-a2-a5-a4-a3"}
    assert len(t5) == len(PAPER_V)
    for r, (k, D, c, b, dec) in zip(t5, PAPER_V):
        assert int(r["k"]) == k and f"{float(r['D']):.4f}" == D and float(r["budget"]) == b and r["decision"] == dec
        assert (r["cost"] == "" if c is None else float(r["cost"]) == c) and r["match"] == "True"
    t6 = {
        r["strategy"]: r
        for r in _rows(repro / "table_vi.csv")
        if r["ring_source"].startswith("reconstructed") and r["x0"] == "rescaled"
    }
    for name, (rounds, tokens, D, status) in PAPER_VI.items():
        r = t6[name]
        assert rounds is None or int(r["rounds"]) == rounds, name
        assert float(r["tokens"]) == tokens and f"{float(r['d_final']):.4f}" == D and r["status"] == status, name
        assert r["match"] == "True"
    # unrescaled, that order still gives adaptive 3 rounds / 800 tokens and ring-only 6 / 600
    p6 = {
        r["strategy"]: r
        for r in _rows(repro / "table_vi.csv")
        if r["ring_source"].startswith("reconstructed") and r["x0"] == "printed"
    }
    assert (int(p6["adaptive"]["rounds"]), float(p6["adaptive"]["tokens"])) == (3, 800.0)
    assert (int(p6["ring-only"]["rounds"]), float(p6["ring-only"]["tokens"])) == (6, 600.0)


def test_text_ring_does_not_reproduce_tables_v_and_vi(repro):
    t5 = [r for r in _rows(repro / "table_v.csv") if r["ring"] == TEXT_RING and r["x0"] == "rescaled"]
    assert t5[0]["ring_source"].startswith("text")
    assert [f"{float(r['D']):.4f}" for r in t5] == ["0.3009", "0.0752", "0.0409", "0.0279"]
    assert [r["match"] for r in t5] == ["True", "True", "False", "False"]
    t6 = {r["strategy"]: r for r in _rows(repro / "table_vi.csv") if r["ring"] == TEXT_RING and r["x0"] == "rescaled"}
    assert (int(t6["ring-only"]["rounds"]), float(t6["ring-only"]["tokens"])) == (7, 700.0)
    assert t6["ring-only"]["match"] == "False" and t6["adaptive"]["match"] == "False"
    assert t6["complete-only"]["match"] == "True" and t6["tight"]["match"] == "True"  # order-independent rows


def test_table_vi_columns_and_values(repro):
    with open(repro / "table_vi.csv") as f:
        assert f.readline().strip() == (
            "ring,ring_source,x0,strategy,b0,rounds,tokens,d_final,status,in_omega_eps,"
            "paper_rounds,paper_tokens,paper_d_final,paper_in_omega_eps,match"
        )
    rows = {(r["ring"], r["x0"], r["strategy"]): r for r in _rows(repro / "table_vi.csv")}
    assert len(rows) == 16
    r = rows[(TEXT_RING, "rescaled", "adaptive")]
    assert (int(r["rounds"]), float(r["tokens"]), r["status"], r["in_omega_eps"]) == (3, 800.0, "consensus", "True")
    r = rows[(TEXT_RING, "rescaled", "complete-only")]
    assert (int(r["rounds"]), float(r["tokens"])) == (2, 1200.0)
    assert float(r["d_final"]) == pytest.approx(0.3009 * 0.25**2, abs=1e-9)
    r = rows[(TEXT_RING, "rescaled", "tight")]
    assert (int(r["rounds"]), float(r["tokens"]), r["status"], r["in_omega_eps"]) == (1, 600.0, "BudgetFail", "False")
    assert float(r["d_final"]) == pytest.approx(0.3009 * 0.25, abs=1e-9)
    r = rows[(TEXT_RING, "printed", "adaptive")]
    assert (int(r["rounds"]), float(r["tokens"])) == (4, 900.0)


def test_table_iv_and_v(repro):
    t4 = _rows(repro / "table_iv.csv")
    X = np.array([[float(r[f"f{i}"]) for i in range(1, 7)] for r in t4])
    assert X.shape == (5, 6) and X[0, 0] == 0.57 and X[4, 5] == 0.66
    t5 = [r for r in _rows(repro / "table_v.csv") if r["x0"] == "rescaled" and r["ring"] == TEXT_RING]
    assert [r["sigma"] for r in t5] == ["1", "2", "2", ""]
    assert [r["paper_sigma"] for r in t5] == ["2", "1", "1", ""]  # printed swapped (errata 3)
    assert [float(r["budget"]) for r in t5] == [2000, 1400, 1300, 1200]
    assert float(t5[1]["D"]) == pytest.approx(0.075225, abs=1e-9)


def test_theorem1_json(repro):
    th = json.loads((repro / "theorem1.json").read_text())
    for key in (
        "lambda1",
        "lambda2",
        "D0",
        "K1",
        "K2",
        "K_star",
        "B_star",
        "K_cmpl",
        "K_ring",
        "B_cmpl",
        "B_ring",
        "corollary_condition",
    ):
        assert key in th, key
    assert (th["K1"], th["K2"], th["K_star"], th["B_star"]) == (1, 4, 5, 1000.0)
    assert (th["K_cmpl"], th["K_ring"], th["B_cmpl"], th["B_ring"]) == (2, 8, 1200.0, 800.0)
    assert th["lambda1"] == pytest.approx(0.25) and th["lambda2"] == pytest.approx(0.7236068, abs=1e-7)
    assert th["D0"] == pytest.approx(0.3009) and th["printed_x0"]["D0"] == pytest.approx(0.3282560, abs=1e-6)
    assert th["corollary_condition"] is True


def test_d0_scale_candidates_are_computed():
    from mascot.studies.consensus import TABLE_IV, d0_candidates, d0_interval, ring_from_order

    c = d0_candidates(TABLE_IV)
    X = TABLE_IV - TABLE_IV.mean(0)
    assert c["‖PX‖_F / sqrt(N) (eq. 4)"] == pytest.approx(np.linalg.norm(X) / np.sqrt(5))
    assert f"{c['‖PX‖_F / sqrt(d)']:.4f}" == "0.2997"  # dividing by sqrt(d) instead of sqrt(N): not 0.3009
    assert not any(f"{v:.4f}" == "0.3009" for v in c.values())
    # rounding Table IV to two decimals moves D(0) by at most sqrt(30) * 0.005 / sqrt(5) = 0.0122 < the 0.027 gap
    rng = np.random.default_rng(0)
    for _ in range(200):
        E = rng.uniform(-0.005, 0.005, size=(5, 6))
        E -= E.mean(0)
        assert np.linalg.norm(E) / np.sqrt(5) <= np.sqrt(30) * 0.005 / np.sqrt(5)
    assert np.sqrt(30) * 0.005 / np.sqrt(5) < c["‖PX‖_F / sqrt(N) (eq. 4)"] - 0.3009
    # the six printed D values after D(0) pin the scale near 0.3009 on the reconstructed ring, and on no scale
    # on the text's ring
    lo, hi = d0_interval(TABLE_IV, ring_from_order((0, 2, 3, 4, 1)), include_d0=False)
    assert lo <= 0.3009 <= hi and hi < 0.3283 and lo > 0.2997
    assert d0_interval(TABLE_IV, ring_from_order((0, 1, 2, 3, 4)), include_d0=False) is None


def test_errata_explains_the_known_differences(repro):
    text = (repro / "errata.md").read_text()
    for needle in (
        "0.3283",
        "0.0122",
        "0.2997",
        "K1 = 1, K2 = 4",
        "sigma = 1, 2, 2",
        "a1-a2-a5-a4-a3",
        "a1-a3-a4-a5-a2",
        "f = 0.403",
        "largest eigenvalue",
        "K_ring = 1",
        "not forward invariant",
        "K2 = ceil(log(eps/D)/log lambda2)",
        # rows once typed, now computed from the runs and the weight matrices (issue 31)
        "complete-only: sigma = 1 in every round; ring-only: sigma = 2 in every round",
        "W1 (complete K5) 0.2500 (x4); W2 (ring C5) 0.7236 (x2), 0.2764 (x2)",
        '"read from the paper"',
        "c1 = 200 and c1/c2 = 2, below Corollary 1's",  # erratum 30: costs from edges alone
        "holds for scales in (0.416, 0.530) only",  # erratum 31: Claude's token scale decides its outcomes
    ):
        assert needle in text, needle
    assert "Every number below is computed" not in text
    # the old, wrong explanation of the Table V/VI mismatch is gone
    assert "unprinted digits differ" not in text and "whose unprinted digits" not in text
    readme = (repro / "README.md").read_text()
    assert "a1-a2-a5-a4-a3" in readme and "||" not in readme
    assert (
        "Chance of a coincidental match" in readme
    )  # the ring search says how much a match proves  # norms written so Markdown tables keep their columns


def test_committed_results_equal_a_fresh_run(repro):
    committed = Path(__file__).resolve().parents[1] / "results" / "consensus"
    assert sorted(p.name for p in committed.iterdir()) == sorted(p.name for p in repro.iterdir())
    for p in sorted(repro.iterdir()):
        if p.suffix in (".csv", ".md", ".json"):
            assert (committed / p.name).read_text() == p.read_text(), p.name


def test_certify_text_and_json(capsys):
    args = [
        "certify",
        "--d0",
        "0.3",
        "--b0",
        "2000",
        "--eta",
        "0.1",
        "--eps",
        "0.03",
        "--lambda1",
        "0.25",
        "--lambda2",
        "0.7236",
        "--c1",
        "600",
        "--c2",
        "100",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "K* = 5" in out and "B* = 1000" in out and "YES" in out
    assert main(args + ["--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["certified"] is True and js["margin"] == 1000.0 and js["corollary_condition"] is True
    assert (
        main(
            [
                "certify",
                "--d0",
                "0.3",
                "--b0",
                "999.5",
                "--eta",
                "0.1",
                "--eps",
                "0.03",
                "--lambda1",
                "0.25",
                "--lambda2",
                "0.7236",
                "--c1",
                "600",
                "--c2",
                "100",
                "--json",
            ]
        )
        == 0
    )
    js = json.loads(capsys.readouterr().out)
    assert js["certified"] is False and js["margin"] == -0.5


def test_certify_from_weight_files(tmp_path, capsys):
    W1, W2 = paper_modes()
    np.save(tmp_path / "w1.npy", W1)
    np.savetxt(tmp_path / "w2.csv", W2, delimiter=",")
    assert (
        main(
            [
                "certify",
                "--d0",
                "0.3009",
                "--b0",
                "1000",
                "--eta",
                "0.1",
                "--eps",
                "0.03",
                "--w1",
                str(tmp_path / "w1.npy"),
                "--w2",
                str(tmp_path / "w2.csv"),
                "--c1",
                "600",
                "--c2",
                "100",
                "--json",
            ]
        )
        == 0
    )
    js = json.loads(capsys.readouterr().out)
    assert js["lambda1"] == pytest.approx(0.25) and js["lambda2"] == pytest.approx(0.7236068, abs=1e-7)
    assert js["B_star"] == 1000.0 and js["certified"] is True  # exactly at the boundary


def test_certify_non_contracting_and_bad_input(tmp_path, capsys):
    base = ["certify", "--d0", "0.3", "--b0", "1e9", "--eta", "0.1", "--eps", "0.03", "--c1", "600", "--c2", "100"]
    assert main(base + ["--lambda1", "1.0", "--lambda2", "0.7", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["certified"] is False and js["B_star"] == "inf" and "does not contract" in js["reason"]
    assert main(base + ["--lambda1", "0.25"]) == 2
    assert "--lambda2" in capsys.readouterr().err
    # found by an outside tester: a rate above 1, which no doubly stochastic W has, was certified as "K_ring c2 <= B*"
    assert main(base + ["--lambda1", "1.2", "--lambda2", "0.7"]) == 2
    assert "--lambda1 must be in [0, 1] (a doubly stochastic W's contraction rate); got 1.2" in capsys.readouterr().err
    bad = np.array([[0.5, 0.5], [0.6, 0.4]])
    np.save(tmp_path / "bad.npy", bad)
    assert main(base + ["--w1", str(tmp_path / "bad.npy"), "--lambda2", "0.7"]) == 2
    assert "W1 (--w1)" in capsys.readouterr().err
    assert (
        main(
            [
                "certify",
                "--d0",
                "0.3",
                "--b0",
                "-5",
                "--eta",
                "0.1",
                "--eps",
                "0.03",
                "--c1",
                "600",
                "--c2",
                "100",
                "--lambda1",
                "0.2",
                "--lambda2",
                "0.7",
            ]
        )
        == 2
    )
    assert "--b0" in capsys.readouterr().err
    # found by an outside tester: modes on different numbers of agents were certified; an empty file printed a
    # numpy warning before the error
    np.savetxt(tmp_path / "I3.csv", np.eye(3), delimiter=",")
    np.savetxt(
        tmp_path / "C5.csv",
        0.6 * np.eye(5) + 0.2 * np.roll(np.eye(5), 1, 1) + 0.2 * np.roll(np.eye(5), -1, 1),
        delimiter=",",
    )
    (tmp_path / "empty.csv").write_text("")
    for w1, says in (("I3.csv", "--w1 is 3 x 3 but --w2 is 5 x 5"), ("empty.csv", "the file is empty")):
        assert main(base + ["--w1", str(tmp_path / w1), "--w2", str(tmp_path / "C5.csv")]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err


def test_console_entry_point():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mascot.cli",
            "certify",
            "--d0",
            "0.05",
            "--b0",
            "0",
            "--eta",
            "0.1",
            "--eps",
            "0.06",
            "--lambda1",
            "0.25",
            "--lambda2",
            "0.7",
            "--c1",
            "6",
            "--c2",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    js = json.loads(out.stdout)
    assert js["K_star"] == 0 and js["certified"] is True


def test_the_chance_of_a_coincidental_ring_match_from_the_printed_digits():
    """Errata row 7: the window of the slow-eigenspace share f that Table V/VI's printed digits allow, recomputed
    here from the ring's two eigenvalues written out, and the chance that one of 12 orders lands in it."""
    from mascot.studies.consensus import TABLE_IV, order_name, ring_from_order, ring_orders
    from mascot.studies.consensus_errata import coincidence_chance
    from mascot.studies.consensus_report import _slow_fraction

    ls, lf = 0.6 + 0.4 * np.cos(2 * np.pi / 5), 0.6 + 0.4 * np.cos(4 * np.pi / 5)

    def f_of(r2, p):  # r2 = f ls^(2p) + (1 - f) lf^(2p)
        return (r2 - lf ** (2 * p)) / (ls ** (2 * p) - lf ** (2 * p))

    h = 5e-5
    rows = [(0.0381, 0.0752, 1), (0.0254, 0.0752, 2), (0.0274, 0.3009, 6)]
    lo = max(f_of(((a - h) / (b + h)) ** 2, p) for a, b, p in rows)
    hi = min(f_of(((a + h) / (b - h)) ** 2, p) for a, b, p in rows)
    f_all = {order_name(o): _slow_fraction(TABLE_IV, ring_from_order(o)) for o in ring_orders(5)}
    c = coincidence_chance(f_all)
    assert c["lo"] == pytest.approx(lo, rel=1e-12) and c["hi"] == pytest.approx(hi, rel=1e-12)
    p = (hi - lo) / (max(f_all.values()) - min(f_all.values()))
    assert c["p_any"] == pytest.approx(1 - (1 - p) ** 12, rel=1e-12) and round(100 * c["p_any"], 1) == 8.5
    assert [o for o, v in f_all.items() if lo <= v <= hi] == ["a1-a2-a5-a4-a3"]


def test_pareto_front_and_the_dominance_errata(repro):
    """Errata 20-21: Table VI's three strategies are all non-dominated (hand-checked: adaptive is neither fastest
    nor cheapest); Table VIII's Gemini and Claude columns contradict 'more efficient than both'."""
    from mascot.studies.consensus_errata import pareto_front

    assert pareto_front({"a": (3, 800), "c": (2, 1200), "r": (6, 600)}) == ["a", "c", "r"]
    assert pareto_front({"a": (2, 500), "b": (3, 600), "c": (2, 700)}) == ["a"]
    assert pareto_front({"a": (2, 500), "b": (2, 500)}) == ["a", "b"]  # equal points dominate neither
    text = (repro / "errata.md").read_text()
    row20 = next(ln for ln in text.splitlines() if ln.startswith("| 20 |"))
    assert "not dominated: adaptive, complete-only, ring-only" in row20 and "False on Table VI" in row20
    row21 = next(ln for ln in text.splitlines() if ln.startswith("| 21 |"))
    assert "Gemini 2.5-Flash: adaptive 14 rounds" in row21 and "GPT" not in row21.split("read from")[1]


def test_what_corollary_1_certifies_and_the_conclusions_theorem_number(repro):
    """Errata 26-27 (the project's audit): Corollary 1 places adaptive between the fixed policies on both axes
    (hand-checked at the paper's numbers: 2 <= 5 <= 8 rounds, 800 <= 1000 <= 1200 tokens: it dominates neither),
    and the theorem on contraction rates, consensus time and minimum budget is Theorem 1."""
    text = (repro / "errata.md").read_text()
    row26 = next(ln for ln in text.splitlines() if ln.startswith("| 26 |"))
    assert "K_cmpl = 2 <= K* = 5 <= K_ring = 8" in row26 and "B_ring = 800 <= B* = 1000 <= B_cmpl = 1200" in row26
    assert "adaptive Pareto-dominates neither fixed policy" in row26
    row27 = next(ln for ln in text.splitlines() if ln.startswith("| 27 |"))
    assert "read from the paper" in row27 and "is Theorem 1" in row27
    # erratum 28: Table I's scores are whole or half counts of 198 questions (hand-checked: 95.45 % of 198 = 189.0,
    # 92.42 % = 183.0, 93.18 % = 184.5) and not of the 448 the text gives (95.45 % of 448 = 427.6)
    row28 = next(ln for ln in text.splitlines() if ln.startswith("| 28 |"))
    assert "427.62" in row28 and "of 448 (not whole or half counts)" in row28
    assert "of 198 (whole or half counts)" in row28 and "has 198 questions" in row28
    # erratum 29: ring C_6 with self-weight 0.1 has eigenvalues 0.1 + 0.9 cos(2 pi k / 6) on 1-perp: 0.55 (k = 1, 5),
    # -0.35 (k = 2, 4), -0.8 (k = 3); the recipe's 0.55 certifies ceil(log 0.1 / log 0.55) = 4 rounds, while the
    # alternating X0 contracts by exactly 0.8 a round: D(4) = 0.8^4 = 0.4096, ceil(log 0.1 / log 0.8) = 11 rounds
    row29 = next(ln for ln in text.splitlines() if ln.startswith("| 29 |"))
    assert "the recipe's lambda = 0.5500, the norm on 1-perp (Def. 6) = 0.8000" in row29
    assert "in K = 4 rounds" in row29 and "D(4) = 0.4096 and needs 11 rounds" in row29
    assert "give 0.8000 and 0.8000 (the modulus)" in row29
