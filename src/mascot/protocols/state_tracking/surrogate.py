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
noise; ``paired_seeds=False`` in the harness gives F_ps of the paper's order). These defaults are the
named parameter set ``"hand-tuned-v1"`` (:data:`PARAM_SETS`); with them the replies are byte-identical to
the model above, so earlier runs reproduce.

**Richer model** (issue 15; every extra is off in ``hand-tuned-v1``), per topology role -- ``chain`` (the
chain's agent), ``star_leaf``, ``mesh_agent`` (round one), ``star_judge``, ``mesh_reviser``; the role comes
from the prompt and ``meta["topology"]`` (an agent request without a known topology uses ``chain``):

* an agent reply is a mixture: with probability ``p_exact`` the exact rule (no noise, no slips), with
  probability ``p_echo`` an echo of its input state (small models do this), else the noisy reply above
  with ``sigma`` scaled by the role's ``sigma_scale``;
* a judge / reviser copies one shown proposal (uniformly chosen) with probability ``p_copy``, recomputes
  the rule exactly on the input state with probability ``p_recompute``, else aggregates (``judge``) and
  adds noise scaled by the role's ``noise`` (default ``judge_noise``);
* ``bias``: the mean of the Value noise (the paper's non-contracting bias drift, Sec. 3.5), scaled per
  role like ``sigma``;
* ``p_blunder``, ``blunder_scale``: with probability ``p_blunder`` a noisy reply's Value noise s.d. is
  multiplied by ``blunder_scale`` (heavy tails: rare large errors);
* perturbation persistence ``persist``: a request of the perturbed arm reuses its paired unperturbed
  request's draws (and the step's shared normal) with probability ``persist``, else draws afresh
  (``persist = 1``: today's fully paired noise, which keeps F_ps small); per role (``roles.<r>.persist``,
  default the global ``persist``): a judge's prompt, holding four proposals, differs more between the arms
  than a chain agent's;
* stale Parity ``p_keep_parity`` (agent roles): an exact or noisy reply (not an echo) carries its input's
  Parity instead of the computed one (the interval after ``parity_slip`` of the Parity-slip draw): the
  arithmetic is done, the Parity not updated;
* boundary misreading ``p_boundary`` (agent roles): an exact or noisy reply reads Rule 2's boundary cases
  (decimal portion of ``V_raw`` exactly 0.5 or 0.0) as the middle case (``V_raw - 0.5``), Parity and Level
  following (:func:`mascot.kernels.state_tracking.rule_step_misread`); the task's first steps from 50 are
  all such cases (``V_raw`` = 68.5, 48.5, 64.5, ...), later steps rarely. A state whose Parity stays "A"
  above 70 grows by 1.25 per step, so errors grow along the trajectory, as the SR paper's chain R_cdr
  (0.27: x19.5 over 12 steps) says Qwen's do.

Parameter files: :meth:`SurrogateBackend.from_params` reads a TOML file (``kind = "state-tracking"``) or a
named set; :func:`params_toml` writes one.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from mascot.backends.base import Request, Response
from mascot.errors import InputError
from mascot.protocols.state_tracking import dynamics
from mascot.protocols.state_tracking.prompts import Prompt, read_prompt
from mascot.seeds import hash64, uniforms

__all__ = ["SurrogateBackend", "JUDGES", "PARAM_SETS", "ROLE_PARAMS", "params_toml", "split_words"]

JUDGES = ("mean", "median", "vote")
_ROLES = ("agent", "judge", "revision")
_TOPOLOGY_IDS = {"chain": 0, "star": 1, "mesh": 2}
_MALFORMED_KINDS = 4
#: topology roles and their parameters (agents: reply mixture and noise scale; judges: copy/recompute/noise)
_AGENT_PARAMS = ("p_exact", "p_echo", "sigma_scale", "p_keep_parity", "p_boundary", "persist")
_JUDGE_PARAMS = ("p_copy", "p_recompute", "noise", "persist")
ROLE_PARAMS = {
    "chain": _AGENT_PARAMS,
    "star_leaf": _AGENT_PARAMS,
    "mesh_agent": _AGENT_PARAMS,
    "star_judge": _JUDGE_PARAMS,
    "mesh_reviser": _JUDGE_PARAMS,
}
_AGENT_ROLE = {"chain": "chain", "star": "star_leaf", "mesh": "mesh_agent"}
_ROLE_IDS = {r: i for i, r in enumerate(ROLE_PARAMS)}
_GLOBAL_KEYS = (
    "sigma",
    "bias",
    "p_blunder",
    "blunder_scale",
    "rho_c",
    "parity_slip",
    "level_slip",
    "parse_fail",
    "judge",
    "judge_noise",
    "persist",
)
#: named parameter sets; "hand-tuned-v1" is the original hand tuning (every committed result uses it)
PARAM_SETS = {
    "hand-tuned-v1": {
        "sigma": 75.0,
        "rho_c": 0.0,
        "parity_slip": 0.05,
        "level_slip": 0.1,
        "parse_fail": 0.01,
        "judge": "mean",
        "judge_noise": 0.25,
        "persist": 1.0,
        "bias": 0.0,
        "p_blunder": 0.0,
        "blunder_scale": 1.0,
        "roles": {},
    }
}
_TAG_EXTRA, _TAG_FRESH = 0x4D49_5854, 0x4652_4553  # streams of the mixture/copy/persist draws, fresh draws


def split_words(text: str) -> int:
    """The surrogate's token count: whitespace-separated words."""
    return len(text.split())


def _check_prob(name, x):
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not (0.0 <= float(x) <= 1.0):
        raise InputError(f"{name} must be a probability in [0, 1]; got {x!r}")
    return float(x)


def _bucket(n: int) -> int:
    return max(256, 1 << (max(n, 1) - 1).bit_length())


class SurrogateBackend:
    """Affine-noise agents on the exact rule (see the module docstring).

    Arguments: ``sigma`` the Value noise s.d.; ``rho_c`` the inter-agent correlation; ``parity_slip``,
    ``level_slip`` the slip probabilities; ``parse_fail`` the malformed-reply probability; ``judge`` the judge's
    aggregation (mean, median, vote); ``judge_noise`` the judge's noise scale; ``seed`` mixed into every draw;
    ``model`` the name the backend reports; ``persist`` the perturbation persistence; ``roles`` per-role options
    (the richer model above); ``params_name`` the named parameter set it came from (recorded); ``bias`` the mean
    of the Value noise; ``p_blunder``, ``blunder_scale`` the heavy-tail mixture.
    """

    name = "surrogate"

    def __init__(
        self,
        sigma: float = 75.0,
        rho_c: float = 0.0,
        parity_slip: float = 0.05,
        level_slip: float = 0.1,
        parse_fail: float = 0.01,
        judge: str = "mean",
        judge_noise: float = 0.25,
        seed: int = 0,
        model: str = "affine-noise",
        persist: float = 1.0,
        roles: dict | None = None,
        params_name: str | None = None,
        bias: float = 0.0,
        p_blunder: float = 0.0,
        blunder_scale: float = 1.0,
    ):
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not (math.isfinite(sigma) and sigma >= 0):
            raise InputError(f"sigma must be a finite number >= 0; got {sigma!r}")
        if (
            isinstance(judge_noise, bool)
            or not isinstance(judge_noise, (int, float))
            or not (math.isfinite(judge_noise) and judge_noise >= 0)
        ):
            raise InputError(f"judge_noise must be a finite number >= 0; got {judge_noise!r}")
        if judge not in JUDGES:
            raise InputError(f"judge must be one of {', '.join(JUDGES)}; got {judge!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InputError(f"seed must be an integer >= 0; got {seed!r}")
        self.sigma = float(sigma)
        self.rho_c = _check_prob("rho_c", rho_c)
        self.parity_slip = _check_prob("parity_slip", parity_slip)
        self.level_slip = _check_prob("level_slip", level_slip)
        self.parse_fail = _check_prob("parse_fail", parse_fail)
        self.judge = judge
        self.judge_noise = float(judge_noise)
        self.seed = int(seed)
        self.model = model
        self.persist = _check_prob("persist", persist)
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not math.isfinite(bias):
            raise InputError(f"bias must be a finite number; got {bias!r}")
        self.bias = float(bias)
        self.p_blunder = _check_prob("p_blunder", p_blunder)
        if (
            isinstance(blunder_scale, bool)
            or not isinstance(blunder_scale, (int, float))
            or not (math.isfinite(blunder_scale) and blunder_scale >= 0)
        ):
            raise InputError(f"blunder_scale must be a finite number >= 0; got {blunder_scale!r}")
        self.blunder_scale = float(blunder_scale)
        self.roles = _check_roles(roles or {}, self.judge_noise, self.persist)
        self.params_name = params_name
        self._word_cache: dict[str, int] = {}

    # ------------------------------------------------------------------ parameter files
    @classmethod
    def from_params(cls, path, **overrides) -> SurrogateBackend:
        """A backend from a TOML parameter file (``kind = "state-tracking"``, see :func:`params_toml`) or the
        name of a built-in set (:data:`PARAM_SETS`); ``overrides`` (e.g. ``seed=3``) replace file values."""
        import tomllib
        from pathlib import Path

        if isinstance(path, str) and path in PARAM_SETS:
            d = {**PARAM_SETS[path], "roles": dict(PARAM_SETS[path]["roles"])}
            name = path
        else:
            p = Path(path)
            if not p.is_file():
                raise InputError(
                    f"surrogate parameter file {str(p)!r} does not exist (or name one of the sets "
                    f"{', '.join(PARAM_SETS)})"
                )
            try:
                d = tomllib.loads(p.read_text())
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
                raise InputError(f"surrogate parameter file {str(p)!r} is not valid TOML: {e}") from None
            except RecursionError:
                raise InputError(f"surrogate parameter file {str(p)!r}: nested too deeply to read") from None
            if d.get("kind") != "state-tracking":
                raise InputError(f"{str(p)!r}: key 'kind' must be \"state-tracking\"; got {d.get('kind')!r}")
            name = d.pop("name", p.stem)
            d.pop("kind")
            unknown = sorted(set(d) - set(_GLOBAL_KEYS) - {"roles"})
            if unknown:
                raise InputError(
                    f"{str(p)!r}: unknown key(s) {', '.join(unknown)}; accepted: kind, name, "
                    f"{', '.join(_GLOBAL_KEYS)}, [roles.<role>]"
                )
            if not isinstance(d.get("roles", {}), dict):
                raise InputError(f"{str(p)!r}: 'roles' must be a table of [roles.<role>] tables")
        kw = {**d, **overrides}
        kw.setdefault("params_name", name)
        try:
            return cls(**kw)
        except TypeError as e:
            raise InputError(f"surrogate parameters: {e}") from None

    def params(self) -> dict:
        """The parameters as a plain dict (the content of :func:`params_toml`)."""
        return {
            "sigma": self.sigma,
            "bias": self.bias,
            "p_blunder": self.p_blunder,
            "blunder_scale": self.blunder_scale,
            "rho_c": self.rho_c,
            "parity_slip": self.parity_slip,
            "level_slip": self.level_slip,
            "parse_fail": self.parse_fail,
            "judge": self.judge,
            "judge_noise": self.judge_noise,
            "persist": self.persist,
            "roles": {r: dict(v) for r, v in self.roles.items()},
        }

    def _extended(self) -> bool:
        """Whether any parameter of the richer model is away from its hand-tuned-v1 value."""
        return (
            self.persist != 1.0
            or self.bias != 0.0
            or self.p_blunder != 0.0
            or self.blunder_scale != 1.0
            or self.roles != _check_roles({}, self.judge_noise, self.persist)
        )

    # ------------------------------------------------------------------ interface
    def identity(self) -> dict:
        """Everything that changes the replies: the noise model, the judge, the seed, the token count (the
        richer model's parameters only when they differ from hand-tuned-v1, so old identities still match)."""
        d = {
            "backend": self.name,
            "model": self.model,
            "sigma": self.sigma,
            "rho_c": self.rho_c,
            "parity_slip": self.parity_slip,
            "level_slip": self.level_slip,
            "parse_fail": self.parse_fail,
            "judge": self.judge,
            "judge_noise": self.judge_noise,
            "seed": self.seed,
            "token_count": "whitespace-separated words",
        }
        if self._extended():
            d["persist"] = self.persist
            d["bias"] = self.bias
            d["p_blunder"] = self.p_blunder
            d["blunder_scale"] = self.blunder_scale
            d["roles"] = {r: dict(v) for r, v in self.roles.items()}
        return d

    def describe(self) -> dict:
        import jax

        from mascot import __version__

        return {
            "name": self.name,
            "model": self.model,
            "sigma": self.sigma,
            "rho_c": self.rho_c,
            "parity_slip": self.parity_slip,
            "level_slip": self.level_slip,
            "parse_fail": self.parse_fail,
            "judge": self.judge,
            "judge_noise": self.judge_noise,
            "seed": self.seed,
            "token_count": "whitespace-separated words",
            "mascot": __version__,
            "jax": jax.__version__,
            **(
                {
                    "persist": self.persist,
                    "bias": self.bias,
                    "p_blunder": self.p_blunder,
                    "blunder_scale": self.blunder_scale,
                    "roles": {r: dict(v) for r, v in self.roles.items()},
                    "params_name": self.params_name,
                }
                if self._extended()
                else {}
            ),
        }

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        n = len(requests)
        if n == 0:
            return []
        out: list[Response | None] = [None] * n
        idx, states, roles, proposals, shared_ids, seeds, role5, pert = [], [], [], [], [], [], [], []
        read: dict[str, Prompt | str] = {}  # user message -> what it asks (mesh revisers share one prompt)
        for i, r in enumerate(requests):
            task = self._read(r.messages, read)
            if isinstance(task, str):
                out[i] = Response(
                    text="",
                    prompt_tokens=self._prompt_tokens(r),
                    completion_tokens=0,
                    finish_reason=None,
                    error="surrogate: the messages are not a state-tracking "
                    f"prompt (agent, judge or revision; see prompts.py): {task}",
                )
                continue
            m = r.meta or {}
            idx.append(i)
            states.append(task.state)
            roles.append(_ROLES.index(task.role))
            proposals.append(task.proposals)
            topo = m.get("topology", "")
            shared_ids.append(
                (
                    _TOPOLOGY_IDS.get(topo, 3 + zlib.crc32(str(topo).encode())),
                    int(m.get("trial", 0)),
                    int(m.get("seed_arm", 0)),
                    int(m.get("step", 0)),
                )
            )
            s64 = m.get("seed64", r.sampling.seed)
            seeds.append(int(s64) if s64 is not None else i)
            role5.append(
                _ROLE_IDS[
                    _AGENT_ROLE.get(topo, "chain")
                    if task.role == "agent"
                    else "star_judge"
                    if task.role == "judge"
                    else "mesh_reviser"
                ]
            )
            pert.append(bool(m.get("perturbed", False)))
        if idx:
            texts = self._replies(
                states, np.array(roles), proposals, shared_ids, seeds, np.array(role5), np.array(pert, dtype=bool)
            )
            for i, text in zip(idx, texts):
                out[i] = Response(
                    text=text,
                    prompt_tokens=self._prompt_tokens(requests[i]),
                    completion_tokens=split_words(text),
                    finish_reason="stop",
                    latency_s=None,
                )
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

    def _replies(self, states, roles, proposals, shared_ids, seeds, role5, pert) -> list[str]:
        """The reply texts: the model of :mod:`mascot.protocols.state_tracking.dynamics` on this call's draws."""
        from mascot.kernels.precision import float64
        from mascot.kernels.state_tracking import rule_step, rule_step_misread

        n = len(states)
        value = np.array([float(s["Value"]) for s in states], dtype=np.float64)
        parity = np.array([0 if s["Parity"] == "A" else 1 for s in states], dtype=np.int32)
        level = np.array([int(s["Level"]) for s in states], dtype=np.int32)
        pad = _bucket(n) - n

        def kernel(f):  # the exact rule kernel needs int64/float64: enabled for this thread, for this call
            with float64():
                out = f(np.pad(value, (0, pad)), np.pad(parity, (0, pad)), np.pad(level, (0, pad), constant_values=1))
                return tuple(np.asarray(x)[:n] for x in out)

        rule = kernel(rule_step)
        d = self._draws(seeds, shared_ids, role5, pert)
        names = list(ROLE_PARAMS)
        col = lambda k: np.array([self.roles[r].get(k, 0.0) for r in names])[role5]  # noqa: E731
        g = {k: getattr(self, k) for k in ("sigma", "bias", "rho_c", "parity_slip", "level_slip", "p_blunder")}
        g["blunder_scale"] = self.blunder_scale
        out_v, out_p, out_l = np.zeros(n), np.zeros(n, np.int32), np.zeros(n, np.int32)
        agents, judges = np.flatnonzero(roles == 0), np.flatnonzero(roles != 0)
        if agents.size:
            r = {k: col(k)[agents] for k in ("p_exact", "p_echo", "sigma_scale", "p_keep_parity", "p_boundary")}
            at = lambda x: x[agents]  # noqa: E731
            # Rule 2's misreading only where a reply may misread (most models never do)
            mis = kernel(rule_step_misread) if (d.aux[agents] < r["p_boundary"]).any() else rule
            v, p_, lv = dynamics.agent_reply(
                g,
                r,
                (value[agents], parity[agents], level[agents]),
                tuple(map(at, rule)),
                tuple(map(at, mis)),
                dynamics.Draws(*(x[agents] for x in d[:8])),
            )
            out_v[agents], out_p[agents], out_l[agents] = v, p_, lv
        if judges.size:
            shown = [[q for q in proposals[j] if isinstance(q, dict)] for j in judges]
            k = max(1, max(len(q) for q in shown))
            ok = np.array([[i < len(q) for i in range(k)] for q in shown])
            pv = np.array([[float(x["Value"]) for x in q] + [0.0] * (k - len(q)) for q in shown])
            pp = np.array([[0 if x["Parity"] == "A" else 1 for x in q] + [0] * (k - len(q)) for q in shown], np.int32)
            pl = np.array([[int(x["Level"]) for x in q] + [1] * (k - len(q)) for q in shown], np.int32)
            r = {k_: col(k_)[judges] for k_ in ("p_copy", "p_recompute", "noise")}
            v, p_, lv = dynamics.judge_reply(
                g,
                r,
                tuple(x[judges] for x in rule),
                (pv, pp, pl),
                ok,
                self.judge,
                dynamics.Draws(*(x[judges] for x in d[:8])),
            )
            out_v[judges], out_p[judges], out_l[judges] = v, p_, lv
        fail = d.fail < self.parse_fail
        kind = np.minimum((d.kind * _MALFORMED_KINDS).astype(int), _MALFORMED_KINDS - 1)
        texts = []
        for j in range(n):
            v = float(out_v[j])
            vs = repr(v) if math.isfinite(v) else json.dumps(v)
            p = "A" if out_p[j] == 0 else "B"
            lv = int(out_l[j])
            if roles[j] == 0:
                st = states[j]
                text = (
                    '{"Reasoning": "surrogate: tau({\\"Value\\": %s, \\"Parity\\": \\"%s\\", \\"Level\\": %s}) '  # noqa: UP031  (%-formats match json.dumps's output byte for byte, and are faster)
                    '+ noise", "Value": %s, "Parity": "%s", "Level": %d}'
                    % (st["Value"], st["Parity"], st["Level"], vs, p, lv)
                )
            else:
                text = '{"Value": %s, "Parity": "%s", "Level": %d}' % (vs, p, lv)  # noqa: UP031  (%-formats match json.dumps's output byte for byte, and are faster)
            if fail[j]:
                k = kind[j]
                if k == 0:
                    text = text[: max(1, int(len(text) * 0.6))]
                elif k == 1:
                    text = "I applied the rules step by step, but I am not certain of the final state."
                elif k == 2:
                    text = text.replace('"Level": %d}' % lv, '"Level": %d}' % (lv + 9))  # noqa: UP031  (%-formats match json.dumps's output byte for byte, and are faster)
                else:
                    text = text.replace(f'"Parity": "{p}"', '"Parity": "C"')
            texts.append(text)
        return texts

    def _draws(self, seeds, shared_ids, role5, pert) -> _Draws:
        """The call's random inputs: per request a SplitMix64 stream of ``seed`` and the request's seed, and the
        normal shared by the replies of one (topology, trial, seed arm, step). The richer model's extra
        uniforms (mixture, misread or copy, blunder) and perturbation persistence: a perturbed-arm request
        keeps its paired draws with its role's probability ``persist``, else draws afresh. With hand-tuned-v1
        the extra uniforms are 0 (every probability they are compared with is 0: the replies of that model
        never depended on them)."""
        n = len(seeds)
        key = hash64(np.full(n, self.seed, dtype=np.uint64), np.array(seeds, dtype=np.uint64))
        u = uniforms(key, 7)  # (n, 7): z_own (2), parity, level, direction, fail, malformed kind
        sid = np.array(shared_ids, dtype=np.uint64)
        skey = hash64(
            np.full(n, self.seed, dtype=np.uint64),
            np.full(n, 0x5348415245, dtype=np.uint64),
            sid[:, 0],
            sid[:, 1],
            sid[:, 2],
            sid[:, 3],
        )
        us = uniforms(skey, 2)
        if self._extended():
            ue = uniforms(hash64(key, np.uint64(_TAG_EXTRA)), 3)
            persist = np.array([self.roles[r]["persist"] for r in ROLE_PARAMS])[role5]
            keep = uniforms(hash64(key, np.uint64(_TAG_EXTRA), np.uint64(1)), 1)[:, 0] < persist
            fresh = pert & ~keep
            if fresh.any():
                fk = hash64(key, np.uint64(_TAG_FRESH))
                u = np.where(fresh[:, None], uniforms(fk, 7), u)
                ue = np.where(fresh[:, None], uniforms(hash64(fk, np.uint64(_TAG_EXTRA)), 3), ue)
                us = np.where(fresh[:, None], uniforms(hash64(skey, np.uint64(_TAG_FRESH)), 2), us)
        else:
            ue = np.zeros((n, 3))
        return _Draws(
            ue[:, 0],
            ue[:, 1],
            dynamics.standard_normal(u[:, 0], u[:, 1]),
            dynamics.standard_normal(us[:, 0], us[:, 1]),
            u[:, 2],
            u[:, 3],
            u[:, 4],
            ue[:, 2],
            u[:, 5],
            u[:, 6],
        )


class _Draws(NamedTuple):
    """:class:`mascot.protocols.state_tracking.dynamics.Draws` (the first eight) and the malformed-reply draws."""

    mix: np.ndarray
    aux: np.ndarray
    z_own: np.ndarray
    z_shared: np.ndarray
    parity: np.ndarray
    level: np.ndarray
    direction: np.ndarray
    blunder: np.ndarray
    fail: np.ndarray
    kind: np.ndarray


def _check_roles(roles: dict, judge_noise: float, persist: float = 1.0) -> dict:
    """All five roles' parameters, defaults filled in (agents 0, 0, 1, 0; judges 0, 0, judge_noise; every
    role's ``persist`` the global ``persist``)."""
    if not isinstance(roles, dict):
        raise InputError(f"roles must be a dict of role -> parameters; got {type(roles).__name__}")
    unknown = sorted(set(roles) - set(ROLE_PARAMS))
    if unknown:
        raise InputError(f"unknown role(s) {', '.join(unknown)}; roles are {', '.join(ROLE_PARAMS)}")
    out = {}
    for r, keys in ROLE_PARAMS.items():
        given = roles.get(r, {})
        if not isinstance(given, dict):
            raise InputError(f"roles.{r} must be a table of {', '.join(keys)}")
        bad = sorted(set(given) - set(keys))
        if bad:
            raise InputError(f"roles.{r}: unknown key(s) {', '.join(bad)}; accepted: {', '.join(keys)}")
        d = {keys[0]: 0.0, keys[1]: 0.0, keys[2]: 1.0 if r in _AGENT_ROLE.values() else float(judge_noise)}
        if "p_keep_parity" in keys:
            d["p_keep_parity"] = 0.0
            d["p_boundary"] = 0.0
        d["persist"] = float(persist)
        for k, v in given.items():
            if k in ("sigma_scale", "noise"):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v >= 0):
                    raise InputError(f"roles.{r}.{k} must be a finite number >= 0; got {v!r}")
                d[k] = float(v)
            else:
                d[k] = _check_prob(f"roles.{r}.{k}", v)
        if d[keys[0]] + d[keys[1]] > 1.0 + 1e-12:
            raise InputError(f"roles.{r}: {keys[0]} + {keys[1]} must be <= 1; got {d[keys[0]]} + {d[keys[1]]}")
        out[r] = d
    return out


_COMMENTS = {
    "sigma": "s.d. of the Value noise of a noisy agent reply",
    "bias": "mean of that noise (a systematic drift; scaled per role like sigma)",
    "p_blunder": "P(a noisy reply's noise s.d. is multiplied by blunder_scale)",
    "blunder_scale": "that multiplier (heavy tails)",
    "rho_c": "share of that variance common to a step's replies (A.4)",
    "parity_slip": "P(Parity flipped) in a noisy reply",
    "level_slip": "P(Level moved by +-1) in a noisy reply",
    "parse_fail": "P(malformed reply)",
    "judge": "how judges / revisers aggregate: mean, median or vote",
    "judge_noise": "judges' noise scale (default of roles.*.noise)",
    "persist": "P(a perturbed-arm request reuses its paired draws)",
    "p_exact": "P(reply = the exact rule)",
    "p_echo": "P(reply = the input state)",
    "sigma_scale": "noise scale of this role",
    "p_copy": "P(copy one shown proposal)",
    "p_recompute": "P(recompute the rule exactly)",
    "noise": "noise scale when aggregating",
    "p_keep_parity": "P(an exact or noisy reply keeps the input's Parity)",
    "p_boundary": "P(an exact or noisy reply misreads Rule 2's boundary cases)",
}
_ROLE_COMMENTS = {"persist": "P(this role's perturbed-arm request reuses its paired draws)"}


def params_toml(params: dict, name: str = "custom", comment: str = "") -> str:
    """The TOML text of a state-tracking surrogate parameter set (``SurrogateBackend.params()`` or a dict
    of the same shape; missing keys take hand-tuned-v1 values), readable by
    :meth:`SurrogateBackend.from_params`. ``comment`` lines go at the top."""
    full = SurrogateBackend(**{k: v for k, v in params.items() if k in _GLOBAL_KEYS or k == "roles"}).params()

    def val(v):
        return json.dumps(v) if isinstance(v, str) else repr(float(v))

    lines = [f"# {c}" for c in comment.splitlines() if c.strip()]
    lines += ['kind = "state-tracking"', f"name = {json.dumps(name)}", ""]
    for k in _GLOBAL_KEYS:
        lines.append(f"{k} = {val(full[k])}".ljust(28) + f"  # {_COMMENTS[k]}")
    for r, keys in ROLE_PARAMS.items():
        lines += ["", f"[roles.{r}]"]
        lines += [
            f"{k} = {val(full['roles'][r][k])}".ljust(28) + f"  # {_ROLE_COMMENTS.get(k, _COMMENTS[k])}" for k in keys
        ]
    return "\n".join(lines) + "\n"
