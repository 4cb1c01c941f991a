"""How paper-table2/ was made (issue 15 (b)): `mascot calibrate trials --paper-table2` (the command in the
README), then the fitted parameters through the real harness (`harness/`: 2000 trials per topology, run seed 1)
against Table 2. Run from the repository root: python results/calibration/trials/paper-table2/make.py"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from mascot.calibrate.trials_checks import harness_check

here = Path(__file__).resolve().parent
root = here.parents[3]
os.chdir(root)  # paths in the reports relative to the repository root
here = here.relative_to(root)
subprocess.run(
    [
        sys.executable,
        "-m",
        "mascot",
        "calibrate",
        "trials",
        "--paper-table2",
        "--out",
        str(here),
        "--sd-weight",
        "0.1",
        "--n-sim",
        "1000",
        "--steps",
        "150",
    ],
    check=True,
)
shutil.rmtree(here / "harness", ignore_errors=True)  # a fresh harness run for the new parameters
r = harness_check(here / "params.toml", here / "harness", n_trials=2000, seed=1)
print(f"harness check: {len(r['passed'])} of {len(r['passed']) + len(r['failed'])} checks passed")
