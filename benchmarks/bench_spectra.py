"""Benchmark: SR spectra (rho, Delta, kappa of M = (I - gamma P)^-1), mascot vs numpy's best method.

All variants run in this one process on the same inputs (float64, JAX x64 on): stacks of G graphs against
4 discounts gamma in {0.5, 0.8, 0.9, 0.99}, i.e. G * 4 (graph, gamma) pairs per call:

  (i)   loop   : plain numpy, one graph at a time: P = row-normalise; eigenvalues of P once per graph
                 (eigvalsh of D^-1/2 A D^-1/2 for undirected graphs, eigvals(P) for directed ones), then
                 per gamma svd(I - gamma P, compute_uv=False); kappa from the eigenvalues instead when P
                 is symmetric (regular graphs); run on the first G/4 graphs;
  (ii)  batch  : numpy batched linalg: eigvalsh / eigvals on the whole (G, n, n) stack once, one
                 svd(compute_uv=False) on the (G, 4, n, n) stack of I - gamma P;
  (iii) batch2 : (ii) with the graphs split over 2 threads, BLAS limited to 1 thread each (threadpoolctl);
  (iv)  mascot : mascot.execute.spectra.sr_spectra(A[:, None], gammas) (the host driver: its host tasks on
                 one thread per core, here 2), warm (compile time separately);
  (v)   kernel : mascot.kernels.spectra.sr_spectra, the same function with its host tasks serial (what
                 ``mascot.sr_spectra`` names today);
  (vi)  no closed forms (the "closed" family only): (iv) with family=None, every graph through LAPACK.

(i) and (ii) run with BLAS limited to one thread, numpy's best setting for these per-matrix LAPACK calls
(its default OpenBLAS threads busy-wait and collide). "numpy best" is the fastest of (i)-(iii), each using
the best method for each graph's structure (the "closed" family mixes structures: its numpy variants run
each structure group with its own method). Families: "undirected" Erdos-Renyi G(n, p), p = min(1, 3 ln n / n) (eigh + SVD), "directed"
random weights U(0, 1) on ~30% of the off-diagonal entries (eig + SVD), "regular" random d-regular graphs,
d = 4 (n = 16), 8 (n = 64), 16 (n = 256) (eigh, P symmetric: kappa from the eigenvalues, no SVD), and
"closed": the SR paper's families with closed forms, cycling chain(n), star(n), mesh(n), ring(n) and
complete_self(n, a) with a ~ U(0.05, 0.95) (chain: directed + SVD; star: eigh + SVD; the rest: eigh).
G = 2048 (n = 16), 512 (n = 64), 16 (n = 256); --quick: G / 8 (at least 5) and 3 repetitions instead of
5. Agreement (kappa and rho to 1e-8 relative, Delta to 1e-8 rho) is asserted before timing.
"roofline" is the floor no solver beats on this machine, both rates measured in this process: max(bytes of
the adjacency stack read once / copy bandwidth, FLOPs / float64 GEMM rate), with LAPACK's leading-order
counts for the numpy method of each structure (eigenvalues only: symmetric 4/3 n^3, general 10 n^3; singular
values only 8/3 n^3 per gamma; the closed forms none), and "of roofline" that floor over mascot's time.
Timings are medians of interleaved repetitions; read the ratios, not the absolute numbers. "2T parallelism"
is process CPU time / wall time of (iii): near 2 when the second core was free, near 1 when another
process held it (then the 2-thread variants, numpy's and mascot's, lose their edge).

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

from mascot.execute.spectra import sr_spectra
from mascot.graphs import chain, complete_self, erdos_renyi, mesh, random_regular, ring, row_normalize, star
from mascot.kernels.spectra import sr_spectra as kernel_sr_spectra

GAMMAS = np.array([0.5, 0.8, 0.9, 0.99])
THREADS = 2
LOOP_FRACTION = 4  # the loop baseline runs on the first G / 4 graphs
SIZES = {16: 2048, 64: 512, 256: 16}
FAMILIES = ("undirected", "directed", "regular", "closed")


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
    if family == "closed":
        a = rng.uniform(0.05, 0.95, size=G)
        build = [
            lambda i: chain(n),
            lambda i: star(n),
            lambda i: mesh(n),
            lambda i: ring(n),
            lambda i: complete_self(n, a[i]),
        ]
        return np.stack([build[i % 5](i) for i in range(G)])
    raise ValueError(family)


def regular_degree(n):
    return 4 if n <= 16 else 8 if n <= 64 else 16


def structure(A):
    """Per graph: undirected (symmetric A), normal (symmetric P)."""
    P = row_normalize(A)
    und = np.all(A == np.swapaxes(A, -1, -2), axis=(-1, -2))
    normal = np.all(np.abs(P - np.swapaxes(P, -1, -2)) <= 1e-12, axis=(-1, -2))
    return und, normal


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


def _grouped(fn, A, gammas, undirected, normal):
    """fn on each group of graphs with one structure (flags given per graph), results back in order."""
    if np.ndim(undirected) == 0 and np.ndim(normal) == 0:
        return fn(A, gammas, bool(undirected), bool(normal))
    und = np.broadcast_to(undirected, A.shape[:1])
    nor = np.broadcast_to(normal, A.shape[:1])
    out = [np.empty((A.shape[0], len(gammas))) for _ in range(3)]
    for u in (True, False):
        for m in (True, False):
            sel = np.flatnonzero((und == u) & (nor == m))
            if sel.size:
                for o, r in zip(out, fn(A[sel], gammas, u, m)):
                    o[sel] = r
    return tuple(out)


def numpy_loop(A, gammas, undirected, normal):
    n = A.shape[-1]
    und = np.broadcast_to(undirected, A.shape[:1])
    nor = np.broadcast_to(normal, A.shape[:1])
    eye = np.eye(n)
    rhos, deltas, kappas = [], [], []
    for a, u, m in zip(A, und, nor):
        P = row_normalize(a)
        mu = np.linalg.eigvalsh(_sym_form(a)) if u else np.linalg.eigvals(P)
        sv = None if m else np.stack([np.linalg.svd(eye - g * P, compute_uv=False) for g in gammas])
        r, d, k = _finish(mu, sv, gammas)
        rhos.append(r), deltas.append(d), kappas.append(k)
    return np.stack(rhos), np.stack(deltas), np.stack(kappas)


def _batched(A, gammas, undirected, normal):
    n = A.shape[-1]
    P = row_normalize(A)
    mu = np.linalg.eigvalsh(_sym_form(A)) if undirected else np.linalg.eigvals(P)
    sv = None if normal else np.linalg.svd(np.eye(n) - gammas[:, None, None] * P[:, None], compute_uv=False)
    return _finish(mu, sv, gammas)


def numpy_batched(A, gammas, undirected, normal):
    return _grouped(_batched, A, gammas, undirected, normal)


def _one_blas_thread(fn):
    """fn with BLAS limited to one thread: numpy's best setting for per-matrix LAPACK calls (its default
    OpenBLAS threads busy-wait and collide, worst when another process holds a core)."""

    def run(*args, **kw):
        with threadpool_limits(1):
            return fn(*args, **kw)

    return run


def numpy_batched_threads(A, gammas, undirected, normal, threads=THREADS):
    idx = np.array_split(np.arange(A.shape[0]), threads)
    und = np.broadcast_to(undirected, A.shape[:1])
    nor = np.broadcast_to(normal, A.shape[:1])
    with threadpool_limits(1), ThreadPoolExecutor(threads) as ex:
        out = list(ex.map(lambda i: numpy_batched(A[i], gammas, und[i], nor[i]), idx))
    return tuple(np.concatenate(c) for c in zip(*out))


def _arrays(r):
    return np.asarray(r.rho), np.asarray(r.delta), np.asarray(r.kappa), r.method


def mascot_call(A, gammas, **kw):
    """mascot's host driver (mascot.execute.spectra.sr_spectra): (rho, delta, kappa, method)."""
    return _arrays(sr_spectra(A[:, None], gammas, **kw))


def mascot_kernel_call(A, gammas, **kw):
    """The kernel with serial host tasks (mascot.kernels.spectra.sr_spectra)."""
    return _arrays(kernel_sr_spectra(A[:, None], gammas, **kw))


# ----------------------------------------------------------------------------- timing
def interleaved(fns, repeat):
    """Median wall time of each function over ``repeat`` rounds (the functions alternating within a
    round), and the median process CPU time / wall time."""
    ts = [[] for _ in fns]
    par = [[] for _ in fns]
    for _ in range(repeat):
        for f, t, p in zip(fns, ts, par):
            c0 = time.process_time()
            t0 = time.perf_counter()
            f()
            t.append(time.perf_counter() - t0)
            p.append((time.process_time() - c0) / t[-1])
    return [float(np.median(t)) for t in ts], [float(np.median(p)) for p in par]


def rel(a, b):
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


_RATES = {}


def machine_rates():
    """``(copy bandwidth in bytes/s, float64 GEMM FLOP/s)`` on this machine, measured once (best of 3/5)."""
    if not _RATES:
        import bench_consensus as bc

        x, y = np.random.default_rng(0).uniform(size=(2, 2048, 2048))
        gemm = min(_timed(lambda: x @ y) for _ in range(5))  # float64, numpy's BLAS (what LAPACK's blocks use)
        _RATES.update(bw=bc.copy_bandwidth(), gemm=2.0 * 2048**3 / gemm)
    return _RATES["bw"], _RATES["gemm"]


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def roofline_flops(family, n, G, und, normal):
    """LAPACK's leading-order FLOPs of the numpy method per stack (eigenvalues, and singular values per gamma
    where P is not symmetric); the closed forms need none."""
    if family == "closed":
        return 0.0
    eig = 4 / 3 * n**3 if np.all(und) else 10.0 * n**3
    svd = 0.0 if np.all(normal) else len(GAMMAS) * 8 / 3 * n**3
    return G * (eig + svd)


def cell(family, n, G, rng, repeat):
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    A = make_graphs(family, n, G, rng)
    t_gen = time.perf_counter() - t0
    und, normal = structure(A)
    if family != "closed":  # one structure per stack
        und, normal = bool(und.all()), bool(normal.all())
    sub = A[: max(1, G // LOOP_FRACTION)]
    k = len(sub)

    t0 = time.perf_counter()
    ref = mascot_call(A, GAMMAS)
    t_first = time.perf_counter() - t0
    r = sr_spectra(A[:, None], GAMMAS)
    routes = {str(m): int(c) for m, c in zip(*np.unique(r.methods[:, 0], return_counts=True))}
    kern = mascot_kernel_call(A, GAMMAS)

    # agreement before timing
    lp = numpy_loop(sub, GAMMAS, und if np.ndim(und) == 0 else und[:k], normal if np.ndim(normal) == 0 else normal[:k])
    bt = numpy_batched(A, GAMMAS, und, normal)
    b2 = numpy_batched_threads(A, GAMMAS, und, normal)
    err = {
        "kappa": max(rel(ref[2][:k], lp[2]), rel(ref[2], bt[2]), rel(ref[2], b2[2]), rel(kern[2], bt[2])),
        "rho": max(rel(ref[0][:k], lp[0]), rel(ref[0], bt[0]), rel(ref[0], b2[0]), rel(kern[0], bt[0])),
        "delta_abs_over_rho": float(
            max(
                np.max(np.abs(ref[1][:k] - lp[1]) / lp[0]),
                np.max(np.abs(ref[1] - bt[1]) / bt[0]),
                np.max(np.abs(kern[1] - bt[1]) / bt[0]),
            )
        ),
    }
    assert err["kappa"] < 1e-8, f"{family} n={n}: kappa disagrees (max rel diff {err['kappa']:.2e})"
    assert err["rho"] < 1e-8, f"{family} n={n}: rho disagrees (max rel diff {err['rho']:.2e})"
    assert err["delta_abs_over_rho"] < 1e-8, f"{family} n={n}: Delta disagrees ({err['delta_abs_over_rho']:.2e})"

    fns = [
        lambda: mascot_call(A, GAMMAS),
        lambda: mascot_kernel_call(A, GAMMAS),
        lambda: _one_blas_thread(numpy_batched)(A, GAMMAS, und, normal),
        lambda: numpy_batched_threads(A, GAMMAS, und, normal),
        lambda: _one_blas_thread(numpy_loop)(
            sub, GAMMAS, und if np.ndim(und) == 0 else und[:k], normal if np.ndim(normal) == 0 else normal[:k]
        ),
    ]
    if family == "closed":
        fns.append(lambda: mascot_call(A, GAMMAS, family=None))
    times, par = interleaved(fns, repeat)
    t_mascot, t_kernel, t_batch, t_batch2, t_loop = times[:5]
    pairs = G * len(GAMMAS)
    rate = {
        "mascot": pairs / t_mascot,
        "mascot_kernel": pairs / t_kernel,
        "numpy_loop": k * len(GAMMAS) / t_loop,
        "numpy_batched": pairs / t_batch,
        "numpy_batched_2threads": pairs / t_batch2,
    }
    if family == "closed":
        rate["mascot_no_closed_forms"] = pairs / times[5]
    best_name = max(("numpy_loop", "numpy_batched", "numpy_batched_2threads"), key=rate.get)
    row = {
        "family": family,
        "n": n,
        "G": G,
        "gammas": len(GAMMAS),
        "pairs": pairs,
        "method": ref[3],
        "routes": routes,
        "normal_P": bool(np.all(normal)),
        "loop_graphs": k,
        "repeat": repeat,
        "loadavg_1min": load,
        "generate_s": t_gen,
        "mascot_s": t_mascot,
        "mascot_kernel_s": t_kernel,
        "numpy_batched_s": t_batch,
        "numpy_batched_2threads_s": t_batch2,
        "numpy_loop_s": t_loop,
        "compile_s": max(t_first - t_mascot, 0.0),
        "parallelism_2threads": par[3],
        "parallelism_mascot": par[0],
        "pairs_per_s": rate,
        "numpy_best": best_name,
        "ratio_vs_loop": rate["mascot"] / rate["numpy_loop"],
        "ratio_vs_best": rate["mascot"] / rate[best_name],
        "ratio_kernel_vs_best": rate["mascot_kernel"] / rate[best_name],
        "ratio_kernel_vs_batched": rate["mascot_kernel"] / rate["numpy_batched"],
        "max_rel_diff": err,
    }
    bw, gemm = machine_rates()
    read_s, flops = A.nbytes / (bw / 2), roofline_flops(family, n, G, und, normal)
    row.update(
        roofline_s=max(read_s, flops / gemm),
        bound="memory" if read_s >= flops / gemm else "compute",
        of_roofline=max(read_s, flops / gemm) / t_mascot,
        copy_bandwidth_GBps=bw / 1e9,
        gemm_gflops=gemm / 1e9,
    )
    if family == "closed":
        row["ratio_no_closed_forms_vs_best"] = rate["mascot_no_closed_forms"] / rate[best_name]
    print(
        f"  {family:10s} n={n:3d} G={G:5d} [{ref[3]}]: mascot {rate['mascot']:10.0f}/s  "
        f"(kernel {rate['mascot_kernel']:10.0f}/s)  loop {rate['numpy_loop']:9.0f}/s  "
        f"batch {rate['numpy_batched']:9.0f}/s  batch2 {rate['numpy_batched_2threads']:9.0f}/s  "
        f"x{row['ratio_vs_best']:.2f} vs best, kernel x{row['ratio_kernel_vs_batched']:.2f} vs batch  "
        f"(2T parallelism {par[3]:.2f}, compile {row['compile_s']:.2f} s)",
        file=sys.stderr,
        flush=True,
    )
    return row


def run(quick=False, families=FAMILIES, sizes=tuple(SIZES)):
    rng = np.random.default_rng(0)
    scale = 8 if quick else 1
    repeat = 3 if quick else 5
    plan = [(fam, n) for fam in families for n in sizes]
    rows = [cell(fam, n, max(SIZES[n] // scale, 5), rng, repeat) for fam, n in plan]
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "numpy": np.__version__,
        "devices": [str(d) for d in jax.devices()],
        "x64": bool(jax.config.jax_enable_x64),
    }
    return {"machine": machine, "gammas": GAMMAS.tolist(), "quick": quick, "rows": rows}


def table(result):
    head = (
        "| family | n | G x gammas | routes | mascot pairs/s | kernel (serial) | numpy loop | numpy batched | "
        "numpy batched 2T | mascot / numpy best | kernel / numpy batched | 2T parallelism | compile s | "
        "roofline ms (bound) | of roofline |"
    )
    lines = [head, "|" + "---|" * 15]
    for r in result["rows"]:
        p = r["pairs_per_s"]
        best = {"numpy_loop": "loop", "numpy_batched": "batched", "numpy_batched_2threads": "2T"}[r["numpy_best"]]
        routes = ", ".join(r["routes"])
        if r["family"] == "closed":
            routes = "closed forms"
        elif r["normal_P"]:
            routes += " (P symmetric, no SVD)"
        else:
            routes += " + SVD"
        nc = r.get("ratio_no_closed_forms_vs_best")
        extra = f" (no closed forms: {nc:.2f}x)" if nc is not None else ""
        lines.append(
            f"| {r['family']} | {r['n']} | {r['G']:,} x {r['gammas']} | {routes} | {p['mascot']:,.0f} | "
            f"{p['mascot_kernel']:,.0f} | {p['numpy_loop']:,.0f} | {p['numpy_batched']:,.0f} | "
            f"{p['numpy_batched_2threads']:,.0f} | "
            f"**{r['ratio_vs_best']:.2f}x** ({best}){extra} | {r['ratio_kernel_vs_batched']:.2f}x | "
            f"{r['parallelism_2threads']:.2f} | {r['compile_s']:.2f} | {1e3 * r['roofline_s']:.3g} ({r['bound']}) | "
            f"{100 * r['of_roofline']:.1f}% |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="stacks 8x smaller (at least 5 graphs), 3 repetitions")
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated subset of " + ",".join(FAMILIES))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated subset of 16,64,256")
    ap.add_argument("--json-out", help="also write the JSON here")
    args = ap.parse_args()
    fams = tuple(f for f in args.families.split(",") if f)
    sizes = tuple(int(s) for s in args.sizes.split(",") if s)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    result = run(args.quick, fams, sizes)
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
