"""Topology builders: doubly stochastic consensus weights (consensus paper, Table III) and the
communication graphs of the successor-representation paper (chain, star, mesh, ring, random families).

Builders return float64 numpy adjacency/weight matrices (host-side, cheap); the kernels cast them to
their working dtype.
"""

from __future__ import annotations

import numpy as np

from mascot.errors import InputError, RunError

__all__ = [
    "circulant",
    "complete_weights",
    "ring_weights",
    "paper_modes",
    "validate_adjacency",
    "row_normalize",
    "chain",
    "star",
    "malicious_star",
    "mesh",
    "ring",
    "complete_self",
    "erdos_renyi",
    "watts_strogatz",
    "random_regular",
    "build",
    "from_spec",
    "canonical_spec",
    "FAMILIES",
    "RANDOM_FAMILIES",
    "SPEC_SYNTAX",
]


def circulant(first_row) -> np.ndarray:
    """Circulant matrix whose row ``i`` is ``first_row`` rolled right by ``i`` (Remark 6's layout).

    Returns: the ``(N, N)`` matrix.
    """
    w = np.asarray(first_row, dtype=np.float64)
    if w.ndim != 1 or w.size < 1:
        raise InputError(f"first_row must be a non-empty 1-D vector; got shape {w.shape}")
    return np.stack([np.roll(w, i) for i in range(w.size)])


def _check(n, self_weight, min_n):
    if int(n) != n or n < min_n:
        raise InputError(f"n must be an integer >= {min_n}; got {n!r}")
    if not 0.0 <= float(self_weight) <= 1.0:
        raise InputError(f"self_weight must be in [0, 1]; got {self_weight!r}")


def complete_weights(n: int, self_weight: float) -> np.ndarray:
    """Complete graph K_n: ``w_ii = a``, ``w_ij = (1 - a)/(n - 1)`` (Table III mode 1: n=5, a=0.4).

    Contraction rate ``|a - (1 - a)/(n - 1)|`` (eigenvalue of multiplicity ``n - 1`` on 1-perp).

    Arguments: ``n`` the number of agents (>= 2); ``self_weight`` a, in [0, 1]. Returns the (n, n) doubly
    stochastic matrix.
    """
    _check(n, self_weight, 2)
    a = float(self_weight)
    row = np.full(int(n), (1.0 - a) / (n - 1))
    row[0] = a
    return circulant(row)


def ring_weights(n: int, self_weight: float) -> np.ndarray:
    """Ring C_n: ``w_ii = a``, ``w_{i,i+-1} = (1 - a)/2`` (Table III mode 2: n=5, a=0.6).

    Eigenvalues ``a + (1 - a) cos(2 pi k / n)``; for ``n = 5, a = 0.6`` the rate is 0.7236.

    Arguments: ``n`` the number of agents (>= 3); ``self_weight`` a, in [0, 1]. Returns the (n, n) doubly
    stochastic matrix.
    """
    _check(n, self_weight, 3)
    a = float(self_weight)
    row = np.zeros(int(n))
    row[0] = a
    row[1] += (1.0 - a) / 2
    row[-1] += (1.0 - a) / 2
    return circulant(row)


def paper_modes() -> tuple[np.ndarray, np.ndarray]:
    """Table III: mode 1 = complete K5 (0.4 / 0.15), mode 2 = ring C5 (0.6 / 0.2).

    Returns: ``(W1, W2)``, two ``(5, 5)`` doubly stochastic matrices.
    """
    return complete_weights(5, 0.4), ring_weights(5, 0.6)


# ----------------------------------------------------------------------------- communication graphs
# Successor-representation paper ("Predictive Maps of Multi-Agent Reasoning", Sec. 3.1): a graph is a
# weighted adjacency A (A[i, j] > 0: agent i reads agent j), row-normalised into P = D^-1 A.


def validate_adjacency(A, name: str = "adjacency") -> np.ndarray:
    """Check a weighted adjacency (square, finite, nonnegative; a stack ``(..., n, n)`` is allowed).

    Returns it as float64. Raises ``ValueError`` naming ``name`` and what is wrong.

    Arguments: ``A`` the array to check; ``name`` how error messages call it.
    """
    A = np.asarray(A)
    if A.dtype.kind not in "biuf":
        raise InputError(f"{name} must be a real numeric matrix; got dtype {A.dtype}")
    A = A.astype(np.float64, copy=False)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise InputError(f"{name} must be square (..., n, n); got shape {A.shape}")
    if A.shape[-1] < 1:
        raise InputError(f"{name} must have at least one agent; got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise InputError(f"{name} has NaN or infinite entries")
    if np.any(A < 0):
        raise InputError(f"{name} has negative weights (min {A.min():.3g}); weights must be >= 0")
    with np.errstate(over="ignore"):
        over = ~np.isfinite(A.sum(axis=-1))
    if np.any(over):  # row-normalising would divide by inf and silently give a zero row
        row = np.argwhere(over)[0]
        raise InputError(
            f"{name} row {int(row[-1])}: weights sum to inf (float64 overflow, max entry "
            f"{A.max():.3g}); rescale the weights"
        )
    return A


def row_normalize(A, name: str = "adjacency") -> np.ndarray:
    """Row-stochastic operator ``P_ij = A_ij / sum_k A_ik`` (SR paper, Sec. 3.1).

    Zero-row rule: an agent that reads nobody (a sink, such as the chain's last agent) keeps a zero row,
    so ``P`` is substochastic there. This is what makes the chain nilpotent (rho(M) = 1, Table 1); adding
    a self-loop instead would make it ergodic and change every diagnostic.

    Arguments: ``A`` a weighted adjacency or a stack ``(..., n, n)``; ``name`` how error messages call it.

    Returns: ``P`` with the shape of ``A`` (float64).
    """
    A = validate_adjacency(A, name)
    s = A.sum(axis=-1, keepdims=True)
    return np.divide(A, s, out=np.zeros_like(A), where=s > 0)


def chain(n: int) -> np.ndarray:
    """n sequential agents: the upper shift (``A[i, i+1] = 1``), nilpotent of index n (SR paper, A.1).

    Returns: the ``(n, n)`` float64 adjacency (0/1 entries).
    """
    check_n(n, 1, "n")
    return np.eye(int(n), k=1)


def star(n: int) -> np.ndarray:
    """``n`` agents: one centre (index 0) and ``n - 1`` leaves; the centre reads every leaf, every leaf the centre.

    P has eigenvalues {1, 0 (n - 2 times), -1} (SR paper, A.1; its star has 4 leaves, ``star(5)``).

    Returns: the ``(n, n)`` float64 adjacency (0/1 entries).
    """
    check_n(n, 2, "n")
    n = int(n)
    A = np.zeros((n, n))
    A[0, 1:] = 1.0
    A[1:, 0] = 1.0
    return A


def malicious_star(n: int, alpha: float) -> np.ndarray:
    """SR paper, A.6: the star of ``n`` agents (``l = n - 1`` leaves) whose leaf 1 has weight ``alpha > 0`` in
    the centre's aggregation.

    After row normalisation ``P_01 = alpha / (alpha + l - 1)`` and ``P_0j = 1 / (alpha + l - 1)``.

    Returns: the ``(n, n)`` float64 adjacency.
    """
    if not (np.isfinite(alpha) and alpha > 0):
        raise InputError(f"alpha must be a positive finite weight; got {alpha!r}")
    A = star(n)
    A[0, 1] = float(alpha)
    return A


def mesh(n: int) -> np.ndarray:
    """Complete graph without self-loops; P has eigenvalues {1, -1/(n-1) (n-1 times)} (SR paper, A.1).

    Returns: the ``(n, n)`` float64 adjacency (0/1 entries).
    """
    check_n(n, 2, "n")
    return np.ones((int(n), int(n))) - np.eye(int(n))


def ring(n: int, directed: bool = False) -> np.ndarray:
    """Cycle C_n: each agent reads both neighbours (or only the next one when ``directed``).

    Arguments: ``n`` the number of agents; ``directed`` read only the next agent.

    Returns: the ``(n, n)`` float64 adjacency (0/1 entries).
    """
    check_n(n, 3, "n")
    n = int(n)
    A = np.roll(np.eye(n), 1, axis=1)
    return A if directed else A + A.T


def complete_self(n: int, a: float) -> np.ndarray:
    """Complete graph with self-weight ``a`` and ``(1 - a)/(n - 1)`` elsewhere (already row-stochastic).

    Returns: the ``(n, n)`` row-stochastic matrix.
    """
    return complete_weights(n, a)


def check_n(n, lo: int, name: str = "n") -> int:
    """``n`` as an int, after checking it is a whole number ``>= lo`` (an error naming ``name`` otherwise)."""
    if isinstance(n, bool) or not isinstance(n, (int, float, np.number)) or not np.isfinite(n) or int(n) != n or n < lo:
        raise InputError(f"{name} must be an integer >= {lo}; got {n!r}")
    return int(n)


def _rng(seed):
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def erdos_renyi(n: int, p: float, count: int = 1, seed=None) -> np.ndarray:
    """``count`` undirected G(n, p) graphs, shape (count, n, n), no self-loops.

    Isolated agents keep a zero row after normalisation (see :func:`row_normalize`).

    Arguments: ``n`` agents; ``p`` the edge probability; ``count`` graphs; ``seed`` an int, a numpy Generator or
    None.

    Returns: a float64 array ``(count, n, n)`` of 0/1 adjacencies.
    """
    check_n(n, 2, "n")
    check_n(count, 1, "count")
    if not 0.0 <= p <= 1.0:
        raise InputError(f"p must be in [0, 1]; got {p!r}")
    rng = _rng(seed)
    u = rng.random((int(count), int(n), int(n))) < p
    upper = np.triu(u, k=1)
    return (upper | np.swapaxes(upper, -1, -2)).astype(np.float64)


def watts_strogatz(n: int, k: int, beta: float, count: int = 1, seed=None) -> np.ndarray:
    """``count`` Watts-Strogatz small-world graphs, shape (count, n, n).

    Ring lattice where each agent links to its ``k/2`` nearest neighbours on each side (``k`` even,
    ``2 <= k < n``); each lattice edge (i, i+j) is rewired with probability ``beta`` to a uniformly chosen
    new endpoint that avoids self-loops and duplicate edges (left in place when none is free).

    Arguments: ``n`` agents; ``k`` lattice neighbours (even); ``beta`` the rewiring probability; ``count``
    graphs; ``seed`` an int, a numpy Generator or None.

    Returns: a float64 array ``(count, n, n)`` of 0/1 adjacencies.
    """
    check_n(n, 3, "n")
    check_n(count, 1, "count")
    if int(k) != k or k < 2 or k % 2 or k >= n:
        raise InputError(f"k must be an even integer with 2 <= k < n = {n}; got {k!r}")
    if not 0.0 <= beta <= 1.0:
        raise InputError(f"beta must be in [0, 1]; got {beta!r}")
    rng = _rng(seed)
    n, k = int(n), int(k)
    out = np.zeros((int(count), n, n))
    for g in range(int(count)):
        A = np.zeros((n, n), dtype=bool)
        for j in range(1, k // 2 + 1):
            idx = np.arange(n)
            A[idx, (idx + j) % n] = A[(idx + j) % n, idx] = True
        for j in range(1, k // 2 + 1):
            for i in range(n):
                t = (i + j) % n
                if rng.random() < beta:
                    free = np.flatnonzero(~A[i])
                    free = free[free != i]
                    if free.size:
                        new = rng.choice(free)
                        A[i, t] = A[t, i] = False
                        A[i, new] = A[new, i] = True
        out[g] = A
    return out


def random_regular(n: int, d: int, count: int = 1, seed=None, max_tries: int = 100) -> np.ndarray:
    """``count`` simple d-regular undirected graphs, shape (count, n, n).

    Needs ``n * d`` even and ``0 <= d < n``. Stubs are paired one at a time (Steger-Wormald style): the
    next stub is drawn in proportion to the remaining degrees and its partner among the agents it may still
    link to (no self-loop, no double edge), restarting on a dead end. Near-uniform for d << sqrt(n) and,
    unlike plain pairing with rejection, fast for dense degrees too.

    Arguments: ``n`` agents; ``d`` the degree; ``count`` graphs; ``seed`` an int, a numpy Generator or None;
    ``max_tries`` restarts allowed per graph before giving up.

    Returns: a float64 array ``(count, n, n)`` of 0/1 adjacencies.
    """
    check_n(n, 2, "n")
    check_n(count, 1, "count")
    if int(d) != d or not 0 <= d < n or (n * d) % 2:
        raise InputError(f"d must be an integer with 0 <= d < n and n*d even; got n={n}, d={d!r}")
    rng = _rng(seed)
    n, d = int(n), int(d)
    out = np.zeros((int(count), n, n))
    for g in range(int(count)):
        for _ in range(max_tries):
            A = np.zeros((n, n), dtype=bool)
            left = np.full(n, d)
            ok = True
            while left.any():
                u = rng.choice(n, p=left / left.sum())
                cand = (left > 0) & ~A[u]
                cand[u] = False
                w = np.where(cand, left, 0)
                if not w.any():
                    ok = False
                    break
                v = rng.choice(n, p=w / w.sum())
                A[u, v] = A[v, u] = True
                left[u] -= 1
                left[v] -= 1
            if ok:
                out[g] = A
                break
        else:
            raise RunError(f"no simple {d}-regular graph on {n} agents after {max_tries} tries; lower d")
    return out


# ----------------------------------------------------------------------------- one vocabulary
# Every family by name, with ``n`` = the number of agents first and then its parameters, as the CLI's specs
# (``star:8``, ``erdos_renyi:8:0.5:SEED``) and the sweeps' ``family`` axis name them.
_FAMILY_PARAMS = {
    "chain": (),
    "star": (),
    "mesh": (),
    "ring": (),
    "complete": (("a", float),),
    "malicious_star": (("alpha", float),),
    "erdos_renyi": (("p", float),),
    "watts_strogatz": (("k", int), ("beta", float)),
    "random_regular": (("d", int),),
}
_PARAM_WORDS = {  # what each family parameter is, for error messages
    "a": "the self-weight, in [0, 1]",
    "alpha": "the malicious leaf's weight, > 0",
    "p": "the edge probability",
    "k": "each agent's neighbours in the ring lattice",
    "beta": "the rewiring probability",
    "d": "each agent's degree",
}
RANDOM_FAMILIES = ("erdos_renyi", "watts_strogatz", "random_regular")
FAMILIES = tuple(_FAMILY_PARAMS)
SPEC_SYNTAX = (
    "chain:N, star:N, mesh:N, ring:N, complete:N:A, malicious_star:N:ALPHA, erdos_renyi:N:P[:SEED], "
    "watts_strogatz:N:K:BETA[:SEED], random_regular:N:D[:SEED] (N = agents; SEED defaults to 0)"
)


def build(family: str, n: int, *params, seed=0) -> np.ndarray:
    """One adjacency ``(n, n)`` of ``family`` with ``n`` agents and the family's parameters in order.

    ``build("star", 8)`` is a centre and 7 leaves; ``build("watts_strogatz", 8, 4, 0.1, seed=3)`` one seeded
    Watts-Strogatz graph. ``seed`` (an int or a ``numpy.random.Generator``) matters for the random families
    only. The parameters of each family are in :data:`SPEC_SYNTAX`.

    Returns: the ``(n, n)`` float64 adjacency.
    """
    if family not in _FAMILY_PARAMS:
        raise InputError(f"unknown topology {family!r}; known: {', '.join(FAMILIES)}")
    want = _FAMILY_PARAMS[family]
    if len(params) != len(want):
        names = ", ".join(k for k, _ in want) or "none"
        raise InputError(f"topology {family!r} takes {len(want)} parameter(s) after n ({names}); got {len(params)}")
    if family == "complete":
        return complete_self(n, *params)
    if family == "malicious_star":
        return malicious_star(n, *params)
    if family in RANDOM_FAMILIES:
        return {"erdos_renyi": erdos_renyi, "watts_strogatz": watts_strogatz, "random_regular": random_regular}[family](
            n, *params, count=1, seed=seed
        )[0]
    return {"chain": chain, "star": star, "mesh": mesh, "ring": ring}[family](n)


def from_spec(spec: str) -> np.ndarray:
    """Adjacency from a short spec, ``FAMILY:N[:PARAM...][:SEED]`` with ``N`` the number of agents.

    ``chain:12``, ``star:5`` (a centre and 4 leaves), ``mesh:4``, ``ring:8``, ``complete:5:0.4`` (self-weight),
    ``malicious_star:5:10`` (alpha), ``erdos_renyi:8:0.5:SEED``, ``watts_strogatz:8:4:0.1:SEED``,
    ``random_regular:8:3:SEED`` (SEED optional, default 0). The CLI's ``--topology`` (diagnose, design) takes
    these.

    Returns: the ``(n, n)`` float64 adjacency.
    """
    family, n, params, seed = _parse_spec(spec)
    return build(family, n, *params, seed=seed)


def canonical_spec(spec: str) -> str:
    """The spec with its numbers written one way (``ring:05`` and ``ring:5`` are one graph; a random family
    always shows its seed).

    Returns: the canonical spec string.
    """
    family, n, params, seed = _parse_spec(spec)
    tail = [str(seed)] if family in RANDOM_FAMILIES else []
    return ":".join([family, str(n), *map(repr, params), *tail])


def _parse_spec(spec: str):
    family, *args = str(spec).strip().split(":")
    if family not in _FAMILY_PARAMS:
        raise InputError(f"unknown topology {family!r} in {spec!r}; known: {SPEC_SYNTAX}")
    want = _FAMILY_PARAMS[family]
    n_args = 1 + len(want)
    ok = len(args) in ((n_args, n_args + 1) if family in RANDOM_FAMILIES else (n_args,))
    if not ok:
        form = ":".join([family, "N", *(k.upper() for k, _ in want)]) + ("[:SEED]" if family in RANDOM_FAMILIES else "")
        words = "; ".join(["N = agents", *(f"{k.upper()} = {_PARAM_WORDS[k]}" for k, _ in want)])
        raise InputError(f"topology {spec!r} must be written {form} ({words})")
    try:
        n = _int_arg(args[0])
        params = [typ(a) if typ is float else _int_arg(a) for (_, typ), a in zip(want, args[1:])]
        seed = _int_arg(args[n_args]) if len(args) > n_args else 0
    except ValueError:
        raise InputError(f"bad numbers in topology spec {spec!r}") from None
    if any(isinstance(v, float) and not np.isfinite(v) for v in params):
        raise InputError(f"topology spec {spec!r} has a non-finite number")
    if seed < 0:
        raise InputError(f"topology spec {spec!r}: SEED must be >= 0")
    return family, n, params, seed


def _int_arg(text: str) -> int:
    text = text.strip()
    if not text.lstrip("+-").isdigit():
        raise ValueError(text)
    return int(text)
