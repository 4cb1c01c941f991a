"""The ``surrogate`` backend: the SR paper's affine-noise agent (Sec. 3.5, eq. 2; A.4) behind the LLM
backend interface, so the trial harness, prompts, parsing and analysis run for real on CPU.

Like a model, the surrogate reads its task from the request's **messages**: the prompts of
:mod:`mascot.protocols.state_tracking.prompts`, read back exactly by
:func:`~mascot.protocols.state_tracking.prompts.read_prompt` (role, input state, proposals shown). A request
whose messages are not one of those prompts comes back with ``error`` set.

An **agent** request (the agent prompt: the state in the user message) replies with the true rule applied to
its input state (exact int64 JAX kernel :func:`mascot.kernels.state_tracking.rule_step`, run inside
:func:`mascot.kernels.precision.float64`, batched over all requests of the call) plus noise:

* Value: ``tau(x) + sqrt(rho_c) sigma z_shared + sqrt(1 - rho_c) sigma z_own`` (A.4: total variance
  ``sigma^2``, inter-agent correlation ``rho_c``); ``z_shared`` is one standard normal per
  (topology, trial, seed arm, step) -- ids the harness puts in ``meta`` for its logs -- shared by every reply
  of that step of that trial (leaves, judge, first round, revisions, retries); ``z_own`` is per request;
* Parity flipped with probability ``parity_slip``; Level moved by +1 or -1 (equally likely, clipped to
  1..9) with probability ``level_slip``;
* Value rounded to 2 decimals; the reply is a JSON object ``{"Reasoning": ..., "Value": ..., "Parity":
  ..., "Level": ...}`` whose "Reasoning" holds braces and escaped quotes, so the parser does real work;
* with probability ``parse_fail`` the reply is malformed instead (equally often: truncated JSON, prose
  without JSON, Level 10, Parity "C").

A **judge** (star) or **revision** (mesh) request (the judge and revision prompts) aggregates the proposals
shown in its prompt and adds the judge's own noise:

* ``judge="mean"``: mean Value, majority Parity, majority Level; ``"median"``: median Value (mean of the
  two middle ones for an even count), majority Parity and Level; ``"vote"``: the plurality
  (Value, Parity, Level) tuple, ties to the earliest proposal
  (:func:`mascot.protocols.state_tracking.aggregation.plurality_vote`).
  Majority ties: Parity from the aggregated Value's Rule-2 threshold (``"A"`` if Value < 70), Level the
  smallest tied level. With no proposals (every leaf failed) the judge applies the rule itself;
* then the same noise model as an agent with ``sigma``, ``parity_slip`` and ``level_slip`` all scaled by
  ``judge_noise`` (default 0.25: a judge that checks k = 4 proposals is a better-than-single agent; with
  iid noise this makes the chain/star error ratio about 1.8, the paper's 1.77), and the same
  ``parse_fail``. Judge replies have no "Reasoning" (the judge prompt's format has none).

Determinism: every draw is a counter-based hash (SplitMix64, :mod:`mascot.seeds`) of ``seed`` and the
request's 64-bit seed (``meta["seed64"]``, the hash whose top 31 bits the harness sends as
``request.sampling.seed``; else ``request.sampling.seed``), so replies depend only on ``seed`` and the
request, not on batch composition or order. Temperature, top_p and max_tokens are ignored.

Token counts: whitespace-separated words, ``prompt_tokens`` summed over the message contents,
``completion_tokens`` of the reply text (a deterministic stand-in for a tokenizer).

Defaults (``sigma=75``, ``rho_c=0``, ``parity_slip=0.05``, ``level_slip=0.1``, ``parse_fail=0.01``,
``judge="mean"``, ``judge_noise=0.25``) are a rough calibration to the *cumulative-error* magnitudes of the
paper's Table 2 (E_ceg about 2100 for the chain and 1100-1200 for star and mesh), not a fit: the paper's
Qwen errors are large (about 175 per step on Values near 70), so sigma is large too. The model does not
reproduce the paper's consensus decay (its leaves never agree exactly, so star/mesh R_cdr stays near 0,
where Qwen's star reaches -3.4) nor, with paired seeds, its F_ps magnitude (the two arms share their
noise; ``paired_seeds=False`` in the harness gives F_ps of the paper's order).
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence

import numpy as np

from mascot.backends.base import Request, Response
from mascot.protocols.state_tracking.aggregation import plurality_vote
from mascot.protocols.state_tracking.prompts import Prompt, read_prompt
from mascot.seeds import hash64, uniforms

__all__ = ["SurrogateBackend", "JUDGES", "split_words"]

JUDGES = ("mean", "median", "vote")
_ROLES = ("agent", "judge", "revision")
_TOPOLOGY_IDS = {"chain": 0, "star": 1, "mesh": 2}
_MALFORMED_KINDS = 4


def split_words(text: str) -> int:
    """The surrogate's token count: whitespace-separated words."""
    return len(text.split())


def _check_prob(name, x):
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not (0.0 <= float(x) <= 1.0):
        raise ValueError(f"{name} must be a probability in [0, 1]; got {x!r}")
    return float(x)


def _bucket(n: int) -> int:
    return max(256, 1 << (max(n, 1) - 1).bit_length())


class SurrogateBackend:
    """Affine-noise agents on the exact rule (see the module docstring)."""

    name = "surrogate"

    def __init__(self, sigma: float = 75.0, rho_c: float = 0.0, parity_slip: float = 0.05,
                 level_slip: float = 0.1, parse_fail: float = 0.01, judge: str = "mean",
                 judge_noise: float = 0.25, seed: int = 0, model: str = "affine-noise"):
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not (math.isfinite(sigma) and sigma >= 0):
            raise ValueError(f"sigma must be a finite number >= 0; got {sigma!r}")
        if isinstance(judge_noise, bool) or not isinstance(judge_noise, (int, float)) or not (
                math.isfinite(judge_noise) and judge_noise >= 0):
            raise ValueError(f"judge_noise must be a finite number >= 0; got {judge_noise!r}")
        if judge not in JUDGES:
            raise ValueError(f"judge must be one of {', '.join(JUDGES)}; got {judge!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0; got {seed!r}")
        self.sigma = float(sigma)
        self.rho_c = _check_prob("rho_c", rho_c)
        self.parity_slip = _check_prob("parity_slip", parity_slip)
        self.level_slip = _check_prob("level_slip", level_slip)
        self.parse_fail = _check_prob("parse_fail", parse_fail)
        self.judge = judge
        self.judge_noise = float(judge_noise)
        self.seed = int(seed)
        self.model = model
        self._word_cache: dict[str, int] = {}

    # ------------------------------------------------------------------ interface
    def identity(self) -> dict:
        """Everything that changes the replies: the noise model, the judge, the seed, the token count."""
        return {"backend": self.name, "model": self.model, "sigma": self.sigma, "rho_c": self.rho_c,
                "parity_slip": self.parity_slip, "level_slip": self.level_slip, "parse_fail": self.parse_fail,
                "judge": self.judge, "judge_noise": self.judge_noise, "seed": self.seed,
                "token_count": "whitespace-separated words"}

    def describe(self) -> dict:
        import jax

        from mascot import __version__

        return {"name": self.name, "model": self.model, "sigma": self.sigma, "rho_c": self.rho_c,
                "parity_slip": self.parity_slip, "level_slip": self.level_slip, "parse_fail": self.parse_fail,
                "judge": self.judge, "judge_noise": self.judge_noise, "seed": self.seed,
                "token_count": "whitespace-separated words", "mascot": __version__, "jax": jax.__version__}

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        n = len(requests)
        if n == 0:
            return []
        out: list[Response | None] = [None] * n
        idx, states, roles, proposals, shared_ids, seeds = [], [], [], [], [], []
        read: dict[str, Prompt | str] = {}  # user message -> what it asks (mesh revisers share one prompt)
        for i, r in enumerate(requests):
            task = self._read(r.messages, read)
            if isinstance(task, str):
                out[i] = Response(text="", prompt_tokens=self._prompt_tokens(r), completion_tokens=0,
                                  finish_reason=None, error="surrogate: the messages are not a state-tracking "
                                  f"prompt (agent, judge or revision; see prompts.py): {task}")
                continue
            m = r.meta or {}
            idx.append(i)
            states.append(task.state)
            roles.append(_ROLES.index(task.role))
            proposals.append(task.proposals)
            topo = m.get("topology", "")
            shared_ids.append((_TOPOLOGY_IDS.get(topo, 3 + zlib.crc32(str(topo).encode())),
                               int(m.get("trial", 0)), int(m.get("seed_arm", 0)), int(m.get("step", 0))))
            s64 = m.get("seed64", r.sampling.seed)
            seeds.append(int(s64) if s64 is not None else i)
        if idx:
            texts = self._replies(states, np.array(roles), proposals, shared_ids, seeds)
            for i, text in zip(idx, texts):
                out[i] = Response(text=text, prompt_tokens=self._prompt_tokens(requests[i]),
                                  completion_tokens=split_words(text), finish_reason="stop", latency_s=None)
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _read(messages, cache: dict) -> Prompt | str:
        """``read_prompt(messages)``, or the reason it failed (a string); cached by the user message."""
        last = messages[-1].get("content") if messages and isinstance(messages[-1], dict) else None
        if isinstance(last, str) and last in cache:
            return cache[last]
        try:
            task: Prompt | str = read_prompt(messages)
        except ValueError as e:
            task = str(e)
        if isinstance(last, str):
            cache[last] = task
        return task

    def _prompt_tokens(self, r: Request) -> int:
        total = 0
        cache = self._word_cache
        for msg in r.messages:
            c = msg.get("content", "")
            k = cache.get(c)
            if k is None:  # system prompts, states and judge prompts repeat within a call: cache them
                k = split_words(c)
                if len(cache) > 200_000:
                    cache.clear()
                cache[c] = k
            total += k
        return total

    def _replies(self, states, roles, proposals, shared_ids, seeds) -> list[str]:
        from mascot.kernels.precision import float64
        from mascot.kernels.state_tracking import rule_step

        n = len(states)
        value = np.array([float(s["Value"]) for s in states], dtype=np.float64)
        parity = np.array([0 if s["Parity"] == "A" else 1 for s in states], dtype=np.int32)
        level = np.array([int(s["Level"]) for s in states], dtype=np.int32)
        m = _bucket(n)
        pad = m - n
        with float64():  # the exact rule kernel needs int64/float64: enabled for this thread, for this call
            tv, tp, tl = rule_step(np.pad(value, (0, pad)), np.pad(parity, (0, pad)),
                                   np.pad(level, (0, pad), constant_values=1))
            tv, tp, tl = (np.asarray(x)[:n] for x in (tv, tp, tl))
        base_v, base_p, base_l = tv.copy(), tp.copy(), tl.copy()
        # judges and revisions: aggregate the proposals they were shown
        for j in np.flatnonzero(roles != 0):
            props = [p for p in proposals[j] if isinstance(p, dict)]
            if not props:
                continue  # no proposals: the judge applies the rule itself
            if self.judge == "vote":
                st, _ = plurality_vote(props)
                base_v[j], base_p[j], base_l[j] = st["Value"], 0 if st["Parity"] == "A" else 1, st["Level"]
                continue
            vals = [float(p["Value"]) for p in props]
            if self.judge == "mean":
                v = sum(vals) / len(vals)
            else:
                vals.sort()
                h = len(vals) // 2
                v = vals[h] if len(vals) % 2 else 0.5 * (vals[h - 1] + vals[h])
            n_b = sum(p["Parity"] == "B" for p in props)
            n_a = len(props) - n_b
            par = (0 if v < 70 else 1) if n_a == n_b else (0 if n_a > n_b else 1)
            counts: dict[int, int] = {}
            for p in props:
                counts[int(p["Level"])] = counts.get(int(p["Level"]), 0) + 1
            top = max(counts.values())
            lvl = min(k for k, c in counts.items() if c == top)
            base_v[j], base_p[j], base_l[j] = v, par, lvl
        # randomness: per-request stream and per-(topology, trial, arm, step) shared normal
        key = hash64(np.full(n, self.seed, dtype=np.uint64), np.array(seeds, dtype=np.uint64))
        u = uniforms(key, 7)  # (n, 7)
        z_own = np.sqrt(-2.0 * np.log1p(-u[:, 0])) * np.cos(2.0 * np.pi * u[:, 1])
        sid = np.array(shared_ids, dtype=np.uint64)
        skey = hash64(np.full(n, self.seed, dtype=np.uint64), np.full(n, 0x5348415245, dtype=np.uint64),
                      sid[:, 0], sid[:, 1], sid[:, 2], sid[:, 3])
        us = uniforms(skey, 2)
        z_sh = np.sqrt(-2.0 * np.log1p(-us[:, 0])) * np.cos(2.0 * np.pi * us[:, 1])
        scale = np.where(roles == 0, 1.0, self.judge_noise)
        noise = scale * self.sigma * (math.sqrt(self.rho_c) * z_sh + math.sqrt(1.0 - self.rho_c) * z_own)
        out_v = np.round(base_v + noise, 2)
        flip = u[:, 2] < scale * self.parity_slip
        out_p = np.where(flip, 1 - base_p, base_p)
        move = u[:, 3] < scale * self.level_slip
        out_l = np.clip(base_l + np.where(move, np.where(u[:, 4] < 0.5, -1, 1), 0), 1, 9)
        fail = u[:, 5] < self.parse_fail
        kind = np.minimum((u[:, 6] * _MALFORMED_KINDS).astype(int), _MALFORMED_KINDS - 1)
        texts = []
        for j in range(n):
            v = float(out_v[j])
            vs = repr(v) if math.isfinite(v) else json.dumps(v)
            p = "A" if out_p[j] == 0 else "B"
            lv = int(out_l[j])
            if roles[j] == 0:
                st = states[j]
                text = ('{"Reasoning": "surrogate: tau({\\"Value\\": %s, \\"Parity\\": \\"%s\\", \\"Level\\": %s}) '
                        '+ noise", "Value": %s, "Parity": "%s", "Level": %d}'
                        % (st["Value"], st["Parity"], st["Level"], vs, p, lv))
            else:
                text = '{"Value": %s, "Parity": "%s", "Level": %d}' % (vs, p, lv)
            if fail[j]:
                k = kind[j]
                if k == 0:
                    text = text[: max(1, int(len(text) * 0.6))]
                elif k == 1:
                    text = "I applied the rules step by step, but I am not certain of the final state."
                elif k == 2:
                    text = text.replace('"Level": %d}' % lv, '"Level": %d}' % (lv + 9))
                else:
                    text = text.replace('"Parity": "%s"' % p, '"Parity": "C"')
            texts.append(text)
        return texts
