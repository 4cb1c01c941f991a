"""How leave-out/ was made (issue 31): SR Table 2's out-of-sample tests. Six fits of the state-tracking surrogate
to Table 2, each without one topology (its six moments) or one metric (its mean and s.d. on every topology),
every parameter started at the centre of its box, each predicting what it did not see:
`mascot calibrate trials --paper-table2 --leave-out X --out leave-out/X` for X in chain, mesh, star, E_ceg, R_cdr,
F_ps, then `summary.md` from their leave_out.json files. Run from the repository root:
python results/calibration/trials/leave-out/make.py [STEPS [N_BOOT]] (default 300 ES steps and 100 bootstrap
draws per fit). A case whose leave_out.json exists and was made with these STEPS and N_BOOT is kept (each fit
is deterministic, about 9 minutes on 2 cores; delete its directory to redo it)."""

import json
import os
import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
root = here.parents[3]
os.chdir(root)
here = here.relative_to(root)
steps = sys.argv[1] if len(sys.argv) > 1 else "300"
n_boot = sys.argv[2] if len(sys.argv) > 2 else "100"
cases = ("chain", "mesh", "star", "E_ceg", "R_cdr", "F_ps")


def done(x) -> bool:
    try:
        fit = json.loads((here / x / "fit" / "fit.json").read_text())
        json.loads((here / x / "leave_out.json").read_text())
    except (OSError, ValueError):
        return False
    return fit["iterations"] == int(steps) and fit["n_boot"] == int(n_boot) and fit["seed"] == 0


for x in cases:
    if done(x):
        print(f"{here / x}: kept (made with {steps} steps and {n_boot} bootstrap draws)")
        continue
    cmd = [sys.executable, "-m", "mascot", "calibrate", "trials", "--paper-table2", "--leave-out", x]
    subprocess.run([*cmd, "--steps", steps, "--n-boot", n_boot, "--seed", "0", "--out", str(here / x)], check=True)
rows = []
for x in cases:
    r = json.loads((here / x / "leave_out.json").read_text())
    outside = [row["moment"] for row in r["rows"] if not row["inside"]]
    apart = [row["moment"] for row in r["not_counted"]]
    rows.append(
        f"| {x} | {r['inside']} of {r['n_moments']} | {r['in_sample']['inside']} of {r['in_sample']['n_moments']} | "
        f"{r['loss']:.3g} | {', '.join(outside) or '-'} | {', '.join(apart) or '-'} |"
    )
n_pred = json.loads((here / cases[0] / "leave_out.json").read_text())["n_pred"]
total = sum(json.loads((here / x / "leave_out.json").read_text())["inside"] for x in cases)
n = sum(json.loads((here / x / "leave_out.json").read_text())["n_moments"] for x in cases)
lines = [
    "# SR Table 2 out of sample: leave one topology or metric out",
    "",
    f"Made by `make.py` ({steps} ES steps and {n_boot} bootstrap draws per fit, seed 0). Each row: a fit to Table 2 without the named topology"
    " or metric, every parameter started at its box's centre, predicting the held-out moments (5-95% ranges of"
    f" {n_pred} simulated 100-trial runs, each at a bootstrap draw of the parameters with what the held-in moments leave"
    " open spread over its box). Details in each directory's `leave_out.md`.",
    "",
    f"**Held-out moments inside their predicted ranges: {total} of {n}.** Not counted: the star's and mesh's"
    " R_cdr, which no Table 2 fit reaches (the surrogate floors D_t; see a fit's report.md).",
    "",
    "| left out | held-out inside | held-in inside | objective (held-in) | held-out outside | not counted |",
    "| --- | --- | --- | --- | --- | --- |",
    *rows,
    "",
]
(here / "summary.md").write_text("\n".join(lines))
print("\n".join(lines))
