"""State-tracking calibration: the surrogate's parameter files, the JAX simulator against the real harness
(the simulator's independent reference: run_trials + SurrogateBackend, the analysis code's metrics), and
parameter recovery from a harness run with known parameters."""

import math

import numpy as np
import pytest

from mascot.protocols.state_tracking.surrogate import PARAM_SETS, SurrogateBackend, params_toml

EXT = {
    "sigma": 60.0,
    "bias": 25.0,
    "p_blunder": 0.05,
    "blunder_scale": 6.0,
    "persist": 0.3,
    "rho_c": 0.1,
    "roles": {
        "chain": {"p_exact": 0.2, "sigma_scale": 0.8},
        "star_leaf": {"p_exact": 0.4, "p_echo": 0.1},
        "star_judge": {"p_copy": 0.5, "noise": 0.6},
        "mesh_agent": {"p_exact": 0.3},
        "mesh_reviser": {"p_copy": 0.6, "p_recompute": 0.1, "noise": 0.5},
    },
}


# stale Parity (the explosion mechanism) and per-role persistence, far from their defaults
STALE = {
    "sigma": 12.0,
    "parity_slip": 0.02,
    "persist": 0.5,
    "roles": {
        "chain": {"p_keep_parity": 0.85, "persist": 0.9, "p_boundary": 0.6},
        "star_leaf": {"p_exact": 0.5, "p_keep_parity": 1.0, "persist": 0.0, "p_boundary": 0.3},
        "star_judge": {"persist": 0.2, "noise": 0.8},
        "mesh_agent": {"p_exact": 0.3, "p_keep_parity": 0.9},
        "mesh_reviser": {"p_copy": 0.2, "persist": 0.7},
    },
}


# a parameter set inside the fitted family (the unfitted parameters at hand-tuned-v1)
TRUTH = {
    "sigma": 90.0,
    "bias": 40.0,
    "p_blunder": 0.04,
    "blunder_scale": 5.0,
    "persist": 0.35,
    "rho_c": 0.05,
    "roles": {
        "chain": {"sigma_scale": 0.7},
        "star_leaf": {"p_exact": 0.35},
        "star_judge": {"p_copy": 0.4, "noise": 0.5},
        "mesh_agent": {"p_exact": 0.3},
        "mesh_reviser": {"p_copy": 0.5, "noise": 0.4},
    },
}

# the parameter file of test_init_file_...: its sigma and bias are not hand-tuned-v1's. The split-half test fits
# from it too (parse_fail, 2 ES steps, runs with judge = median, 10 trials fitted), so that the two calibrations
# compile their four programs once: the ES step holds the fixed parameters' values, the fitted names, the number of
# ES steps, the judge and the trial count; the other three the judge and the trial count
INIT = SurrogateBackend(sigma=33.0, bias=-7.0, judge="mean").params()
SHARED_FIT = dict(quick=True, steps=2, n_boot=0, fit_names=("parse_fail",))


def _init_file(tmp_path):
    p = tmp_path / "init.toml"
    p.write_text(params_toml(INIT, name="i"))
    return p


def _run(tmp_path, backend, n, seed, name):
    import pandas as pd

    from mascot.analysis.trials_report import trial_metrics
    from mascot.protocols.state_tracking.harness import TrialConfig, run_trials

    out = tmp_path / name
    run_trials(TrialConfig(n_trials=n, seed=seed, log_requests="none"), out, backend)
    from mascot.calibrate.trials_fit import step_profile

    df = pd.read_parquet(out / "trials.parquet")
    met = trial_metrics(df)
    prof = step_profile(df)
    return out, {
        t: {**{m: met.loc[met.topology == t, m].to_numpy(float) for m in ("E_ceg", "R_cdr", "F_ps")}, **prof[t]}
        for t in ("chain", "mesh", "star")
    }


def test_params_toml_round_trip_and_named_set(tmp_path):
    b = SurrogateBackend(**EXT)
    p = tmp_path / "p.toml"
    p.write_text(params_toml(b.params(), name="ext"))
    c = SurrogateBackend.from_params(p, seed=5)
    assert c.params() == b.params() and c.seed == 5 and c.params_name == "ext"
    h = SurrogateBackend.from_params("hand-tuned-v1")
    assert h.identity() == SurrogateBackend().identity()  # old identities (and run dirs) still match
    assert "roles" not in h.identity() and "roles" in c.identity()
    assert set(PARAM_SETS) >= {"hand-tuned-v1"}


@pytest.mark.parametrize(
    "text,match",
    [
        ('kind = "deliberation"\n', "kind"),
        ('kind = "state-tracking"\nsigmaa = 3.0\n', "sigmaa"),
        ('kind = "state-tracking"\n[roles.chain]\np_exact = 1.5\n', "roles.chain.p_exact"),
        ('kind = "state-tracking"\n[roles.judge]\np_copy = 0.5\n', "judge"),
        ('kind = "state-tracking"\npersist = -1\n', "persist"),
        ('kind = "state-tracking"\n[roles.star_leaf]\np_exact = 0.7\np_echo = 0.6\n', "star_leaf"),
        ("kind = = 3", "not valid TOML"),
    ],
)
def test_from_params_names_the_bad_key(tmp_path, text, match):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        SurrogateBackend.from_params(p)
    with pytest.raises(ValueError, match="does not exist"):
        SurrogateBackend.from_params(tmp_path / "none.toml")


def _close(h, s, what):
    """Means within 4 combined standard errors (the three metrics and every step-profile row);
    E_ceg distributions by two-sample KS (p > 1e-3)."""
    from scipy.stats import ks_2samp

    from mascot.calibrate.trials_fit import profile_keys

    bad = []
    for t in h:
        for m in ("E_ceg", "F_ps", "R_cdr", *profile_keys(t, 12)):
            a, b = h[t][m][np.isfinite(h[t][m])], s[t][m][np.isfinite(s[t][m])]
            se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
            if abs(a.mean() - b.mean()) > 4 * se + 1e-9:
                bad.append(f"{what} {t} {m}: harness {a.mean():.3f} sim {b.mean():.3f} se {se:.3f}")
        p = ks_2samp(h[t]["E_ceg"], s[t]["E_ceg"]).pvalue
        if p < 1e-3:
            bad.append(f"{what} {t} E_ceg KS p = {p:.2g}")
    return bad


def test_simulator_matches_the_harness(tmp_path):
    from mascot.calibrate.trials import SimConfig, simulate_numpy

    bad = []
    # "abst": 0.6^3 = 21.6% of requests abstain (a small model's malformed replies)
    for name, kw in (("v1", {}), ("ext", EXT), ("stale", STALE), ("abst", {**STALE, "parse_fail": 0.6})):
        b = SurrogateBackend(seed=3, **kw)
        _, h = _run(tmp_path, b, 80, 11, name)
        s = simulate_numpy(b.params(), seed=1, cfg=SimConfig(n_trials=400), profile=True)
        for t in s:  # a share of 12 steps, exactly (float64: a float32 mean put 1/3 at 0.33333334)
            k = s[t]["parity_miss"] * 12
            np.testing.assert_allclose(k, np.round(k), rtol=0, atol=1e-12)
        bad += _close(h, s, name)
    assert not bad, "\n".join(bad)


def test_stale_parity_keeps_the_input_parity_and_persist_is_per_role():
    """Hand-checked replies: a noisy agent reply with p_keep_parity = 1 carries its input's Parity (the rule's
    would flip it: 50 'A' -> 70.0 'B'); with 0 it carries the rule's; per-role persist reaches the identity."""
    import json

    from mascot.backends.base import Request, Sampling
    from mascot.protocols.state_tracking.prompts import agent_messages

    def reply(keep, exact=0.0, sigma=0.0):
        b = SurrogateBackend(
            sigma=sigma,
            parity_slip=0.0,
            level_slip=0.0,
            parse_fail=0.0,
            seed=1,
            roles={"chain": {"p_keep_parity": keep, "persist": 0.25, "p_exact": exact}},
        )
        msgs = agent_messages({"Value": 50.0, "Parity": "A", "Level": 3})
        r = b.generate([Request(messages=msgs, sampling=Sampling(seed=7), meta={"topology": "chain"})])[0]
        return json.loads(r.text), b

    kept, b = reply(1.0)
    assert (kept["Value"], kept["Parity"]) == (70.0, "A")
    assert reply(0.0)[0]["Parity"] == "B"
    assert (reply(1.0, exact=1.0, sigma=50.0)[0]["Value"], reply(1.0, exact=1.0, sigma=50.0)[0]["Parity"]) == (
        70.0,
        "A",
    )
    assert reply(0.0, exact=1.0, sigma=50.0)[0]["Parity"] == "B"
    assert reply(1.0, sigma=50.0)[0]["Value"] != 70.0  # the noisy reply really is noisy
    assert b.identity()["roles"]["chain"]["persist"] == 0.25 and b.identity()["roles"]["star_leaf"]["persist"] == 1.0


@pytest.mark.slow
def test_recovers_known_parameters_from_a_harness_run(tmp_path):
    """(a) of issue 15, small: 40 trials of the real harness with known parameters -> calibrate three of them
    from the run directory (a short fit; the rest fixed at the truth) -> the truth within 3 bootstrap s.d."""
    from mascot.calibrate.trials_checks import recovery

    names = ("sigma", "bias", "persist")
    from mascot.calibrate.trials import nest_params

    start = nest_params({"sigma": 75.0, "bias": 0.0, "persist": 0.5})  # hand-tuned-v1's scale, not the truth
    # 40 trials, simulated at the observed size (quick), 60 ES steps, then the polish on 400 simulated trials: the
    # truth at z = 1.8, 1.8, 0.7 (the start at about 4, 11, 2.5); with seeds 0-7 all inside, the largest z 2.6.
    # More ES steps on 40 simulated trials did not recover better: with 150 the truth was at z = 2.3, 2.3, 1.8
    # here and outside (z 3.2-3.3) with seeds 0, 1 and 3; with 30, persist stayed at its start with seed 3
    r = recovery(
        tmp_path, TRUTH, n_trials=40, seed=2, n_boot=100, steps=60, n_pred=8, fit_names=names, init=start, quick=True
    )
    assert [row["param"] for row in r["rows"]] == list(names)
    off = [row for row in r["rows"] if not row["inside"]]
    assert not off, off
    loaded = SurrogateBackend.from_params(tmp_path / "fit" / "params.toml")
    est = {row["param"]: row["estimate"] for row in r["rows"]}
    assert loaded.params()["sigma"] == pytest.approx(est["sigma"])
    assert (tmp_path / "fit" / "report.md").read_text().count("|") > 50


def test_split_half_holds_out_the_other_half(tmp_path):
    """(d) machinery on a surrogate-generated run: half A is fitted (a token fit here, with --init and --fit as in
    the init-file test, whose programs it shares: its quality is shown in
    results/calibration/trials/split-half-surrogate), half B's moments are those of the held-out trials,
    checked against numpy on the analysis code's per-trial metrics of exactly those trials."""
    from mascot.calibrate.trials_checks import split_half

    backend = SurrogateBackend(seed=4, judge="median", **{**TRUTH, "parse_fail": 0.5})  # 12.5% abstain
    run, per = _run(tmp_path, backend, 20, 9, "run")
    r = split_half(run, tmp_path / "split", seed=1, n_pred=3, init=_init_file(tmp_path), **SHARED_FIT)
    a, b = (np.array(h) for h in r["halves"])
    assert len(a) == len(b) == 10 and not set(a) & set(b) and set(a) | set(b) == set(range(20))
    got = {row["moment"]: row["held_out"] for row in r["rows"]}
    for t in ("chain", "mesh", "star"):
        for m in ("E_ceg", "F_ps"):
            x = per[t][m][b]
            assert got[f"{t}.{m}.mean"] == pytest.approx(float(np.mean(x)), rel=1e-12)
            assert got[f"{t}.{m}.sd"] == pytest.approx(float(np.std(x, ddof=1)), rel=1e-12)
        for k in ("log1p_err.s1", "log1p_gap.s8-12", "parity_miss"):
            assert got[f"{t}.{k}.mean"] == pytest.approx(float(np.mean(per[t][k][b])), rel=1e-12)
    # the abstention share, from the parquet's counts and the requests per step the config implies (1 chain
    # agent; 4 leaves + the judge; 4 mesh agents + 4 revisers), unperturbed arm, steps 1-12, held-out trials
    import pandas as pd

    df = pd.read_parquet(run / "trials.parquet")
    df = df[(df.step > 0) & ~df.perturbed & df.trial.isin(b)]
    for t, n_req in (("chain", 1), ("star", 5), ("mesh", 8)):
        want = (df[df.topology == t].groupby("trial").n_abstained.sum() / (12 * n_req)).mean()
        assert got[f"{t}.abstained.mean"] == pytest.approx(float(want), rel=1e-12, abs=1e-15)
    tol = lambda row: 4 * np.finfo(np.float32).eps * (1 + abs(row["lo"]) + abs(row["hi"]))  # noqa: E731 (float32 ties)
    assert r["n_moments"] == 18 + (12 + 3) + (16 + 3) + (16 + 3) and r["inside"] == sum(
        row["lo"] - tol(row) <= row["held_out"] <= row["hi"] + tol(row) for row in r["rows"]
    )
    cov = r["coverage"]  # informative rows: a range of one value that the held-out value sits on is not counted
    single = [row["moment"] for row in r["rows"] if row["hi"] - row["lo"] <= tol(row) and row["inside"]]
    assert cov["constant"] == single and cov["counted"] == r["n_moments"] - len(single) - len(cov["repeats"])
    text = (tmp_path / "split" / "split_half.md").read_text()
    assert f"range: {cov['counted_inside']} of {cov['counted']}**" in text and "| half A (fitted) |" in text
    assert (tmp_path / "split" / "fit" / "params.toml").is_file()


def test_init_file_supplies_the_unfitted_parameters_and_the_run_judge_is_read(tmp_path):
    """Found by an outside tester: with --init and --fit, the parameters not fitted come from the init file
    (not hand-tuned-v1); a run made with judge = median is calibrated with judge = median; params.toml is
    written last (a directory with one is complete)."""
    from mascot.calibrate.trials_fit import calibrate_trials

    run, _ = _run(tmp_path, SurrogateBackend(seed=1, judge="median"), 10, 3, "run")
    out = tmp_path / "cal"
    s = calibrate_trials(run, out, n_pred=2, init=_init_file(tmp_path), **SHARED_FIT)
    got = SurrogateBackend.from_params(out / "params.toml")
    assert (got.sigma, got.bias, got.judge) == (33.0, -7.0, "median") and set(s["estimates"]) == {"parse_fail"}
    names = sorted(p.name for p in out.iterdir())
    assert (out / "params.toml").stat().st_mtime_ns >= max((out / n).stat().st_mtime_ns for n in names)


def test_natural_coordinates_make_the_noise_scale_symmetry_a_straight_line():
    """A role's Value noise is c * (bias + sigma * blunder * z): sigma, bias -> e^t sigma, e^t bias with every
    role's scale c -> e^-t c leaves every simulated trial unchanged (with the slips, c * parity_slip and
    c * level_slip, at 0: they are what breaks the symmetry in a fit, with the roles whose c is fixed). In ``natural_coords`` that orbit is one
    fixed direction of u (a straight line: the linearization and the polish can follow it); the straight line
    with the orbit's tangent in the box coordinates leaves it (the trials change)."""
    import jax

    from mascot.calibrate.fit import Param, box_coords
    from mascot.calibrate.trials import SimConfig, flat_params, natural_coords, nest_params, simulate_program
    from mascot.kernels.precision import float64

    base = flat_params(
        nest_params({"sigma": 20.0, "bias": -30.0, "p_blunder": 0.2, "parity_slip": 0.0, "level_slip": 0.0})
    )
    scales = (
        "chain.sigma_scale",
        "star_leaf.sigma_scale",
        "mesh_agent.sigma_scale",
        "star_judge.noise",
        "mesh_reviser.noise",
    )
    params = [
        Param("sigma", 1.0, 600.0, 20.0),
        Param("bias", -400.0, 400.0, -30.0),
        Param("p_blunder", 0.0, 0.5, 0.2),
    ] + [Param(k, 0.01, 5.0, 0.5) for k in scales]
    v0 = {p.name: base[p.name] for p in params}
    nat, box = natural_coords(params, base), box_coords(params)
    np.testing.assert_allclose([nat.inv(nat.fwd(v0))[k] for k in v0], list(v0.values()), rtol=1e-12)
    # the jitted simulator of Table 2's setting (100 trials, judge = mean, no step profile): the program the
    # leave-one-out test's predictions use, compiled once for the file
    sim = simulate_program(SimConfig(n_trials=100), False)

    def trials(v):
        with float64():
            out = sim({**base, **v}, jax.random.PRNGKey(5))
            return np.concatenate([np.asarray(out[t]).ravel() for t in sorted(out)])

    ref = trials(v0)
    direction = np.array([1.0, 0.0, 0.0] + [-1.0] * len(scales))  # log sigma +t, bias / sigma fixed, log c -t
    t = 0.4
    moved = nat.inv(nat.fwd(v0) + t * direction)
    assert moved["sigma"] == pytest.approx(20.0 * math.exp(t)) and moved["bias"] == pytest.approx(-30.0 * math.exp(t))
    np.testing.assert_allclose(trials(moved), ref, rtol=1e-9, atol=1e-9)
    # the box coordinates: the orbit's tangent at u0 (finite difference), followed in a straight line
    eps = 1e-6
    tangent = (box.fwd(nat.inv(nat.fwd(v0) + eps * direction)) - box.fwd(v0)) / eps
    straight = box.inv(box.fwd(v0) + t * tangent)
    off = np.abs(trials(straight) - ref)
    assert np.nanmax(off) > 1.0, np.nanmax(off)


def test_natural_coordinates_with_a_fixed_sigma_of_zero():
    """Found by an outside tester: --init with sigma = 0 (a valid surrogate: no Value noise) and bias fitted
    divided by zero in bias / sigma; bias then is its own coordinate, and round trips."""
    from mascot.calibrate.fit import Param
    from mascot.calibrate.trials import natural_coords

    c = natural_coords([Param("bias", -400.0, 400.0, 0.0), Param("chain.persist", 0.0, 1.0, 0.5)], {"sigma": 0.0})
    u = c.fwd({"bias": -37.5, "chain.persist": 1.0})
    assert u.tolist() == [-37.5, 1.0]
    assert c.inv(u + np.array([1.0, 0.3])) == {"bias": -36.5, "chain.persist": 1.0}  # clipped to its box
    assert c.raw(u + np.array([1.0, 0.3])) == pytest.approx({"bias": -36.5, "chain.persist": 1.3})  # not clipped


@pytest.mark.x64
def test_one_home_for_the_reply_model_numpy_and_jax_agree_and_judges_aggregate_like_the_protocol():
    """The reply model (protocols/state_tracking/dynamics.py) serves the surrogate (numpy) and the simulator
    (JAX): on the same draws both give the same replies (Values but for XLA's last bit); its aggregation is the protocol's (a plain-Python
    reference: the mean in order, the median of the sorted Values, majority Parity and Level with the documented
    ties, and aggregation.plurality_vote for "vote")."""
    import statistics

    import jax.numpy as jnp

    from mascot.kernels.state_tracking import rule_step, rule_step_misread
    from mascot.protocols.state_tracking import dynamics
    from mascot.protocols.state_tracking.aggregation import plurality_vote

    rng = np.random.default_rng(0)
    n, k = 400, 5
    g = {"sigma": 40.0, "bias": -3.0, "rho_c": 0.3, "parity_slip": 0.2, "level_slip": 0.3}
    g |= {"p_blunder": 0.2, "blunder_scale": 4.0}
    r_agent = {"p_exact": 0.2, "p_echo": 0.1, "sigma_scale": 0.8, "p_keep_parity": 0.3, "p_boundary": 0.4}
    r_judge = {"p_copy": 0.3, "p_recompute": 0.1, "noise": 0.5}
    d = dynamics.Draws(
        *(rng.uniform(size=n) for _ in range(2)), *rng.standard_normal((2, n)), *rng.uniform(size=(4, n))
    )
    state = (np.round(rng.uniform(0, 200, n), 2), rng.integers(0, 2, n).astype(np.int32), rng.integers(1, 10, n))
    state = (state[0], state[1], state[2].astype(np.int32))
    rule = tuple(np.asarray(x) for x in rule_step(*state))
    mis = tuple(np.asarray(x) for x in rule_step_misread(*state))
    props = (  # few distinct values, so that votes and majorities tie
        rng.choice([60.0, 70.5, 81.25], (n, k)),
        rng.integers(0, 2, (n, k)).astype(np.int32),
        rng.integers(1, 4, (n, k)).astype(np.int32),
    )
    ok = rng.uniform(size=(n, k)) < 0.7
    J = lambda t: tuple(jnp.asarray(x) for x in t)  # noqa: E731
    dj = dynamics.Draws(*(jnp.asarray(x) for x in d))
    a_np = dynamics.agent_reply(g, r_agent, state, rule, mis, d)
    a_jx = dynamics.agent_reply(g, r_agent, J(state), J(rule), J(mis), dj, jnp)
    same = (
        lambda x, y: [  # noqa: E731  (Values: XLA divides by 100 through a reciprocal, the last bit differs)
            np.testing.assert_allclose(x[0], np.asarray(y[0]), rtol=4e-16, atol=0),
            *(np.testing.assert_array_equal(a, np.asarray(b)) for a, b in zip(x[1:], y[1:])),
        ]
    )
    same(a_np, a_jx)
    for method in ("mean", "median", "vote"):
        j_np = dynamics.judge_reply(g, r_judge, rule, props, ok, method, d)
        j_jx = dynamics.judge_reply(g, r_judge, J(rule), J(props), jnp.asarray(ok), method, dj, jnp)
        same(j_np, j_jx)
        av, ap, al = dynamics.aggregate(method, *props, ok)
        for i in np.flatnonzero(ok.any(1)):
            shown = [
                {"Value": props[0][i, j], "Parity": "AB"[props[1][i, j]], "Level": int(props[2][i, j])}
                for j in range(k)
                if ok[i, j]
            ]
            if method == "vote":
                want, _ = plurality_vote(shown)
            else:
                vals = [s["Value"] for s in shown]
                v = sum(vals) / len(vals) if method == "mean" else statistics.median(vals)
                nb = sum(s["Parity"] == "B" for s in shown)
                par = ("A" if v < 70 else "B") if 2 * nb == len(shown) else "AB"[nb * 2 > len(shown)]
                counts = [sum(s["Level"] == lv for s in shown) for lv in range(1, 10)]
                want = {"Value": v, "Parity": par, "Level": 1 + counts.index(max(counts))}
            assert (av[i], "AB"[ap[i]], al[i]) == (want["Value"], want["Parity"], want["Level"]), (method, i, shown)
    # the mixture's shares, as the draws say: exact replies are the rule's (misread) state, echoes the input
    exact, echo = d.mix < 0.2, (d.mix >= 0.2) & (d.mix < 0.3)
    want_exact = np.where(d.aux < 0.4, mis[0], rule[0])
    np.testing.assert_array_equal(a_np[0][exact], want_exact[exact])
    np.testing.assert_array_equal(a_np[0][echo], state[0][echo])
    assert (a_np[0][~exact & ~echo] != want_exact[~exact & ~echo]).mean() > 0.95  # noisy replies are noisy


def test_leave_one_out_never_sees_what_it_predicts(tmp_path, monkeypatch):
    """Issue 31: Table 2 without the star topology. Other star numbers give the same estimate and predictions
    (the fit never reads them; every parameter starts at its box's centre, not at a start fitted to all of
    Table 2); the rows' observed values are Table 2's star moments, the report counts what it says, and the
    star's own roles are not fitted (no held-in moment moves them) but drawn in their boxes."""
    import json

    from mascot import papers
    from mascot.calibrate.trials_checks import leave_one_out_table2

    kw = dict(quick=True, steps=3, n_boot=4, n_pred=3, seed=2)
    a = leave_one_out_table2(tmp_path / "a", "star", **kw)
    t2 = {m: dict(v) for m, v in papers.SR_TABLE2.items()}
    for m in t2:
        t2[m]["star"] = (t2[m]["star"][0] * 3 + 1, t2[m]["star"][1] * 2 + 1)
    monkeypatch.setattr(papers, "SR_TABLE2", t2)
    b = leave_one_out_table2(tmp_path / "b", "star", **kw)
    fa, fb = (json.loads((tmp_path / x / "fit" / "fit.json").read_text()) for x in "ab")
    assert fa["estimates"] == fb["estimates"] and fa["predicted"] == fb["predicted"]
    assert a["held_out"] == [f"star.{m}.{s}" for m in ("E_ceg", "R_cdr", "F_ps") for s in ("mean", "sd")]
    want = {f"star.{m}.{s}": v for m, row in _paper_star_rows().items() for s, v in zip(("mean", "sd"), row["star"])}
    # the star's R_cdr, which no Table 2 fit reaches (excluded in the record), is shown apart, not counted
    apart = {"star.R_cdr.mean", "star.R_cdr.sd"}
    assert {r["moment"] for r in a["not_counted"]} == apart == set(fa["excluded"]) & set(a["held_out"])
    assert {r["moment"]: r["held_out"] for r in a["rows"] + a["not_counted"]} == want
    assert {r["moment"] for r in a["rows"]} == set(want) - apart and a["n_moments"] == 4
    assert {r["moment"]: r["held_out"] for r in b["rows"]}["star.E_ceg.mean"] == 1184.24 * 3 + 1
    for r in a["rows"]:
        assert r["inside"] == (r["lo"] <= r["held_out"] <= r["hi"])
    assert a["inside"] == sum(r["inside"] for r in a["rows"])
    assert all(w == 0 for n, w in zip(fa["moment_names"], fa["weights"]) if n.startswith("star."))
    from mascot.calibrate.trials_fit import DEFAULT_FIT

    star_roles = {n for n in DEFAULT_FIT if n.startswith(("star_leaf.", "star_judge."))}
    assert len(star_roles) == 6 and set(a["left_open"]) == set(fa["prior"]) == star_roles
    assert not star_roles & set(fa["estimates"])  # not fitted: drawn in their boxes for the predictions
    text = (tmp_path / "a" / "leave_out.md").read_text()
    assert f"inside their predicted 5-95% range: {a['inside']} of 4**" in text
    assert "| star.R_cdr.mean | -3.44 |" in text and text.count("not counted |") == 2
    # the report is rendered from the record: rendering it again gives the same files
    from mascot.calibrate.trials_checks import leave_out_report

    files = {f: (tmp_path / "a" / f).read_bytes() for f in ("leave_out.md", "leave_out.json")}
    assert leave_out_report(tmp_path / "a", "star") == a
    assert files == {f: (tmp_path / "a" / f).read_bytes() for f in files}
    with pytest.raises(ValueError, match="leave must be one of"):
        leave_one_out_table2(tmp_path / "c", "ring", **kw)


def _paper_star_rows():
    """Table 2 as the paper prints it (independent of any monkeypatching: typed from the paper)."""
    return {"E_ceg": {"star": (1184.24, 951.91)}, "R_cdr": {"star": (-3.44, 2.4)}, "F_ps": {"star": (443.64, 307.45)}}


def test_an_impossible_fixed_parameter_set_is_refused_before_the_fit(tmp_path):
    """Found by the leave-one-out fits: a base with p_exact + p_echo > 1 ran a five-minute fit on an impossible
    model and failed only when writing params.toml; it is refused at once now, naming the constraint."""
    from mascot.calibrate.trials import nest_params
    from mascot.calibrate.trials_fit import calibrate_trials

    bad = nest_params({"star_leaf.p_echo": 0.5, "star_leaf.p_exact": 0.9})
    with pytest.raises(ValueError, match="p_exact \\+ p_echo must be <= 1"):
        calibrate_trials(None, tmp_path / "c", quick=True, steps=2, n_boot=0, base=bad)
    assert not (tmp_path / "c").exists()
