"""The SR paper's 12-step state-tracking task on chain, star and mesh topologies (Sec. 4, Appendix C).

``prompts`` (the Appendix C prompts and their exact inverse), ``parsing`` (model replies to states),
``aggregation`` (the mesh vote and the disagreement D_t), ``harness`` (batched, logged, resumable trials:
:func:`run_trials`) and ``surrogate`` (affine-noise agents that read the prompts). Names are loaded on
first use (PEP 562), so importing one module does not import the others.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "TOPOLOGIES": "harness",
    "TrialConfig": "harness",
    "TrialsResult": "harness",
    "derive_seeds": "harness",
    "run_trials": "harness",
    "BackendFailure": "harness",
    "plurality_vote": "aggregation",
    "pairwise_disagreement": "aggregation",
    "SurrogateBackend": "surrogate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    return _submodule(name)  # (.baselines, .harness after import mascot)


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))


from mascot import submodule_loader  # noqa: E402

_submodule = submodule_loader(__name__, __path__)
