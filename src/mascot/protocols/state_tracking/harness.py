"""The 12-step state-tracking trials of "Predictive Maps of Multi-Agent Reasoning" (Sec. 4, Appendix C) on
any backend, batched by stage, logged, resumable.

Topologies, as the paper ran them (``leaves = mesh_agents = 4``):

* **chain** -- one fresh agent per step: the agent's state is the next state;
* **star** -- ``leaves`` agents answer independently; a judge sees their proposals and the input state
  (the Appendix C judge prompt) and writes the next state;
* **mesh** -- ``mesh_agents`` agents answer (round one); each then revises after seeing all round-one
  proposals (the Appendix C revision prompt); the next state is the plurality (Value, Parity, Level)
  tuple of the revisions (:func:`~mascot.protocols.state_tracking.aggregation.plurality_vote`; ties:
  ``mesh_tie="first"``, the tied tuple proposed by
  the lowest agent index, or ``"median"``, the tied tuple with the median Value, the lower middle one for
  an even count).

Every agent context is fresh (the ruleset and the current state only); prompts are in
:mod:`mascot.protocols.state_tracking.prompts`. Each trial runs twice, from the initial state and with
``epsilon`` added to its Value, with the **same** request seeds in both arms (``paired_seeds=True``; the
surrogate's shared noise is paired too), for ``F_ps``.

Batching: one step is two stages, each **one** ``backend.generate`` call over all trials, topologies and
both arms (stage 1: chain agents + star leaves + mesh round one; stage 2: star judges + mesh
revisions), plus one call per retry round for just the failed requests; the mesh vote is Python.

Parse failures: a reply that :func:`mascot.protocols.state_tracking.parsing.parse_state` rejects (or a
backend error) is retried up to ``retries`` times, each retry round one batched call with new seeds. After
that the agent **abstains**: a failed leaf or round-one agent is left out of the proposals shown to the
judge / the revisers and out of ``D_t``; a failed revision is left out of the vote. A node that decides
the next state (chain agent, star judge, all mesh revisions) and failed **carries the input state
forward**. All of it is counted per row (``n_failed_attempts``, ``n_abstained``, ``carried``).

Seeds: each request's seed is a SplitMix64 hash of (run seed, topology, trial, arm, step, role, agent,
attempt) with ``arm = 0`` in both arms when seeds are paired; the request gets its top 31 bits as its
sampling seed (``request.sampling.seed``, portable across backends; the rest of ``sampling`` is the
config's) and the full 64-bit value in ``meta["seed64"]``. ``meta`` carries ids for the logs (role,
topology, trial, arm, step, agent, attempt, stage); the task itself is only in the messages.

Run directory (``out``):

* ``run.json`` -- provenance: config, the backend's ``identity()`` and ``describe()``, versions, command
  lines, one record per session (resumes), timings; its ``identity`` (the config and the backend's
  :func:`~mascot.backends.run_spec` of ``identity()``) must match on rerun;
* ``steps/step_NNN.parquet`` -- one committed step (written atomically, the resume point), and
  ``steps/step_NNN.requests.jsonl`` its request log (moved into place before the step commits);
* at the end: ``trials.parquet`` (one row per (topology, trial, perturbed, step), step 0 = the initial
  state) and ``requests.jsonl`` (the step logs concatenated). The harness writes records only; the report
  (Table 2, statistics, Figs 2-6) is :func:`mascot.analysis.trials_report.write_report` of the directory,
  which ``mascot trials`` runs after the harness returns.

A SIGKILL loses at most the step in flight; rerunning the same command skips committed steps.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mascot import log
from mascot.backends import run_spec
from mascot.backends.base import Backend, BackendFailure, CutWatch, Request, attach_progress, endpoint, stop_if_down
from mascot.backends.cache import AnswerCache, keep_answers
from mascot.errors import BackendError, InputError
from mascot.io import atomic_path, atomic_write_text
from mascot.protocols.state_tracking import prompts
from mascot.protocols.state_tracking.aggregation import MESH_TIES, pairwise_disagreement, plurality_vote
from mascot.protocols.state_tracking.config import (  # noqa: F401  (re-exported)
    LOG_MODES,
    RECORDS_VERSION,
    ROLES,
    TOPOLOGIES,
    TOPOLOGY_IDS,
    TrialConfig,
    TrialsResult,
    derive_seeds,
)
from mascot.protocols.state_tracking.parsing import ParseResult, parse_state
from mascot.rundir import begin_run, utc_now
from mascot.seeds import hash64, uniforms  # noqa: F401  (re-exported: part of this module's API)
from mascot.theory.state_tracking import perturb, trajectory

_log = log.get_logger(__name__)

__all__ = [
    "BackendFailure",
    "LOG_MODES",
    "MESH_TIES",
    "TOPOLOGIES",
    "TrialConfig",
    "TrialsResult",
    "derive_seeds",
    "hash64",
    "plurality_vote",
    "run_trials",
    "uniforms",
]


# ----------------------------------------------------------------------------- file helpers
_now = utc_now


def _versions() -> dict:
    """The versions a run records, read from the installed packages' metadata (importing jax, scipy and pandas
    only to ask took 5-12 s of a surrogate run's start)."""
    import platform
    from importlib import metadata

    import mascot

    out = {"python": platform.python_version(), "platform": platform.platform(), "mascot": mascot.__version__}
    for dist in ("numpy", "jax", "scipy", "pandas", "pyarrow"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:  # pragma: no cover - optional
            pass
    return out


# ----------------------------------------------------------------------------- the run
_PA_SCHEMA = None


def _read_part(path, columns=None):
    """A step's table, every data page checked against its CRC32 (parts written before checksums: decoded
    only). Damage raises ``ValueError`` naming the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path, page_checksum_verification=True).read(columns=columns)
    except (OSError, pa.ArrowException) as e:
        raise InputError(f"{path} is damaged: {str(e).splitlines()[0][:120]}") from None


def _schema():
    global _PA_SCHEMA
    if _PA_SCHEMA is None:
        import pyarrow as pa

        _PA_SCHEMA = pa.schema(
            [
                ("topology", pa.string()),
                ("trial", pa.int32()),
                ("perturbed", pa.bool_()),
                ("step", pa.int16()),
                ("value_true", pa.float64()),
                ("parity_true", pa.string()),
                ("level_true", pa.int8()),
                ("value", pa.float64()),
                ("parity", pa.string()),
                ("level", pa.int8()),
                ("carried", pa.bool_()),
                ("agent_values", pa.list_(pa.float64())),
                ("revised_values", pa.list_(pa.float64())),
                ("d_t", pa.float64()),
                ("vote_count", pa.int8()),
                ("vote_tied", pa.int8()),
                ("n_requests", pa.int32()),
                ("n_failed_attempts", pa.int32()),
                ("n_abstained", pa.int16()),
                ("prompt_tokens", pa.int64()),
                ("completion_tokens", pa.int64()),
                ("n_backend_errors", pa.int32()),
            ]
        )
    return _PA_SCHEMA


class _Stage(NamedTuple):
    states: list  # final parsed state per slot (None: unparsable after retries)
    n_req: np.ndarray
    n_fail: np.ndarray  # attempts answered by the model but not parsable
    ptok: np.ndarray
    ctok: np.ndarray
    n_err: np.ndarray  # attempts the backend did not answer (connection, HTTP status, timeout, ...)


class _Runner:
    def __init__(self, cfg: TrialConfig, out: Path, progress: bool):
        self.cfg = cfg
        self.out = out
        self.progress = progress
        self.steps_dir = out / "steps"
        topo, trial, arm = [], [], []
        for t in cfg.topologies:
            for i in range(cfg.n_trials):
                for a in (0, 1):
                    topo.append(t)
                    trial.append(i)
                    arm.append(a)
        self.topo = topo
        self.tid = np.array([TOPOLOGY_IDS[t] for t in topo], dtype=np.int64)
        self.trial = np.array(trial, dtype=np.int64)
        self.arm = np.array(arm, dtype=np.int64)
        self.seed_arm = np.zeros_like(self.arm) if cfg.paired_seeds else self.arm
        self.U = len(topo)
        init = cfg.initial
        pert = perturb(init, cfg.epsilon)
        self.initial_arms = (init, pert)
        self.truth = (trajectory(init, cfg.steps), trajectory(pert, cfg.steps))
        self.cur: list[dict] = [self.initial_arms[a] for a in arm]
        self.backend: Backend | None = None
        self.n_requests = 0
        self.call_s = 0.0
        self.cuts = CutWatch(cfg.sampling.max_tokens)  # warns when most replies stop at max_tokens
        self._log = None
        self._log_count = 0

    # -------------------------------------------------------------- progress and logs
    def _say(self, msg: str) -> None:
        if self.progress:
            log.progress(_log, f"mascot trials: {msg}")

    def _log_record(self, rec: dict) -> None:
        if self._log is not None:
            self._log.write(json.dumps(rec, default=str) + "\n")
            self._log_count += 1

    # -------------------------------------------------------------- one stage with retries
    def _stage(self, step: int, name: str, su: np.ndarray, role: np.ndarray, agent: np.ndarray, msgs: list) -> _Stage:
        cfg = self.cfg
        n = len(su)
        states: list = [None] * n
        n_req = np.zeros(n, np.int64)
        n_fail = np.zeros(n, np.int64)
        ptok = np.zeros(n, np.int64)
        ctok = np.zeros(n, np.int64)
        n_err = np.zeros(n, np.int64)
        unanswered: dict[int, str] = {}  # slot -> its last backend error (cleared when the model answers)
        # A slot's attempt number (its seed) counts the model's answers only: a request that got no answer is
        # asked again with the same seed and does not use up a parse retry, so a transient server error
        # leaves the results as they would have been (it changed 10 of 72 values before). A slot stops after
        # retries + 1 answers, or retries + 1 backend errors in a row (then the step is not committed).
        answered = np.zeros(n, np.int64)
        errs_in_row = np.zeros(n, np.int64)
        pending = np.arange(n)
        log_mode = cfg.log_requests
        call = 0
        while len(pending):
            u = su[pending]
            att = answered[pending]
            seeds = derive_seeds(
                cfg.seed, self.tid[u], self.trial[u], self.seed_arm[u], step, role[pending], agent[pending], att
            ).tolist()
            reqs = []
            for j, i in enumerate(pending.tolist()):
                ui = int(su[i])
                r = int(role[i])
                meta = {
                    "role": ROLES[r],
                    "topology": self.topo[ui],
                    "trial": int(self.trial[ui]),
                    "perturbed": bool(self.arm[ui]),
                    "seed_arm": int(self.seed_arm[ui]),
                    "step": step,
                    "agent": int(agent[i]),
                    "attempt": int(att[j]),
                    "stage": name,
                    "seed64": seeds[j],
                }
                schema = None
                if cfg.structured_output:
                    schema = prompts.AGENT_SCHEMA if r == 0 else prompts.FINAL_SCHEMA
                sampling = dataclasses.replace(cfg.sampling, seed=seeds[j] >> 33)
                reqs.append(Request(messages=msgs[i], sampling=sampling, json_schema=schema, meta=meta))
            t0 = time.perf_counter()
            resps = self.backend.generate(reqs)
            stop_if_down(self.backend, f"step {step}")
            dt = time.perf_counter() - t0
            self.call_s += dt
            if not isinstance(resps, list) or len(resps) != len(reqs):
                raise BackendError(
                    f"backend {getattr(self.backend, 'name', '?')} returned "
                    f"{len(resps) if hasattr(resps, '__len__') else resps!r} responses for "
                    f"{len(reqs)} requests"
                )
            self.n_requests += len(reqs)
            still, parsed = [], []
            for j, (i, resp) in enumerate(zip(pending.tolist(), resps)):
                if resp.error:
                    pr = ParseResult(None, f"backend_error: {resp.error}")
                else:
                    pr = parse_state(resp.text)
                parsed.append(pr.state is not None)
                n_req[i] += 1
                ptok[i] += int(resp.prompt_tokens or 0)
                ctok[i] += int(resp.completion_tokens or 0)
                if resp.error:  # not an answer: asked again (same seed), never counted as a parse failure
                    n_err[i] += 1
                    errs_in_row[i] += 1
                    unanswered[i] = str(resp.error)
                    if errs_in_row[i] <= cfg.retries:
                        still.append(i)
                else:
                    errs_in_row[i] = 0
                    answered[i] += 1
                    unanswered.pop(i, None)
                    if pr.state is not None:
                        states[i] = pr.state
                    else:
                        n_fail[i] += 1
                        if answered[i] <= cfg.retries:
                            still.append(i)
                if log_mode == "all" or (log_mode == "failures" and pr.state is None):
                    meta = reqs[j].meta
                    self._log_record(
                        {
                            "topology": meta["topology"],
                            "trial": meta["trial"],
                            "perturbed": meta["perturbed"],
                            "step": step,
                            "stage": name,
                            "role": meta["role"],
                            "agent": meta["agent"],
                            "attempt": meta["attempt"],
                            "seed": reqs[j].sampling.seed,
                            "messages": reqs[j].messages,
                            "text": resp.text,
                            "finish_reason": resp.finish_reason,
                            "error": resp.error,
                            "prompt_tokens": resp.prompt_tokens,
                            "completion_tokens": resp.completion_tokens,
                            "latency_s": resp.latency_s,
                            "call_s": round(dt, 6),
                            "call_size": len(reqs),
                            "parse_ok": pr.state is not None,
                            "reason": pr.reason,
                            "method": pr.method,
                            "state": pr.state,
                        }
                    )
            # most replies cut at max_tokens: said once per run, as soon as it shows, with whether raising the
            # limit would help (92% of SmolLM2's replies were cut at --max-tokens 48)
            self.cuts.add(resps, parsed)
            # this call's outcomes, the last try's included (they counted only the requests asked again)
            errs = sum(1 for r in resps if r.error)
            unparsed = sum(1 for r, ok in zip(resps, parsed) if not r.error and not ok)
            self._say(
                # "re-ask round k", not "retry k": a round holds unparsed replies (at most --retries re-asks each)
                # and unanswered requests (asked again apart from those), so k may pass --retries
                f"step {step}/{cfg.steps} {name}{f' re-ask round {call}' if call else ''}: "
                f"{len(reqs)} requests in {dt:.2f} s ({len(reqs) / max(dt, 1e-9):,.2f} req/s), "
                f"{unparsed} unparsed, {errs} backend errors"
            )
            pending = np.array(still, dtype=np.int64)
            call += 1
        if unanswered:
            first = unanswered[min(unanswered)]
            raise BackendFailure(
                f"{endpoint(self.backend)}: {len(unanswered)} of {n} requests of step {step} ({name}) got no answer "
                f"after {cfg.retries + 1} tries in a row; first error: {first[:600]}. Step {step} was not committed; "
                f"rerun the same command to resume from it"
            )
        return _Stage(states, n_req, n_fail, ptok, ctok, n_err)

    # -------------------------------------------------------------- one step
    def step(self, step: int) -> dict:
        cfg = self.cfg
        U = self.U
        n1 = np.array([1 if t == "chain" else (cfg.leaves if t == "star" else cfg.mesh_agents) for t in self.topo])
        su1 = np.repeat(np.arange(U), n1)
        agent1 = np.concatenate([np.arange(k) for k in n1])
        unit_msgs = [prompts.agent_messages(s) for s in self.cur]
        msgs1 = [unit_msgs[u] for u in su1.tolist()]
        s1 = self._stage(step, "stage1", su1, np.zeros(len(su1), np.int64), agent1, msgs1)
        first: list[list] = [[] for _ in range(U)]
        for i, u in enumerate(su1.tolist()):
            first[u].append(s1.states[i])
        # stage 2: star judges and mesh revisions
        su2, role2, agent2, msgs2 = [], [], [], []
        for u in range(U):
            t = self.topo[u]
            if t == "chain":
                continue
            shown = [s for s in first[u] if s is not None]
            if t == "star":
                su2.append(u)
                role2.append(1)
                agent2.append(0)
                msgs2.append(prompts.judge_messages(shown, self.cur[u]))
            else:
                m = prompts.revision_messages(shown, self.cur[u], cfg.mesh_agents)
                for i in range(cfg.mesh_agents):
                    su2.append(u)
                    role2.append(2)
                    agent2.append(i)
                    msgs2.append(m)
        su2a = np.array(su2, dtype=np.int64)
        if len(su2a):
            s2 = self._stage(step, "stage2", su2a, np.array(role2, np.int64), np.array(agent2, np.int64), msgs2)
        else:
            s2 = _Stage([], *(np.zeros(0, np.int64) for _ in range(5)))
        second: list[list] = [[] for _ in range(U)]
        for i, u in enumerate(su2a.tolist()):
            second[u].append(s2.states[i])

        def per_unit(a1, a2):
            out = np.bincount(su1, weights=a1, minlength=U)
            if len(su2a):
                out = out + np.bincount(su2a, weights=a2, minlength=U)
            return out.astype(np.int64)

        n_req = per_unit(s1.n_req, s2.n_req)
        n_fail = per_unit(s1.n_fail, s2.n_fail)
        n_err = per_unit(s1.n_err, s2.n_err)
        ptok = per_unit(s1.ptok, s2.ptok)
        ctok = per_unit(s1.ctok, s2.ctok)
        cols: dict[str, list] = {k: [] for k in _schema().names}
        new_cur = []
        for u in range(U):
            t = self.topo[u]
            arm = int(self.arm[u])
            truth = self.truth[arm][step]
            firsts = first[u]
            seconds = second[u]
            vote_count = vote_tied = 0
            revised: list[float] = []
            if t == "chain":
                nxt = firsts[0]
            elif t == "star":
                nxt = seconds[0]
            else:
                nxt, info = plurality_vote([s for s in seconds if s is not None], cfg.mesh_tie)
                vote_count, vote_tied = info["count"], info["tied"]
                revised = [s["Value"] if s is not None else math.nan for s in seconds]
            carried = nxt is None
            if carried:
                nxt = self.cur[u]
            nxt = {"Value": float(nxt["Value"]), "Parity": nxt["Parity"], "Level": int(nxt["Level"])}
            new_cur.append(nxt)
            agent_vals = [s["Value"] if s is not None else math.nan for s in firsts]
            if t == "chain":
                d = abs(truth["Value"] - nxt["Value"])
            elif t == "star":
                d = pairwise_disagreement([v for v in agent_vals if not math.isnan(v)])
            else:
                d = pairwise_disagreement([v for v in revised if not math.isnan(v)])
            abstained = sum(s is None for s in firsts) + sum(s is None for s in seconds)
            cols["topology"].append(t)
            cols["trial"].append(int(self.trial[u]))
            cols["perturbed"].append(bool(arm))
            cols["step"].append(step)
            cols["value_true"].append(truth["Value"])
            cols["parity_true"].append(truth["Parity"])
            cols["level_true"].append(truth["Level"])
            cols["value"].append(nxt["Value"])
            cols["parity"].append(nxt["Parity"])
            cols["level"].append(nxt["Level"])
            cols["carried"].append(carried)
            cols["agent_values"].append(agent_vals)
            cols["revised_values"].append(revised)
            cols["d_t"].append(d)
            cols["vote_count"].append(vote_count)
            cols["vote_tied"].append(vote_tied)
            cols["n_requests"].append(int(n_req[u]))
            cols["n_failed_attempts"].append(int(n_fail[u]))
            cols["n_abstained"].append(abstained)
            cols["prompt_tokens"].append(int(ptok[u]))
            cols["completion_tokens"].append(int(ctok[u]))
            cols["n_backend_errors"].append(int(n_err[u]))
        self.cur = new_cur
        return cols

    def initial_rows(self) -> dict:
        cols: dict[str, list] = {k: [] for k in _schema().names}
        for u in range(self.U):
            arm = int(self.arm[u])
            s = self.initial_arms[arm]
            truth = self.truth[arm][0]
            vals = dict(
                topology=self.topo[u],
                trial=int(self.trial[u]),
                perturbed=bool(arm),
                step=0,
                value_true=truth["Value"],
                parity_true=truth["Parity"],
                level_true=truth["Level"],
                value=s["Value"],
                parity=s["Parity"],
                level=s["Level"],
                carried=False,
                agent_values=[],
                revised_values=[],
                d_t=math.nan,
                vote_count=0,
                vote_tied=0,
                n_requests=0,
                n_failed_attempts=0,
                n_abstained=0,
                prompt_tokens=0,
                completion_tokens=0,
                n_backend_errors=0,
            )
            for k, v in vals.items():
                cols[k].append(v)
        return cols

    # -------------------------------------------------------------- persistence
    def part_path(self, step: int) -> Path:
        return self.steps_dir / f"step_{step:03d}.parquet"

    def log_path(self, step: int) -> Path:
        return self.steps_dir / f"step_{step:03d}.requests.jsonl"

    def commit(self, step: int, cols: dict) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pydict(cols, schema=_schema())
        if self._log is not None:
            self._log.flush()
            os.fsync(self._log.fileno())
            self._log.close()
            self._log = None
            os.replace(self.log_path(step).with_suffix(".jsonl.tmp"), self.log_path(step))
        with atomic_path(self.part_path(step)) as tmp:
            pq.write_table(table, tmp, write_page_checksum=True)  # damage on disk is found on resume

    def open_log(self, step: int) -> None:
        if self.cfg.log_requests != "none":
            tmp = self.log_path(step).with_suffix(".jsonl.tmp")
            tmp.unlink(missing_ok=True)  # a leftover of a killed run, or a planted link: removed, never followed
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
            self._log = open(fd, "w", encoding="utf-8")

    def drop_log(self, step: int) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        self.log_path(step).with_suffix(".jsonl.tmp").unlink(missing_ok=True)

    def done_steps(self) -> int:
        """Committed steps (the contiguous prefix 1..k); later stray parts are removed."""
        k = 0
        while self.part_path(k + 1).exists():
            try:  # every page against its checksum: a damaged step is recomputed, with the steps after it
                steps = set(_read_part(self.part_path(k + 1)).column("step").to_pylist())  # (all columns verified)
                if steps != {k + 1}:  # e.g. another step's file copied over it (its checksums are valid)
                    raise InputError(
                        f"{self.part_path(k + 1)} is damaged: it holds step(s) {sorted(steps)[:3]}, not step {k + 1}"
                    )
            except ValueError as e:
                self._say(
                    f"removing {self.part_path(k + 1).name}: damaged ({str(e).split(' is damaged: ', 1)[-1]}), so "
                    f"steps {k + 1}.. will be recomputed"
                )
                self.part_path(k + 1).unlink()
                break
            k += 1
        for p in sorted(self.steps_dir.glob("step_*.parquet")):
            try:
                s = int(p.stem.split("_")[1])
            except (IndexError, ValueError):
                continue
            if s > k:
                self._say(f"removing {p.name}: step {k + 1} is missing, so it will be recomputed")
                p.unlink()
        return k

    def restore(self, k: int) -> None:
        t = _read_part(self.part_path(k), columns=["topology", "trial", "perturbed", "value", "parity", "level"])
        d = t.to_pydict()
        if (
            len(d["value"]) != self.U
            or d["topology"] != self.topo
            or d["trial"] != self.trial.tolist()
            or d["perturbed"] != [bool(a) for a in self.arm]
        ):
            raise InputError(f"{self.part_path(k)} does not match this run's trials (corrupt run directory?)")
        self.cur = [
            {"Value": float(v), "Parity": p, "Level": int(lv)} for v, p, lv in zip(d["value"], d["parity"], d["level"])
        ]

    def finalize(self) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        parts = [pa.Table.from_pydict(self.initial_rows(), schema=_schema())]
        parts += [_read_part(self.part_path(s)).cast(_schema()) for s in range(1, self.cfg.steps + 1)]
        table = pa.concat_tables(parts)
        order = pc.sort_indices(
            table,
            sort_keys=[
                ("topology", "ascending"),
                ("trial", "ascending"),
                ("perturbed", "ascending"),
                ("step", "ascending"),
            ],
        )
        table = table.take(order)
        with atomic_path(self.out / "trials.parquet") as tmp:
            pq.write_table(table, tmp, write_page_checksum=True)  # readers (calibrate trials) verify them
        # request log: the per-step logs concatenated in step order, then removed. If requests.jsonl exists
        # (a finished run whose later steps were recomputed), the records of the recomputed steps are replaced.
        req = self.out / "requests.jsonl"
        parts = {s: self.log_path(s) for s in range(1, self.cfg.steps + 1) if self.log_path(s).exists()}
        if parts:
            with atomic_path(req) as tmp, open(tmp, "wb") as f:
                old = open(req, "rb") if req.exists() else None
                try:
                    line = old.readline() if old else b""
                    for s in range(1, self.cfg.steps + 1):
                        while line and json.loads(line)["step"] == s:
                            if s not in parts:
                                f.write(line)
                            line = old.readline()
                        if s in parts:
                            with open(parts[s], "rb") as src:
                                while chunk := src.read(1 << 20):
                                    f.write(chunk)
                    while line:  # records of steps beyond this run's (not expected)
                        f.write(line)
                        line = old.readline()
                finally:
                    if old:
                        old.close()
            for p in parts.values():
                p.unlink()


def _spec_of(backend) -> dict:
    """Name, model and ``describe()`` of a backend (provenance)."""
    try:
        desc = backend.describe()
    except Exception as e:  # pragma: no cover
        desc = {"describe_error": str(e)}
    return {
        "name": getattr(backend, "name", type(backend).__name__),
        "model": getattr(backend, "model", None),
        "describe": desc,
    }


def _identity_spec(backend) -> dict:
    """The backend part of the run's identity: :func:`~mascot.backends.run_spec` of ``identity()`` (the
    options that change results); a backend without ``identity()`` is identified by its name and model."""
    ident = getattr(backend, "identity", None)
    if ident is None:
        ident = {"backend": getattr(backend, "name", type(backend).__name__), "model": getattr(backend, "model", None)}
    else:
        ident = ident()
    return run_spec(ident)


def run_trials(
    config: TrialConfig,
    out,
    backend: Backend | Callable[[], Backend],
    *,
    backend_spec: dict | None = None,
    progress: bool = True,
    command: Sequence[str] | None = None,
) -> TrialsResult:
    """Run (or resume) the trials of ``config`` into ``out``: ``run.json``, ``trials.parquet`` and
    ``requests.jsonl`` (records only; the report is :func:`mascot.analysis.trials_report.write_report`).

    ``backend`` is a backend, or a zero-argument factory called only when steps remain (a finished run
    never loads a model). ``backend_spec`` (``{"name", "model", "options"}``, the
    :func:`~mascot.backends.run_spec` of the backend's ``identity()``) is part of the run's identity; it
    defaults to that of ``backend`` (pass it explicitly with a factory, e.g.
    ``run_spec(identity_of(name, **options))``).
    A rerun with a different identity into the same ``out`` raises ``ValueError`` naming the differences.

    Arguments: ``config`` a :class:`TrialConfig`; ``out`` the run directory; ``backend``, ``backend_spec`` as
    above; ``progress`` print progress; ``command`` the command line recorded in the run's provenance. Returns a
    :class:`TrialsResult`.
    """
    if not isinstance(config, TrialConfig):
        raise InputError("config must be a TrialConfig")
    out = Path(out)
    start = begin_run(
        out,
        kind="mascot-trials",
        label="a run",
        config_identity=config.identity(),
        backend=backend,
        backend_spec=backend_spec,
        spec_of=_identity_spec,
        results="steps",
        n_diffs=8,
        check_kind=False,
        fresh_extra=lambda ident: {
            "identity_hash": hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
        },
    )
    factory, meta = start.factory, start.meta
    run_json = out / "run.json"
    meta["config"] = config.to_dict()
    runner = _Runner(config, out, progress)
    runner.steps_dir.mkdir(exist_ok=True)
    done = runner.done_steps()
    session = {
        "started": _now(),
        "command": list(command) if command is not None else None,
        "steps_done_before": done,
        "versions": _versions(),
        "log_requests": config.log_requests,
        "host": os.uname().nodename if hasattr(os, "uname") else None,
    }
    for key in ("SLURM_JOB_ID", "SLURM_RESTART_COUNT"):
        if key in os.environ:
            session[key.lower()] = os.environ[key]
    meta["sessions"].append(session)
    meta["complete"] = False
    meta["steps_done"] = done
    atomic_write_text(run_json, json.dumps(meta, indent=2, default=str) + "\n")

    t_start = time.perf_counter()
    steps_run = 0
    if done < config.steps:
        if done:
            runner.restore(done)
            runner._say(f"resuming {out}: steps 1..{done} of {config.steps} already committed")
        b = factory() if factory is not None else backend
        b = keep_answers(b, out)  # a model's answers are kept until their step commits (resume at the request)
        runner.backend = b
        attach_progress(b, runner._say)  # requests done/total inside a stage (hf, openai)
        session["backend"] = _spec_of(b)
        atomic_write_text(run_json, json.dumps(meta, indent=2, default=str) + "\n")
        for step in range(done + 1, config.steps + 1):
            t0 = time.perf_counter()
            n0 = runner.n_requests
            runner.open_log(step)
            try:
                cols = runner.step(step)
            except BaseException:  # the step is not committed: its partial request log goes too
                runner.drop_log(step)
                raise
            runner.commit(step, cols)
            if isinstance(b, AnswerCache):  # the step's answers are committed (and in its records)
                b.clear()
            steps_run += 1
            dt = time.perf_counter() - t0
            left = (config.steps - step) * (time.perf_counter() - t_start) / steps_run
            runner._say(
                f"step {step}/{config.steps} committed: {runner.n_requests - n0} requests in {dt:.1f} s "
                f"({(runner.n_requests - n0) / max(dt, 1e-9):,.2f} req/s); about {left:.0f} s left"
            )
            meta["steps_done"] = step
            session["steps_done"] = step
            session["requests"] = runner.n_requests
            atomic_write_text(run_json, json.dumps(meta, indent=2, default=str) + "\n")
    runner.finalize()
    runner.cuts.finish()  # a run too short for the warning on the way says it now
    if isinstance(runner.backend, AnswerCache):
        session["replayed"] = runner.backend.replayed  # answered before an interruption, not asked again
    wall = time.perf_counter() - t_start
    session.update(
        finished=_now(),
        wall_s=round(wall, 3),
        steps_run=steps_run,
        requests=runner.n_requests,
        backend_call_s=round(runner.call_s, 3),
        # three significant digits: round(x, 1) wrote 0.0 for the 0.02 req/s of a CPU model (issue 33)
        requests_per_s=float(f"{runner.n_requests / runner.call_s:.3g}") if runner.call_s > 0 else None,
    )
    meta["complete"] = True
    meta["steps_done"] = config.steps
    atomic_write_text(run_json, json.dumps(meta, indent=2, default=str) + "\n")
    return TrialsResult(out, steps_run, done, runner.n_requests, wall)
