"""``mascot deliberate`` and ``mascot debate``: sub-commands added to the main CLI by :func:`add_parsers`.

    mascot deliberate [CONFIG] [--strategy adaptive|complete|ring|all] [--backend surrogate|vllm|openai|hf]
                      [--model M] [--base-url URL] [--runs N] [--out DIR] [--json] [--monitor] ...
    mascot debate [CONFIG] [--backend ...] [--model M] [--runs N] [--max-rounds N] [--out DIR] [--json] ...

Without CONFIG: the consensus paper's Sec. V-C scenario (deliberate) or the voting/debate article's code
review (debate). CONFIG is TOML (``configs/deliberation/paper.toml``, ``configs/debate/code_review.toml``).
Progress goes to stderr; run directories are resumable (rerun the same command). ``--json`` prints

* deliberate: ``{"adaptive": [{"rounds", "tokens", "d0", "d_final", "status", "d0_from_priors", "unanswered_rounds"}, ...one per run], "complete":
  [...], "ring": [...]}`` (strategies that ran, in that order);
* debate: ``{"rounds", "consensus", "decision", "tokens"}`` for one debate, a list of them for ``--runs N > 1``.

Handlers return an exit code; bad input raises ``ValueError`` (the main CLI prints it and exits 2).
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

from mascot.cli.backend_args import check_run_size
from mascot.errors import InputError

__all__ = ["add_parsers", "cmd_deliberate", "cmd_debate"]


def _backend_args(p) -> None:
    """The backend and sampling flags (one set for every LLM command: :mod:`mascot.cli.backend_args`);
    sampling values left out come from the config."""
    from mascot.cli.backend_args import add_backend_args

    add_backend_args(p)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")[:60] or "run"


def _default_out(kind: str, cfg_name: str, args) -> Path:
    model = "" if args.backend == "surrogate" else "-" + _slug(Path(args.model).name if args.model else "")
    return Path("runs") / kind / f"{_slug(cfg_name)}-{args.backend}{model}"


def _num(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _check_counts(overrides: dict) -> None:
    for k in ("runs", "max_rounds"):
        if overrides[k] is not None and overrides[k] < 1:
            raise InputError(f"--{k.replace('_', '-')} must be >= 1; got {overrides[k]}")


def _backend(args, sur: dict, surrogate_keys: tuple, surrogate_cls, **extra) -> tuple[object, dict]:
    """``(backend, spec)``: the surrogate (config options, overridden by ``--surrogate-KEY``) or an LLM
    (:func:`mascot.cli.backend_args.build_backend`: the same flags, checks and identity as ``mascot trials``)."""
    from mascot.cli.backend_args import build_backend

    def surrogate():
        given = {k: getattr(args, f"surrogate_{k}") for k in surrogate_keys}
        return surrogate_cls(**extra, **{**sur, **{k: v for k, v in given.items() if v is not None}})

    return build_backend(args, surrogate, {k: f"--surrogate-{k}" for k in surrogate_keys})  # surrogate: spec None,
    # the harness takes it from the instance


def _settings_from_params(args, overrides: dict) -> None:
    """A calibrated parameter file (``--surrogate-params``) records the deployment it was fitted under
    (``[settings]``: token_scale, eta, eps, b0, max_rounds). Those fill in what neither a flag nor ``--config``
    sets, so that the surrogate runs under the token accounting it was fitted to (e.g. Gemini's x0.75)."""
    path = getattr(args, "surrogate_params", None)
    if not path or args.backend != "surrogate":
        return  # build_backend refuses --surrogate-params with another backend
    from mascot.io import read_toml
    from mascot.protocols.deliberation.surrogate import read_params

    try:
        settings = read_params(path)["settings"]
    except (OSError, ValueError) as e:
        raise InputError(f"--surrogate-params: {e}") from None
    in_config = set(read_toml(args.config)) if args.config else set()
    used = {}
    for k in ("token_scale", "eta", "eps", "b0", "max_rounds"):
        if k in settings and overrides.get(k) is None and k not in in_config:
            overrides[k] = used[k] = settings[k]
    if used and not args.quiet:
        print(
            "using the settings the parameter file was fitted under: "
            + ", ".join(f"{k} = {v:g}" for k, v in used.items()),
            file=sys.stderr,
        )


def cmd_deliberate(args) -> int:
    from mascot.protocols.deliberation import (
        STRATEGIES,
        SurrogateDeliberationBackend,
        load_deliberation_config,
        run_deliberation,
    )

    overrides = {
        "runs": args.runs,
        "max_rounds": args.max_rounds,
        "b0": args.b0,
        "eta": args.eta,
        "eps": args.eps,
        "budget_rule": args.budget_rule,
        "retries": args.retries,
        "seed": args.seed,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
        "monitor_enabled": True if args.monitor else None,
    }
    if args.strategy and args.strategy != "all":
        overrides["strategies"] = [args.strategy]
    _check_counts(overrides)
    _settings_from_params(args, overrides)
    cfg, sur = load_deliberation_config(args.config, overrides)
    # the run's size before a request (issue 33): an upper bound, lanes stop early
    first = cfg.runs * cfg.n * (1 if cfg.shared_initial else len(cfg.strategies))
    later = cfg.runs * len(cfg.strategies) * cfg.n * cfg.max_rounds
    args.retries = cfg.retries  # the config's value when --retries is not given: checked like the flag
    lanes = cfg.runs * len(cfg.strategies)
    check_run_size(args, lanes, MAX_LANES, "lanes (runs x strategies)", first + later, "--runs")
    if cfg.structured_output and args.backend == "openai":
        args.structured_output = True  # the config asks for it: the server probe checks it is honoured
    backend, spec = _backend(args, sur, ("noise", "compliance", "malformed"), SurrogateDeliberationBackend)
    if args.dry_run:
        most = (first + later) * (cfg.retries + 1)
        print(
            f"plan: {cfg.runs:,} run(s) x {len(cfg.strategies)} strategies ({', '.join(cfg.strategies)}) x {cfg.n} "
            f"agents: at most {first + later:,} requests at their first tries ({first:,} in round 0, then at most "
            f"{cfg.max_rounds} rounds per lane; a lane stops at consensus or when its budget b0 = {cfg.b0:,.0f} "
            f"is spent), up to {most:,} if every reply is re-asked --retries {cfg.retries} times; replies at most "
            f"{most * cfg.sampling.max_tokens:,} tokens (--max-tokens {cfg.sampling.max_tokens}); the budget "
            f"charges prompt tokens (x token_scale {cfg.token_scale:g}): at most b0 = {cfg.b0:,.0f} per lane plus "
            f"the round that crosses it, over {lanes:,} lanes: {lanes * cfg.b0:,.0f} plus {lanes:,} such rounds"
            + ("" if cfg.charge_initial else " (round 0's prompts are not charged)")
        )
        return 0
    name = cfg.name if args.strategy in (None, "all") else f"{cfg.name}-{args.strategy}"
    out = Path(args.out) if args.out else _default_out("deliberate", name, args)
    res = run_deliberation(cfg, out, backend, backend_spec=spec, progress=not args.quiet, command=sys.argv)
    if not args.no_report:
        from mascot.analysis.deliberation_report import write_report  # after the requests (pandas, matplotlib)

        write_report([out], out)
    from mascot.analysis.deliberation_report import lane_flags
    from mascot.io import read_jsonl

    lane_rounds = read_jsonl(out / "rounds.jsonl")
    # values not measured (D(0) from priors, unanswered rounds), and most replies unparsed: said as trials says
    # when most steps carried their state (issue 33)
    flags = lane_flags(lane_rounds)
    slots, failed = len(lane_rounds) * cfg.n, sum(int(r.get("failures", 0) or 0) for r in lane_rounds)
    if slots and failed > slots / 2:
        print(
            f"mascot: warning: {failed:,} of the {slots:,} agent replies in {out} did not parse after the retries "
            "(the agent's previous position, or its role prior, stood in): the run measures that fallback, not the "
            f"model; see {out / 'requests.jsonl'} for the replies",
            file=sys.stderr,
        )
    if args.json:
        obj: dict = {}
        for s in STRATEGIES:
            rows = [x for x in res.summaries if x["strategy"] == s]
            if rows:
                obj[s] = [
                    {
                        "rounds": int(x["rounds"]),
                        "tokens": _num(float(x["tokens"])),
                        "d0": _num(float(x["d0"])),
                        "d_final": _num(float(x["d_final"])),
                        "status": x["status"],
                        "d0_from_priors": bool(flags.get((s, x["run"]), {}).get("d0_from_priors", False)),
                        "unanswered_rounds": int(flags.get((s, x["run"]), {}).get("unanswered_rounds", 0)),
                    }
                    for x in sorted(rows, key=lambda x: x["run"])
                ]
        print(json.dumps(obj, indent=2))
        return 0
    # round 0 (every agent's first reply) is not charged to the budget (charge_initial = false): say so, and what
    # it used, so the charged tokens are not mistaken for everything the run spent (issue 33)
    first = {(r["strategy"], r["run"]): int(r.get("prompt_tokens_raw") or 0) for r in lane_rounds if r["round"] == 0}
    print(f"{out}: {len(res.summaries)} lanes ({res.rounds_run} lane-rounds run now, {res.requests} requests)")
    print(
        f"{'strategy':<10} {'run':>4} {'rounds':>6} {'charged':>10} {'round 0':>9} {'D(0)':>9} {'D_final':>8}  status"
    )
    priors = False
    for x in res.summaries:
        from_priors = bool(flags.get((x["strategy"], x["run"]), {}).get("d0_from_priors", False))
        priors |= from_priors
        print(
            f"{x['strategy']:<10} {x['run']:>4} {x['rounds']:>6} {x['tokens']:>10,.0f} "
            f"{first.get((x['strategy'], x['run']), 0):>9,} {x['d0']:>8.4f}{'*' if from_priors else ' '} "
            f"{x['d_final']:>8.4f}  {x['status']}" + (f"  ({x['failures']} parse failures)" if x["failures"] else "")
        )
    print(
        f"charged: the prompt tokens of rounds {'0' if cfg.charge_initial else '1'}.. x token_scale "
        f"{cfg.token_scale:g}, what the budget b0 pays; round 0: the prompt tokens of every agent's first reply, "
        + ("charged too (charge_initial = true)" if cfg.charge_initial else "not charged (charge_initial = false)")
        + ", shared by the strategies of a run"
    )
    if priors:
        print("* D(0) computed from role priors: a first reply did not parse, so its agent's prior stood in for it")
    if not args.no_report:
        print(f"report: {out}/table_viii.md, {out}/fig4.png, {out}/estimates.md, {out}/certificates.csv")
    return 0


MAX_LANES = 100_000  # lanes (debates) held in memory at once (mascot.cli.backend_args.check_run_size)


def cmd_debate(args) -> int:
    from mascot.protocols.debate import SurrogateDebateBackend, load_debate_config, run_debate

    overrides = {
        "runs": args.runs,
        "max_rounds": args.max_rounds,
        "final_rule": args.final_rule,
        "seed": args.seed,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
    }
    _check_counts(overrides)
    cfg, sur = load_debate_config(args.config, overrides)
    backend, spec = _backend(
        args,
        sur,
        ("persuasion", "malformed"),
        SurrogateDebateBackend,
        priors={a.name: a.prior_pass for a in cfg.agents},
    )
    # the dry run after the checks the run makes (--runs 100000 passed the dry run: an outside tester)
    check_run_size(args, cfg.runs, MAX_LANES, "debates (--runs)", len(cfg.agents) * cfg.runs * cfg.max_rounds, "--runs")
    if args.dry_run:  # the run's size before a request (issue 33)
        from mascot.protocols.debate.harness import REASK

        n = len(cfg.agents) * cfg.runs * cfg.max_rounds
        print(
            f"plan: {cfg.runs} debate(s) x {len(cfg.agents)} agents x at most {cfg.max_rounds} rounds: at most {n:,} "
            f"requests (a debate stops at consensus; a request that gets no answer is asked again up to {REASK} "
            "times); "
            f"replies at most {n * cfg.sampling.max_tokens:,} tokens (max_tokens {cfg.sampling.max_tokens})"
        )
        return 0
    out = Path(args.out) if args.out else _default_out("debate", cfg.name, args)
    res = run_debate(cfg, out, backend, backend_spec=spec, progress=not args.quiet, command=sys.argv)
    replies = sum(o["rounds"] for o in res.outcomes) * len(cfg.agents)
    untagged = sum(o["untagged"] for o in res.outcomes)
    if replies and untagged > replies / 2:  # as trials warns when most steps carried their state (issue 33)
        print(
            f"mascot: warning: {untagged} of the {replies} replies in {out} carry no [DECISION: PASS/FAIL] tag: an "
            "untagged reply blocks consensus, so the outcome measures the tag format, not the debate; see "
            f"{out}/transcript.jsonl for the replies",
            file=sys.stderr,
        )
    if args.json:
        objs = [
            {"rounds": o["rounds"], "consensus": o["consensus"], "decision": o["decision"], "tokens": o["tokens"]}
            for o in res.outcomes
        ]
        print(json.dumps(objs[0] if len(objs) == 1 else objs, indent=2))
        return 0
    print(f"{out}: {len(res.outcomes)} debate(s), {res.requests} requests now")
    for o in res.outcomes:
        print(
            f"  debate {o['run']}: {o['rounds']} round(s), consensus {o['consensus']}, decision {o['decision']}, "
            f"{o['tokens']:,} tokens" + (f", {o['untagged']} untagged replies" if o["untagged"] else "")
        )
    print(f"transcript: {out}/transcript.jsonl")
    return 0


def add_parsers(subparsers) -> None:
    """Add ``deliberate`` and ``debate`` to the main CLI's sub-parsers (each sets ``func``)."""
    d = subparsers.add_parser(
        "deliberate",
        help="LLM consensus deliberation under a token budget (consensus paper, Sec. V-C)",
        description="Role agents negotiate a design-preference vector under adaptive/complete/ring topologies, "
        "with the token budget charged by measured input tokens. Resumable; writes Table VIII, "
        "Fig. 4, per-mode estimates and certificates into the run directory.",
    )
    d.add_argument(
        "config", nargs="?", help="TOML config (default: the paper's scenario, as configs/deliberation/paper.toml)"
    )
    d.add_argument(
        "--strategy",
        default="all",
        choices=["adaptive", "complete", "ring", "all"],
        help="strategy to run (default all = the config's strategies)",
    )
    d.add_argument("--runs", type=int, help="repeated runs per strategy (batched together)")
    d.add_argument("--out", help="run directory (default runs/deliberate/NAME-BACKEND[-MODEL])")
    d.add_argument("--json", action="store_true", help="print a JSON summary (one object per strategy and run)")
    d.add_argument("--dry-run", action="store_true", help="print the run's size (requests, reply tokens); send nothing")
    d.add_argument(
        "--allow-large",
        action="store_true",
        help="run past the size limits (100,000 lanes; 100,000 model requests; 20 --retries or --max-retries)",
    )
    d.add_argument(
        "--monitor", action="store_true", help="stop a lane early when b_k < B*(D(k)) (predicted BudgetFail)"
    )
    d.add_argument(
        "--budget-rule",
        choices=["spent", "predicted"],
        help="spent: BudgetFail when b < 0 (paper, default); predicted: also when the next round's "
        "predicted cost exceeds b",
    )
    d.add_argument("--b0", type=float, help="initial token budget (default 100000)")
    d.add_argument("--eta", type=float, help="switching threshold (default 0.2)")
    d.add_argument("--eps", type=float, help="consensus tolerance (default 0.05)")
    d.add_argument("--max-rounds", type=int, help="round limit (default 30)")
    d.add_argument("--retries", type=int, help="re-asks after an unparsable or unanswered reply (default 2)")
    d.add_argument("--no-report", action="store_true", help="do not write tables and figures")
    _backend_args(d)
    s = d.add_argument_group("surrogate backend")
    s.add_argument("--surrogate-noise", type=float, help="belief noise per entry and round")
    s.add_argument("--surrogate-compliance", type=float, help="fraction of the way to the weighted average (0-1)")
    s.add_argument("--surrogate-malformed", type=float, help="probability of an unusable reply")
    d.set_defaults(func=cmd_deliberate)

    b = subparsers.add_parser(
        "debate",
        help="iterative multi-agent debate with strict [DECISION: ...] tags (voting/debate article)",
        description="Persona agents review a task, read each other's previous replies and update their decision "
        "until all agree (strict tags) or max_rounds; transcript in DIR/transcript.jsonl.",
    )
    b.add_argument(
        "config", nargs="?", help="TOML config (default: the article's code review, as configs/debate/code_review.toml)"
    )
    b.add_argument("--max-rounds", type=int, help="round limit (default 3)")
    b.add_argument("--runs", type=int, help="repeated debates (batched together)")
    b.add_argument(
        "--final-rule", choices=["majority", "weighted"], help="decision rule at max_rounds without consensus"
    )
    b.add_argument("--out", help="run directory (default runs/debate/NAME-BACKEND[-MODEL])")
    b.add_argument("--json", action="store_true", help="print rounds, consensus, decision, tokens as JSON")
    b.add_argument("--dry-run", action="store_true", help="print the run's size (requests, reply tokens); send nothing")
    b.add_argument(
        "--allow-large",
        action="store_true",
        help="run past the size limits (100,000 lanes; 100,000 model requests; 20 --max-retries)",
    )
    _backend_args(b)
    s = b.add_argument_group("surrogate backend")
    s.add_argument("--surrogate-persuasion", type=float, help="probability of adopting the others' majority per round")
    s.add_argument("--surrogate-malformed", type=float, help="probability of an untagged reply")
    b.set_defaults(func=cmd_debate)
