"""The parameter reference of the sweep kinds (``mascot params``), from the same :class:`~mascot.sweep.schema.Param`
tables that validate configs."""

from __future__ import annotations

from mascot.sweep.kinds import KINDS

__all__ = ["NOTES", "describe", "kind_note", "distinct_simulations"]


#: What a kind's parameter table alone does not say (printed under it by ``mascot params``).
NOTES = {
    "experiment": "Other tables: [fixed] (one value per parameter, shared by every point), [grid] (the axes of a "
    "cartesian product, last fastest; a value is a list, {linspace = [start, stop, count]}, {logspace = [start, "
    "stop, count]} (geometric), or {range = [start, stop, step]} (stop excluded)), [grid.zip.NAME] (lists of equal "
    "length taken together: one axis), [grid.random] (count = N seeded random points crossed with the other axes; "
    "values {uniform = [a, b]}, {loguniform = [a, b]} or {choice = [...]}), and [output] with its one key dir "
    "(the run directory; default runs/NAME, --out overrides it). Command-line overrides: KEY=VALUE with a dotted "
    "key (grid.n=5,8,16, fixed.trajectories=256, experiment.seed=3, output.dir=runs/x) or a bare one, ~KEY "
    "removes one. `mascot params KIND` lists a kind's parameters.",
    "consensus": "Every row also holds Theorem 1's adaptive certificate (K_star, B_star from D(0), eta, eps, "
    "lambda1, lambda2, c1, c2), whatever its strategy: those columns read eta, c1, c2 and both self-weights at "
    "every point. Output columns: point, trajectory, the parameters, lambda1, lambda2, d0, rounds, tokens, "
    "d_final, status ({status}; the merged file's status field carries these labels in its metadata), K_star, "
    "B_star, certified (b0 >= B_star).",
    "spectra": "Families (n agents, P the row-normalised adjacency): chain = the directed path i -> i+1 (the "
    "upper shift; the last agent reads nobody, so P is nilpotent), star = agent 0 reads every leaf and every leaf "
    "reads agent 0, mesh = every agent reads every other (no self-loops), ring = the undirected cycle, complete = "
    "self-weight a and (1 - a)/(n - 1) elsewhere, malicious_star = the star with leaf 1 weighted alpha in the "
    "centre's aggregation, erdos_renyi = G(n, p), watts_strogatz = ring lattice of `degree` neighbours rewired "
    "with probability beta, random_regular = a uniform `degree`-regular graph. Deterministic families give one "
    "row per point; random families `graphs` rows, each a seeded sample (the same samples for every gamma). "
    "Output columns: point, graph, family, n, gamma, the family parameters (p, degree, beta, alpha, a; missing "
    "(null) in the rows of a family that does not read them), method (the eigenvalue route), isolated (agents that "
    "read nobody: zero rows of A, kept as zero rows of P, such as the chain's last agent; not a connectivity test, "
    "`mascot diagnose` counts separate groups), rho, delta, kappa (spectral radius, gap and condition number of M = (I - gamma P)^-1).",
    "affine_noise": 'model = "rule" needs experiment.dtype = "float64". Output columns: point, the parameters, '
    "ceg_mean, ceg_sd, ceg_se, ceg_median, ceg_q05, ceg_q95 (the cumulative error over the trials), diverged "
    "(trials that overflowed), ceg_theory (A.3's closed form, linear model with aggregate = mean) and "
    "ratio_theory_k (A.4's chain-to-aggregate ratio).",
}


def kind_note(kind: str) -> str:
    """:data:`NOTES` for ``kind``, its status codes from :data:`mascot.theory.STATUS_NAMES`."""
    from mascot.theory import STATUS_NAMES

    return NOTES.get(kind, "").replace("{status}", ", ".join(f"{k} {v}" for k, v in STATUS_NAMES.items()))


def describe(kind: str) -> list[dict]:
    """Every parameter of sweep kind ``kind`` as rows: key, type, default, range, unit, meaning and which
    points simulate with it (what ``mascot params KIND`` prints)."""
    spec = KINDS[kind]
    rows = []
    for k, p in spec.params.items():
        reads = "every point" if p.reads is None else f"{p.reads[0]} in {', '.join(p.reads[1])}"
        default = p.default
        if default is None and k in spec.derived_from:
            default = f"from {spec.derived_from[k]}"
        rows.append(
            dict(
                key=k,
                type=p.type.__name__,
                default=default,
                range=p.rule,
                unit=p.unit,
                meaning=p.doc,
                simulated_by=reads,
            )
        )
    return rows


# points whose random draws come from their own point index (fold_in of the point key), not shared streams:
# consensus belief noise, the affine-noise Monte Carlo (X0 and random graphs are shared across points)
_OWN_DRAWS = {"consensus": lambda p: p["noise"] > 0, "affine_noise": lambda p: True}


def distinct_simulations(cfg, limit: int = 100_000, per_chunk: bool = False) -> int | None:
    """How many of ``cfg``'s grid points differ in what they simulate: each point's parameters with those its
    strategy or family does not simulate with (:attr:`Param.reads`) left out (``None`` above ``limit`` points,
    where expanding the grid would take long: about 28 us a point, 2.8 s at the limit, on one core).

    ``per_chunk``: how many simulations a run makes. Points that simulate the same thing run once within a
    chunk (chunks are independent, so equal points in different chunks each run theirs): a grid whose unread
    axes vary fastest, or a larger ``chunk_size``, brings this down to the distinct count."""
    if cfg.n_points > limit:
        return None
    spec = KINDS[cfg.kind]
    own = _OWN_DRAWS.get(cfg.kind, lambda p: False)
    seen = set()
    for i, p in enumerate(cfg.points()):
        full = spec.fill(p)
        key = tuple(
            (k, full[k])
            for k, prm in spec.params.items()
            if prm.reads is None or full.get(prm.reads[0]) in prm.reads[1]
        ) + ((("point", i),) if own(full) else ())  # a point with its own random draws is its own simulation
        seen.add(key + ((("chunk", i // cfg.chunk_size),) if per_chunk else ()))
    return len(seen)
