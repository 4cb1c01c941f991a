"""Benchmark: SR spectra (rho, Delta, kappa of M = (I - gamma P)^-1), mascot.sr_spectra vs numpy.

All variants run in this one process on the same inputs (float64, JAX x64 on): stacks of G random graphs
against 4 discounts gamma in {0.5, 0.8, 0.9, 0.99}, i.e. G * 4 (graph, gamma) pairs per call:

  (i)   loop   : plain numpy, one graph at a time: P = row-normalise; eigenvalues of P once per graph
                 (eigvalsh of D^-1/2 A D^-1/2 for undirected graphs, eigvals(P) for directed ones), then
                 per gamma svd(I - gamma P, compute_uv=False); kappa from the eigenvalues instead when P
                 is symmetric (regular graphs), exactly as the kernel does; run on the first G/4 graphs;
  (ii)  batch  : numpy batched linalg: eigvalsh / eigvals on the whole (G, n, n) stack once, one
                 svd(compute_uv=False) on the (G, 4, n, n) stack of I - gamma P;
  (iii) batch2 : (ii) with the graphs split over 2 threads, BLAS limited to 1 thread each (threadpoolctl);
  (iv)  mascot : mascot.kernels.spectra.sr_spectra(A[:, None], gammas), warm (compile time separately);
  (v)   mascot 1T: (iv) inside threadpool_limits(1). JAX's CPU LAPACK kernels call scipy's OpenBLAS, whose
                 2 threads (busy-waiting between calls) collide with XLA's own threads and with any other
                 load on this 2-core machine; this shows how much of (iv) is that, not the kernel.

"numpy best" is the fastest of (i)-(iii). Families: "undirected" Erdos-Renyi G(n, p), p = min(1, 3 ln n / n)
(eigh path + SVD), "directed" random weights U(0, 1) on ~30% of the off-diagonal entries (eig path + SVD),
"regular" random d-regular graphs, d = 8 (n = 64) or 16 (n = 256) (eigh path, P symmetric: kappa from the
eigenvalues, no SVD). G = 16384 (n = 5), 4096 (n = 12), 512 (n = 64), 16 (n = 256); --quick: G / 8 (at least
4) and 3 repetitions instead of 5. Agreement (kappa and rho to 1e-8 relative, Delta to 1e-8 rho) is asserted
before timing.
Timings are medians of interleaved repetitions; read the ratios, not the absolute numbers.

    python benchmarks/bench_spectra.py [--quick] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np
from threadpoolctl import threadpool_limits

from mascot.kernels.spectra import sr_spectra
from mascot.graphs import erdos_renyi, random_regular, row_normalize

GAMMAS = np.array([0.5, 0.8, 0.9, 0.99])
THREADS = 2
LOOP_FRACTION = 4  # the loop baseline runs on the first G / 4 graphs


# ----------------------------------------------------------------------------- inputs
def make_graphs(family, n, G, rng):
    if family == "undirected":
        return erdos_renyi(n, min(1.0, 3 * np.log(n) / n), count=G, seed=rng)
    if family == "directed":
        W = rng.random((G, n, n)) * (rng.random((G, n, n)) < 0.3)
        W[:, np.arange(n), np.arange(n)] = 0.0
        return W
    if family == "regular":
        return random_regular(n, regular_degree(n), count=G, seed=rng)
    raise ValueError(family)


def regular_degree(n):
    return 8 if n <= 64 else 16


# ----------------------------------------------------------------------------- baselines
def _finish(mu, sv_or_none, gammas):
    """rho, Delta, kappa from eigenvalues mu (..., n) of P and singular values (..., Gamma, n) or None."""
    mod = 1.0 / np.abs(1.0 - gammas[:, None] * mu[..., None, :])  # (..., Gamma, n)
    top = -np.partition(-mod, 1, axis=-1)[..., :2] if mod.shape[-1] > 1 else np.concatenate([mod, mod], -1)
    rho = top[..., 0]
    delta = top[..., 0] - top[..., 1] if mod.shape[-1] > 1 else np.zeros_like(rho)
    kappa = mod.max(-1) / mod.min(-1) if sv_or_none is None else sv_or_none[..., 0] / sv_or_none[..., -1]
    return rho, delta, kappa


def _sym_form(A):
    d = A.sum(-1)
    r = np.divide(1.0, np.sqrt(d), out=np.zeros_like(d), where=d > 0)
    S = r[..., :, None] * A * r[..., None, :]
    return 0.5 * (S + np.swapaxes(S, -1, -2))


def numpy_loop(A, gammas, undirected, normal):
    n = A.shape[-1]
    eye = np.eye(n)
    rhos, deltas, kappas = [], [], []
    for a in A:
        P = row_normalize(a)
        mu = np.linalg.eigvalsh(_sym_form(a)) if undirected else np.linalg.eigvals(P)
        sv = None if normal else np.stack([np.linalg.svd(eye - g * P, compute_uv=False) for g in gammas])
        r, d, k = _finish(mu, sv, gammas)
        rhos.append(r), deltas.append(d), kappas.append(k)
    return np.stack(rhos), np.stack(deltas), np.stack(kappas)


def numpy_batched(A, gammas, undirected, normal):
    n = A.shape[-1]
    P = row_normalize(A)
    mu = np.linalg.eigvalsh(_sym_form(A)) if undirected else np.linalg.eigvals(P)
    sv = None if normal else np.linalg.svd(np.eye(n) - gammas[:, None, None] * P[:, None], compute_uv=False)
    return _finish(mu, sv, gammas)


def numpy_batched_threads(A, gammas, undirected, normal, threads=THREADS):
    parts = np.array_split(A, threads)
    with threadpool_limits(1), ThreadPoolExecutor(threads) as ex:
        out = list(ex.map(lambda p: numpy_batched(p, gammas, undirected, normal), parts))
    return tuple(np.concatenate(c) for c in zip(*out))


def mascot_call(A, gammas):
    r = sr_spectra(A[:, None], gammas)
    return np.asarray(r.rho), np.asarray(r.delta), np.asarray(r.kappa), r.method


def mascot_call_1t(A, gammas):
    with threadpool_limits(1):
        return mascot_call(A, gammas)


# ----------------------------------------------------------------------------- timing
def interleaved(fns, repeat):
    """Median time of each function over ``repeat`` rounds, the functions alternating within a round."""
    ts = [[] for _ in fns]
    for _ in range(repeat):
        for f, t in zip(fns, ts):
            t0 = time.perf_counter()
            f()
            t.append(time.perf_counter() - t0)
    return [float(np.median(t)) for t in ts]


def rel(a, b):
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def cell(family, n, G, rng, repeat):
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    A = make_graphs(family, n, G, rng)
    t_gen = time.perf_counter() - t0
    undirected = family != "directed"
    normal = bool(np.allclose(row_normalize(A), np.swapaxes(row_normalize(A), -1, -2), rtol=0, atol=1e-12))
    sub = A[: max(1, G // LOOP_FRACTION)]

    t0 = time.perf_counter()
    ref = mascot_call(A, GAMMAS)
    t_first = time.perf_counter() - t0
    method = ref[3]

    # agreement before timing
    lp = numpy_loop(sub, GAMMAS, undirected, normal)
    bt = numpy_batched(A, GAMMAS, undirected, normal)
    b2 = numpy_batched_threads(A, GAMMAS, undirected, normal)
    k = len(sub)
    err = {
        "kappa": max(rel(ref[2][:k], lp[2]), rel(ref[2], bt[2]), rel(ref[2], b2[2])),
        "rho": max(rel(ref[0][:k], lp[0]), rel(ref[0], bt[0]), rel(ref[0], b2[0])),
        "delta_abs_over_rho": float(max(np.max(np.abs(ref[1][:k] - lp[1]) / lp[0]),
                                        np.max(np.abs(ref[1] - bt[1]) / bt[0]))),
    }
    assert err["kappa"] < 1e-8, f"{family} n={n}: kappa disagrees (max rel diff {err['kappa']:.2e})"
    assert err["rho"] < 1e-8, f"{family} n={n}: rho disagrees (max rel diff {err['rho']:.2e})"
    assert err["delta_abs_over_rho"] < 1e-8, f"{family} n={n}: Delta disagrees ({err['delta_abs_over_rho']:.2e})"

    t_mascot, t_mascot1, t_batch, t_batch2, t_loop = interleaved(
        [lambda: mascot_call(A, GAMMAS),
         lambda: mascot_call_1t(A, GAMMAS),
         lambda: numpy_batched(A, GAMMAS, undirected, normal),
         lambda: numpy_batched_threads(A, GAMMAS, undirected, normal),
         lambda: numpy_loop(sub, GAMMAS, undirected, normal)], repeat)
    pairs = G * len(GAMMAS)
    rate = {"mascot": pairs / t_mascot, "mascot_blas1": pairs / t_mascot1,
            "numpy_loop": k * len(GAMMAS) / t_loop, "numpy_batched": pairs / t_batch,
            "numpy_batched_2threads": pairs / t_batch2}
    best_name = max(("numpy_loop", "numpy_batched", "numpy_batched_2threads"), key=rate.get)
    row = {"family": family, "n": n, "G": G, "gammas": len(GAMMAS), "pairs": pairs, "method": method,
           "normal_P": normal, "loop_graphs": k, "repeat": repeat, "loadavg_1min": load, "generate_s": t_gen,
           "mascot_s": t_mascot, "mascot_blas1_s": t_mascot1, "numpy_batched_s": t_batch,
           "numpy_batched_2threads_s": t_batch2, "numpy_loop_s": t_loop, "compile_s": max(t_first - t_mascot, 0.0),
           "pairs_per_s": rate, "numpy_best": best_name,
           "ratio_vs_loop": rate["mascot"] / rate["numpy_loop"],
           "ratio_vs_best": rate["mascot"] / rate[best_name],
           "ratio_blas1_vs_best": rate["mascot_blas1"] / rate[best_name], "max_rel_diff": err}
    tag = f"{method}, normal" if normal else method
    print(f"  {family:10s} n={n:3d} G={G:5d} [{tag}]: mascot {rate['mascot']:10.0f}/s  "
          f"(1T {rate['mascot_blas1']:10.0f}/s)  loop {rate['numpy_loop']:9.0f}/s  "
          f"batch {rate['numpy_batched']:9.0f}/s  batch2 {rate['numpy_batched_2threads']:9.0f}/s  "
          f"x{row['ratio_vs_loop']:.1f} vs loop, "
          f"x{row['ratio_vs_best']:.2f} vs best  (compile {row['compile_s']:.2f} s)", file=sys.stderr, flush=True)
    return row


def run(quick=False):
    rng = np.random.default_rng(0)
    scale = 8 if quick else 1
    repeat = 3 if quick else 5
    Gs = {5: 16384, 12: 4096, 64: 512, 256: 16}
    plan = [(fam, n) for fam in ("undirected", "directed") for n in (5, 12, 64, 256)]
    plan += [("regular", 64), ("regular", 256)]
    rows = [cell(fam, n, max(Gs[n] // scale, 4), rng, repeat) for fam, n in plan]
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(), "jax": jax.__version__,
               "numpy": np.__version__, "devices": [str(d) for d in jax.devices()],
               "x64": bool(jax.config.jax_enable_x64)}
    return {"machine": machine, "gammas": GAMMAS.tolist(), "quick": quick, "rows": rows}


def table(result):
    head = ("| family | n | G x gammas | path | mascot pairs/s | mascot BLAS 1T | numpy loop | numpy batched | "
            "numpy batched 2T | mascot / loop | mascot / numpy best | mascot 1T / numpy best | compile s |")
    lines = [head, "|" + "---|" * 13]
    for r in result["rows"]:
        p = r["pairs_per_s"]
        best = {"numpy_loop": "loop", "numpy_batched": "batched", "numpy_batched_2threads": "2T"}[r["numpy_best"]]
        path = r["method"] + (" (P symmetric, no SVD)" if r["normal_P"] else " + SVD")
        lines.append(f"| {r['family']} | {r['n']} | {r['G']:,} x {r['gammas']} | {path} | {p['mascot']:,.0f} | "
                     f"{p['mascot_blas1']:,.0f} | {p['numpy_loop']:,.0f} | {p['numpy_batched']:,.0f} | "
                     f"{p['numpy_batched_2threads']:,.0f} | "
                     f"{r['ratio_vs_loop']:.1f}x | {r['ratio_vs_best']:.2f}x ({best}) | "
                     f"{r['ratio_blas1_vs_best']:.2f}x | {r['compile_s']:.2f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="stacks 8x smaller (at least 4 graphs), 3 repetitions")
    ap.add_argument("--json-out", help="also write the JSON here")
    args = ap.parse_args()
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    result = run(args.quick)
    result["total_s"] = time.perf_counter() - t0
    result["machine"]["loadavg_before"], result["machine"]["loadavg_after"] = load0, os.getloadavg()
    print(json.dumps(result, indent=2))
    print()
    print(table(result))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
