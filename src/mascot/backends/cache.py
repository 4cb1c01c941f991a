"""Resume at the request: every answered request of a run is kept, and a rerun sends only the unanswered ones.

The protocols commit whole steps (trials) or rounds (deliberate, debate): a step whose second stage fails is not
committed, and before this module its fully answered first stage was asked again on resume (40 s a request on a
CPU model). :class:`AnswerCache` wraps a backend: each answered :class:`~mascot.backends.base.Response` is
appended to ``answers.jsonl`` in the run directory (flushed and synced once per call) under the key of its
request -- a hash of the messages, the sampling parameters with the request's seed, the JSON schema and the
harness's ``meta`` (topology, trial, step, stage, agent, attempt; run, round, agent), so two requests share a key
only when they are the same request of the same run. On a rerun a request found there is answered from the file
and not sent; since every later prompt is built from those answers, the rerun asks exactly what the interrupted
run had not, and the results equal an uninterrupted run's. A request that got no answer is never kept.

The file is the run's (its identity is checked with the run's); trials empty it when a step commits (the step's
records hold its answers then), the other protocols when the run completes. A last line cut short by a kill is
dropped; a damaged line elsewhere stops the run with the file's name (delete it to ask those requests again).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from mascot.backends.base import Request, Response
from mascot.errors import InputError
from mascot.log import get_logger

__all__ = ["AnswerCache", "keep_answers", "request_key"]

_log = get_logger(__name__)
FILE = "answers.jsonl"


def request_key(req: Request) -> str:
    """The hash that names ``req`` in the cache: its messages, sampling (seed included), schema and meta."""
    blob = json.dumps(
        [req.messages, dataclasses.asdict(req.sampling), req.json_schema, req.meta],
        sort_keys=True,
        default=str,
        ensure_ascii=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class AnswerCache:
    """``backend`` with its answered requests kept in ``path`` (see the module docstring); a backend with an
    ``on_answer`` hook (openai, hf) has each answer kept as it comes, so a kill in the middle of a call loses none
    that were answered. Every other attribute
    (``name``, ``model``, ``describe``, ``identity``, ``down``, ``on_progress``) is the wrapped backend's."""

    def __init__(self, backend, path):
        object.__setattr__(self, "inner", backend)
        object.__setattr__(self, "path", Path(path))
        object.__setattr__(self, "replayed", 0)
        object.__setattr__(self, "_answers", self._load())

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __setattr__(self, name, value):  # on_progress and the like belong to the wrapped backend
        if name in ("replayed",):
            object.__setattr__(self, name, value)
        else:
            setattr(self.inner, name, value)

    def __len__(self) -> int:
        return len(self._answers)

    def _load(self) -> dict:
        answers: dict[str, dict] = {}
        if not self.path.is_file():
            return answers
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        good = 0  # bytes up to the end of the last whole record
        for i, line in enumerate(lines):
            if not line.strip():
                good += len(line) + 1
                continue
            try:
                rec = json.loads(line)
                key, resp = rec["key"], Response(**rec["response"])
            except (ValueError, KeyError, TypeError):
                if i == len(lines) - 1:  # the last line, cut short by a kill: dropped
                    _log.warning(f"{self.path}: the last answer was cut short (a killed run); it will be asked again")
                    with open(self.path, "r+b") as f:
                        f.truncate(good)
                    break
                raise InputError(
                    f"{self.path}: line {i + 1} is damaged; delete the file to ask its requests again "
                    "(nothing committed depends on it)"
                ) from None
            answers[key] = resp
            good += len(line) + 1
        return answers

    def generate(self, requests: list[Request]) -> list[Response]:
        requests = list(requests)
        keys = [request_key(r) for r in requests]
        out: list[Response | None] = [self._answers.get(k) for k in keys]
        todo = [i for i, r in enumerate(out) if r is None]
        self.replayed += len(requests) - len(todo)
        if todo:
            streams = hasattr(self.inner, "on_answer")  # the backend says each answer as it comes (openai, hf)
            if streams:
                self.inner.on_answer = lambda j, resp: self._keep([keys[todo[j]]], [resp])
            try:
                got = self.inner.generate([requests[i] for i in todo])
            finally:
                if streams:
                    self.inner.on_answer = None
            if not isinstance(got, list) or len(got) != len(todo):
                return got  # the harness reports a backend that returns the wrong number of responses
            for i, resp in zip(todo, got):
                out[i] = resp
            self._keep([keys[i] for i in todo], got)  # (what a streaming backend said already is not written twice)
        return out  # type: ignore[return-value]

    def _keep(self, keys: list[str], responses: list[Response]) -> None:
        """Append the answered ones to the file, synced (a kill after this loses none of them)."""
        lines = []
        for k, resp in zip(keys, responses):
            if resp.error is None and k not in self._answers:
                self._answers[k] = resp
                lines.append(json.dumps({"key": k, "response": resp.to_dict()}, ensure_ascii=True) + "\n")
        if lines:
            with open(self.path, "a", encoding="ascii") as f:
                f.write("".join(lines))
                f.flush()
                os.fsync(f.fileno())

    def clear(self) -> None:
        """Forget every answer (the caller has committed them elsewhere)."""
        self._answers.clear()
        self.path.unlink(missing_ok=True)


def keep_answers(backend, out):
    """``backend`` wrapped in an :class:`AnswerCache` at ``out/answers.jsonl``, unless it is a protocol's surrogate
    (instant and deterministic: nothing to save, and millions of answers to write); says how many it holds."""
    if getattr(backend, "name", None) == "surrogate":
        return backend
    cache = AnswerCache(backend, Path(out) / FILE)
    if len(cache):
        # (not "they are not asked again": some answer rounds committed before the interruption, which are not
        # asked at all; run.json's `replayed` counts those reused: an outside tester)
        _log.warning(
            f"{len(cache)} answers of an interrupted run are kept ({cache.path.name}): a request one of them answers "
            "is not asked again"
        )
    return cache
