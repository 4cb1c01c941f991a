"""A finished state-tracking run, exported for readers (``results/real-llm/``): its Table 2 report beside the
echo and random baselines (:func:`mascot.analysis.trials_report.write_report`), ``trials.parquet``, ``run.json``,
``requests.jsonl`` (when small enough) and a ``README.md`` whose every number is computed from those files:
the command, wall time and requests per second, parse rates per role and attempt, why replies failed, how
often a parsed reply was exactly its input state (an echo) or the correct next state, and whether the run's
E_ceg beats the baselines'."""

from __future__ import annotations

import json
import math
import shlex
import shutil
from collections import Counter
from pathlib import Path

from mascot.errors import InputError
from mascot.io import atomic_write_text, read_jsonl

__all__ = ["export_run", "reply_statistics"]

MAX_LOG_BYTES = 2_000_000


def reply_statistics(records: list[dict]) -> dict:
    """From ``requests.jsonl`` records: per role ``attempts``, ``parsed`` (attempts that parsed),
    ``first_attempts`` / ``first_parsed``, ``nodes`` / ``nodes_parsed`` (a node parsed on some attempt),
    ``echo`` (parsed replies equal to the prompt's input state), ``correct`` (equal to the rule applied to
    it), ``length`` (replies cut at max_tokens), failure ``reasons`` (codes), and ``backend_errors``."""
    from mascot.protocols.state_tracking.prompts import read_prompt
    from mascot.theory.state_tracking import apply_rules

    out: dict = {}
    nodes: dict = {}
    for r in records:
        role = r.get("role", "?")
        s = out.setdefault(
            role,
            {
                "attempts": 0,
                "parsed": 0,
                "first_attempts": 0,
                "first_parsed": 0,
                "echo": 0,
                "correct": 0,
                "length": 0,
                "backend_errors": 0,
                "reasons": Counter(),
            },
        )
        s["attempts"] += 1
        ok = bool(r.get("parse_ok"))
        s["parsed"] += ok
        if r.get("attempt", 0) == 0:
            s["first_attempts"] += 1
            s["first_parsed"] += ok
        s["length"] += r.get("finish_reason") == "length"
        s["backend_errors"] += bool(r.get("error"))
        key = (role, r.get("topology"), r.get("trial"), r.get("perturbed"), r.get("step"), r.get("agent"))
        nodes[key] = nodes.get(key, False) or ok
        if ok:
            task = read_prompt(r["messages"])
            got = r["state"]
            same = {
                "Value": float(task.state["Value"]),
                "Parity": task.state["Parity"],
                "Level": int(task.state["Level"]),
            }
            s["echo"] += got == same
            s["correct"] += got == apply_rules(task.state)
        else:
            s["reasons"][str(r.get("reason", "")).split(":", 1)[0]] += 1
    for (role, *_), ok in nodes.items():
        s = out[role]
        s["nodes"] = s.get("nodes", 0) + 1
        s["nodes_parsed"] = s.get("nodes_parsed", 0) + ok
    for s in out.values():
        s["reasons"] = dict(s["reasons"].most_common())
    return out


def _pct(a, b) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


def _examples(records: list[dict], k: int = 3) -> list[dict]:
    """Up to ``k`` parsed and ``k`` unparsed first-attempt agent replies (in log order)."""
    ok = [r for r in records if r.get("attempt") == 0 and r.get("parse_ok")][:k]
    bad = [r for r in records if r.get("attempt") == 0 and not r.get("parse_ok")][:k]
    return ok + bad


def export_run(run_dir, dest, n_boot: int = 2000, title: str = "A small real run", note: str = "") -> dict:
    """Write the report of the finished run ``run_dir`` into ``dest`` with its baselines (run them first:
    :func:`mascot.protocols.state_tracking.baselines.run_baselines`, as ``mascot trials`` does), copy its records,
    and write ``dest/README.md`` (``note``: a paragraph of the caller's under the command, e.g. the environment it
    ran in); returns the numbers the README states."""
    from mascot.analysis.trials_report import TOPOLOGY_ORDER, write_report
    from mascot.protocols.state_tracking.baselines import BASELINE_NAMES, baseline_dirs

    run_dir, dest = Path(run_dir), Path(dest)
    meta = json.loads((run_dir / "run.json").read_text())
    if not meta.get("complete"):
        raise InputError(f"{run_dir} is not a finished run (run.json: complete is false); rerun its command first")
    missing = set(BASELINE_NAMES) - set(baseline_dirs(run_dir))
    if missing:
        raise InputError(
            f"{run_dir} has no finished {' and '.join(sorted(missing))} baseline(s): run them first with "
            "mascot.protocols.state_tracking.baselines.run_baselines(run_dir)"
        )
    tab, stats = write_report(run_dir, dest=dest, n_boot=n_boot)
    for name in ("trials.parquet", "run.json"):
        shutil.copyfile(run_dir / name, dest / name)
    log = run_dir / "requests.jsonl"
    records = read_jsonl(log) if log.exists() else []
    log_size = log.stat().st_size if log.exists() else 0
    log_kept = 0 < log_size <= MAX_LOG_BYTES
    if log_kept:
        shutil.copyfile(log, dest / "requests.jsonl")
    sessions = [s for s in meta.get("sessions", []) if s.get("steps_run")]
    wall = sum(s.get("wall_s", 0.0) for s in sessions)
    call = sum(s.get("backend_call_s", 0.0) for s in sessions)
    n_req = sum(s.get("requests", 0) for s in sessions)
    rs = reply_statistics(records)
    import pandas as pd

    n_total = int(pd.read_parquet(run_dir / "trials.parquet", columns=["n_requests"]).n_requests.sum())
    cfg = meta["config"]
    cmd = sessions[0].get("command") if sessions else None
    if cmd and (Path(cmd[0]).name == "mascot" or Path(cmd[0]).parts[-2:] == ("mascot", "__main__.py")):
        cmd = ["mascot", *cmd[1:]]  # the entry point as a user types it (argv[0] holds its install path)
    ident = meta["identity"]["backend"]
    lines = [
        f"# {title}: `{ident.get('name')}` backend, {Path(str(ident.get('model'))).name}",
        "",
        "Written by `mascot.analysis.trials_export.export_run` from the run directory; every number below is "
        "computed from the files here (`run.json`, `trials.parquet`, `requests.jsonl`, `stats.json`).",
        "",
        "## The run",
        "",
        "```",
        " ".join(shlex.quote(c) for c in cmd) if cmd else "(command not recorded)",
        "```",
        "",
        *([note, ""] if note else []),
        f"Topologies {', '.join(cfg['topologies'])}; {cfg['n_trials']} trials each (two arms: from the initial "
        f"state and with epsilon = {cfg['epsilon']:g} added to its Value); {cfg['steps']} steps; "
        f"{cfg['retries']} retries after an unparsable reply; temperature {cfg['sampling']['temperature']:g}, "
        f"top_p {cfg['sampling']['top_p']:g}, max_tokens {cfg['sampling']['max_tokens']}, seed {cfg['seed']}.",
        "",
        f"Measured over the sessions that finished: {n_req:,} requests in {wall:,.1f} s of wall time "
        f"({wall / 60:.1f} min; "
        f"{n_req / wall if wall else math.nan:.2f} requests/s overall, {n_req / call if call else math.nan:.2f} "
        f"requests/s inside the backend's generate calls) on {sessions[0].get('host', '?') if sessions else '?'} "
        f"({(sessions[0].get('backend') or {}).get('describe', {}).get('device', 'device not recorded') if sessions else ''})."
        f" Requests of the whole run (`trials.parquet`): {n_total:,}.",
        "",
        "Sessions (`run.json`; a rerun of the same command resumes after the last committed step):",
        "",
        "| started | steps committed before | steps run | requests | wall time (s) | requests/s in generate calls |",
        "|---|---|---|---|---|---|",
        *(
            f"| {x.get('started')} | {x.get('steps_done_before')} | "
            + (
                f"{x.get('steps_run')} | {x.get('requests'):,} | {x.get('wall_s'):,.1f} | "
                f"{x['requests'] / x['backend_call_s'] if x.get('backend_call_s') else math.nan:.2f} |"
                if x.get("finished")
                else f"stopped before finishing: {x.get('steps_done', 0) - x.get('steps_done_before', 0)} "
                f"step(s) committed, {x.get('requests', 0):,} requests; time not recorded | | | |"
            )
            for x in meta.get("sessions", [])
            if x.get("steps_run") or not x.get("finished")
        ),
        "",
        "## Replies",
        "",
        "| role | attempts | parsed | first attempts parsed | nodes parsed after retries | parsed replies equal "
        "to the input state (echo) | parsed replies equal to the correct next state | cut at max_tokens | "
        "failure reasons |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for role, s in rs.items():
        reasons = ", ".join(f"{k} {v}" for k, v in s["reasons"].items()) or "none"
        lines.append(
            f"| {role} | {s['attempts']} | {s['parsed']} ({_pct(s['parsed'], s['attempts'])}) | "
            f"{s['first_parsed']} of {s['first_attempts']} ({_pct(s['first_parsed'], s['first_attempts'])}) | "
            f"{s['nodes_parsed']} of {s['nodes']} ({_pct(s['nodes_parsed'], s['nodes'])}) | "
            f"{s['echo']} of {s['parsed']} ({_pct(s['echo'], s['parsed'])}) | "
            f"{s['correct']} of {s['parsed']} ({_pct(s['correct'], s['parsed'])}) | "
            f"{s['length']} ({_pct(s['length'], s['attempts'])}) | {reasons} |"
        )
    car = stats["carried"]
    lines += [
        "",
        "Carried-forward steps (a deciding node unparsable after every retry keeps its input state): "
        + "; ".join(
            f"{t} {car[t]['carried_steps']} of {car[t]['steps']} ({100 * car[t]['carried_fraction']:.1f}%)"
            for t in TOPOLOGY_ORDER
            if t in car
        )
        + ".",
        "",
        "## Against the trivial baselines",
        "",
        "The echo agent replies with its input state; the random agent with a uniform valid state (see "
        "`table2.md`). Both ran through the same harness and metrics with this run's config "
        "(`baselines.csv`).",
        "",
        "| topology | E_ceg (this run) | echo | random | below echo? | below random? | F_ps (this run) | echo | "
        "random |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    b = stats["baselines"]
    for t in TOPOLOGY_ORDER:
        if t not in car:
            continue
        ce, cr = b["echo"]["E_ceg_vs_run"][t], b["random"]["E_ceg_vs_run"][t]
        f_run = stats["metrics"]["F_ps"]["mean"][t]
        lines.append(
            f"| {t} | {ce['run']:.2f} | {ce['baseline']:.2f} | {cr['baseline']:.2f} | "
            f"{'yes' if ce['beats'] else 'no'} ({ce['trials_below']} of {ce['trials']} trials below) | "
            f"{'yes' if cr['beats'] else 'no'} ({cr['trials_below']} of {cr['trials']} trials below) | "
            f"{f_run:.2f} | {b['echo']['metrics']['F_ps']['mean'][t]:.2f} | "
            f"{b['random']['metrics']['F_ps']['mean'][t]:.2f} |"
        )
    lines += ["", "## Example replies (first attempts, as logged)", ""]
    for r in _examples(records):
        verdict = "parsed" if r.get("parse_ok") else f"not parsed ({r.get('reason')})"
        text = r.get("text", "").replace("```", "'''")
        lines += [
            f"* {r.get('topology')} trial {r.get('trial')} ({'perturbed' if r.get('perturbed') else 'unperturbed'}"
            f" arm), step {r.get('step')}, {r.get('role')} "
            f"{r.get('agent')}: {verdict}, finish_reason {r.get('finish_reason')}",
            "",
            "  ```",
            *("  " + x for x in text.splitlines()),
            "  ```",
            "",
        ]
    lines += [
        "## Files",
        "",
        "* `table2.md`, `table2.csv`, `baselines.csv`, `stats.json`, `metrics.csv` (one row per topology and "
        "trial), `fig2`-`fig6` (PNG, PDF): the report (`mascot.analysis.trials_report.write_report`).",
        "* `trials.parquet`: one row per (topology, trial, arm, step); `run.json`: config, backend identity, "
        "sessions and timings.",
        f"* `requests.jsonl`: every request and reply ({log_size / 1e6:.2f} MB)."
        if log_kept
        else f"* `requests.jsonl` is not here: {log_size / 1e6:.2f} MB, over the {MAX_LOG_BYTES / 1e6:.0f} MB limit "
        "for committed logs (it stays in the run directory).",
        "",
    ]
    atomic_write_text(dest / "README.md", "\n".join(lines))
    return {
        "requests": n_req,
        "wall_s": wall,
        "backend_call_s": call,
        "replies": rs,
        "log_bytes": log_size,
        "log_kept": log_kept,
        "stats": stats,
    }
