"""Benchmark: the hf backend, batched left-padded ``generate`` vs one request at a time.

The tiny random-weight Qwen2 of the tests (tests/tiny_model.py: 2 layers, width 32, byte-level BPE of
384 tokens) is built in a temporary directory; N chat requests of different lengths (state-tracking
style prompts, 75-110 prompt tokens) are decoded greedily with max_tokens new tokens each (the random
model never emits eos within that budget, so every variant generates exactly N * max_tokens tokens):

  (i)   single : HFBackend(batch_size=1), i.e. N separate ``generate`` calls;
  (ii)  batch16: HFBackend(batch_size=16), N / 16 calls;
  (iii) batch64: HFBackend(batch_size=64), one call for N = 64.

Each variant runs once to warm up, then ``--reps`` times interleaved; the best time is reported
(requests/s and generated tokens/s) with the ratio to (i). Greedy outputs of all variants are compared
(left padding must not change them). On this model, per-step overhead (Python, kernel launches) dominates
the FLOPs, which is the regime where batching pays most; a 7B model on CPU is compute bound and gains less.
Read the ratios, not the absolute numbers.

    python benchmarks/bench_hf_batching.py [--n 64] [--max-tokens 32] [--reps 3] [--json-out FILE]

(about 3 minutes on 2 CPU cores, most of it the one-at-a-time variant).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mascot.backends.base import Request, Sampling  # noqa: E402
from mascot.backends.hf import HFBackend  # noqa: E402
from tiny_model import build_tiny_qwen2  # noqa: E402


def make_requests(n: int, max_tokens: int) -> list[Request]:
    s = Sampling(temperature=0.0, top_p=1.0, max_tokens=max_tokens)
    reqs = []
    for i in range(n):
        neighbours = ", ".join(f"agent {j} says {10 + (i * 7 + j) % 13}" for j in range(1 + i % 5))
        reqs.append(
            Request(
                [
                    {"role": "system", "content": f"You are agent {i % 5} of 5 in a state-tracking task."},
                    {
                        "role": "user",
                        "content": f'State {{"x": {i}, "step": {i % 12}}}. Your neighbours reported: {neighbours}.',
                    },
                ],
                dataclasses.replace(s, seed=i),
            )
        )
    return reqs


def run(n: int, max_tokens: int, reps: int, batch_sizes: list[int]) -> dict:
    import torch
    import transformers

    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_qwen2(os.path.join(tmp, "tiny"))
        reqs = make_requests(n, max_tokens)
        backends = {bs: HFBackend(path, device="cpu", batch_size=bs) for bs in [1, *batch_sizes]}
        outputs, best = {}, {bs: float("inf") for bs in backends}
        for bs, be in backends.items():  # warm-up
            outputs[bs] = be.generate(reqs)
        for _ in range(reps):
            for bs, be in backends.items():
                t0 = time.perf_counter()
                be.generate(reqs)
                best[bs] = min(best[bs], time.perf_counter() - t0)

    ref = [(r.text, r.completion_tokens) for r in outputs[1]]
    prompt_tokens = [r.prompt_tokens for r in outputs[1]]
    rows = []
    for bs, t in best.items():
        gen = sum(r.completion_tokens for r in outputs[bs])
        rows.append(
            dict(
                variant="single" if bs == 1 else f"batch{bs}",
                batch_size=bs,
                generate_calls=-(-n // bs),
                seconds=round(t, 4),
                requests_per_s=round(n / t, 2),
                tokens_per_s=round(gen / t, 1),
                speedup_vs_single=round(best[1] / t, 2),
                outputs_identical_to_single=[(r.text, r.completion_tokens) for r in outputs[bs]] == ref,
                errors=sum(r.error is not None for r in outputs[bs]),
            )
        )
    return dict(
        machine=dict(
            platform=platform.platform(),
            cpus=os.cpu_count(),
            torch=torch.__version__,
            torch_threads=torch.get_num_threads(),
            transformers=transformers.__version__,
        ),
        workload=dict(
            n_requests=n,
            max_tokens=max_tokens,
            decoding="greedy",
            prompt_tokens_min=min(prompt_tokens),
            prompt_tokens_max=max(prompt_tokens),
            model="tiny random Qwen2 (tests/tiny_model.py)",
            reps=reps,
            timing="best of reps after one warm-up",
        ),
        results=rows,
    )


def table(result: dict) -> str:
    lines = [
        "| variant | batch size | generate calls | s | requests/s | tokens/s | vs single | same outputs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["results"]:
        lines.append(
            f"| {r['variant']} | {r['batch_size']} | {r['generate_calls']} | {r['seconds']:.3f} | "
            f"{r['requests_per_s']:,.1f} | {r['tokens_per_s']:,.0f} | {r['speedup_vs_single']:.1f}x | "
            f"{'yes' if r['outputs_identical_to_single'] else 'NO'} |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=64, help="number of requests (default 64)")
    ap.add_argument("--max-tokens", type=int, default=32, help="new tokens per request (default 32)")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions per variant (default 3)")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--json-out", help="also write the JSON here")
    args = ap.parse_args()
    result = run(args.n, args.max_tokens, args.reps, args.batch_sizes)
    print(json.dumps(result, indent=2))
    print()
    print(table(result))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
