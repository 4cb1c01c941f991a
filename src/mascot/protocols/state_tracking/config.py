"""What a state-tracking run computes (:class:`TrialConfig`: topologies, trials, steps, the perturbation, the
initial state, sampling, retries, seeds) and how its requests are seeded (:func:`derive_seeds`), apart from
the runner that executes it (:mod:`mascot.protocols.state_tracking.harness`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mascot.backends.base import Sampling
from mascot.errors import InputError
from mascot.limits import check_int
from mascot.protocols.state_tracking.aggregation import MESH_TIES
from mascot.seeds import hash64, uniforms  # noqa: F401  (re-exported: part of this module's API)
from mascot.theory.state_tracking import DEFAULT_STATE, EPSILON, validate_state

TOPOLOGIES = ("chain", "star", "mesh")


RECORDS_VERSION = 2  # 2: n_backend_errors apart from n_failed_attempts; unanswered steps are never committed


TOPOLOGY_IDS = {"chain": 0, "star": 1, "mesh": 2}


ROLES = ("agent", "judge", "revision")


LOG_MODES = ("all", "failures", "none")


def derive_seeds(run_seed, topology_ids, trials, arms, step, roles, agents, attempt) -> np.ndarray:
    """64-bit request seeds from (run seed, topology, trial, arm, step, role, agent, attempt) (broadcast).

    Arguments: ``run_seed`` the run's seed; ``topology_ids``, ``trials``, ``arms``, ``step``, ``roles``,
    ``agents``, ``attempt`` integer ids (arrays broadcast). Returns uint64 seeds.
    """
    return hash64(run_seed, 0x7472_6961_6C73, topology_ids, trials, arms, step, roles, agents, attempt)


# ----------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class TrialConfig:
    """What a trial run computes (everything except ``log_requests`` and ``d_floor`` is its identity).

    Fields: ``topologies`` among chain, star, mesh; ``n_trials`` trials per topology; ``steps`` steps of the
    task; ``epsilon`` the perturbation added to the perturbed arm's Value; ``seed`` the run's seed; ``retries``
    re-asks of a reply that did not parse; ``leaves`` the star's leaves; ``mesh_agents`` the mesh's agents;
    ``mesh_tie`` how the mesh's vote breaks ties (first: the earliest proposal; median: see :func:`plurality_vote`); ``paired_seeds`` the two arms share request
    seeds; ``structured_output`` ask the backend for JSON-schema output; ``initial_state`` (Value, Parity,
    Level); ``sampling`` the decoding parameters; ``log_requests`` which requests ``requests.jsonl`` keeps (all,
    failures, none); ``d_floor`` the floor under disagreements in R_cdr's logs.
    """

    topologies: tuple[str, ...] = TOPOLOGIES
    n_trials: int = 100
    steps: int = 12
    epsilon: float = EPSILON
    seed: int = 0
    retries: int = 2
    leaves: int = 4
    mesh_agents: int = 4
    mesh_tie: str = "first"
    paired_seeds: bool = True
    structured_output: bool = False
    initial_state: tuple = (DEFAULT_STATE["Value"], DEFAULT_STATE["Parity"], DEFAULT_STATE["Level"])
    sampling: Sampling = field(default_factory=Sampling)
    log_requests: str = "all"
    d_floor: float = 1e-6

    def __post_init__(self):
        topo = self.topologies
        if isinstance(topo, str):
            topo = (topo,)
        topo = tuple(topo)
        if not topo:
            raise InputError(f"topologies must name at least one of {', '.join(TOPOLOGIES)}")
        for t in topo:
            if t not in TOPOLOGIES:
                raise InputError(f"unknown topology {t!r}; choose from {', '.join(TOPOLOGIES)}")
        # canonical order, no duplicates
        object.__setattr__(self, "topologies", tuple(t for t in TOPOLOGIES if t in topo))
        check_int("n_trials", self.n_trials, 1)
        check_int("steps", self.steps, 1)
        check_int("seed", self.seed, 0)
        check_int("retries", self.retries, 0)
        check_int("leaves", self.leaves, 1)
        check_int("mesh_agents", self.mesh_agents, 1)
        eps = self.epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps):
            raise InputError(f"epsilon must be a finite number; got {self.epsilon!r}")
        if self.mesh_tie not in MESH_TIES:
            raise InputError(f"mesh_tie must be one of {', '.join(MESH_TIES)}; got {self.mesh_tie!r}")
        if self.log_requests not in LOG_MODES:
            raise InputError(f"log_requests must be one of {', '.join(LOG_MODES)}; got {self.log_requests!r}")
        if not (isinstance(self.d_floor, (int, float)) and self.d_floor > 0 and math.isfinite(self.d_floor)):
            raise InputError(f"d_floor must be a finite number > 0; got {self.d_floor!r}")
        if not isinstance(self.sampling, Sampling):
            raise InputError("sampling must be a mascot.backends.base.Sampling")
        st = self.initial_state
        if isinstance(st, dict):
            st = (st.get("Value"), st.get("Parity"), st.get("Level"))
        try:
            v, p, lv = st
        except (TypeError, ValueError):
            raise InputError(f"initial_state must be (Value, Parity, Level); got {self.initial_state!r}") from None
        validate_state({"Value": v, "Parity": p, "Level": lv})
        object.__setattr__(self, "initial_state", (float(v), p, int(lv)))

    @property
    def initial(self) -> dict:
        v, p, lv = self.initial_state
        return {"Value": v, "Parity": p, "Level": lv}

    def identity(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("log_requests")
        d.pop("d_floor")
        d["topologies"] = list(self.topologies)
        d["initial_state"] = list(self.initial_state)
        d["records_version"] = RECORDS_VERSION  # the step files' schema: an older directory is refused, not mixed
        return d

    def to_dict(self) -> dict:
        d = self.identity()
        d["log_requests"] = self.log_requests
        d["d_floor"] = self.d_floor
        return d

    def plan(self) -> dict:
        """The run's size before a request is sent (``mascot trials --dry-run``): ``units`` (topology x trial x
        arm), ``requests`` (first tries: per unit and step, chain 1, star ``leaves`` + 1 judge, mesh
        2 ``mesh_agents``), ``requests_max`` (every request re-asked ``retries`` times: an unparsed reply is),
        ``prompt_chars`` (the first tries' prompts as built from the initial state, the judge's and the
        revisions' showing correct proposals) and ``completion_tokens_max`` (``requests_max`` x ``max_tokens``)."""
        from mascot.protocols.state_tracking import prompts

        s = self.initial
        chars = lambda msgs: sum(len(m["content"]) for m in msgs)  # noqa: E731
        agent = chars(prompts.agent_messages(s))
        per_unit = {"chain": (1, agent)}
        per_unit["star"] = (self.leaves + 1, self.leaves * agent + chars(prompts.judge_messages([s] * self.leaves, s)))
        rev = chars(prompts.revision_messages([s] * self.mesh_agents, s, self.mesh_agents))
        per_unit["mesh"] = (2 * self.mesh_agents, self.mesh_agents * (agent + rev))
        units = 2 * self.n_trials  # two arms per trial
        requests = sum(per_unit[t][0] for t in self.topologies) * units * self.steps
        return dict(
            units=units * len(self.topologies),
            requests=requests,
            requests_max=requests * (self.retries + 1),
            prompt_chars=sum(per_unit[t][1] for t in self.topologies) * units * self.steps,
            completion_tokens_max=requests * (self.retries + 1) * self.sampling.max_tokens,
        )


class TrialsResult(NamedTuple):
    out: Path
    steps_run: int
    steps_skipped: int
    requests: int
    wall_s: float
