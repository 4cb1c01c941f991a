"""Pre-inference triage of communication graphs (SR paper "Predictive Maps of Multi-Agent Reasoning", Sec. 5.6).

:func:`diagnose` turns adjacency matrices into rho, Delta, kappa (of M = (I - gamma P)^-1), the
drift-corrected gain rho~ (eq. 4) and its bias-aware form rho~_c (eq. 6), and :func:`triage_text`
writes the paper's reading: kappa first (perturbation robustness), Delta second with the aggregator
caveat (a lower bound on consensus speed where judges or votes aggregate), rho~ for cumulative drift.

Aggregation profile k_i: the effective number of proposals agent i averages per step. Default: the
number of agents i reads (nonzeros of row i of A: itself too when A has a self-loop), at least 1 (an agent that reads nobody keeps its own
view: one input); so the star's judge has k = leaves, its
leaves k = 1, the mesh k = n - 1, the chain k = 1. Pass ``k_profile`` to override it (e.g. the paper's
"k = 4 per step" for both star and mesh).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from mascot.errors import InputError, NotFoundError
from mascot.graphs import canonical_spec, from_spec, validate_adjacency

__all__ = ["diagnose", "default_k_profile", "load_adjacency", "triage_text", "rank", "gamma_warning"]


def default_k_profile(A) -> np.ndarray:
    return np.maximum((np.asarray(A) > 0).sum(axis=-1), 1).astype(np.float64)


def load_adjacency(path, what: str = "adjacency") -> np.ndarray:
    """Read an adjacency from .npy, .csv (comma-separated numbers, optional header row) or .json
    (a list of rows, or an object with key "adjacency"). Every problem is a ``ValueError`` (or
    ``FileNotFoundError``) naming the file: a directory, an empty or malformed file, not one 2-D matrix.
    ``what`` names the matrix in those messages (e.g. "cost" for a cost matrix read the same way)."""
    p = Path(path)
    if not p.exists():
        raise NotFoundError(f"{what} file not found: {p}")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not {'an' if what[0] in 'aeiou' else 'a'} {what} file")
    suf = p.suffix.lower()
    if suf not in (".npy", ".json", ".csv", ".txt"):
        raise InputError(f"{what} file must be .npy, .csv, .txt or .json; got {p.name}")
    try:
        A = _read_matrix(p, suf)
    except (ValueError, TypeError, KeyError, OSError, EOFError) as e:
        msg = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
        raise InputError(f"{p}: not a readable {suf[1:]} {what} matrix ({msg})") from None
    if A.ndim != 2:
        raise InputError(
            f"{p}: {'an' if what[0] in 'aeiou' else 'a'} {what} file holds one n x n matrix; got shape {A.shape}"
        )
    return validate_adjacency(A, str(p))


def _read_matrix(p: Path, suf: str) -> np.ndarray:
    if suf == ".npy":
        try:
            return np.asarray(np.load(p, allow_pickle=False))
        except ValueError as e:  # numpy's advice to load a pickle "unsafely" is no advice for a weights file
            if "pickle" not in str(e):
                raise
            raise InputError(
                "no .npy array header (a file of another kind, or an object array; mascot never loads pickles)"
            ) from None
    text = p.read_bytes().decode("utf-8").removeprefix("\ufeff")  # (a byte-order mark: not a header row)
    if not text.strip():
        raise InputError("the file is empty")
    if suf == ".json":
        obj = json.loads(text)
        if isinstance(obj, dict) and "adjacency" not in obj:
            raise InputError('a JSON object needs the key "adjacency"')
        rows = obj["adjacency"] if isinstance(obj, dict) else obj
        if isinstance(rows, list):  # numbers only: "1", true and null are not weights
            if not all(isinstance(r, list) for r in rows):
                raise InputError("the matrix must be a list of rows, each a list of numbers")
            bad = [v for r in rows for v in r if isinstance(v, bool) or not isinstance(v, (int, float))]
            if bad:
                raise InputError(f"entries must be JSON numbers; got {json.dumps(bad[0])}")
            short = next((i for i, r in enumerate(rows) if len(r) != len(rows[0])), None)
            if short is not None:
                raise InputError(f"row {short} has {len(rows[short])} entries, row 0 has {len(rows[0])}")
        return np.asarray(rows, dtype=np.float64)
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]  # (# comments)
    if not lines:
        raise InputError("no numeric rows")
    if any(";" in ln for ln in lines):  # (a semicolon-separated file read as one header cell per line: "shape (1, 0)")
        raise InputError("values are separated by ';': separate them by commas, spaces or tabs")

    def split(ln):  # commas (quoted names may hold one), tabs (empty cells kept), else any whitespace
        if "," in ln:
            return [c.strip() for c in next(csv.reader([ln]))]
        return [c.strip() for c in ln.split("\t")] if "\t" in ln else ln.split()

    def number(c):
        try:
            return float(c)
        except ValueError:
            return None

    header = None
    first = split(lines[0])
    if not first or first[0] == "" or number(first[0]) is None:  # a header row (pandas' to_csv starts its
        header, lines = lines[0], lines[1:]  # with an empty cell above the index: ",0,1,2")
    if not lines:
        raise InputError("no numeric rows")
    cells = [split(ln) for ln in lines]
    # a first column of row labels, as pandas' to_csv writes its index beside a header of column names: labels
    # that are not numbers, an empty header cell above them, or n rows of n + 1 cells under a header
    if header is not None and cells:
        names = split(header)
        widths = {len(r) for r in cells}
        labels = (
            all(r and number(r[0]) is None for r in cells)
            or (names[:1] == [""] and widths == {len(names)})
            or (widths == {len(cells) + 1} and len(names) == len(cells) + 1)
        )
        if labels:
            cells = [r[1:] for r in cells]
            header = names[1:] if names and len(names) == len(cells[0]) + 1 else names
    bad = next(((i, c) for i, r in enumerate(cells) for c in r if number(c) is None), None)
    if bad is not None:
        what = "an empty cell (a missing weight: write 0 for no edge)" if bad[1] == "" else f"{bad[1]!r}, not a number"
        raise InputError(f"row {bad[0]} holds {what}")
    rows = [[float(c) for c in r] for r in cells]
    if len({len(r) for r in rows}) != 1:
        raise InputError(f"rows have different lengths {sorted({len(r) for r in rows})}")
    n = len(rows[0])
    # pandas' column names 0..n-1 or 1..n as a header (to_csv with index=False): n + 1 rows are no adjacency
    if header is None and len(rows) == n + 1 and rows[0] in (list(range(n)), list(range(1, n + 1))):
        header, rows = cells[0], rows[1:]
    names = None if header is None else header if isinstance(header, list) else split(header)
    if names is not None and len(names) != len(rows[0]):
        raise InputError(f"the header names {len(names)} columns but rows have {len(rows[0])}")
    return np.array(rows)


def diagnose(graphs: dict, gamma: float = 0.9, rho_c: float = 0.0, k_profiles: dict | None = None) -> list[dict]:
    """Diagnostics for named adjacency matrices ``{name: A}``; one dict per graph, in input order.

    Keys: name, n, gamma, rho, delta, kappa, aggregation_factor (mean_i 1/sqrt(k_i)), rho_tilde (eq. 4),
    rho_tilde_c (eq. 6 at ``rho_c``), k_profile, components (groups of agents with no edge between them, either
    direction), silent_agents (agents with no edge to or from another agent; a self-loop alone counts as
    silent), reads_nobody (agents whose row of A is zero: they
    keep their own view; the ``isolated`` column of a ``spectra`` sweep) and sources (groups of agents that read
    no one outside their group: the closed classes of P; every agent's view ends up a mix of the sources it
    hears, so one team has one source: the chain's last agent, the star's or mesh's whole team; two agents that
    read nobody, both read by a third, are two).

    Arguments: ``graphs`` name -> adjacency; ``gamma`` the discount; ``rho_c`` the shared-bias fraction;
    ``k_profiles`` name -> inputs aggregated per agent (default: the number of agents each reads, itself
    included when A has a self-loop).
    """
    from scipy.sparse.csgraph import connected_components

    from mascot.graphs import row_normalize
    from mascot.theory.noise import bias_aware_gain, drift_corrected_gain
    from mascot.theory.spectra import check_gamma, sr_diagnostics

    if not 0.0 <= rho_c <= 1.0:
        raise InputError(f"rho_c must be in [0, 1]; got {rho_c!r}")
    out = []
    for name, A in graphs.items():
        A = validate_adjacency(A, name)
        off = A * (1 - np.eye(A.shape[0]))  # edges between agents (a self-loop alone leaves an agent silent)
        k = (k_profiles or {}).get(name)
        k = default_k_profile(A) if k is None else np.broadcast_to(np.asarray(k, dtype=np.float64), A.shape[:1])
        # a handful of graphs: float64 numpy is exact and takes milliseconds (no compilation);
        # batches of thousands belong to mascot.kernels.sr_spectra
        s = sr_diagnostics(row_normalize(A, name), float(check_gamma(gamma)))
        rho = float(s.rho)
        # a gap that is 0 in exact arithmetic (a repeated leading eigenvalue: several sources or groups) comes out
        # as rounding noise, 7e-15, which ranked a team that never agrees "fastest"; below 1e-12 of rho it is 0,
        # as in the spectra report
        delta = float(s.delta) if abs(float(s.delta)) > 1e-12 * abs(rho) else 0.0
        out.append(
            dict(
                name=name,
                n=int(A.shape[0]),
                gamma=float(gamma),
                rho=rho,
                delta=delta,
                kappa=float(s.kappa),
                aggregation_factor=float(np.mean(1.0 / np.sqrt(k))),
                rho_tilde=float(drift_corrected_gain(rho, k)),
                rho_tilde_c=float(bias_aware_gain(rho, k, rho_c)),
                rho_c=float(rho_c),
                k_profile=[float(x) for x in k],
                components=int(connected_components(A != 0, directed=True, connection="weak")[0]),
                silent_agents=int(np.sum(~(off != 0).any(axis=0) & ~(off != 0).any(axis=1))),
                reads_nobody=int(np.sum(~(A != 0).any(axis=1))),
                sources=_sources(A != 0),
            )
        )
    return out


def _sources(reads: np.ndarray) -> int:
    """The number of closed groups of the read graph (``reads[i, j]``: agent i reads agent j): its strongly
    connected components from which no agent reads anyone outside."""
    from scipy.sparse.csgraph import connected_components

    _, label = connected_components(reads, directed=True, connection="strong")
    i, j = np.nonzero(reads)
    leaks = np.unique(label[i[label[i] != label[j]]])  # groups with an agent that reads outside them
    return int(label.max() + 1 - leaks.size)


def rank(rows: list[dict]) -> dict:
    """Orderings by each diagnostic: kappa ascending (most robust first), Delta descending (fastest
    consensus first), rho_tilde_c ascending (least predicted drift first)."""
    names = [r["name"] for r in rows]
    by = lambda key, rev: [names[i] for i in sorted(range(len(rows)), key=lambda i: rows[i][key], reverse=rev)]  # noqa: E731
    return {"kappa": by("kappa", False), "delta": by("delta", True), "rho_tilde_c": by("rho_tilde_c", False)}


def gamma_warning(gamma: float) -> str | None:
    """A sentence on the float64 digits left when ``gamma`` is so close to 1 that M = (I - gamma P)^-1 is
    ill-conditioned (an eigenvalue 1 - gamma of I - gamma P is computed to about 1e-16 absolute, so rho and kappa
    lose about log10(1e-16 / (1 - gamma)) digits), or None when at least 8 remain."""
    gap = 1.0 - float(gamma)
    if gap <= 0 or gap >= 1e-8 * 2.3:
        return None
    digits = max(0, math.floor(math.log10(gap / np.finfo(np.float64).eps)))
    return (
        f"gamma = {float(gamma)!r} is within {gap:.1e} of 1: M = (I - gamma P)^-1 is ill-conditioned there, and rho "
        f"and kappa carry about {digits} correct significant digits in float64 (1 - gamma itself is rounded)"
    )


def triage_text(rows: list[dict]) -> str:
    w = max(22, *(len(r["name"]) + 2 for r in rows))  # (long names pushed the columns out of line)
    lines = [f"{'topology':<{w}}{'n':>5}{'rho':>10}{'Delta':>10}{'kappa':>10}{'rho~':>10}{'rho~_c':>10}"]
    for r in rows:
        lines.append(
            f"{r['name']:<{w}}{r['n']:>5}{r['rho']:>10.4g}{r['delta']:>10.4g}{r['kappa']:>10.4g}"
            f"{r['rho_tilde']:>10.4g}{r['rho_tilde_c']:>10.4g}"
        )
    g, rc = rows[0]["gamma"], rows[0]["rho_c"]
    # (the shortest form that reads back as gamma: 0.999999999999999 printed as "1", a value diagnose refuses)
    lines.append(f"(gamma = {float(g)!r}; rho~_c at rho_c = {rc:g}; k_i = inputs per agent unless --k-profile)")
    if gamma_warning(g):
        lines.append(f"Warning: {gamma_warning(g)}.")
    lines.append("")
    lines.append("Triage (SR paper, Sec. 5.6):")
    lines.append("  1. kappa first: the cleanest predictor of perturbation sensitivity; lower is more robust.")
    lines.append("  2. Delta next: larger means faster consensus; where judges or votes aggregate, read Delta as")
    lines.append("     a lower bound on consensus speed (explicit aggregation adds a bottleneck the raw gap misses).")
    lines.append("  3. Cumulative drift: not rho alone; rho~ (eq. 4) and rho~_c (eq. 6) discount it by the")
    lines.append("     aggregation profile. Note: with rho from Table 1, eq. 4 still ranks the chain lowest")
    lines.append("     (rho = 1); the aggregation factor mean(1/sqrt(k_i)) alone carries the paper's drift ordering.")
    apart = [r for r in rows if r.get("components", 1) > 1 or r.get("sources", 1) > 1]
    if apart:
        lines.append("")
        lines.append("Warning: not one team. In these graphs the agents hear more than one source (a group that reads")
        lines.append("no one outside itself: separate groups, or agents that read nobody), so the team never reaches")
        lines.append("one consensus; kappa and Delta then describe the parts, and a low kappa is no robustness of the")
        lines.append("whole:")
        for r in apart:
            silent = (
                f", {r['silent_agents']} agent(s) with no edge to or from another" if r.get("silent_agents") else ""
            )
            nobody = f", {r['reads_nobody']} agent(s) that read nobody" if r.get("reads_nobody") else ""
            groups = f"{r['components']} separate groups, " if r["components"] > 1 else ""
            lines.append(f"  {r['name']}: {groups}{r['sources']} sources{silent}{nobody}")
    if len(rows) > 1:
        rk = rank(rows)
        lines.append("")
        lines.append("Ranking (= where the values agree to 9 significant digits):")
        lines.append("  robustness (kappa, best first):   " + _chain(rows, rk["kappa"], "kappa", " < "))
        lines.append("  consensus (Delta, fastest first): " + _chain(rows, rk["delta"], "delta", " > "))
        lines.append("  drift (rho~_c, least first):      " + _chain(rows, rk["rho_tilde_c"], "rho_tilde_c", " < "))
    return "\n".join(lines)


def _chain(rows: list[dict], order: list[str], key: str, sep: str) -> str:
    """``order`` joined by ``sep``, or by `` = `` between neighbours whose values are equal to 9 digits (the same
    graph under two names must not read as better or worse than itself)."""
    value = {r["name"]: r[key] for r in rows}
    out = order[:1]
    for a, b in zip(order, order[1:]):
        tie = math.isclose(value[a], value[b], rel_tol=1e-9, abs_tol=0.0) or value[a] == value[b]
        out += [" = " if tie else sep, b]
    return "".join(out)


def graphs_from_args(topologies: list[str] | None, adjacency: list[str] | None, order: list | None = None) -> dict:
    """``{name: adjacency}`` of the ``--topology`` specs and ``--adjacency`` files; ``order``: the
    ``("topology" | "adjacency", value)`` pairs as the command line gave them (the graphs keep that order;
    default: topologies first)."""
    graphs, canonical, named = {}, {}, {}
    for spec in topologies or []:
        graph, key = from_spec(spec), canonical_spec(spec)
        if key in canonical:
            same = "" if canonical[key] == spec else f" (as {canonical[key]})"
            raise InputError(f"--topology {spec} is given twice{same}")
        canonical[key], graphs[spec], named["topology", spec] = spec, graph, spec
    seen = set()
    names = [Path(p).name for p in adjacency or []]
    for path in adjacency or []:
        if Path(path).resolve() in seen:
            raise InputError(f"--adjacency {path} is given twice")
        seen.add(Path(path).resolve())
        # named by the file name, or, where two files share a name (or a file's name is a topology spec), every
        # one of them by its path as given
        base = Path(path).name
        name = base if names.count(base) == 1 and base not in graphs else path
        if name in graphs:
            raise InputError(f"--adjacency {path}: its name clashes with another graph's; rename the file")
        graphs[name], named["adjacency", path] = load_adjacency(path), name
    if not graphs:
        raise InputError("give at least one --topology SPEC or --adjacency FILE")
    if order:
        graphs = {named[o]: graphs[named[o]] for o in dict.fromkeys(order) if o in named} | graphs
    return graphs
