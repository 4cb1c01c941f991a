"""Trivial agents for the state-tracking trials: the yardsticks a model's Table 2 is read against.

Both are backends of the batched interface (:mod:`mascot.backends.base`) and read their task from the
request's messages like the surrogate (:func:`~mascot.protocols.state_tracking.prompts.read_prompt`), so
they run through the **same** harness, parser and metrics as a model:

* :class:`EchoBackend` -- every agent (chain agent, star leaf and judge, mesh first round and revision)
  replies with exactly the input state it was given, as the compact JSON object the parser accepts
  (``{"Value": ..., "Parity": ..., "Level": ...}``). From the initial state ``x_0`` every trial stays at
  ``x_0``: ``x^_t = x_0`` for all t, so ``E_ceg = sum_{t=1..T} |x*_t - x_0|`` on every topology, and with
  the perturbed arm at ``x_0 + epsilon``, ``F_ps = |epsilon|``. A model whose E_ceg is not below the echo's
  has not beaten copying its input (small instruct models often do little else).
* :class:`RandomBackend` -- every agent replies with a uniformly random valid state: Value uniform on
  ``[value_low, value_high]`` rounded to 2 decimals, Parity ``A``/``B`` and Level 1..9 uniform. The draws
  are a counter-based hash (SplitMix64, :mod:`mascot.seeds`) of ``seed`` and the request's 64-bit seed
  (``meta["seed64"]``, else ``sampling.seed``), as in the surrogate: replies do not depend on batch
  composition or order, and the paired perturbed arm (same request seeds) gets the same replies, so its
  ``F_ps`` is 0: an agent that ignores its input cannot be perturbed.

Neither fails to parse, so their runs have no retries and no carried steps. Token counts are
whitespace-separated words (the surrogate's stand-in for a tokenizer).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mascot.backends.base import Request, Response
from mascot.errors import InputError
from mascot.protocols.state_tracking.prompts import read_prompt
from mascot.seeds import hash64, uniforms

__all__ = [
    "BASELINES",
    "BASELINE_NAMES",
    "EchoBackend",
    "RandomBackend",
    "baseline_config",
    "baseline_dirs",
    "make_baseline",
    "random_value_range",
    "run_baselines",
    "state_reply",
]

_RANDOM_TAG = 0x52414E44  # "RAND": separates the random agent's stream from the surrogate's


def state_reply(state: dict) -> str:
    """The reply text of a state: compact JSON ``{"Value": v, "Parity": p, "Level": l}`` (Value written with
    ``repr`` through ``json.dumps``, which the parser reads back to the same float)."""
    return json.dumps({"Value": float(state["Value"]), "Parity": state["Parity"], "Level": int(state["Level"])})


def _words(text: str) -> int:
    return len(text.split())


def _prompt_words(r: Request) -> int:
    return sum(_words(m.get("content", "") or "") for m in r.messages)


def _task(r: Request, cache: dict):
    """``(Prompt, None)`` or ``(None, error text)`` for a request's messages; ``cache``: results of one call,
    by (system, user) message text (trials that share a state share their prompts)."""
    try:
        key = tuple(m.get("content") for m in r.messages)
        hash(key)
    except (TypeError, AttributeError):
        key = None
    if key is not None and key in cache:
        return cache[key]
    try:
        out = read_prompt(r.messages), None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        out = None, f"{e}"
    if key is not None:
        cache[key] = out
    return out


class _Trivial:
    name = "trivial"
    model = "trivial"

    def _reply(self, requests: Sequence[Request], texts: list[str | None], errors: list[str | None]) -> list[Response]:
        out = []
        for r, text, err in zip(requests, texts, errors):
            if err is not None:
                out.append(
                    Response(
                        text="",
                        prompt_tokens=_prompt_words(r),
                        completion_tokens=0,
                        finish_reason=None,
                        error=f"{self.name}: the messages are not a state-tracking prompt: {err}",
                    )
                )
            else:
                out.append(
                    Response(
                        text=text,
                        prompt_tokens=_prompt_words(r),
                        completion_tokens=_words(text),
                        finish_reason="stop",
                        latency_s=None,
                    )
                )
        return out

    def describe(self) -> dict:
        from mascot import __version__

        return {**self.identity(), "mascot": __version__}


class EchoBackend(_Trivial):
    """Replies with the input state of its prompt (see the module docstring)."""

    name = "echo"
    model = "echo"

    def identity(self) -> dict:
        return {"backend": self.name, "model": self.model, "token_count": "whitespace-separated words"}

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        texts, errors, cache = [], [], {}
        for r in requests:
            task, err = _task(r, cache)
            texts.append(None if task is None else state_reply(task.state))
            errors.append(err)
        return self._reply(requests, texts, errors)


class RandomBackend(_Trivial):
    """Replies with a uniformly random valid state (see the module docstring)."""

    name = "random"
    model = "uniform"

    def __init__(self, value_low: float = 0.0, value_high: float = 100.0, seed: int = 0):
        for nm, v in (("value_low", value_low), ("value_high", value_high)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InputError(f"{nm} must be a finite number; got {v!r}")
        if not value_low <= value_high:
            raise InputError(f"value_low must be <= value_high; got {value_low!r} > {value_high!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InputError(f"seed must be an integer >= 0; got {seed!r}")
        self.value_low = float(value_low)
        self.value_high = float(value_high)
        self.seed = int(seed)

    def identity(self) -> dict:
        return {
            "backend": self.name,
            "model": self.model,
            "value_low": self.value_low,
            "value_high": self.value_high,
            "seed": self.seed,
            "token_count": "whitespace-separated words",
        }

    def states(self, request_seeds: Sequence[int]) -> list[dict]:
        """The states the agent answers for these request seeds (64-bit), one per seed."""
        n = len(request_seeds)
        if n == 0:
            return []
        key = hash64(
            np.full(n, self.seed, dtype=np.uint64),
            np.full(n, _RANDOM_TAG, dtype=np.uint64),
            np.asarray(request_seeds, dtype=np.uint64),
        )
        u = uniforms(key, 3)
        value = np.round(self.value_low + (self.value_high - self.value_low) * u[:, 0], 2)
        value = np.clip(value, self.value_low, self.value_high)
        parity = np.where(u[:, 1] < 0.5, "A", "B")
        level = 1 + np.minimum((u[:, 2] * 9).astype(np.int64), 8)
        return [{"Value": float(v), "Parity": str(p), "Level": int(lv)} for v, p, lv in zip(value, parity, level)]

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        seeds, errors, cache = [], [], {}
        for i, r in enumerate(requests):
            _, err = _task(r, cache)
            errors.append(err)
            s = (r.meta or {}).get("seed64", r.sampling.seed)
            seeds.append(int(s) if s is not None else i)
        states = self.states(seeds)
        return self._reply(requests, [state_reply(s) for s in states], errors)


#: name -> class of the trivial baselines run beside a trials report
BASELINES = {"echo": EchoBackend, "random": RandomBackend}


# ----------------------------------------------------------------------------- running them beside a run
BASELINE_NAMES = ("echo", "random")


def baseline_config(config: dict):
    """The :class:`~mascot.protocols.state_tracking.harness.TrialConfig` of a run (``run.json``'s
    ``config``) with its requests unlogged: what the baselines run."""
    from mascot.backends.base import Sampling
    from mascot.protocols.state_tracking.harness import TrialConfig

    names = {f.name for f in dataclasses.fields(TrialConfig)}
    kw = {k: v for k, v in config.items() if k in names}
    if isinstance(kw.get("sampling"), dict):
        kw["sampling"] = Sampling(**kw["sampling"])
    if "topologies" in kw:
        kw["topologies"] = tuple(kw["topologies"])
    if "initial_state" in kw:
        kw["initial_state"] = tuple(kw["initial_state"])
    kw["log_requests"] = "none"
    return TrialConfig(**kw)


def random_value_range(cfg) -> tuple[float, float]:
    """``(min, max)`` of the reference Values x*_t, t = 0..T, of both arms of ``cfg`` (exact rule,
    :func:`mascot.theory.state_tracking.trajectory`): the random agent's Value range."""
    from mascot.theory.state_tracking import perturb, trajectory

    init = cfg.initial
    vals = [s["Value"] for s in trajectory(init, cfg.steps) + trajectory(perturb(init, cfg.epsilon), cfg.steps)]
    return float(min(vals)), float(max(vals))


def make_baseline(name: str, cfg):
    if name == "echo":
        return EchoBackend()
    if name == "random":
        lo, hi = random_value_range(cfg)
        return RandomBackend(value_low=lo, value_high=hi, seed=cfg.seed)
    raise InputError(f"unknown baseline {name!r}; choose from {', '.join(BASELINE_NAMES)}")


def run_baselines(run_dir, config: dict | None = None, names=BASELINE_NAMES) -> dict[str, Path]:
    """Run (or resume) the baselines ``names`` with the run's ``config`` (default: ``run_dir/run.json``'s) into
    ``run_dir/baselines/<name>``; returns their directories."""
    from mascot.protocols.state_tracking.harness import run_trials

    if config is None:
        config = json.loads((Path(run_dir) / "run.json").read_text())["config"]
    cfg = baseline_config(config)
    out = {}
    for name in names:
        d = Path(run_dir) / "baselines" / name
        run_trials(cfg, d, make_baseline(name, cfg), progress=False)
        out[name] = d
    return out


def baseline_dirs(run_dir, names=BASELINE_NAMES) -> dict[str, Path]:
    """The baselines already run beside ``run_dir`` (``run_dir/baselines/<name>`` with a complete run), by name."""
    out = {}
    for name in names:
        d = Path(run_dir) / "baselines" / name
        try:
            complete = json.loads((d / "run.json").read_text()).get("complete")
        except (OSError, ValueError):
            complete = False
        if complete and (d / "trials.parquet").exists():
            out[name] = d
    return out
