"""Deliberation agents without an LLM (:class:`SurrogateDeliberationBackend`), so that the exact text harness
runs on CPU; the surrogates' deterministic token count (:func:`count_tokens`); and the agent model's named
parameter sets (:class:`RateLawParams`, read and written as TOML by :func:`read_params` / :func:`write_params`).

Two agent families:

* ``legacy`` (the hand-tuned defaults, unchanged: ``SurrogateDeliberationBackend()``): every agent moves a
  fixed fraction ``compliance`` of the way to the weighted average of the proposals in its prompt;
* ``rate_law`` (:class:`RateLawParams`, fitted by :mod:`mascot.calibrate.deliberation`): the fraction depends
  on the disagreement ``D`` and the mode so that the mode's contraction rate follows a log-linear law in
  ``D`` (expansion, rate > 1, is allowed), with compliance noise, and the reply length (hence the next
  round's prompt tokens) depends on the mode, with verbosity noise.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from mascot.backends.base import Request, Response
from mascot.errors import InputError
from mascot.io import atomic_write_text, read_toml
from mascot.protocols.deliberation import dynamics
from mascot.protocols.deliberation.config import check_float, check_int
from mascot.seeds import crc32, request_rng

__all__ = [
    "count_tokens",
    "SurrogateDeliberationBackend",
    "RateLawParams",
    "LEGACY_PARAMS",
    "PARAM_SETS",
    "read_params",
    "write_params",
    "rate_law",
    "compliance_for_rate",
]


def count_tokens(text: str) -> int:
    """The surrogates' deterministic token count: ``ceil(len(text) / 4)`` (about 4 characters per BPE token).

    Returns: the count (int).
    """
    return (len(text) + 3) // 4


def _tokens(text: str, chars_per_token: float) -> int:
    """``ceil(len(text) / chars_per_token)`` (:func:`count_tokens` for 4)."""
    if chars_per_token == 4.0:
        return count_tokens(text)
    return int(math.ceil(len(text) / chars_per_token))


#: The legacy (hand-tuned) surrogate's options: ``SurrogateDeliberationBackend()`` and ``family = "legacy"``.
LEGACY_PARAMS = {
    "noise": 0.005,
    "compliance": 0.5,
    "initial_spread": 0.05,
    "malformed": 0.02,
    "reasoning_words": 60,
    "fenced": 0.2,
}

# name -> (lo, hi, lo_open, default, meaning)
_RATE_LAW_SPEC = {
    "rate1": (0.0, 3.0, True, 0.6, "mode-1 (complete) contraction rate lambda_1 at D = d_ref"),
    "slope1": (-5.0, 5.0, False, 0.0, "d log lambda_1 / d log D (< 0: slower, even expanding, near consensus)"),
    "rate2": (0.0, 3.0, True, 0.8, "mode-2 (ring) contraction rate lambda_2 at D = d_ref"),
    "slope2": (-5.0, 5.0, False, 0.0, "d log lambda_2 / d log D"),
    "d_ref": (0.0, 10.0, True, 0.2, "reference disagreement of the rate law"),
    "rate_min": (0.0, 3.0, False, 0.02, "lower clip of lambda(D)"),
    "rate_max": (0.0, 3.0, True, 1.5, "upper clip of lambda(D)"),
    "compliance_noise": (0.0, 5.0, False, 0.0, "sd of each agent's per-round compliance around its mean"),
    "round_noise": (0.0, 3.0, False, 0.0, "sd of log lambda per round, shared by the agents of a lane's round"),
    "noise": (0.0, 1.0, False, 0.0, "sd of the additive belief noise per entry and round"),
    "prior_scale": (0.0, 5.0, False, 1.0, "round 0: x = 0.5 + prior_scale (prior - 0.5) + initial_spread z"),
    "initial_spread": (0.0, 1.0, False, 0.05, "sd of the round-0 belief noise per entry"),
    "reply_chars1": (
        0.0,
        1e5,
        False,
        300.0,
        "mean reasoning length (characters) of a reply in a mode-1 round and in round 0",
    ),
    "reply_chars2": (0.0, 1e5, False, 300.0, "mean reasoning length (characters) of a reply in a mode-2 round"),
    "verbosity": (0.0, 3.0, False, 0.0, "sd of log reply length (lognormal, mean kept)"),
    "chars_per_token": (0.0, 100.0, True, 4.0, "tokens = ceil(characters / chars_per_token) per message"),
    "malformed": (0.0, 1.0, False, 0.0, "probability of an unusable reply (retried by the harness)"),
    "fenced": (0.0, 1.0, False, 0.0, "probability of a ```json fence after a short preamble"),
}


@dataclass(frozen=True)
class RateLawParams:
    """The ``rate_law`` agent model (one small, named parameter set; defaults in ``_RATE_LAW_SPEC``).

    A mode-``sigma`` round at disagreement ``D = D(k-1)`` (Def. 5; the harness passes it in ``meta["D"]``):

    * target rate ``lambda_sigma(D) = clip(rate_sigma (D / d_ref)^slope_sigma, rate_min, rate_max)``, i.e.
      ``log lambda`` linear in ``log D``;
    * agent ``i``'s compliance ``c_i = (1 - lambda_sigma(D) exp(round_noise xi)) / (1 - mu_sigma) +
      compliance_noise z_i``, with ``xi ~ N(0, 1)`` drawn once per lane and round (shared by its agents: from
      ``(seed, meta["strategy"], meta["run"], meta["round"])``) and ``z_i`` per agent, where
      ``mu_sigma`` is the contraction rate of ``W_sigma`` (Def. 6; ``meta["mode_rate"]``), so that without
      noise the effective operator ``(1 - c) I + c W_sigma`` contracts the slowest direction of 1-perp by
      exactly ``lambda_sigma(D)`` (every direction for the complete graph, whose ``W P`` is a multiple of
      ``P``); ``c < 0`` (moving away from the neighbours) gives expansion;
    * ``x_i <- round(clip(x_i + c_i (m_i - x_i) + noise z, 0, 1), 3)`` with ``m_i = sum_j w_ij x_j`` over
      the proposals in the prompt;
    * the reply's reasoning has ``L = max(0, round(reply_chars_sigma exp(verbosity z - verbosity^2 / 2)))``
      characters (round 0: ``reply_chars1``); the harness puts the previous round's replies into the next
      round's prompts, so the prompt (input) tokens the budget is charged follow from the real prompt text;
    * tokens per message ``ceil(chars / chars_per_token) + 4``.
    """

    rate1: float = 0.6
    slope1: float = 0.0
    rate2: float = 0.8
    slope2: float = 0.0
    d_ref: float = 0.2
    rate_min: float = 0.02
    rate_max: float = 1.5
    compliance_noise: float = 0.0
    round_noise: float = 0.0
    noise: float = 0.0
    prior_scale: float = 1.0
    initial_spread: float = 0.05
    reply_chars1: float = 300.0
    reply_chars2: float = 300.0
    verbosity: float = 0.0
    chars_per_token: float = 4.0
    malformed: float = 0.0
    fenced: float = 0.0

    def __post_init__(self):
        for k, (lo, hi, lo_open, _, _) in _RATE_LAW_SPEC.items():
            object.__setattr__(
                self, k, check_float(f"surrogate params: {k}", getattr(self, k), lo=lo, hi=hi, lo_open=lo_open)
            )
        if self.rate_min >= self.rate_max:
            raise InputError(f"surrogate params: rate_min must be < rate_max; got {self.rate_min} >= {self.rate_max}")

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def describe_keys() -> dict:
        """``{key: meaning}`` of every parameter."""
        return {k: v[4] for k, v in _RATE_LAW_SPEC.items()}


#: Named parameter sets: ``legacy`` (the hand-tuned defaults, ``family = "legacy"``) and ``rate_law`` (the
#: rate-law family's defaults).
PARAM_SETS = {"legacy": ("legacy", dict(LEGACY_PARAMS)), "rate_law": ("rate_law", RateLawParams().to_dict())}


def rate_law(D, rate, slope, d_ref, rate_min, rate_max):
    """``clip(rate (D / d_ref)^slope, rate_min, rate_max)`` (numpy; ``D = 0`` is taken as 1e-12;
    :func:`mascot.protocols.deliberation.dynamics.rate_law`)."""
    return dynamics.rate_law(D, rate, slope, d_ref, rate_min, rate_max)


def compliance_for_rate(lam, mode_rate):
    """The compliance ``c`` whose operator ``(1 - c) I + c W`` has contraction rate ``lam`` on the slowest
    direction of a ``W`` with contraction rate ``mode_rate``: ``(1 - lam) / (1 - mode_rate)``."""
    if not mode_rate < 1:
        raise InputError(f"mode_rate must be < 1 (a connected mode); got {mode_rate!r}")
    return dynamics.compliance(np.asarray(lam, dtype=np.float64), mode_rate)


# ----------------------------------------------------------------------------- TOML
_TOP = {"kind", "family", "name", "description", "params", "settings", "uncertainty", "fit"}
_SETTINGS = {"token_scale", "eta", "eps", "b0", "max_rounds", "source"}


def _fmt_toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if not math.isfinite(f):
            raise InputError(f"cannot write a non-finite number to TOML: {f}")
        return repr(f)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt_toml(x) for x in v) + "]"
    raise InputError(f"cannot write {type(v).__name__} to TOML")


def write_params(
    path,
    params,
    *,
    name: str,
    description: str = "",
    settings: dict | None = None,
    uncertainty: dict | None = None,
    fit: dict | None = None,
    comments: dict | None = None,
) -> None:
    """Write a parameter file (atomically) that :meth:`SurrogateDeliberationBackend.from_params` reads.

    ``params``: a :class:`RateLawParams` (family ``rate_law``) or a dict of the legacy options (family
    ``legacy``). ``settings``: the deployment the parameters were fitted under (token_scale, eta, eps, b0,
    max_rounds, source; informational: ``mascot deliberate`` uses its own config). ``uncertainty``: per
    parameter, e.g. the bootstrap sd. ``fit``: provenance scalars. ``comments``: per parameter, a line
    written above it.
    """
    if isinstance(params, RateLawParams):
        family, values = "rate_law", params.to_dict()
    else:
        family, values = "legacy", _legacy_options(dict(params), "params")
    lines = [
        "# mascot surrogate parameters for the deliberation agents (consensus paper, Sec. V-C).",
        "# Read by SurrogateDeliberationBackend.from_params(FILE) / mascot deliberate --surrogate-params FILE.",
        'kind = "deliberation"',
        f"family = {_fmt_toml(family)}",
        f"name = {_fmt_toml(name)}",
    ]
    if description:
        lines.append(f"description = {_fmt_toml(description)}")
    lines += ["", "[params]"]
    for k, v in values.items():
        if comments and k in comments:
            lines.append(f"# {comments[k]}")
        lines.append(f"{k} = {_fmt_toml(v)}")
    for title, table, allowed in (
        ("settings", settings, _SETTINGS),
        ("uncertainty", uncertainty, set(values)),
        ("fit", fit, None),
    ):
        if table:
            if allowed is not None:
                bad = sorted(set(table) - allowed)
                if bad:
                    raise InputError(f"[{title}]: unknown key(s) {', '.join(bad)}; known: {', '.join(sorted(allowed))}")
            lines += ["", f"[{title}]"] + [f"{k} = {_fmt_toml(v)}" for k, v in table.items()]
    atomic_write_text(path, "\n".join(lines) + "\n")


def _legacy_options(d: dict, where: str) -> dict:
    bad = sorted(set(d) - set(LEGACY_PARAMS))
    if bad:
        raise InputError(
            f"{where}: unknown key(s) {', '.join(bad)} for family 'legacy'; known: {', '.join(sorted(LEGACY_PARAMS))}"
        )
    out = {**LEGACY_PARAMS, **d}
    for k in ("noise", "initial_spread"):
        out[k] = check_float(f"{where}.{k}", out[k], lo=0)
    for k in ("compliance", "malformed", "fenced"):
        out[k] = check_float(f"{where}.{k}", out[k], lo=0, hi=1)
    out["reasoning_words"] = check_int(f"{where}.reasoning_words", out["reasoning_words"], 0)
    return out


def read_params(path) -> dict:
    """Read and validate a parameter file (or a name of :data:`PARAM_SETS`) ->
    ``{"family", "name", "params", "settings", "uncertainty", "fit"}``: ``params`` is a
    :class:`RateLawParams` for family ``rate_law``, the legacy options dict for ``legacy``.
    ``ValueError`` naming the file and the key on anything unknown, missing or out of range."""
    if isinstance(path, str) and path in PARAM_SETS:
        fam, vals = PARAM_SETS[path]
        raw = {"kind": "deliberation", "family": fam, "name": path, "params": vals}
        where = f"parameter set {path!r}"
    else:
        raw = read_toml(path)
        where = str(path)
    if raw.get("kind") != "deliberation":
        raise InputError(
            f'{where}: kind must be "deliberation" (a deliberation surrogate parameter file); got {raw.get("kind")!r}'
        )
    bad = sorted(set(raw) - _TOP)
    if bad:
        raise InputError(f"{where}: unknown key(s) {', '.join(bad)}; known: {', '.join(sorted(_TOP))}")
    fam = raw.get("family")
    if fam not in ("legacy", "rate_law"):
        raise InputError(f'{where}: family must be "legacy" or "rate_law"; got {fam!r}')
    p = raw.get("params", {})
    if not isinstance(p, dict):
        raise InputError(f"{where}: [params] must be a table")
    if fam == "legacy":
        params = _legacy_options(p, f"{where}: params")
    else:
        bad = sorted(set(p) - set(_RATE_LAW_SPEC))
        if bad:
            raise InputError(
                f"{where}: params: unknown key(s) {', '.join(bad)} for family 'rate_law'; "
                f"known: {', '.join(_RATE_LAW_SPEC)}"
            )
        try:
            params = RateLawParams(**p)
        except ValueError as e:
            raise InputError(f"{where}: {e}") from None
    settings = raw.get("settings", {})
    if not isinstance(settings, dict) or set(settings) - _SETTINGS:
        raise InputError(f"{where}: [settings] may hold only {', '.join(sorted(_SETTINGS))}")
    return {
        "family": fam,
        "name": str(raw.get("name", "")),
        "params": params,
        "settings": settings,
        "uncertainty": dict(raw.get("uncertainty", {})),
        "fit": dict(raw.get("fit", {})),
    }


# ----------------------------------------------------------------------------- the backend
_WORDS = (
    "the plan must ship on time stay secure and remain affordable so I weigh the proposals of the team "
    "against my priorities and move toward a shared design for the launch "
)


class SurrogateDeliberationBackend:
    """Answers deliberation requests without an LLM, from the state the harness puts in ``request.meta``.

    **legacy** family (the default constructor, the hand-tuned options of :data:`LEGACY_PARAMS`):
    round 0 (``meta["inputs"]`` empty): ``x = clip(prior + initial_spread z)`` (the role prior, else 0.5).
    Round k: the weighted average ``m = sum_j w_ij x_j`` of the proposals in the prompt (their weights and
    vectors are in ``meta["inputs"]``), then ``x = clip(x_own + compliance (m - x_own) + noise z)``, rounded
    to 3 decimals: ``compliance = 1`` is the paper's algebraic step (eq. 5) plus noise; ``compliance < 1``
    makes agents move only part of the way (effective mode ``(1 - c) I + c W``, still doubly stochastic).
    The reply is ``{"vector": [...], "reasoning": "..."}`` (``reasoning_words`` words), wrapped in a
    ```` ```json ```` fence after a short preamble with probability ``fenced`` (exercises the extraction); with
    probability ``malformed`` it is unusable instead (equally often: prose without JSON, a vector of the
    wrong length, truncated JSON).

    **rate_law** family (``params=RateLawParams(...)`` or :meth:`from_params`): see :class:`RateLawParams`;
    needs ``meta["D"]`` (the lane's current disagreement), ``meta["sigma"]`` (the round's mode) and
    ``meta["mode_rate"]`` (the contraction rate of that mode's ``W``), which :func:`run_deliberation` provides.

    Token counts are deterministic: ``prompt_tokens = sum over messages of count_tokens(content) + 4``,
    ``completion_tokens = count_tokens(reply)`` (:func:`count_tokens`: ceil(chars / 4); rate_law:
    ``chars_per_token`` instead of 4). Draws depend only on ``seed`` and the request's seed
    ``request.sampling.seed`` (not on batching). Requests without ``meta["kind"] == "deliberation"`` get an
    error response.

    Arguments: ``noise``, ``compliance``, ``initial_spread``, ``malformed``, ``reasoning_words``, ``fenced`` the
    legacy options above; ``seed`` mixed into every request's seed; ``model`` the name the backend reports;
    ``params`` a :class:`RateLawParams` (the rate_law family).
    """

    name = "surrogate"

    def __init__(
        self,
        noise: float = 0.005,
        compliance: float = 0.5,
        initial_spread: float = 0.05,
        malformed: float = 0.02,
        reasoning_words: int = 60,
        fenced: float = 0.2,
        seed: int = 0,
        model: str = "surrogate-deliberation",
        params: RateLawParams | None = None,
    ):
        self.noise = check_float("surrogate.noise", noise, lo=0)
        self.compliance = check_float("surrogate.compliance", compliance, lo=0, hi=1)
        self.initial_spread = check_float("surrogate.initial_spread", initial_spread, lo=0)
        self.malformed = check_float("surrogate.malformed", malformed, lo=0, hi=1)
        self.fenced = check_float("surrogate.fenced", fenced, lo=0, hi=1)
        self.reasoning_words = check_int("surrogate.reasoning_words", reasoning_words, 0)
        self.seed = check_int("surrogate.seed", seed, 0)
        self.model = model
        if params is not None and not isinstance(params, RateLawParams):
            raise InputError(f"params must be a RateLawParams; got {type(params).__name__}")
        self.params = params

    @classmethod
    def from_params(cls, path, **overrides) -> SurrogateDeliberationBackend:
        """The backend of a parameter file written by :func:`write_params` (or a name of :data:`PARAM_SETS`:
        ``"legacy"`` is ``SurrogateDeliberationBackend()``). ``overrides``: ``seed``, ``model`` (the name the
        run records show) or any parameter of the file's family; unknown keys raise ``ValueError``."""
        spec = read_params(path)
        seed = overrides.pop("seed", 0)
        model = overrides.pop("model", None)
        if spec["family"] == "legacy":
            opts = _legacy_options({**spec["params"], **overrides}, f"{path}: overrides")
            return cls(**opts, seed=seed, **({"model": model} if model else {}))
        bad = sorted(set(overrides) - set(_RATE_LAW_SPEC))
        if bad:
            raise InputError(
                f"from_params: unknown override(s) {', '.join(bad)}; known: seed, model, {', '.join(_RATE_LAW_SPEC)}"
            )
        params = RateLawParams(**{**spec["params"].to_dict(), **overrides})
        return cls(seed=seed, model=model or f"surrogate-deliberation-{spec['name'] or 'rate_law'}", params=params)

    def options(self) -> dict:
        if self.params is not None:
            return {"family": "rate_law", **self.params.to_dict(), "seed": self.seed}
        return {
            "noise": self.noise,
            "compliance": self.compliance,
            "initial_spread": self.initial_spread,
            "malformed": self.malformed,
            "reasoning_words": self.reasoning_words,
            "fenced": self.fenced,
            "seed": self.seed,
        }

    def describe(self) -> dict:
        return {"backend": self.name, "model": self.model, **self.options()}

    def _reasoning(self, meta: dict, rng) -> str:
        title = meta.get("title", "agent")
        words = (
            f"As the {title} I move toward the weighted proposals of the team while keeping my priorities; "
            "the plan must ship on time, stay secure and remain affordable for the launch"
        ).split()
        out = []
        while len(out) < self.reasoning_words:
            out.extend(words)
        return " ".join(out[: self.reasoning_words])

    @staticmethod
    def _reasoning_chars(meta: dict, n: int) -> str:
        """Exactly ``n`` characters of plain ASCII reasoning (no quotes or backslashes: JSON adds 2 characters)."""
        base = f"As the {meta.get('title', 'agent')} I " + _WORDS
        base = "".join(ch for ch in base if ch not in '"\\')
        return (base * (n // len(base) + 1))[:n]

    def _rate_law_vector(self, meta: dict, inputs: list, rng, d: int):
        """``(x, reasoning)`` of the rate_law family, or ``(None, error)``."""
        p = self.params
        z = rng.standard_normal(d)
        zc, zl = rng.standard_normal(), rng.standard_normal()
        if inputs:
            missing = [k for k in ("D", "sigma", "mode_rate") if meta.get(k) is None]
            if missing:
                return None, (
                    f"surrogate deliberation backend (rate_law): request meta lacks {', '.join(missing)} "
                    "(run it through mascot's run_deliberation)"
                )
            sigma = int(meta["sigma"])
            w = np.array([x["weight"] for x in inputs], dtype=np.float64)
            V = np.array([x["vector"] for x in inputs], dtype=np.float64)
            m = (w[:, None] * V).sum(axis=0) / w.sum()
            own = np.asarray(next((x["vector"] for x in inputs if x.get("self")), m), dtype=np.float64)
            rate, slope = (p.rate1, p.slope1) if sigma == 1 else (p.rate2, p.slope2)
            lam = float(rate_law(float(meta["D"]), rate, slope, p.d_ref, p.rate_min, p.rate_max))
            if p.round_noise > 0:  # one draw per lane and round, the same for every agent of the round
                xi = np.random.default_rng(
                    [
                        self.seed,
                        crc32(str(meta.get("strategy"))),
                        int(meta.get("run", 0)),
                        int(meta.get("round", 0)),
                        0x5EED,
                    ]
                ).standard_normal()
                lam *= math.exp(p.round_noise * xi)
            c = float(compliance_for_rate(lam, float(meta["mode_rate"]))) + p.compliance_noise * zc
            x = dynamics.update(own, m, c, p.noise, z)
            mean_len = p.reply_chars1 if sigma == 1 else p.reply_chars2
        else:
            prior = meta.get("prior")
            pr = np.full(d, 0.5) if prior is None else np.asarray(prior, dtype=np.float64)
            x = dynamics.initial_proposal(pr, p.prior_scale, p.initial_spread, z)
            mean_len = p.reply_chars1
        n = int(dynamics.reply_length(mean_len, p.verbosity, zl))
        return x, self._reasoning_chars(meta, n)

    def generate(self, requests: list[Request]) -> list[Response]:
        out = []
        rl = self.params
        cpt = rl.chars_per_token if rl is not None else 4.0
        malformed = rl.malformed if rl is not None else self.malformed
        fenced = rl.fenced if rl is not None else self.fenced
        for req in requests:
            t0 = time.perf_counter()
            meta = req.meta or {}
            ptok = sum(_tokens(m.get("content", ""), cpt) + 4 for m in req.messages)
            if meta.get("kind") != "deliberation":
                out.append(
                    Response(
                        "",
                        ptok,
                        0,
                        error="surrogate deliberation backend: request has no meta['kind'] == 'deliberation'",
                        latency_s=0.0,
                    )
                )
                continue
            rng = request_rng(self.seed, req.sampling.seed, req.messages)
            d = int(meta["d"])
            inputs = meta.get("inputs") or []
            if rl is not None:
                x, reasoning = self._rate_law_vector(meta, inputs, rng, d)
                if x is None:
                    out.append(Response("", ptok, 0, error=reasoning, latency_s=0.0))
                    continue
            else:
                z = rng.standard_normal(d)
                if inputs:
                    w = np.array([x["weight"] for x in inputs], dtype=np.float64)
                    V = np.array([x["vector"] for x in inputs], dtype=np.float64)
                    m = (w[:, None] * V).sum(axis=0) / w.sum()
                    own = np.asarray(next((x["vector"] for x in inputs if x.get("self")), m), dtype=np.float64)
                    x = own + self.compliance * (m - own) + self.noise * z
                else:
                    prior = meta.get("prior")
                    p = np.full(d, 0.5) if prior is None else np.asarray(prior, dtype=np.float64)
                    x = p + self.initial_spread * z
                x = np.round(np.clip(x, 0.0, 1.0), 3)
                reasoning = self._reasoning(meta, rng)
            u_bad, u_fence, kind = rng.random(), rng.random(), int(rng.integers(3))
            body = json.dumps({"vector": [float(v) for v in x], "reasoning": reasoning})
            if u_bad < malformed:
                if kind == 0:
                    text = f"I think we should mostly keep the current plan. {reasoning}"
                elif kind == 1:
                    text = json.dumps({"vector": [float(v) for v in x[:-1]], "reasoning": reasoning})
                else:
                    text = body[: len(body) // 2]
            elif u_fence < fenced:
                text = f"Here is my updated proposal.\n```json\n{body}\n```"
            else:
                text = body
            out.append(
                Response(text, ptok, _tokens(text, cpt), finish_reason="stop", latency_s=time.perf_counter() - t0)
            )
        return out
