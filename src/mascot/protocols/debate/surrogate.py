"""Debate agents without an LLM (:class:`SurrogateDebateBackend`), so that the debate harness runs on CPU."""

from __future__ import annotations

from mascot.backends.base import Request, Response
from mascot.errors import InputError
from mascot.limits import check_int
from mascot.protocols.debate.voting import DECISIONS
from mascot.protocols.deliberation.surrogate import count_tokens
from mascot.seeds import request_rng

__all__ = ["SurrogateDebateBackend"]

_REASONS = {
    "PASS": [
        "Reason: the function is short and the evaluation path is fast.",
        "Reason: execution time is optimal for simple arithmetic expressions.",
        "Reason: the code is readable and does what its name says.",
    ],
    "FAIL": [
        "Reason: the code uses an unsafe eval() execution block on caller input.",
        "Reason: unhandled exception risks in input parsing.",
        "Reason: eval() allows arbitrary code execution; use a safe expression parser.",
    ],
}


class SurrogateDebateBackend:
    """Debate agents without an LLM, driven by ``request.meta`` (agent, round, own previous and others' decisions).

    Round 1 (or after an own untagged reply): PASS with the persona's prior probability (``priors[name]``,
    else ``meta["prior_pass"]``, else 0.5). Later rounds: keep the previous decision, except that with
    probability ``persuasion`` the agent adopts the strict majority of the other agents' tagged decisions
    (if there is one). Confidence ~ U(confidence_low, confidence_high), 2 decimals (only when the prompt
    asks for it, ``meta["ask_confidence"]``). With probability ``malformed`` the reply is untagged for the
    strict parser, equally often: the tag in mid-text (which the article's substring check would accept),
    no tag at all, or a lower-case tag. Token counts: ``ceil(chars / 4)`` per message (+4) and reply, as in
    :class:`mascot.protocols.deliberation.surrogate.SurrogateDeliberationBackend`. Deterministic per request
    seed (``request.sampling.seed``).

    Arguments: ``priors`` persona name -> P(PASS) in round 1; ``persuasion``, ``malformed`` the probabilities
    above; ``seed`` mixed into every request's seed; ``confidence_low``, ``confidence_high`` the confidence
    range; ``model`` the name the backend reports.
    """

    name = "surrogate"

    def __init__(
        self,
        priors: dict[str, float] | None = None,
        persuasion: float = 0.5,
        malformed: float = 0.05,
        seed: int = 0,
        confidence_low: float = 0.5,
        confidence_high: float = 1.0,
        model: str = "surrogate-debate",
    ):
        for nm, v in (
            ("persuasion", persuasion),
            ("malformed", malformed),
            ("confidence_low", confidence_low),
            ("confidence_high", confidence_high),
        ):
            if isinstance(v, (bool, str)) or not isinstance(v, (int, float)) or not (0 <= float(v) <= 1):
                raise InputError(f"surrogate.{nm} must be a number in [0, 1]; got {v!r}")
        if confidence_low > confidence_high:
            raise InputError("surrogate.confidence_low must be <= confidence_high")
        self.priors = dict(priors or {})
        self.persuasion, self.malformed = float(persuasion), float(malformed)
        self.confidence_low, self.confidence_high = float(confidence_low), float(confidence_high)
        self.seed = check_int("surrogate.seed", seed, 0)
        self.model = model

    def options(self) -> dict:
        return {
            "priors": self.priors,
            "persuasion": self.persuasion,
            "malformed": self.malformed,
            "seed": self.seed,
            "confidence_low": self.confidence_low,
            "confidence_high": self.confidence_high,
        }

    def describe(self) -> dict:
        return {"backend": self.name, "model": self.model, **self.options()}

    def generate(self, requests: list[Request]) -> list[Response]:
        out = []
        for req in requests:
            meta = req.meta or {}
            ptok = sum(count_tokens(m.get("content", "")) + 4 for m in req.messages)
            if meta.get("kind") != "debate":
                out.append(
                    Response("", ptok, 0, error="surrogate debate backend: request has no meta['kind'] == 'debate'")
                )
                continue
            rng = request_rng(self.seed, req.sampling.seed, req.messages)
            u_prior, u_pers, u_bad, u_conf = rng.random(4)
            kind, pick = int(rng.integers(3)), int(rng.integers(3))
            prior = self.priors.get(meta.get("agent"), meta.get("prior_pass", 0.5))
            prev = meta.get("previous")
            if meta.get("round", 1) <= 1 or prev not in DECISIONS:
                dec = "PASS" if u_prior < prior else "FAIL"
            else:
                dec = prev
                others = [d for d in meta.get("others", []) if d in DECISIONS]
                p, f = others.count("PASS"), others.count("FAIL")
                maj = "PASS" if p > f else "FAIL" if f > p else None
                if maj is not None and u_pers < self.persuasion:
                    dec = maj
            conf = self.confidence_low + (self.confidence_high - self.confidence_low) * u_conf
            reason = _REASONS[dec][pick]
            ctag = f" [CONFIDENCE: {conf:.2f}]" if meta.get("ask_confidence", True) else ""
            if u_bad < self.malformed:
                if kind == 0:
                    text = f"After weighing the other reviews, my verdict is [DECISION: {dec}]{ctag}. {reason}"
                elif kind == 1:
                    text = f"{reason} I would {'approve' if dec == 'PASS' else 'reject'} this change."
                else:
                    text = f"[decision: {dec.lower()}]{ctag.lower()} {reason}"
            else:
                text = f"[DECISION: {dec}]{ctag} {reason}"
            out.append(Response(text, ptok, count_tokens(text), finish_reason="stop", latency_s=0.0))
        return out
