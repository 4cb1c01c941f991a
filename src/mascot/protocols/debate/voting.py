"""Ballots and votes of the voting/debate article ("Multi-Agent Consensus: Architecting Voting & Debate
Topologies in LLM Swarms").

Ballots
-------
A reply's decision is read from a **strict tag at the start of the reply** (after leading whitespace):
exactly ``[DECISION: PASS]`` or ``[DECISION: FAIL]`` (upper case, one space). Anything else -- no tag, a
tag later in the text, ``[decision: pass]``, ``[DECISION:PASS]`` -- is the decision ``"NONE"`` (untagged).
An optional confidence follows the decision tag: ``[DECISION: FAIL] [CONFIDENCE: 0.85]``; it must be a plain
decimal number in [0, 1] (``0.85``, ``1``, ``.5``).

Voting rules (:func:`majority_vote`, :func:`weighted_vote`)
----------------------------------------------------------
* **Abstentions** are excluded from the tally but counted (``abstentions``): an untagged reply (``"NONE"``,
  ``None``, anything other than PASS/FAIL), and -- for the weighted vote only -- a ballot whose confidence
  is missing, not a number, NaN, or outside [0, 1]. A valid ballot with confidence 0 is a vote (it
  counts in ``pass_votes``/``fail_votes``) that adds nothing to the score.
* **Majority**: ``PASS`` if more valid PASS than FAIL votes, ``FAIL`` if fewer, ``TIE`` if equal and at
  least one valid vote, ``NONE`` if there is no valid vote at all.
* **Weighted confidence**: ``score = sum_i D_i C_i`` with ``D_i = +1`` (PASS) / ``-1`` (FAIL) and
  ``C_i in [0, 1]``; ``PASS`` if ``score > 0``, ``FAIL`` if ``< 0``, ``TIE`` if exactly 0 with at least one valid
  vote, ``NONE`` without valid votes. The sum is exact: each confidence is taken as the decimal number it
  was written as (``Decimal(str(c))`` for floats, numpy's too), summed without rounding, so ``0.1 + 0.2 - 0.3``
  is a tie, not ``5.6e-17``, and ``0.9 + 1e-30 - 0.9`` is PASS.

Erratum (the article's ``check_consensus``)
-------------------------------------------
The article decides with substring tests on the upper-cased reply (``"[DECISION: PASS]" in op``, then
``"[DECISION: FAIL]" in op``) and declares consensus when ``len(set(decisions)) == 1`` over the agents
whose reply matched. Consequences: (1) agents whose replies hold no tag are silently dropped, so ONE
tagged agent plus any number of untagged ones counts as unanimous consensus; (2) a tag anywhere in the
text counts, including quoted from another agent ("Security wrote [DECISION: FAIL] but I disagree ..."), and
a reply containing both tags counts as PASS; (3) lower-case tags are accepted although the prompt demands
the exact prefix. Its own conclusion asks for "a clear tag ... at the start of the response", which is
what :func:`parse_decision` enforces; :func:`article_consensus` keeps the article's check for comparison
(logged as ``article_consensus`` in every ``round`` line).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Sequence
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, InvalidOperation
from typing import NamedTuple

__all__ = [
    "DECISIONS",
    "OUTCOMES",
    "Ballot",
    "parse_decision",
    "article_decision",
    "article_consensus",
    "VoteResult",
    "majority_vote",
    "weighted_vote",
    "agreed_decision",
]

DECISIONS = ("PASS", "FAIL")
OUTCOMES = ("PASS", "FAIL", "TIE", "NONE")
_TAG = re.compile(r"\A\s*\[DECISION: (PASS|FAIL)\]")
_CONF = re.compile(r"\A\s*\[DECISION: (?:PASS|FAIL)\][ \t]*\[CONFIDENCE: ([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\]")


class Ballot(NamedTuple):
    decision: str  # "PASS", "FAIL" or "NONE"
    confidence: Decimal | None
    reason: str  # "ok", "untagged", or why the confidence is missing/invalid

    @property
    def tagged(self) -> bool:
        return self.decision in DECISIONS


def parse_decision(text: str | None) -> Ballot:
    """Strict ballot of a reply: the tag must open the reply (see the module docstring).

    Arguments: ``text`` a reply (None: no reply). Returns a :class:`Ballot` (decision or None, confidence, why
    it did not parse).
    """
    if not text:
        return Ballot("NONE", None, "untagged: empty reply")
    m = _TAG.match(text)
    if not m:
        return Ballot("NONE", None, "untagged: the reply does not start with [DECISION: PASS] or [DECISION: FAIL]")
    c = _CONF.match(text)
    if not c:
        return Ballot(m.group(1), None, "ok (no confidence tag)")
    conf = Decimal(c.group(1))
    if not (0 <= conf <= 1):
        return Ballot(m.group(1), None, f"ok (confidence {c.group(1)} outside [0, 1] ignored)")
    return Ballot(m.group(1), conf, "ok")


def article_decision(text: str | None) -> str | None:
    """The article's parsing, kept for comparison: substring test on the upper-cased reply, PASS first.

    Arguments: ``text`` a reply (None: no reply).

    Returns: "PASS", "FAIL" or None.
    """
    op = (text or "").upper()
    if "[DECISION: PASS]" in op:
        return "PASS"
    if "[DECISION: FAIL]" in op:
        return "FAIL"
    return None


def article_consensus(texts: Sequence[str | None]) -> bool:
    """The article's ``check_consensus`` (untagged agents dropped; see the erratum in the module docstring).

    Arguments: ``texts`` the agents' replies (None: no reply).

    Returns: True when the tagged replies all agree.
    """
    decisions = [d for d in (article_decision(t) for t in texts) if d is not None]
    return len(set(decisions)) == 1


class VoteResult(NamedTuple):
    outcome: str  # PASS, FAIL, TIE or NONE
    pass_votes: int
    fail_votes: int
    abstentions: int
    score: float | None  # weighted vote only (exact sum, converted to float)

    def to_dict(self) -> dict:
        return self._asdict()


def _decision(x) -> str | None:
    if isinstance(x, Ballot):
        x = x.decision
    return x if x in DECISIONS else None


def _outcome(p, f, n_valid) -> str:
    if n_valid == 0:
        return "NONE"
    return "PASS" if p > f else "FAIL" if f > p else "TIE"


def majority_vote(decisions: Sequence) -> VoteResult:
    """Simple majority over ``decisions`` ("PASS"/"FAIL"; anything else, or a NONE ballot, abstains).

    Returns: a :class:`VoteResult` (decision or None on a tie, counts).
    """
    valid = [d for d in (_decision(x) for x in decisions) if d is not None]
    p, f = valid.count("PASS"), valid.count("FAIL")
    return VoteResult(_outcome(p, f, len(valid)), p, f, len(decisions) - len(valid), None)


def _confidence(c) -> Decimal | None:
    if c is None or isinstance(c, bool):
        return None
    try:
        if isinstance(c, Decimal):
            v = c
        elif isinstance(c, numbers.Integral):  # int, numpy integers
            v = Decimal(int(c))
        elif isinstance(c, numbers.Real):  # float, numpy floats (float32 as written: str gives '0.9')
            if not math.isfinite(float(c)):
                return None
            try:
                v = Decimal(str(c))
            except InvalidOperation:  # other Reals (e.g. Fraction): their nearest float
                v = Decimal(repr(float(c)))
        elif isinstance(c, str):
            v = Decimal(c.strip())
        else:
            return None
    except InvalidOperation:
        return None
    if not v.is_finite() or not (0 <= v <= 1):
        return None
    return v


# sums of decimals are exact in this context (it only adds: results have as many digits as they need)
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


def weighted_vote(ballots: Sequence) -> VoteResult:
    """Weighted confidence vote ``score = sum D_i C_i`` over ``ballots``: :class:`Ballot` objects or
    ``(decision, confidence)`` pairs. Invalid decisions or confidences abstain (see the module docstring).

    Returns: a :class:`VoteResult` (decision, score, counts).
    """
    p = f = n = 0
    score = Decimal(0)
    for b in ballots:
        d, c = (b.decision, b.confidence) if isinstance(b, Ballot) else (b[0], b[1])
        d = _decision(d)
        c = _confidence(c)
        if d is None or c is None:
            continue
        n += 1
        if d == "PASS":
            p += 1
            score = _EXACT.add(score, c)
        else:
            f += 1
            score = _EXACT.subtract(score, c)
    outcome = "NONE" if n == 0 else ("PASS" if score > 0 else "FAIL" if score < 0 else "TIE")
    return VoteResult(outcome, p, f, len(ballots) - n, float(score))


def agreed_decision(decisions: Sequence) -> str | None:
    """The consensus decision: every ballot tagged and all equal; ``None`` otherwise (an untagged reply blocks).

    Arguments: ``decisions`` the round's ballots (or decision strings).

    Returns: "PASS", "FAIL" or None.
    """
    ds = [_decision(x) for x in decisions]
    if not ds or any(d is None for d in ds) or len(set(ds)) != 1:
        return None
    return ds[0]
