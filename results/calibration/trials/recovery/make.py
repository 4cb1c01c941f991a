"""How recovery/ was made (issue 15 (a)): the real harness with known surrogate parameters (truth.json: an
earlier Table 2 estimate with sigma, bias, chain.p_keep_parity, chain.p_boundary, star_leaf.p_boundary,
star_leaf.persist and mesh_agent.p_boundary moved away from it), 100 trials, then `mascot calibrate trials`
on that run directory and the truth against the estimates. Run from the repository root:
python results/calibration/trials/recovery/make.py (about 11 min on 2 cores)."""

import json
from pathlib import Path

from mascot.calibrate.trials_fit import recovery

here = Path(__file__).resolve().parent
truth = json.loads((here / "truth.json").read_text())
r = recovery(here, truth, n_trials=100, seed=0, n_boot=10)
print(f"inside {r['inside']} of {r['n']}")
