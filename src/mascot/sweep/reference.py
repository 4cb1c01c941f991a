"""The parameter reference of the sweep kinds (``mascot params``), from the same :class:`~mascot.sweep.schema.Param`
tables that validate configs."""

from __future__ import annotations

from mascot.sweep.kinds import KINDS

__all__ = ["NOTES", "describe", "kind_note", "distinct_simulations"]


#: What a kind's parameter table alone does not say (printed under it by ``mascot params``).
NOTES = {
    "consensus": "Every row also holds Theorem 1's adaptive certificate (K_star, B_star from D(0), eta, eps, "
    "lambda1, lambda2, c1, c2), whatever its strategy: those columns read eta, c1, c2 and both self-weights at "
    "every point. Output columns: point, trajectory, the parameters, lambda1, lambda2, d0, rounds, tokens, "
    "d_final, status ({status}), K_star, B_star.",
    "spectra": "Deterministic families (chain, star, mesh, ring, complete, malicious_star) give one row per "
    "point; random families `graphs` rows, each a seeded sample.",
    "affine_noise": 'model = "rule" needs experiment.dtype = "float64".',
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


def distinct_simulations(cfg, limit: int = 100_000) -> int | None:
    """How many of ``cfg``'s grid points differ in what they simulate: each point's parameters with those its
    strategy or family does not simulate with (:attr:`Param.reads`) left out (``None`` above ``limit`` points,
    where expanding the grid would take long: about 28 us a point, 2.8 s at the limit, on one core). Points counted once here still run separately today."""
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
        seen.add(key)
    return len(seen)
