"""How recovery-seed1/ was made (issue 15 (a)): recovery/ again with a second data set -- the same true
parameters (`../recovery/truth.json`), the real harness with seed 2 instead of 1 (`run/`), the calibration
with seed 1 -- to see whether the reported uncertainty covers the truth on more than one sample. Run from the
repository root: python results/calibration/trials/recovery-seed1/make.py (about 5 min on 2 cores)."""

import json
import os
from pathlib import Path

from mascot.calibrate.trials_checks import recovery

here = Path(__file__).resolve().parent
root = here.parents[3]
os.chdir(root)  # paths in the reports relative to the repository root
here = here.relative_to(root)
truth = json.loads((here.parent / "recovery" / "truth.json").read_text())
r = recovery(here, truth, n_trials=100, seed=1)
print(f"inside {r['inside']} of {r['n']}")
