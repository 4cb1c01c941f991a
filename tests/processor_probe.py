"""Everything mascot computes that could depend on the processor, small, as JSON.

Run as a script (``python tests/processor_probe.py WORKDIR``, the JSON in ``WORKDIR/probe.json``) once as this machine is and once with numpy,
OpenBLAS and XLA narrowed to another processor's instruction sets (``tests/test_same_numbers.py``); the
two outputs must agree. It covers the committed configs' hashes and grid values, and a small run of every
kind of result mascot commits: consensus sweeps (float32 and float64, modal and matrix paths, belief
noise), spectra sweeps (closed forms, LAPACK, random graphs), affine-noise sweeps (linear and on the
rule), state-tracking trials and their statistics, the deliberation and debate surrogates, and Theorem 1's
certificates.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent

SWEEPS = {
    "consensus32": """
[experiment]
kind = "consensus"
seed = 3
chunk_size = 4
[fixed]
trajectories = 16
d = 3
max_rounds = 40
b0 = 3000
[grid]
n = [17]  # where the FMA lanes showed (test_same_numbers); n = 6 is in consensus64
strategy = ["adaptive", "complete", "ring"]
noise = [0.0, 0.002]
""",
    "consensus64": """
[experiment]
kind = "consensus"
seed = 3
dtype = "float64"
chunk_size = 8
[fixed]
trajectories = 16
max_rounds = 60
[grid]
n = [6, 17]
eta = { logspace = [0.05, 0.2, 3] }
x0_spread = { linspace = [0.1, 0.3, 2] }
""",
    "spectra": """
[experiment]
kind = "spectra"
seed = 1
dtype = "float64"
[fixed]
graphs = 3
[grid]
family = ["chain", "star", "mesh", "erdos_renyi", "watts_strogatz", "malicious_star"]
n = [8, 40]
gamma = [0.5, 0.95]
""",
    "noise_linear": """
[experiment]
kind = "affine_noise"
seed = 2
[fixed]
trials = 500
[grid]
k = [1, 4]
rho_c = [0.0, 0.5]
L = [0.9, 1.0]
""",
    "noise_rule": """
[experiment]
kind = "affine_noise"
seed = 2
dtype = "float64"
[fixed]
model = "rule"
trials = 300
[grid]
k = [1, 3]
sigma = [0.5, 4.0]
""",
}


def _table(path) -> dict:
    df = pd.read_parquet(path)
    return {c: df[c].tolist() if df[c].dtype.kind in "biufc" else df[c].astype(str).tolist() for c in df.columns}


def main(work: Path) -> dict:
    from mascot.cli import main as cli
    from mascot.sweep import RunDir, load_config, parse_config, run_sweep
    from mascot.theory import theorem1_batch

    out: dict = {"configs": {}}
    for p in sorted((ROOT / "configs").glob("*/*.toml")):
        try:
            c = load_config(p)
        except Exception:  # not a sweep config (trials, deliberation, debate)
            continue
        out["configs"][p.name] = {"hash": c.hash, "values": [v for _, pts in c.axes for t in pts for v in t]}
    for name, text in SWEEPS.items():
        cfg = parse_config(text)
        run_sweep(cfg, work / name, progress=False)
        out[name] = _table(RunDir(work / name).merge())
    assert (
        cli(
            [
                "trials",
                "--backend",
                "surrogate",
                "--n-trials",
                "6",
                "--steps",
                "5",
                "--n-boot",
                "50",
                "--no-figures",
                "--quiet",
                "--out",
                str(work / "trials"),
            ]
        )
        == 0
    )
    out["trials"] = _table(work / "trials" / "trials.parquet")
    out["trials_stats"] = json.loads((work / "trials" / "stats.json").read_text())["metrics"]
    assert cli(["deliberate", "--runs", "3", "--no-report", "--quiet", "--out", str(work / "delib")]) == 0
    keep = (
        "strategy",
        "run",
        "round",
        "sigma",
        "D",
        "b",
        "cost",
        "X",
        "status",
        "prompt_tokens",
        "completion_tokens",
        "next_sigma",
        "predicted_cost",
    )  # not the wall-clock time of each round
    rounds = [json.loads(line) for line in (work / "delib" / "rounds.jsonl").read_text().splitlines()]
    out["deliberation"] = [{k: r.get(k) for k in keep} for r in rounds]
    assert (
        cli(["debate", str(ROOT / "configs" / "debate" / "code_review.toml"), "--quiet", "--out", str(work / "debate")])
        == 0
    )
    out["debate"] = json.loads((work / "debate" / "summary.json").read_text())
    rng = np.random.default_rng(0)
    d0 = rng.uniform(0.05, 1.0, 2000)
    k1, k2, b = theorem1_batch(d0, 0.1, 0.03, 0.25, 0.6, 600.0, 100.0)
    out["theorem1"] = [k1.tolist(), k2.tolist(), b.tolist()]
    return out


if __name__ == "__main__":
    work = Path(sys.argv[1])
    work.mkdir(parents=True, exist_ok=True)
    (work / "probe.json").write_text(json.dumps(main(work)))
