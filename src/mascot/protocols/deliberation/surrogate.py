"""Deliberation agents without an LLM (:class:`SurrogateDeliberationBackend`), so that the exact text harness
runs on CPU, and the surrogates' deterministic token count (:func:`count_tokens`)."""

from __future__ import annotations

import json
import time

import numpy as np

from mascot.backends.base import Request, Response
from mascot.protocols.deliberation.config import check_float, check_int
from mascot.seeds import request_rng

__all__ = ["count_tokens", "SurrogateDeliberationBackend"]


def count_tokens(text: str) -> int:
    """The surrogates' deterministic token count: ``ceil(len(text) / 4)`` (about 4 characters per BPE token)."""
    return (len(text) + 3) // 4



class SurrogateDeliberationBackend:
    """Answers deliberation requests without an LLM, from the state the harness puts in ``request.meta``.

    Round 0 (``meta["inputs"]`` empty): ``x = clip(prior + initial_spread z)`` (the role prior, else 0.5).
    Round k: the weighted average ``m = sum_j w_ij x_j`` of the proposals in the prompt (their weights and
    vectors are in ``meta["inputs"]``), then ``x = clip(x_own + compliance (m - x_own) + noise z)``, rounded
    to 3 decimals: ``compliance = 1`` is the paper's algebraic step (eq. 5) plus noise; ``compliance < 1``
    makes agents move only part of the way (effective mode ``(1 - c) I + c W``, still doubly stochastic).
    The reply is ``{"vector": [...], "reasoning": "..."}`` (``reasoning_words`` words), wrapped in a
    ```` ```json ```` fence after a short preamble with probability ``fenced`` (exercises the extraction); with
    probability ``malformed`` it is unusable instead (equally often: prose without JSON, a vector of the
    wrong length, truncated JSON).

    Token counts are deterministic: ``prompt_tokens = sum over messages of count_tokens(content) + 4``,
    ``completion_tokens = count_tokens(reply)`` (:func:`count_tokens`: ceil(chars / 4)). Draws depend only on
    ``seed`` and the request's seed ``request.sampling.seed`` (not on batching). Requests without
    ``meta["kind"] == "deliberation"`` get an error response.
    """

    name = "surrogate"

    def __init__(self, noise: float = 0.005, compliance: float = 0.5, initial_spread: float = 0.05,
                 malformed: float = 0.02, reasoning_words: int = 60, fenced: float = 0.2, seed: int = 0,
                 model: str = "surrogate-deliberation"):
        self.noise = check_float("surrogate.noise", noise, lo=0)
        self.compliance = check_float("surrogate.compliance", compliance, lo=0, hi=1)
        self.initial_spread = check_float("surrogate.initial_spread", initial_spread, lo=0)
        self.malformed = check_float("surrogate.malformed", malformed, lo=0, hi=1)
        self.fenced = check_float("surrogate.fenced", fenced, lo=0, hi=1)
        self.reasoning_words = check_int("surrogate.reasoning_words", reasoning_words, 0)
        self.seed = check_int("surrogate.seed", seed, 0)
        self.model = model

    def options(self) -> dict:
        return {"noise": self.noise, "compliance": self.compliance, "initial_spread": self.initial_spread,
                "malformed": self.malformed, "reasoning_words": self.reasoning_words, "fenced": self.fenced,
                "seed": self.seed}

    def describe(self) -> dict:
        return {"backend": self.name, "model": self.model, **self.options()}

    def _reasoning(self, meta: dict, rng) -> str:
        title = meta.get("title", "agent")
        words = (f"As the {title} I move toward the weighted proposals of the team while keeping my priorities; "
                 "the plan must ship on time, stay secure and remain affordable for the launch").split()
        out = []
        while len(out) < self.reasoning_words:
            out.extend(words)
        return " ".join(out[: self.reasoning_words])

    def generate(self, requests: list[Request]) -> list[Response]:
        out = []
        for req in requests:
            t0 = time.perf_counter()
            meta = req.meta or {}
            ptok = sum(count_tokens(m.get("content", "")) + 4 for m in req.messages)
            if meta.get("kind") != "deliberation":
                out.append(Response("", ptok, 0, error="surrogate deliberation backend: request has no "
                                    "meta['kind'] == 'deliberation'", latency_s=0.0))
                continue
            rng = request_rng(self.seed, req.sampling.seed, req.messages)
            d = int(meta["d"])
            inputs = meta.get("inputs") or []
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
            if u_bad < self.malformed:
                if kind == 0:
                    text = f"I think we should mostly keep the current plan. {reasoning}"
                elif kind == 1:
                    text = json.dumps({"vector": [float(v) for v in x[:-1]], "reasoning": reasoning})
                else:
                    text = body[: len(body) // 2]
            elif u_fence < self.fenced:
                text = f"Here is my updated proposal.\n```json\n{body}\n```"
            else:
                text = body
            out.append(Response(text, ptok, count_tokens(text), finish_reason="stop",
                                latency_s=time.perf_counter() - t0))
        return out
