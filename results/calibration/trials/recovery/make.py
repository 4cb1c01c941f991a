"""How recovery/ was made (issue 15 (a)): the real harness with known surrogate parameters (truth.json: an
earlier Table 2 estimate with sigma, bias, chain.p_keep_parity, chain.p_boundary, star_leaf.p_boundary,
star_leaf.persist and mesh_agent.p_boundary moved away from it), 100 trials, then `mascot calibrate trials`
on that run directory and the truth against the estimates. Run from the repository root:
python results/calibration/trials/recovery/make.py (about 4 min on 2 cores)."""

import json
import os
from pathlib import Path

from mascot.calibrate.trials_checks import recovery

here = Path(__file__).resolve().parent
root = here.parents[3]
os.chdir(root)  # paths in the reports relative to the repository root
here = here.relative_to(root)
truth = json.loads((here / "truth.json").read_text())
r = recovery(here, truth, n_trials=100, seed=0)
print(f"inside {r['inside']} of {r['n']}")
