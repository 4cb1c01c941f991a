"""The architecture as a test: walk every import of ``src/mascot`` (module level and inside functions) and
fail on an import cycle, an upward import, a cross-module ``_private`` import, a module over 800 lines or a
process-wide switch flipped by library code. The layers are those of DESIGN.md:

    errors, log  <-  io, seeds, stable, status, limits  <-  graphs, papers, rundir  <-  theory  <-  kernels  <-  execute, backends
      <-  protocols, sweep  <-  analysis  <-  cli
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from limits import HANG_S  # noqa: E402  (a hang guard, not a speed claim)

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "mascot"

# component -> (level, components it may never import even when they sit lower)
LEVELS = {
    "errors": -1,
    "log": -1,  # import nothing of mascot
    "io": 0,
    "seeds": 0,
    "stable": 0,
    "status": 0,
    "limits": 0,  # what the dtypes keep exactly (numpy only)
    "mascot": 0,
    "graphs": 1,
    "papers": 1,
    "rundir": 1,  # the run-directory format of sweeps and protocols
    "theory": 2,
    "kernels": 3,
    "execute": 4,
    "backends": 4,
    "protocols": 5,
    "sweep": 5,
    "design": 5,
    "analysis": 6,
    "calibrate": 6.5,  # fits surrogates to runs: reads them with analysis, replays them through protocols
    "studies": 6.8,  # the three documents' reproductions: built on everything above, imported only by cli
    "cli": 7,
    "__main__": 8,  # python -m mascot: calls the command line
}
FORBIDDEN = {
    "backends": {"kernels", "execute", "protocols", "analysis"},
    "kernels": {"execute", "backends", "protocols", "sweep", "analysis", "cli"},
}


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _component(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "mascot"


def _resolve(name: str) -> str | None:
    """The module of ``mascot`` that ``import name`` loads last (a package's ``__init__`` or a module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(mod: str) -> list[tuple[str, int, list[str]]]:
    """``(target module, line, imported names)`` for every import of a mascot module in ``mod``."""
    path = MODULES[mod]
    tree = ast.parse(path.read_text(), str(path))
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "mascot":
                    out.append((_resolve(a.name), node.lineno, []))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "mascot":
                continue
            names = [a.name for a in node.names]
            for n in names:  # `from mascot.pkg import submodule` imports the submodule
                full = f"{base}.{n}"
                if full in MODULES:
                    out.append((full, node.lineno, []))
            out.append((_resolve(base), node.lineno, [n for n in names if f"{base}.{n}" not in MODULES]))
    return out


GRAPH = {m: _imports(m) for m in MODULES}


def test_no_upward_or_forbidden_imports():
    bad = []
    for mod, imps in GRAPH.items():
        src = _component(mod)
        for target, line, _ in imps:
            dst = _component(target)
            if dst == src:
                continue
            if LEVELS[dst] >= LEVELS[src] and not (dst == "mascot" and src != "mascot"):
                bad.append(f"{mod}:{line} imports {target} ({src} may not import {dst})")
            if dst in FORBIDDEN.get(src, ()):
                bad.append(f"{mod}:{line} imports {target} ({src} never imports {dst})")
    assert not bad, "\n".join(bad)


def _ancestor(pkg: str, mod: str) -> bool:
    return mod.startswith(pkg + ".")


def test_no_import_cycles():
    # a submodule naming its own package (``from mascot.cli import slurm`` inside mascot.cli.main) imports
    # nothing new: the package is always initialised before its submodules
    edges = {m: {t for t, _, _ in imps if t != m and not _ancestor(t, m)} for m, imps in GRAPH.items()}
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t) :] + [t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "\n".join(cycles)


def test_no_private_names_across_modules():
    bad = [
        f"{mod}:{line} imports {n} from {target}"
        for mod, imps in GRAPH.items()
        for target, line, names in imps
        for n in names
        if n.startswith("_") and not n.startswith("__") and target != mod
    ]
    assert not bad, "\n".join(bad)


#: what runs an experiment (a sweep, a protocol, the baselines): never called from mascot.analysis, which reads
#: records and computes tables and figures
EXPERIMENTS = {"run_sweep", "run_trials", "run_deliberation", "run_debate", "run_baselines", "deliberate"}


def test_analysis_runs_no_experiment():
    bad = [
        f"{mod}:{line} imports {n} from {target}"
        for mod, imps in GRAPH.items()
        if _component(mod) == "analysis"
        for target, line, names in imps
        for n in names
        if n in EXPERIMENTS
    ]
    assert not bad, "\n".join(bad)


def test_nothing_but_the_command_line_imports_the_studies():
    bad = [
        f"{mod}:{line} imports {target}"
        for mod, imps in GRAPH.items()
        for target, line, _ in imps
        if _component(target) == "studies" and _component(mod) not in ("studies", "cli", "__main__")
    ]
    assert not bad, "\n".join(bad)


def test_no_module_over_800_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 800}
    assert not long, long


def test_library_code_flips_no_process_wide_switch():
    """``jax_enable_x64`` is set by the CLI (or inside a context manager); matplotlib's backend is never
    forced at import; only the CLI and context managers change BLAS thread limits globally."""
    bad = []
    for mod, path in MODULES.items():
        if _component(mod) == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            first = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            if node.func.attr == "update" and first == "jax_enable_x64":
                bad.append(f"{mod}:{node.lineno}: jax.config.update('jax_enable_x64', ...)")
            if node.func.attr == "use" and isinstance(node.func.value, ast.Name) and node.func.value.id == "matplotlib":
                bad.append(f"{mod}:{node.lineno}: matplotlib.use(...)")
    assert not bad, "\n".join(bad)


def test_kernels_start_no_host_threads():
    """Kernels are pure functions of arrays: chunking over host threads belongs to ``mascot.execute``."""
    bad = [
        f"{mod}:{line} imports {name}"
        for mod, path in MODULES.items()
        if _component(mod) == "kernels"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for name, line in [
            ((node.module if isinstance(node, ast.ImportFrom) else node.names[0].name) or "", node.lineno)
        ]
        if name.split(".")[0] in ("threading", "concurrent", "multiprocessing")
    ]
    assert not bad, "\n".join(bad)


def _fresh_modules(code: str) -> set[str]:
    res = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert res.returncode == 0, res.stderr
    return set(res.stdout.split())


@pytest.mark.parametrize(
    "stmt",
    [
        "import mascot",
        "import mascot.backends.base",
        "import mascot.backends",
        "from mascot.backends import Request, Sampling, Response",
        "import mascot.io, mascot.seeds, mascot.status",
    ],
)
def test_light_imports_do_not_load_jax(stmt):
    loaded = _fresh_modules(stmt)
    assert "jax" not in loaded and "torch" not in loaded and "matplotlib" not in loaded, stmt


def test_old_public_names_still_work():
    import mascot

    for name in [
        "simulate_consensus",
        "sr_spectra",
        "affine_noise_error",
        "ConsensusResult",
        "complete_weights",
        "ring_weights",
        "paper_modes",
        "algorithm1",
        "apply_rules",
        "contraction_rate",
        "corollary1",
        "disagreement",
        "in_certificate_region",
        "theorem1",
    ]:
        assert callable(getattr(mascot, name)) or isinstance(getattr(mascot, name), type), name
    assert "simulate_consensus" in dir(mascot)
    with pytest.raises(AttributeError):
        mascot.no_such_name  # noqa: B018


def test_the_first_long_compile_is_announced_once_when_the_command_line_asks(capsys):
    """Issue 29: a first call that compiles for seconds says so (once per process, on stderr) when the mascot
    command asks for it; library use stays silent."""
    import mascot.kernels  # noqa: F401  (registers the listener)
    from mascot import log

    state = dict(log._COMPILE)
    try:
        log._COMPILE.update(wanted=False, said=False)
        log.compile_listener("/jax/core/compile/backend_compile_duration", 5.0)
        assert capsys.readouterr().err == ""  # not asked: silent
        log.want_compile_notice()
        log.compile_listener("/jax/core/compile/backend_compile_duration", 0.2)  # quick: nothing to say
        assert capsys.readouterr().err == ""
        log.compile_listener("/jax/core/compile/backend_compile_duration", 3.5)
        log.compile_listener("/jax/core/compile/backend_compile_duration", 4.0)
        err = capsys.readouterr().err
        assert err.count("compiling JAX programs") == 1 and "3.5 s" in err
    finally:
        log._COMPILE.update(state)


def test_one_name_per_quantity_tokens_everywhere_spent_an_alias():
    """Issue 29: the API said ``spent`` where the sweep tables and mascot.rollout say ``tokens``."""
    import numpy as np

    from mascot.graphs import complete_weights, ring_weights
    from mascot.theory import algorithm1

    X0 = np.random.default_rng(0).uniform(0, 1, (5, 3))
    r = algorithm1(X0, complete_weights(5, 0.4), ring_weights(5, 0.6), 600, 100, 0.1, 0.03, 5000)
    assert "tokens" in r._fields and "spent" not in r._fields and r.spent == r.tokens == 5000 - r.b_trace[-1]
