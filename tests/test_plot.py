"""`mascot plot` and mascot.analysis.plot (issue 29): the plotted numbers against independent formulas (Student's
t interval from scipy.stats.t.interval; the median's order-statistic interval from exact binomial sums), the
refusal to average over a hidden study variable, and the command's files and errors."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from mascot.analysis.plot import plot, summarize, warnings_for
from mascot.cli import main
from mascot.errors import InputError


def _sweep_like(rng):
    """A table shaped like a merged sweep: point, trajectory, parameters constant per point, outputs."""
    rows = []
    point = 0
    for n in (5, 8, 16):
        for strategy in ("adaptive", "ring"):
            for eta in (0.05, 0.1):
                for t in range(16):
                    rows.append(
                        dict(
                            point=point,
                            trajectory=t,
                            n=n,
                            strategy=strategy,
                            eta=eta,
                            c1=n * (n - 1) * 30.0,
                            tokens=float(rng.gamma(2.0, 100.0 * n)),
                        )
                    )
                point += 1
    return pd.DataFrame(rows)


def test_mean_and_median_intervals_match_independent_formulas():
    df = _sweep_like(np.random.default_rng(0))
    got = summarize(df, "n", "tokens", hue="strategy", facet="eta", ci=90)
    for _, r in got.iterrows():
        v = df[(df.n == r.n) & (df.strategy == r.strategy) & (df.eta == r.eta)].tokens.to_numpy()
        lo, hi = stats.t.interval(0.90, len(v) - 1, loc=v.mean(), scale=stats.sem(v))
        assert r.tokens == pytest.approx(v.mean(), rel=1e-12) and r.rows == 16
        assert (r.lo, r.hi) == (pytest.approx(lo, rel=1e-12), pytest.approx(hi, rel=1e-12))
    med = summarize(df, "n", "tokens", hue="strategy", facet="eta", agg="median", ci=95)
    n = 16
    # the largest j with P(j <= B <= n - j) >= 0.95, B ~ binomial(16, 1/2): j = 4 (0.979; j = 5 gives 0.923)
    cover = lambda j: sum(math.comb(n, k) for k in range(j, n - j + 1)) / 2**n  # noqa: E731
    j = max(j for j in range(1, n // 2) if cover(j) >= 0.95)
    assert j == 4
    for _, r in med.iterrows():
        s = np.sort(df[(df.n == r.n) & (df.strategy == r.strategy) & (df.eta == r.eta)].tokens.to_numpy())
        assert (r.tokens, r.lo, r.hi) == (np.median(s), s[j - 1], s[n - j])


def test_a_hidden_study_variable_is_refused_and_where_fixes_it():
    df = _sweep_like(np.random.default_rng(1))
    with pytest.raises(InputError, match=r"eta \(2 values at one plotted point\)"):
        summarize(df, "n", "tokens", hue="strategy")
    # c1 follows n (one value at each plotted point): not a hidden variable
    s = summarize(df, "n", "tokens", hue="strategy", where={"eta": "0.1"})
    assert len(s) == 6 and set(s.rows) == {16}
    with pytest.raises(InputError, match="keeps no row"):
        summarize(df, "n", "tokens", hue="strategy", where={"eta": "0.3"})
    with pytest.raises(InputError, match="no such column"):
        summarize(df, "nn", "tokens")
    with pytest.raises(InputError, match="not numeric"):
        summarize(df, "n", "strategy")
    # a table without a point column (trials, metrics) aggregates every row of a group
    t = df.drop(columns="point")
    assert summarize(t, "n", "tokens").rows.tolist() == [64, 64, 64]
    fig = plot(df, "n", "tokens", hue="strategy", facet="eta", logx=True, logy=True)
    assert len([a for a in fig.axes if a.get_visible()]) == 2 and fig.axes[1].get_legend() is not None
    one = plot(df[df.strategy == "ring"], "n", "tokens", hue="strategy", facet="eta")  # one hue value: no legend
    assert all(a.get_legend() is None for a in one.axes)


def test_the_command_writes_the_figure_and_its_numbers(tmp_path, capsys):
    df = _sweep_like(np.random.default_rng(2))
    data = tmp_path / "d.parquet"
    df.to_parquet(data)
    for suffix in ("png", "pdf"):
        out = tmp_path / f"f.{suffix}"
        args = ["plot", str(data), "--x", "n", "--y", "tokens", "--hue", "strategy", "--facet", "eta", "--logy"]
        assert main([*args, "--out", str(out)]) == 0
        head = out.read_bytes()[:8]
        assert head.startswith(b"\x89PNG" if suffix == "png" else b"%PDF")
    table = pd.read_csv(tmp_path / "f.csv")
    assert len(table) == 12 and table.rows.sum() == len(df)
    capsys.readouterr()
    assert main(["plot", str(data), "--x", "n", "--y", "tokens", "--out", str(tmp_path / "f.svg")]) == 2
    assert "give a .png or .pdf" in capsys.readouterr().err
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    assert main(["plot", str(bad), "--x", "n", "--y", "tokens", "--out", str(tmp_path / "g.png")]) == 2
    assert "cannot read it as parquet" in capsys.readouterr().err
    assert main(["plot", str(tmp_path), "--x", "n", "--y", "tokens", "--out", str(tmp_path / "g.png")]) == 2
    assert "neither merged.parquet nor trials.parquet" in capsys.readouterr().err


def test_outside_tester_findings(tmp_path, capsys):
    """--ci 0 draws no band (it crashed); a median band that cannot reach its confidence is not drawn (two rows:
    [min, max] covers 50%, not 95%); a column filtered twice is refused; a bool column takes true/false; PDFs
    embed TrueType fonts (Type 42), not Type 3."""
    df = pd.DataFrame(
        {"x": [1, 1, 1, 2, 2, 3], "y": [1.0, 2, 3, 2, 5, 7], "ok": [True, False, True, True, True, False]}
    )
    s = summarize(df, "x", "y", ci=None)
    assert s.lo.isna().all() and s.y.tolist() == [2.0, 3.5, 7.0]
    m = summarize(df, "x", "y", agg="median")
    assert m.lo.isna().all() and m.hi.isna().all()  # n = 3 covers 75%, n = 2 50%: below 95%
    # n = 6: binom.ppf(0.025, 6, 0.5) = 1, so [s_(1), s_(6)] covers 1 - 2/64 = 0.969 >= 0.95
    six = summarize(pd.DataFrame({"x": [1] * 6, "y": [5.0, 1, 4, 2, 6, 3]}), "x", "y", agg="median")
    assert (six.lo[0], six.hi[0]) == (1.0, 6.0)
    assert summarize(df, "x", "y", where={"ok": "true"}).rows.sum() == 4
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    assert main(["plot", str(data), "--x", "x", "--y", "y", "--ci", "0", "--out", str(tmp_path / "a.pdf")]) == 0
    assert b"/FontFile2" in (tmp_path / "a.pdf").read_bytes() and b"/Type3" not in (tmp_path / "a.pdf").read_bytes()
    args = [
        "plot",
        str(data),
        "--x",
        "x",
        "--y",
        "y",
        "--where",
        "x=1",
        "--where",
        "x=2",
        "--out",
        str(tmp_path / "b.png"),
    ]
    assert main(args) == 2 and "given twice" in capsys.readouterr().err


def test_categories_in_natural_order_warnings_and_the_small_cases(tmp_path, capsys):
    """Issue 29's plot polish: categorical x and hue in natural order (n2 < n10), a warning for each thing the
    figure leaves out (NaN rows, points a log axis cannot show), one x value drawn as a point with its error
    bar, more than ten hues in distinct colours, and .PNG written as PNG."""
    from matplotlib.colors import to_hex

    from mascot.analysis.plot import draw, warnings_for

    rng = np.random.default_rng(0)
    cats = ["n10", "n2", "n1", "n21"]
    df = pd.DataFrame({"g": np.repeat(cats, 5), "v": rng.normal(1.0, 0.1, 20)})
    df.loc[0, "v"] = np.nan
    f = tmp_path / "d.csv"
    df.to_csv(f, index=False)
    s = summarize(f, "g", "v")
    fig = draw(s, "g", "v")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["n1", "n2", "n10", "n21"]
    w = warnings_for(s, "g", "v", logy=True)
    assert w == ["1 rows with a NaN or infinite v were left out of the aggregates"]
    s2 = s.assign(v=s.v - 1.0)  # two or so points below zero: a log axis cannot show them
    assert any("with v <= 0 cannot be drawn on the log y axis" in m for m in warnings_for(s2, "g", "v", logy=True))
    # one numeric x value: an error bar, not an invisible band
    one = pd.DataFrame({"x": [3.0] * 6, "v": np.arange(6.0)})
    fig = draw(summarize(one, "x", "v"), "x", "v")
    assert len(fig.axes[0].containers) == 1  # the errorbar container
    # fifteen hues: fifteen distinct colours
    many = pd.DataFrame({"x": np.tile([1.0, 2.0], 15), "h": np.repeat([f"h{i}" for i in range(15)], 2), "v": 1.0})
    fig = draw(summarize(many, "x", "v", hue="h"), "x", "v", hue="h")
    assert len({to_hex(line.get_color()) for line in fig.axes[0].get_lines()}) == 15
    out = tmp_path / "fig.PNG"
    assert main(["plot", str(f), "--x", "g", "--y", "v", "--logy", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "mascot: warning: 1 rows with a NaN or infinite v were left out" in capsys.readouterr().err


def test_nothing_finite_to_plot_is_an_error_and_log_axes_leave_out_what_they_cannot_show(tmp_path):
    """Found by an outside tester: every y NaN wrote an empty figure with exit 0; on log axes the points <= 0
    were warned about but still drawn as stubs off the axis."""
    f = tmp_path / "nan.csv"
    pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [np.nan] * 3}).to_csv(f, index=False)
    assert main(["plot", str(f), "--x", "x", "--y", "y", "--out", str(tmp_path / "a.png")]) == 2
    assert not (tmp_path / "a.png").exists()
    g = tmp_path / "zeros.csv"
    pd.DataFrame({"x": [0.0, 1.0, 2.0, 4.0] * 3, "y": [0.0, 1.0, 2.0, 4.0] * 3}).to_csv(g, index=False)
    fig = plot(g, "x", "y", logx=True, logy=True)
    (line,) = fig.axes[0].get_lines()
    assert list(line.get_xdata()) == [1.0, 2.0, 4.0]  # the point at 0 is left out, not drawn off the axis
    # ... and the figure says so, not only the command's stderr (a later tester)
    assert [t.get_text() for t in fig.texts] == ["1 point <= 0 not shown (log axis)"]
    assert not plot(g, "x", "y").texts  # (linear axes show every point: no note)


def test_outputs_fixed_per_point_are_not_parameters():
    """A sweep kind's table: only the kind's parameters can be hidden study variables. ``certified`` is
    fixed per point (the Theorem 1 certificate) and differs between the points averaged at one x; it is an
    output, so averaging over it is no error (the outside test saw it listed as a varying parameter)."""
    from mascot.sweep.kinds import KINDS

    params = KINDS["consensus"].params
    rows = []
    for point, (b0, certified) in enumerate([(500.0, False), (1000.0, True), (500.0, True), (1000.0, False)]):
        base = {k: p.default for k, p in params.items()}
        base.update(b0=b0, n=5 if point < 2 else 8)
        for t in range(4):
            rows.append({**base, "point": point, "trajectory": t, "certified": certified, "tokens": 100.0 * t})
    df = pd.DataFrame(rows)
    with pytest.raises(InputError, match=r"b0 \(2 values") as e:
        summarize(df, "n", "tokens")
    assert "certified" not in str(e.value)
    s = summarize(df, "n", "tokens", hue="b0")
    assert len(s) == 4 and set(s.rows) == {4}
    # the same table without the kind's parameters (a user's own table): every per-point constant counts
    other = df[["point", "trajectory", "n", "b0", "certified", "tokens"]]
    with pytest.raises(InputError, match=r"b0 \(2 values.*certified \(2 values"):
        summarize(other, "n", "tokens")


def test_rows_that_stopped_short_of_consensus_are_said_and_can_be_filtered_by_label(tmp_path, capsys):
    """Found by an outside tester: tokens of trajectories stopped at max_rounds were plotted as if consensus had
    cost that much, with no word. The summary counts them per point, the warnings say so, and --where takes
    the status labels."""
    from mascot.analysis.plot import summarize, warnings_for

    df = pd.DataFrame(
        {
            "point": [0] * 4 + [1] * 4,
            "n": [5] * 4 + [32] * 4,
            "tokens": [100.0, 110.0, 120.0, 130.0, 400.0, 400.0, 400.0, 390.0],
            "status": np.array([0, 0, 0, 0, 2, 2, 2, 0], dtype=np.int8),
        }
    )
    s = summarize(df, "n", "tokens")
    assert s["unfinished_rows"].tolist() == [0, 3]
    # the figure marks the point with an x and says why (a tester: a figure copied into a paper lost the warning)
    from mascot.analysis.plot import draw

    fig = draw(s, "n", "tokens")
    marks = [ln for ln in fig.axes[0].lines if ln.get_marker() == "x"]
    assert len(marks) == 1 and marks[0].get_xdata().tolist() == [32] and marks[0].get_ydata().tolist() == [397.5]
    assert any("did not reach consensus" in t.get_text() for t in fig.texts)
    assert not any(t.get_text().startswith("x:") for t in draw(s.iloc[:1], "n", "tokens").texts)
    w = warnings_for(s, "n", "tokens")
    assert any("3 of 8 aggregated rows did not reach consensus" in m and "75%" in m for m in w), w
    kept = summarize(df, "n", "tokens", where={"status": "consensus"})
    assert kept["rows"].tolist() == [4, 1] and kept["unfinished_rows"].tolist() == [0, 0]
    assert any("very different row counts (1 to 4)" in m for m in warnings_for(kept, "n", "tokens"))
    with pytest.raises(InputError, match="status label: consensus, BudgetFail"):
        summarize(df, "n", "tokens", where={"status": "finished"})
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    assert main(["plot", str(path), "--x", "n", "--y", "tokens", "--out", str(tmp_path / "f.png")]) == 0
    assert "did not reach consensus" in capsys.readouterr().err


def test_a_share_of_rows_is_plotted_with_wilson_intervals_and_a_status_code_is_not_averaged(tmp_path, capsys):
    """Found by an outside tester: `--y status` drew the mean of the codes 1 and 2 (1.17) with no word. A status is
    refused as y; `--y status=consensus` plots the share of rows that reached it, with Wilson's score interval
    (scipy.stats.binomtest's, an independent implementation)."""
    rng = np.random.default_rng(3)
    status = rng.choice(np.array([0, 1, 2], dtype=np.int8), size=60, p=[0.6, 0.3, 0.1])
    df = pd.DataFrame({"point": np.repeat([0, 1, 2], 20), "n": np.repeat([5, 8, 16], 20), "status": status})
    df.loc[df.n == 16, "status"] = 0  # a share of 1: Student's t would give a zero-width band
    with pytest.raises(InputError, match="status' is a code.*--y status=consensus"):
        summarize(df, "n", "status")
    for y in ("status=consensus", "status=0"):
        got = summarize(df, "n", y, ci=90)
        for _, r in got.iterrows():
            k = int((df[df.n == r.n].status == 0).sum())
            ci = stats.binomtest(k, 20).proportion_ci(confidence_level=0.90, method="wilson")
            assert r[y] == k / 20 and r.rows == 20 and "unfinished_rows" not in got
            assert (r.lo, r.hi) == (pytest.approx(ci.low, abs=1e-12), pytest.approx(ci.high, abs=1e-12))
    assert got.loc[got.n == 16, "lo"].item() < 1.0 == got.loc[got.n == 16, y].item()
    with pytest.raises(InputError, match="share of rows: aggregate it with the mean"):
        summarize(df, "n", "status=consensus", agg="median")
    with pytest.raises(InputError, match="status is numeric \\(or a status label"):
        summarize(df, "n", "status=finished")
    with pytest.raises(InputError, match="no column 'state'"):
        summarize(df, "n", "state=consensus")
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    out = tmp_path / "share.png"
    assert main(["plot", str(path), "--x", "n", "--y", "status=BudgetFail", "--out", str(out)]) == 0
    plotted = pd.read_csv(out.with_suffix(".csv"))
    assert plotted["status=BudgetFail"].tolist() == [float((df[df.n == n].status == 1).mean()) for n in (5, 8, 16)]
    # found by a second outside tester: a share that matches no row was plotted as 0 (a typo reads as a result),
    # except a known status, which may be absent; the column list of an error named the made-up y column; a
    # sweep parameter's share was refused as a hidden variable and then as "also the hue"; exact interval ends
    with pytest.raises(InputError, match="no row has status = '7'; status takes 0, 1, 2"):
        summarize(df, "n", "status=7")
    none = summarize(df[df.status != 3], "n", "status=predicted_BudgetFail")
    assert none["status=predicted_BudgetFail"].tolist() == [0.0] * 3 and (none.lo == 0.0).all()
    with pytest.raises(InputError, match="no such column; columns: point, n, status$"):
        summarize(df, "n", "status=0", hue="nosuch")
    sweep = _sweep_like(np.random.default_rng(4))
    ring = summarize(sweep, "n", "strategy=ring", facet="eta")
    assert ring["strategy=ring"].tolist() == [0.5] * 6 and ring.rows.tolist() == [32] * 6
    # FIG.csv next to FIG.png was written over the data when they shared a name (t.csv -> t.png + t.csv)
    before = path.read_bytes()
    assert main(["plot", str(path), "--x", "n", "--y", "status=0", "--out", str(tmp_path / "t.png")]) == 2
    assert "the data being plotted" in capsys.readouterr().err and path.read_bytes() == before


def test_third_outside_tester_findings(tmp_path, capsys):
    """Status codes against a column of labels; rows without an x, hue or facet value left out and said; a
    missing value in the share's column is no 'not VALUE'; a merged consensus table with one trajectory per
    point keeps its outputs out of the hidden-variable check; FIG.csv next to a folder made on the way."""
    df = pd.DataFrame(
        {
            "x": [1.0, 1.0, 2.0, 2.0, np.nan, 2.0],
            "g": ["a", "a", "a", None, "a", "a"],
            "status": ["consensus", "BudgetFail", "consensus", "consensus", "consensus", "max_rounds"],
            "k": [1.0, np.nan, 1.0, 0.0, 1.0, 0.0],
        }
    )
    got = summarize(df, "x", "status=0", hue="g", ci=None)
    assert got["status=0"].tolist() == [0.5, 0.5] and got.rows.tolist() == [2, 2]
    assert any("2 rows with no value in the x, hue or facet column" in w for w in warnings_for(got, "x", "status=0"))
    k = summarize(df, "x", "k=1", ci=None)  # x = NaN left out; k = NaN neither 1 nor not 1
    assert k["k=1"].tolist() == [1.0, 1 / 3] and k.nonfinite_rows.tolist() == [1, 0]
    one = pd.DataFrame(  # a consensus sweep's columns, one trajectory per point: rounds etc. vary by point only
        {"point": [0, 1, 2, 3], "trajectory": 0, "n": [5, 5, 8, 8], "strategy": ["adaptive", "ring"] * 2,
         "eta": 0.1, "eps": 0.03, "b0": 1e4, "c1": 600.0, "c2": 100.0, "d": 6, "max_rounds": 64, "noise": 0.0,
         "self_weight_complete": 0.4, "self_weight_ring": 0.6, "x0_mean": 0.5, "x0_spread": 0.15,
         "rounds": [3, 7, 4, 9], "tokens": [1.0, 2.0, 3.0, 4.0], "certified": [True, False, True, True]}
    )  # fmt: skip
    assert summarize(one, "n", "tokens", hue="strategy", ci=None).tokens.tolist() == [1.0, 3.0, 2.0, 4.0]
    data = tmp_path / "t.csv"
    df.to_csv(data, index=False)
    before = data.read_bytes()
    out = tmp_path / "nosub" / ".." / "t.png"  # t.csv once nosub exists
    assert main(["plot", str(data), "--x", "x", "--y", "k=1", "--out", str(out)]) == 2
    assert "the data being plotted" in capsys.readouterr().err and data.read_bytes() == before


def test_facets_and_the_plotted_numbers_follow_natural_order():
    """Facet panels and FIG.csv rows sorted as text (n1, n10, n2) while x and hue sorted naturally (an outside
    tester)."""
    df = pd.DataFrame(
        {"g": ["n10", "n2", "n1"] * 4, "h": ["b10", "b9"] * 6, "x": [1, 2, 3, 4] * 3, "y": np.arange(12.0)}
    )
    s = summarize(df, "x", "y", hue="h", facet="g", ci=None)
    assert list(dict.fromkeys(s.g)) == ["n1", "n2", "n10"]
    assert s.groupby("g", sort=False).h.apply(lambda h: list(dict.fromkeys(h))).tolist() == [["b9", "b10"]] * 3
    fig = plot(df, "x", "y", hue="h", facet="g", ci=None)
    assert [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()] == ["g = n1", "g = n2", "g = n10"]


def test_a_hue_of_one_value_is_named_in_the_title():
    """Found by an outside tester: --hue family after a --where that left one family drew no legend and named the
    family nowhere. A one-value hue is no dimension; the title names it (after any --where filters)."""
    df = pd.DataFrame({"family": ["star"] * 4, "x": [1, 2, 1, 2], "y": [1.0, 2.0, 3.0, 4.0]})
    fig = plot(df, "x", "y", hue="family", ci=None)
    assert fig._suptitle.get_text() == "family = star" and fig.axes[0].get_legend() is None
    fig = plot(df, "x", "y", hue="family", ci=None, title="n = 8")
    assert fig._suptitle.get_text() == "n = 8, family = star"


def test_a_parameter_missing_where_a_family_does_not_read_it_is_not_a_hidden_variable():
    """Found by an outside tester: ``--y family=star`` on a spectra sweep with a fixed degree was refused because
    degree "varies": it is missing on the star's rows (a star does not read it). Missing values do not count;
    two values do."""
    df = pd.DataFrame(  # a star (one graph) and two Watts-Strogatz graphs per gamma
        {
            "point": [0, 1, 1, 2, 3, 3],
            "family": ["star", "watts_strogatz", "watts_strogatz"] * 2,
            "degree": [np.nan, 4.0, 4.0] * 2,
            "gamma": [0.5, 0.5, 0.5, 0.9, 0.9, 0.9],
            "kappa": [3.0, 5.0, 6.0, 28.0, 16.0, 17.0],
        }
    )
    s = summarize(df, "gamma", "family=star", ci=None)
    assert s["family=star"].tolist() == pytest.approx([1 / 3, 1 / 3])
    with pytest.raises(InputError, match="degree \\(2 values at one plotted point\\)"):
        summarize(df.assign(degree=[np.nan, 4.0, 4.0, np.nan, 6.0, 6.0], gamma=0.5), "gamma", "family=star")


def test_deliberation_figure_names_the_graphs_of_the_run():
    """Found by an outside tester: the legend said K5/C5 for 7 agents."""
    from mascot.analysis.deliberation_report import _mode_names
    from mascot.graphs import complete_weights, ring_weights

    assert _mode_names({"n_agents": 7}) == ("complete K7", "ring C7")
    assert _mode_names({"roles": [{}] * 4, "complete_self": 0.4}) == ("complete K4", "ring C4")
    W1 = complete_weights(4, 0.4).tolist()
    assert _mode_names({"n_agents": 4, "W1": W1, "W2": ring_weights(4, 0.6).tolist()}) == ("complete K4", "ring C4")
    assert _mode_names({"n_agents": 4, "W1": W1, "W2": np.full((4, 4), 0.25).tolist()}) == ("complete K4", "W2")


def test_points_that_differ_only_in_their_trajectory_count_share_their_first_trajectories(tmp_path, capsys):
    """Found in review: a consensus sweep with a ``trajectories`` axis draws trajectory t alike at every count
    (common random numbers), so without belief noise the rows of the 8-trajectory point are 8 of the
    24-trajectory point's samples; pooled as 32 rows they made the interval too narrow. With noise each point
    draws its own (an outside tester: counting those as shared dropped distinct samples). The plotted numbers
    equal scipy's t interval over the distinct samples, though a copy's d0 can differ in its last float32 bit."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[experiment]\nkind = "consensus"\nseed = 3\n[fixed]\nn = 5\n[grid]\ntrajectories = [8, 24]\n'
        "eta = [0.1, 0.2]\nnoise = [0.0, 0.01]\n"
    )
    run = tmp_path / "r"
    assert main(["run", str(cfg), "--out", str(run)]) == 0
    assert main(["merge", str(run)]) == 0
    capsys.readouterr()
    df = pd.read_parquet(run / "merged.parquet")
    s = summarize(df, "eta", "rounds", hue="noise")
    assert s["rows"].tolist() == [24, 24, 32, 32]  # noise 0: 24 distinct runs; noise 0.01: 8 + 24
    assert "16 rows repeat rows of other grid points" in " ".join(warnings_for(s, "eta", "rounds"))
    size = df.groupby("point")["point"].transform("size")
    for got in s.itertuples():
        at = df[(df.eta == got.eta) & (df.noise == got.noise)]
        v = (at if got.noise > 0 else at[size[at.index] == 24])["rounds"].to_numpy(dtype=np.float64)
        lo, hi = stats.t.interval(0.95, v.size - 1, v.mean(), stats.sem(v))
        assert (got.rounds, got.lo, got.hi) == pytest.approx((v.mean(), lo, hi), rel=1e-12)
    # the sample count itself can be a role (a tester: "--hue trajectories: no such column"): each point's rows
    by = summarize(df, "eta", "rounds", hue="trajectories", where={"noise": 0.0})
    assert by["trajectories"].tolist() == [8, 8, 24, 24] and by["rows"].tolist() == [8, 8, 24, 24]
    first8 = df[(df.noise == 0) & (size == 8) & (df.eta == 0.1)]["rounds"].mean()
    assert by["rounds"].iloc[0] == pytest.approx(first8, rel=1e-12)
    assert summarize(df, "eta", "rounds", where={"trajectories": 8, "noise": 0.0})["rows"].tolist() == [8, 8]
    # a user's own table with a point column: equal values in two points are not taken for one sample
    own = pd.DataFrame({"point": [0, 0, 1, 1, 2, 2], "n": [5] * 6, "rounds": [3.0, 4.0, 3.0, 5.0, 3.0, 4.0]})
    assert summarize(own, "n", "rounds")["rows"].tolist() == [4]  # point 2 repeats point 0 whole; 1 does not


def test_empty_key_columns_and_missing_intervals_are_explained():
    """Found by an outside tester: ``--x p --where family=chain`` (a chain reads no p: stored as missing) said only
    "no rows", and a median over 3 rows drew no interval without a word. The fewest rows for a 95% median
    interval is 6 by hand: with n = 5 even [min, max] covers 1 - 2 * 2^-5 = 0.9375 < 0.95; with 6, 0.969."""
    df = pd.DataFrame(
        {"point": [0, 0, 0, 1, 1, 1], "family": ["chain"] * 3 + ["er"] * 3, "p": [np.nan] * 3 + [0.3] * 3}
    ).assign(kappa=np.arange(6.0), graph=[0, 1, 2] * 2)
    with pytest.raises(InputError, match="none of the 3 rows kept has a value in the x column p"):
        summarize(df, "p", "kappa", where={"family": "chain"})
    s = summarize(df, "p", "kappa", agg="median", where={"family": "er"})
    assert "1 plotted point(s) have no interval: a 95% interval of the median needs at least 6 rows" in warnings_for(
        s, "p", "kappa"
    )
    big = pd.concat([df[df.family == "er"].assign(graph=g) for g in range(2)])  # 6 rows at one point
    big = big.assign(point=1, graph=range(6), kappa=np.arange(6.0))
    assert not any("no interval" in m for m in warnings_for(summarize(big, "p", "kappa", agg="median"), "p", "kappa"))
    assert summarize(df, "p", "kappa", ci=None, where={"family": "er"}).attrs["interval"] is None


def test_fixing_a_parameter_keeps_the_rows_that_do_not_read_it():
    """Found by an outside tester: ``--where p=0.25`` (Erdos-Renyi's p) dropped the rings and Watts-Strogatz
    graphs, whose p is missing (not read), without a word; fixing p for one family and beta for another in one
    figure was impossible. In a sweep kind's table the filter keeps them, and says so."""
    from mascot.sweep.kinds import KINDS

    base = {k: np.nan if p.reads else p.default for k, p in KINDS["spectra"].params.items() if k != "graphs"}
    rows, point = [], 0
    for fam, extra in [("ring", {}), ("erdos_renyi", {"p": 0.25}), ("erdos_renyi", {"p": 0.5})]:
        for g in range(3 if fam != "ring" else 1):
            rows.append({**base, **extra, "family": fam, "point": point, "graph": g, "kappa": 10.0 * point + g})
        point += 1
    df = pd.DataFrame(rows)
    s = summarize(df, "n", "kappa", hue="family", where={"p": 0.25})
    assert s["family"].tolist() == ["erdos_renyi", "ring"] and s["rows"].tolist() == [3, 1]
    assert s["kappa"].tolist() == [11.0, 0.0]  # point 1's graphs 0-2; the ring (point 0)
    assert "where p=0.25 also keeps the 1 rows that do not read p (stored as missing)" in warnings_for(s, "n", "kappa")
    with pytest.raises(InputError, match="where p=0.3 keeps no row; p takes 0.25, 0.5"):
        summarize(df, "n", "kappa", hue="family", where={"p": 0.3})
    # the filters' order does not matter (a later tester: family=ring before p=0.25 kept no row)
    for where in ({"family": "ring", "p": 0.25}, {"p": 0.25, "family": "ring"}):
        s = summarize(df, "n", "kappa", where=where)
        assert s["rows"].tolist() == [1] and s.attrs["where_notes"] == [
            "where p=0.25 also keeps the 1 rows that do not read p (stored as missing)"
        ]
    with pytest.raises(InputError, match="no row meets every filter together"):
        summarize(df, "n", "kappa", where={"family": "ring", "p": 0.25, "kappa": 10.0})
    own = df.drop(columns="graph")  # not a sweep kind's table: a missing value is no value
    assert summarize(own.drop(columns=["point"]), "n", "kappa", where={"p": 0.25})["rows"].tolist() == [3]


def test_a_spectra_sweep_splits_by_its_graph_count_which_deterministic_families_do_not_read(tmp_path, capsys):
    """Left open by an outside tester: ``--hue graphs`` on a spectra sweep was "no such column". Each point's
    graph count is its row count; a ring (one graph, ``graphs`` not read) has none, so a hue leaves it out and a
    filter keeps it, as for any parameter a family does not read. Means against numpy over the same rows."""
    cfg = tmp_path / "s.toml"
    cfg.write_text(
        '[experiment]\nkind = "spectra"\n[fixed]\ngamma = 0.9\n[grid]\nfamily = ["erdos_renyi", "ring"]\n'
        "n = [8, 12]\ngraphs = [4, 8]\n"
    )
    run = tmp_path / "r"
    assert main(["run", str(cfg), "--out", str(run)]) == 0 and main(["merge", str(run)]) == 0
    capsys.readouterr()
    df = pd.read_parquet(run / "merged.parquet")
    assert "graphs" not in df.columns
    by = summarize(df, "n", "kappa", hue="graphs")
    assert by["graphs"].tolist() == [4, 4, 8, 8] and by["rows"].tolist() == [4, 4, 8, 8]
    size = df.groupby("point")["point"].transform("size")
    for got in by.itertuples():
        v = df[(df.family == "erdos_renyi") & (df.n == got.n) & (size == got.graphs)]["kappa"].to_numpy(np.float64)
        assert v.size == got.graphs and got.kappa == pytest.approx(v.mean(), rel=1e-12)
    assert "rows with no value in the x, hue or facet column were left out" in " ".join(warnings_for(by, "n", "kappa"))
    kept = summarize(df, "n", "kappa", hue="family", where={"graphs": 8})
    assert kept["rows"].tolist() == [8, 8, 1, 1]  # the rings kept (their two points one graph: counted once)
    assert "also keeps the 4 rows that do not read graphs" in " ".join(kept.attrs["where_notes"])


def test_a_column_in_two_roles_is_refused_and_names_are_shown_as_written(tmp_path):
    """Found by an outside tester: --x b0 --hue b0 drew one point per colour without a word; d_t was labelled
    "d t"; the share's y label ran taller than the axes."""
    df = pd.DataFrame({"b0": [1.0, 1.0, 2.0, 2.0], "d_t": [0.5, 0.7, 0.2, 0.4], "ok": [1, 0, 1, 1]})
    for kw in ({"hue": "b0"}, {"facet": "b0"}):
        with pytest.raises(InputError, match="are both 'b0': give each role its own column"):
            summarize(df, "b0", "d_t", **kw)
    fig = plot(df, x="b0", y="d_t")
    assert fig.axes[0].get_ylabel().startswith("d_t") and fig.axes[0].get_xlabel() == "b0"
    fig = plot(df, x="b0", y="ok=1")
    assert fig.axes[0].get_ylabel() == "share with ok = 1\n(95% Wilson CI)"


def test_readable_axes_and_labels(tmp_path):
    """Found by an outside tester: log y ticks read 6x10^0, integer n was ticked 7.5, a long title widened the
    figure, and "mean (95% CI)" labelled points of one row each (no interval drawn)."""
    import matplotlib.pyplot as plt

    plt.close("all")  # (this module draws many figures)
    df = pd.DataFrame({"n": [6, 7, 12, 24] * 2, "v": [3.0, 4.5, 9.0, 20.0, 3.2, 4.4, 9.5, 21.0]})
    fig = plot(df, x="n", y="v", logy=True, title="a long title " * 20)
    ax = fig.axes[0]
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and all("times" not in t and "^" not in t for t in labels), labels  # plain numbers
    assert all(float(t.get_text()).is_integer() for t in ax.get_xticklabels() if t.get_text())
    assert "\n" in fig._suptitle.get_text()
    assert ax.get_ylabel() == "v, mean (95% CI)"
    one = plot(df.iloc[:4], x="n", y="v")
    assert one.axes[0].get_ylabel() == "v"  # one row a point: no interval, none named
    # a later tester: a log axis from 5.2 to 25 labelled only 10 and 20, the smallest values below any label
    from mascot.analysis.figures import plt, readable_log_axis

    for lo, hi, want in ((5.2, 25.0, [6, 8, 10, 15, 20]), (3.0, 9.0, [3, 4, 6, 8]), (1.0, 50.0, [1, 2, 5, 10, 20, 50])):
        f, a = plt.subplots()
        a.set_yscale("log")
        a.set_ylim(lo, hi)
        readable_log_axis(a, "y")
        f.canvas.draw()
        shown = [float(t.get_text()) for t in a.get_yticklabels() if t.get_text() and lo <= t.get_position()[1] <= hi]
        assert shown == want, (lo, hi, shown)
        plt.close(f)


def test_values_left_out_for_nan_or_inf_are_said_on_the_figure(tmp_path):
    """Found by an outside tester: a hue whose every value was inf (a ring that never contracts: K* = inf) stood in
    the legend with no line, and an inf row was left out of a mean, both said on stderr only."""
    import matplotlib.pyplot as plt

    plt.close("all")  # (this module draws many figures)
    df = pd.DataFrame({"x": [2, 2, 3, 2, 3], "y": [np.inf, 3.0, 4.0, np.nan, np.inf], "g": ["a", "a", "a", "b", "b"]})
    fig = plot(df, "x", "y", hue="g")
    labels = fig.axes[0].get_legend().get_texts()
    assert [t.get_text() for t in labels] == ["a", "b (no finite value)"]
    assert [t.get_text() for t in fig.texts] == [
        "2 points not drawn: no finite y (NaN or inf)\n1 row with NaN or inf y left out of the points"
    ]
    assert not plot(df[np.isfinite(df.y)], "x", "y").texts  # (every value finite: no note)
    # on a log axis the same (a later tester: NaN points were counted as <= 0 and their hue left the legend)
    fig = plot(df, "x", "y", hue="g", logy=True)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["a", "b (no finite value)"]
    assert [t.get_text() for t in fig.texts] == [
        "2 points not drawn: no finite y (NaN or inf)\n1 row with NaN or inf y left out of the points"
    ]


def test_where_takes_a_value_as_figures_and_tables_show_it():
    """Found by an outside tester: --where b0=1392.48 kept no row; the value was 1392.4766500838336 (a logspace)."""
    b0 = np.logspace(np.log10(500), np.log10(50000), 7)
    df = pd.DataFrame({"b0": np.repeat(b0, 2), "x": [1, 2] * 7, "y": np.arange(14.0)})
    cases = (("1077.22", 1), ("1077", 1), ("1.08e3", 1), ("23207.9", 5), (repr(float(b0[3])), 3))
    # (and as a report's ticks write it, thousands separated, trailing zeros placeholders: "23,210")
    for typed, row in (*cases, ("23,210", 5), ("1,077", 1), ("23,208", 5)):
        s = summarize(df, "x", "y", where={"b0": typed})
        assert list(s.y) == [2.0 * row, 2.0 * row + 1], typed
    with pytest.raises(InputError, match="keeps no row"):  # 1 significant digit is no rounding of 1077.2
        summarize(df, "x", "y", where={"b0": "1e3"})
    close = pd.DataFrame({"v": [1.0001, 1.0002], "x": [1, 1], "y": [0.0, 1.0]})
    with pytest.raises(InputError, match=r"fits 2 values \(1.0001, 1.0002\); give more digits"):
        summarize(close, "x", "y", where={"v": "1.00"})


def test_values_equal_to_12_digits_are_one_setting():
    """Found by an outside tester: 0.3 and 0.30000000000000004 (a linspace's) were two hue lines both labelled 0.3,
    which --where a=0.3 pooled."""
    df = pd.DataFrame({"a": [0.3, 0.1 + 0.2, 0.5, 0.5], "x": [1, 1, 1, 1], "y": [1.0, 2.0, 3.0, 4.0]})
    s = summarize(df, "x", "y", hue="a")
    assert list(s.a) == [0.3, 0.5] and list(s.y) == [1.5, 3.5] and list(s.rows) == [2, 2]
