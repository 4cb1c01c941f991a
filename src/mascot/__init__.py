"""mascot: Multi-Agent Spectral Consensus Toolkit.

JAX-accelerated switched-system consensus simulation, consensus-budget certificates, successor-
representation spectra, affine-noise Monte Carlo, sweeps and LLM trial harnesses for multi-agent LLM
systems. The public API below is loaded lazily (PEP 562): ``import mascot`` does not import JAX; the first
use of a name imports the module that implements it.

Layout (each layer imports only the ones before it): ``io``, ``seeds``, ``status`` -> ``graphs``,
``papers`` -> ``theory`` -> ``kernels`` -> ``execute``, ``backends`` -> ``protocols``, ``sweep`` ->
``analysis`` -> ``cli``.
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0.dev0"

# public name -> module that defines it
_EXPORTS = {
    "Modes": "mascot.kernels.core",
    "Policy": "mascot.kernels.core",
    "Rollout": "mascot.kernels.core",
    "rollout": "mascot.kernels.core",
    "simulate_consensus": "mascot.execute.consensus",
    "ConsensusResult": "mascot.kernels.consensus",
    "affine_noise_error": "mascot.execute.noise",
    "affine_noise_point": "mascot.kernels.noise",
    "rule_noise_point": "mascot.kernels.noise",
    "rule_noise_error": "mascot.execute.noise",
    "sr_spectra": "mascot.execute.spectra",
    "SRSpectra": "mascot.kernels.spectra",
    "complete_weights": "mascot.graphs",
    "ring_weights": "mascot.graphs",
    "paper_modes": "mascot.graphs",
    "algorithm1": "mascot.theory.consensus",
    "contraction_rate": "mascot.theory.consensus",
    "corollary1": "mascot.theory.consensus",
    "disagreement": "mascot.theory.consensus",
    "in_certificate_region": "mascot.theory.consensus",
    "theorem1": "mascot.theory.consensus",
    "apply_rules": "mascot.theory.state_tracking",
    "Status": "mascot.status",
}

# the library's subpackages and modules, loaded on first use too (``mascot.graphs.star(8)`` after ``import
# mascot``); a subpackage loads its own modules the same way (``mascot.analysis.plot.plot`` after ``import mascot``)
_SUBMODULES = (
    "analysis",
    "backends",
    "calibrate",
    "design",
    "errors",
    "execute",
    "graphs",
    "io",
    "kernels",
    "limits",
    "papers",
    "protocols",
    "rundir",
    "seeds",
    "stable",
    "status",
    "sweep",
    "theory",
)


def submodule_loader(package: str, path) -> callable:
    """A module ``__getattr__`` for ``package`` that imports its submodule ``name`` on first use (PEP 562), so that
    ``package.name`` works after ``import package`` alone, whatever was imported before."""
    import pkgutil

    names = frozenset(m.name for m in pkgutil.iter_modules(path))

    def __getattr__(name: str):
        if name in names:
            return importlib.import_module(f"{package}.{name}")  # (the import binds it in the package)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"mascot.{name}")  # the import binds it in this namespace
    raise AttributeError(f"module 'mascot' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | set(_SUBMODULES))
