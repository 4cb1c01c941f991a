"""Benchmark: Algorithm 1 rollouts, JAX kernel vs a plain Python loop and a tuned vectorised numpy baseline.

All three run in this one process on the same inputs (float32, d = 6, adaptive strategy, eta = 0.1,
eps = 0.03, a budget that never binds, max_rounds = 64):

  (i)   python : the plain Python loop, numpy per step (mascot.theory.algorithm1), on a subsample of
                 min(B, 300) trajectories, reported as trajectories/s;
  (ii)  numpy  : beliefs as one (N, B*d) matrix, one matrix product per round over the whole batch
                 (the stacked [W1; W2] product when lanes are split between modes), finished
                 trajectories masked, the batch split over 2 threads with BLAS limited to 1 thread
                 each (threadpoolctl) so both cores work;
  (iii) jax    : mascot.simulate_consensus (modal path for the commuting complete+ring pair, the
                 compacting matrix path for a non-commuting pair); compile time reported separately.

"roofline" is the floor a kernel cannot beat on this machine, both rates measured in this process:
max(bytes read / copy bandwidth, FLOPs / GEMM rate), with bytes = X0 read once and FLOPs = the modal
projection (2 B d N (N - 1)) or, on the matrix path, one N x N product per round (2 N^2 d B x mean
rounds); the GEMM rate is the faster of XLA's and numpy's (BLAS on every core) on one (B d, N) @ (N, N)
float32 product. "of roofline" is that floor divided by the JAX time. The closed-form (round-free) modal path
is timed against the round loop it replaced at the issue's two cells (``--focus``). OpenBLAS runs on one
thread for the whole benchmark (numpy's baseline splits its batch over Python threads): after a
multi-threaded OpenBLAS call its idle workers spin, and on a 2-core machine the JAX call timed next ran at
half speed.

``--profile`` splits the modal path's time at the two target cells (N = 64, B = 2e4 and N = 5, B = 1e5,
float32) into the host copy to aligned memory (none where the kernel reads X0 in place), the kernel
(projection and round-free rounds, beside the round loop) and the rest (dispatch, harvest), against the
roofline: max(reading X0 once, the projection's multiply-adds at the best GEMM rate on one same-shaped
product). Calls are timed back to back and, separately, each after 0.3 s with the cores idle (a call after
other work: this VM's idle cores come back slower). It also times the matrix path at N = 64, B = 2e4 both
ways against its roofline.

    python benchmarks/bench_consensus.py [--quick] [--json-out FILE] [--focus] [--profile]
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
import numpy as np
from threadpoolctl import threadpool_limits

from mascot import simulate_consensus
from mascot.graphs import complete_weights, ring_weights
from mascot.theory import algorithm1

ETA, EPS, C1, C2, B0, MAX_ROUNDS, D = (
    0.1,
    0.03,
    600.0,
    100.0,
    1e7,
    64,
    6,
)  # B0: never binds (64 x 600 = 38,400); float32-exact


def pairs(n, rng):
    W1, W2 = complete_weights(n, 0.4), ring_weights(n, 0.6)

    # non-commuting: random convex combinations of permutations (doubly stochastic, non-symmetric)
    def birkhoff(k):
        W = np.zeros((n, n))
        for w in rng.dirichlet(np.ones(k)):
            W[np.arange(n), rng.permutation(n)] += w
        return W

    return {
        "commuting": (W1, W2),
        "non-commuting": (0.5 * np.eye(n) + 0.5 * birkhoff(4), 0.7 * np.eye(n) + 0.3 * birkhoff(2)),
    }


def numpy_rollout(X0, W1, W2):
    """Tuned vectorised numpy: X as (N, B*d), one product per round over the whole batch, masking."""
    B, N, d = X0.shape
    X = np.ascontiguousarray(np.transpose(X0, (1, 0, 2)))  # (N, B, d)
    W1, W2 = W1.astype(X.dtype), W2.astype(X.dtype)
    W12 = np.concatenate([W1, W2])
    b = np.full(B, B0, X.dtype)
    rounds = np.zeros(B, np.int32)
    c = X - X.mean(axis=0)
    dis = np.sqrt(np.einsum("nbd,nbd->b", c, c) / N)
    active = dis > EPS
    for _ in range(MAX_ROUNDS):
        if not active.any():
            break
        mode1 = dis > ETA
        cost = np.where(mode1, C1, C2)
        step = active & (b >= cost)
        flat = X.reshape(N, B * d)
        if np.all(mode1 | ~step):
            Y = (W1 @ flat).reshape(N, B, d)
        elif np.all(~mode1 | ~step):
            Y = (W2 @ flat).reshape(N, B, d)
        else:
            Y2 = (W12 @ flat).reshape(2, N, B, d)
            Y = np.where(mode1[None, :, None], Y2[0], Y2[1])
        X = np.where(step[None, :, None], Y, X)
        c = X - X.mean(axis=0)
        dis = np.where(step, np.sqrt(np.einsum("nbd,nbd->b", c, c) / N), dis)
        b = np.where(step, b - cost, b)
        rounds += step
        active = step & (dis > EPS)
    return rounds, dis


def numpy_threads(X0, W1, W2, threads=2):
    parts = np.array_split(X0, threads)
    with threadpool_limits(1), ThreadPoolExecutor(threads) as ex:
        out = list(ex.map(lambda p: numpy_rollout(p, W1, W2), parts))
    return np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out])


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def interleaved(fa, fb, repeat):
    """Best-of-``repeat`` times of ``fa`` and ``fb``, alternating so that drifts in machine load hit both."""
    ta, tb = [], []
    for _ in range(repeat):
        for f, ts in ((fa, ta), (fb, tb)):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
    return min(ta), min(tb)


def copy_bandwidth():
    a = np.ones(2**26, np.float32)  # 256 MiB
    b = np.empty_like(a)
    t = best_of(lambda: np.copyto(b, a), 3)
    return 2 * a.nbytes / t  # bytes read + written per second


_GEMM = {}


def gemm_rate(N, B):
    """FLOP/s of the faster of XLA's and numpy's (BLAS) float32 (B d, N) @ (N, N) product on this machine (best
    of 5 each), cached per shape."""
    import jax.numpy as jnp

    if (N, B) not in _GEMM:
        xh = np.random.default_rng(0).uniform(size=(B * D, N)).astype(np.float32)
        uh = np.random.default_rng(1).uniform(size=(N, N)).astype(np.float32)
        x, u = jax.device_put(xh), jax.device_put(uh)
        f = jax.jit(lambda a, b: jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST))
        jax.block_until_ready(f(x, u))
        out = np.empty((B * D, N), np.float32)
        t_xla = best_of(lambda: jax.block_until_ready(f(x, u)), 5)
        with threadpool_limits(os.cpu_count()):  # numpy's GEMM on every core (the rest of the run keeps one)
            t_np = best_of(lambda: np.matmul(xh, uh, out=out), 5)
        time.sleep(1.0)  # let OpenBLAS's workers stop spinning before anything else is timed
        t = min(t_xla, t_np)
        _GEMM[(N, B)] = 2.0 * B * D * N * N / t
    return _GEMM[(N, B)]


def run(quick=False):
    rng = np.random.default_rng(0)
    bw = copy_bandwidth()
    rows = []
    Bs = [1000, 10000, 20000] if quick else [1000, 10000, 20000, 100000]
    for N in (5, 64):
        for kind, (W1, W2) in pairs(N, rng).items():
            for B in Bs:
                X0 = rng.normal(0.5, 0.15, size=(B, N, D)).clip(0, 1).astype(np.float32)
                sub = X0[: min(B, 300)]
                with threadpool_limits(1):  # tiny matrices: one BLAS thread, none left spinning
                    t_py = best_of(
                        lambda: [algorithm1(x, W1, W2, C1, C2, ETA, EPS, B0, "adaptive", MAX_ROUNDS) for x in sub], 1
                    )
                jax_call = lambda: simulate_consensus(
                    X0, W1, W2, C1, C2, ETA, EPS, B0, max_rounds=MAX_ROUNDS, dtype="float32"
                )  # noqa: E731
                t0 = time.perf_counter()
                res = jax_call()
                t_first = time.perf_counter() - t0
                repeat = 5 if B * N <= 2_000_000 else 3
                t_jax, t_np = interleaved(jax_call, lambda: numpy_threads(X0, W1, W2), repeat)
                r_np, _ = numpy_threads(X0, W1, W2)
                assert np.mean(r_np == res.rounds) > 0.999, "baseline and kernel disagree"
                rate = gemm_rate(N, B)
                read_s = X0.nbytes / (bw / 2)
                flops = (
                    2.0 * B * D * N * (N - 1)
                    if res.method == "modal"
                    else 2.0 * N * N * D * B * float(res.rounds.mean())
                )
                floor = max(read_s, flops / rate)
                rows.append(
                    dict(
                        N=N,
                        pair=kind,
                        B=B,
                        method=res.method,
                        mean_rounds=float(res.rounds.mean()),
                        python_traj_s=len(sub) / t_py,
                        numpy_traj_s=B / t_np,
                        jax_traj_s=B / t_jax,
                        jax_s=t_jax,
                        numpy_s=t_np,
                        compile_s=max(t_first - t_jax, 0.0),
                        ratio_vs_numpy=t_np / t_jax,
                        ratio_vs_python=(len(sub) / t_py) ** -1 * B / t_jax,
                        roofline_s=floor,
                        bound="memory" if read_s >= flops / rate else "compute",
                        gemm_gflops=rate / 1e9,
                        floor_fraction=floor / t_jax,
                    )
                )
                print(
                    f"  N={N:3d} {kind:13s} B={B:6d}: jax {B / t_jax:11.0f}/s  numpy {B / t_np:11.0f}/s  "
                    f"x{t_np / t_jax:6.1f}",
                    file=sys.stderr,
                    flush=True,
                )
    return dict(
        machine=dict(
            platform=platform.platform(),
            cpus=os.cpu_count(),
            jax=jax.__version__,
            numpy=np.__version__,
            devices=[str(d) for d in jax.devices()],
            copy_bandwidth_GBps=bw / 1e9,
        ),
        rows=rows,
    )


def _round_loop(call):
    """``call()`` on the modal path's round loop instead of its closed form (issue 34)."""
    import mascot.execute.consensus as ec

    ec.CLOSED_FORM = False
    try:
        return call()
    finally:
        ec.CLOSED_FORM = True


def focus(trials=7):
    """The issue's target cells, measured ``trials`` times each (interleaved, best of 3 per trial)."""
    rng = np.random.default_rng(1)
    out = []
    for N, B in ((64, 20000), (5, 100000)):
        W1, W2 = pairs(N, rng)["commuting"]
        X0 = rng.normal(0.5, 0.15, size=(B, N, D)).clip(0, 1).astype(np.float32)
        call = lambda: simulate_consensus(X0, W1, W2, C1, C2, ETA, EPS, B0, max_rounds=MAX_ROUNDS, dtype="float32")  # noqa: E731
        call()
        ratios, vs_loop = [], []
        for _ in range(trials):
            t_jax, t_np = interleaved(call, lambda: numpy_threads(X0, W1, W2), 3)
            ratios.append(t_np / t_jax)
            t_closed, t_loop = interleaved(call, lambda: _round_loop(call), 3)
            vs_loop.append(t_loop / t_closed)
        out.append(
            dict(
                N=N,
                B=B,
                pair="commuting",
                ratios=ratios,
                closed_vs_round_loop=vs_loop,
                closed_vs_round_loop_median=float(np.median(vs_loop)),
                median=float(np.median(ratios)),
                min=min(ratios),
                max=max(ratios),
            )
        )
        print(
            f"  N={N} B={B}: jax/numpy median {np.median(ratios):.1f}x (min {min(ratios):.1f}, max "
            f"{max(ratios):.1f}) over {trials} trials; round loop / closed form median {np.median(vs_loop):.2f}x",
            file=sys.stderr,
            flush=True,
        )
    return out


def after_idle(fn, repeat):
    """Best of ``repeat`` timings of ``fn()``, each after 0.3 s with both cores idle (as a call after other work
    meets them)."""
    ts = []
    for _ in range(repeat):
        time.sleep(0.3)
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def profile(N=64, B=20000, repeat=9):
    """Where the modal path's time goes at one cell (float32, numpy X0 as the benchmark makes it)."""
    import jax.numpy as jnp

    import mascot.execute.consensus as ec
    from mascot.kernels import consensus as kc

    rng = np.random.default_rng(1)
    W1, W2 = pairs(N, rng)["commuting"]
    X0 = rng.normal(0.5, 0.15, size=(B, N, D)).clip(0, 1).astype(np.float32)
    dt = jnp.float32
    _, _, _, c = ec._setup(W1.tobytes(), W2.tobytes(), N, "auto", "float32", False)
    tile = ec._tile(N, D, dt) if hasattr(ec, "_tile") and N > kc.SMALL_N else None  # (older drivers: none)
    try:
        C = ec._chunk_size(B, N, D, dt, True, None, "cpu", tiled=tile is not None)
    except TypeError:
        C = ec._chunk_size(B, N, D, dt, True, None, "cpu")
    kw = {} if tile is None else dict(tile=tile)
    chunks = [jax.device_put(ec._aligned(X0[lo : lo + C])) for lo in range(0, B - C + 1, C)]  # full chunks
    params = dict(
        c1=np.float32(C1), c2=np.float32(C2), eta=np.float32(ETA), eps=np.float32(EPS), b0=np.full(C, B0, np.float32)
    )

    closed = getattr(kc, "modal_closed", kc.modal_rollout)  # the closed form (issue 34) where there is one

    def kernel(fn=closed):
        return jax.block_until_ready(
            [
                fn(x, c["U"], c["S"], c["lam1"], c["lam2"], params, strategy="adaptive", max_rounds=MAX_ROUNDS, **kw)
                for x in chunks
            ]
        )

    def kernel_loop():
        return kernel(kc.modal_rollout)

    def projection():
        return jax.block_until_ready([kc.modal_init(x, c["U"], c["S"], noisy=False, **kw) for x in chunks])

    n_cols = c["U"].shape[1]
    Xt_host = np.ascontiguousarray(X0.transpose(0, 2, 1)).reshape(B * D, N)
    Xt, U_host = jax.device_put(Xt_host), np.asarray(c["U"])
    matmul = jax.jit(lambda x, u: jnp.matmul(x, u, precision=jax.lax.Precision.HIGHEST))
    product_out = np.empty((B * D, n_cols), np.float32)
    product = lambda: jax.block_until_ready(matmul(Xt, c["U"]))  # noqa: E731
    product_np = lambda: np.matmul(Xt_host, U_host, out=product_out)  # noqa: E731
    total = lambda: simulate_consensus(X0, W1, W2, C1, C2, ETA, EPS, B0, max_rounds=MAX_ROUNDS, dtype="float32")  # noqa: E731
    unaligned = X0[1:] if X0.ctypes.data % 64 == 0 else X0  # the copy a typical (16-byte aligned) X0 gets
    copy = lambda: ec._aligned(unaligned)  # noqa: E731

    fns = dict(
        total=total,
        host_copy=copy,
        kernel=kernel,
        kernel_loop=kernel_loop,
        projection=projection,
        product=product,
        product_np=product_np,
    )
    for f in fns.values():
        f()
    times = {k: [] for k in fns}
    for _ in range(repeat):  # interleaved: load drifts hit every part alike
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    idle = after_idle(total, repeat)
    t = {k: min(v) for k, v in times.items()}
    t["product"] = min(t["product"], t.pop("product_np"))  # the faster GEMM of the two: the compute floor
    n_full = len(chunks) * C
    scale = B / n_full  # the kernel parts were timed on the full chunks only
    kern, proj = t["kernel"] * scale, t["projection"] * scale
    # the tiled path reads an unaligned X0 in place (from the 64-byte boundary before it); others copy it
    copies = X0.ctypes.data % 64 and (tile is None or not hasattr(ec, "_from_boundary"))
    host_copy = t["host_copy"] if copies else 0.0
    avoided = t["host_copy"] if X0.ctypes.data % 64 and not copies else 0.0  # what reading in place saves
    flops = 2.0 * B * D * N * n_cols
    bw = copy_bandwidth()
    floor = X0.nbytes / (bw / 2)
    roofline = max(floor, t["product"])
    out = dict(
        N=N,
        B=B,
        chunk=C,
        tile=tile,
        total_s=t["total"],
        host_copy_s=host_copy,
        kernel_s=kern,
        projection_s=proj,
        rounds_s=kern - proj,
        round_loop_s=t["kernel_loop"] * scale - proj,
        other_s=t["total"] - host_copy - kern,
        x0_read_floor_s=floor,
        roofline_s=roofline,
        roofline_fraction=roofline / t["total"],
        total_after_idle_s=idle,
        roofline_fraction_after_idle=roofline / idle,
        aligned_copy_avoided_s=avoided,
        product_gflops=flops / t["product"] / 1e9,
        compute_floor_s=t["product"],
        compute_floor_fraction=t["product"] / t["total"],
        copy_bandwidth_GBps=bw / 1e9,
        x0_aligned=bool(X0.ctypes.data % 64 == 0),
    )
    print(
        f"  N={N} B={B} chunk={C} tile={tile}: total {1e3 * t['total']:.2f} ms = host copy "
        f"{1e3 * host_copy:.2f} + projection {1e3 * proj:.2f} + rounds {1e3 * (kern - proj):.2f} (the round loop: "
        f"{1e3 * out['round_loop_s']:.2f}) + other "
        f"{1e3 * out['other_s']:.2f} (X0 read in place: an aligned copy would add {1e3 * avoided:.2f}); roofline {1e3 * roofline:.2f} ms = max(X0 read {1e3 * floor:.2f}, "
        f"projection at the best GEMM rate {1e3 * t['product']:.2f} ({out['product_gflops']:.0f} GFLOP/s)): "
        f"{100 * out['roofline_fraction']:.1f}% of the roofline; the same call after 0.3 s idle: "
        f"{1e3 * idle:.2f} ms ({100 * out['roofline_fraction_after_idle']:.1f}%)",
        file=sys.stderr,
        flush=True,
    )
    return out


def profile_matrix(N=64, B=20000, repeat=7):
    """The matrix path (non-commuting pair) at one cell: back-to-back calls and calls after 0.3 s idle, against
    the roofline of its useful products (2 N^2 d B x mean rounds at the best GEMM rate)."""
    rng = np.random.default_rng(0)
    W1, W2 = pairs(N, rng)["non-commuting"]
    X0 = rng.normal(0.5, 0.15, size=(B, N, D)).clip(0, 1).astype(np.float32)
    call = lambda: simulate_consensus(X0, W1, W2, C1, C2, ETA, EPS, B0, max_rounds=MAX_ROUNDS, dtype="float32")  # noqa: E731
    res = call()
    steady = best_of(call, repeat)

    idle = after_idle(call, repeat)
    roofline = 2.0 * N * N * D * B * float(res.rounds.mean()) / gemm_rate(N, B)
    parts = _matrix_parts(call, repeat)
    out = dict(
        N=N,
        B=B,
        method=res.method,
        mean_rounds=float(res.rounds.mean()),
        total_s=steady,
        total_after_idle_s=idle,
        roofline_s=roofline,
        roofline_fraction=roofline / steady,
        roofline_fraction_after_idle=roofline / idle,
        parts_s=parts,
    )
    print(
        f"  matrix N={N} B={B}: {1e3 * steady:.1f} ms back to back, {1e3 * idle:.1f} ms after 0.3 s idle; roofline "
        f"{1e3 * roofline:.1f} ms ({100 * out['roofline_fraction']:.1f}%, after idle "
        f"{100 * out['roofline_fraction_after_idle']:.1f}%); one call with each kernel awaited: "
        + ", ".join(f"{k} {1e3 * v:.1f}" for k, v in parts.items())
        + " ms",
        file=sys.stderr,
        flush=True,
    )
    return out


def _matrix_parts(call, repeat):
    """Seconds of one matrix-path call spent in each compiled kernel (each awaited as it returns, so the call
    runs serialised) and on the host between them: the fastest of ``repeat`` calls."""
    from mascot.kernels import consensus as kc

    names = ("matrix_init", "make_lanes", "matrix_segment", "gather", "gather_lanes")
    real = {k: getattr(kc, k) for k in names}
    spent = {}

    def timed(name):
        def run(*a, **k):
            t0 = time.perf_counter()
            r = jax.block_until_ready(real[name](*a, **k))
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
            return r

        return run

    best = None
    try:
        for k in names:
            setattr(kc, k, timed(k))
        for _ in range(repeat):
            spent.clear()
            t0 = time.perf_counter()
            call()
            total = time.perf_counter() - t0
            if best is None or total < best["total"]:
                best = dict(spent, total=total, host=total - sum(spent.values()))
    finally:
        for k, f in real.items():
            setattr(kc, k, f)
    return best


def table(result):
    head = (
        "| N | pair | B | path | mean rounds | python traj/s | numpy traj/s | jax traj/s | jax / numpy | "
        "jax / python | compile s | roofline ms (bound) | of roofline |"
    )
    lines = [head, "|" + "---|" * 13]
    for r in result["rows"]:
        lines.append(
            f"| {r['N']} | {r['pair']} | {r['B']:,} | {r['method']} | {r['mean_rounds']:.1f} | "
            f"{r['python_traj_s']:,.0f} | {r['numpy_traj_s']:,.0f} | {r['jax_traj_s']:,.0f} | "
            f"{r['ratio_vs_numpy']:.1f}x | {r['ratio_vs_python']:,.0f}x | {r['compile_s']:.2f} | "
            f"{1e3 * r['roofline_s']:.2f} ({r['bound']}) | {100 * r['floor_fraction']:.1f}% |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="B up to 2e4 only")
    ap.add_argument("--json-out", help="also write the JSON here")
    ap.add_argument(
        "--focus", action="store_true", help="only the target cells (commuting N=64 B=2e4, N=5 B=1e5), 7 trials each"
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="only the time split of the modal path at the target cells (host copy, kernel, rest) and its roofline",
    )
    args = ap.parse_args()
    # OpenBLAS at one thread for the whole run (numpy's baseline splits its batch over Python threads itself):
    # after a multi-threaded OpenBLAS call its idle workers spin for about 0.1 s, and on a 2-core machine the
    # JAX call timed next ran at half speed (measured 12 -> 20-26 ms at N = 64, B = 2e4); the alternation of
    # baseline and kernel then measured OpenBLAS's spinning, not the kernel
    threadpool_limits(1)
    if args.focus or args.profile:
        if args.focus:
            out = focus()
        else:
            out = dict(modal=[profile(64, 20000), profile(5, 100000)], matrix=profile_matrix())
        print(json.dumps(out, indent=2))
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(out, f, indent=2)
        return
    result = run(args.quick)
    print(json.dumps(result, indent=2))
    print()
    print(table(result))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
