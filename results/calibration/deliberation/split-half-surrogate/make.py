"""How split-half-surrogate/ was made (issue 31): a deliberation run of 40 runs (every strategy) through the real
text harness with the rate-law agents fitted to GPT's Table VIII column (`../gpt/params.toml`; known
parameters, so the model is right by construction), then `mascot calibrate deliberation RUN --split-half`: the
fit sees 20 runs and predicts the other 20. The run directory (40 MB of request logs) is not committed; this
script makes it again, byte for byte apart from timestamps (the surrogate is seeded). Run from the repository
root: python results/calibration/deliberation/split-half-surrogate/make.py (a few minutes on 2 cores)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
root = here.parents[3]
os.chdir(root)  # paths in the reports relative to the repository root
here = here.relative_to(root)
run = Path("runs/split-half-deliberation")
shutil.rmtree(run, ignore_errors=True)
mascot = [sys.executable, "-m", "mascot"]
params = str(here.parent / "gpt" / "params.toml")
deliberate = ["deliberate", "--strategy", "all", "--runs", "40", "--seed", "5", "--surrogate-params", params]
subprocess.run([*mascot, *deliberate, "--out", str(run), "--quiet", "--no-report"], check=True)
for name in ("split_half.md", "split_half.json", "fit"):
    p = here / name
    shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
subprocess.run(
    [*mascot, "calibrate", "deliberation", str(run), "--split-half", "--seed", "0", "--out", str(here)], check=True
)
