"""What the model did in an LLM run (``mascot show RUN``): a summary in the terminal and one self-contained HTML page.

Reads the records a run keeps -- ``requests.jsonl`` of ``mascot trials`` (``--log-requests all`` or ``failures``)
and ``mascot deliberate``, ``transcript.jsonl`` of ``mascot debate`` -- into one table of requests
(:func:`load_run`): where each request belongs (topology, trial and arm, step and stage; strategy, run and round;
run, round and agent), its prompt, reply, finish reason, error, parse outcome, tokens and latency. Trials also
join the committed step rows of ``trials.parquet``: which state each unit carried forward.

Every string from a model or a server is escaped before it reaches a terminal (:func:`mascot.log.printable`) or
the page (HTML-escaped; the page has no script and loads nothing).
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path

from mascot.errors import InputError
from mascot.log import printable

__all__ = ["load_run", "summarise", "summary_text", "write_html"]

_KINDS = {"mascot-trials": "trials", "mascot-deliberation": "deliberate", "mascot-debate": "debate"}


def _read_jsonl(path: Path, skipped: list[tuple[int, str]]) -> list[tuple[int, dict]]:
    """The file's records; a line that is not a JSON object is left out and said in ``skipped`` (a record cut by
    a kill, a damaged line: the readable records are what a user needs to see then)."""
    rows = []
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:  # (undecodable bytes come through as lone surrogates, which JSON refuses too)
                skipped.append((n, f"{path.name} line {n} is not JSON (a damaged or cut record)"))
                continue
            if not isinstance(rec, dict):
                skipped.append((n, f"{path.name} line {n} is not a record (a JSON object)"))
                continue
            rows.append((n, rec))
    return rows


def load_run(run) -> tuple[str, dict, list[dict]]:
    """``(command, run.json, records)`` of an LLM run directory, the records normalised to the keys
    ``group``, ``where``, ``stage``, ``messages``, ``reply``, ``finish_reason``, ``error``, ``parse_ok`` (None when the
    request got no answer), ``parse_reason``, ``parsed``, ``carried``, ``prompt_tokens``, ``completion_tokens``,
    ``latency_s``. Lines that cannot be read (a record cut by a kill, a damaged line) are left out and listed in
    ``run.json``'s dict as ``"_skipped"``; a file with no readable record is refused."""
    run = Path(run)
    if not (run / "run.json").is_file():
        raise InputError(f"{run} is not a run directory of mascot trials, deliberate or debate (no run.json)")
    try:
        meta = json.loads((run / "run.json").read_text())
    except ValueError:
        raise InputError(f"{run}/run.json is not JSON (a damaged run?)") from None
    command = _KINDS.get(meta.get("kind"))
    if command is None:
        raise InputError(
            f"{run}/run.json is of kind {meta.get('kind')!r}; mascot show reads trials, deliberate, debate"
        )
    if command == "debate":
        path = run / "transcript.jsonl"
    else:
        path = run / "requests.jsonl"
    if not path.is_file():
        why = (
            " (it keeps them with --log-requests all or failures, the default for model backends; a run that never "
            "committed a step has none)"
            if command == "trials"
            else ""
        )
        kept = run / "answers.jsonl"  # answered requests of work not committed yet (resume at the request)
        if kept.is_file():
            n_kept = sum(1 for line in open(kept, encoding="utf-8", errors="replace") if line.strip())
            why += (
                f"; nothing is committed yet, and {n_kept:,} answered request(s) wait in answers.jsonl for the rerun "
                "that commits them"
            )
        raise InputError(f"{run} has no {path.name}{why}")
    records, skipped = [], []
    for n, r in _read_jsonl(path, skipped):
        if command == "debate" and r.get("type") != "reply":
            continue
        try:
            rec = _normal(command, r)
            for k in ("prompt_tokens", "completion_tokens"):
                rec[k] = None if rec[k] is None else int(rec[k])
            if rec["latency_s"] is not None:
                rec["latency_s"] = float(rec["latency_s"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            skipped.append((n, f"{path.name} line {n} is not a {command} record ({type(e).__name__}: {e})"))
            continue
        records.append(rec)
    skipped = [why for _, why in sorted(skipped)]
    if not records and skipped:
        more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
        raise InputError(f"{path}: no readable record; {skipped[0]}{more}")
    meta["_skipped"] = skipped
    if command == "trials":
        _join_carried(run, records)
    return command, meta, records


def _normal(command: str, r: dict) -> dict:
    if command == "trials":
        arm = "perturbed" if r.get("perturbed") else "benign"
        return dict(
            group=f"{r['topology']} · trial {r['trial']} · {arm}",
            where=f"step {r['step']} · {r['stage']} · {r['role']} {r['agent']} · attempt {r['attempt']}",
            key=(r["topology"], r["trial"], bool(r.get("perturbed")), r["step"]),
            stage=r["stage"],
            messages=r.get("messages") or [],
            reply=r.get("text") or "",
            finish_reason=r.get("finish_reason"),
            error=r.get("error"),
            parse_ok=None if r.get("error") else bool(r.get("parse_ok")),
            parse_reason=r.get("reason"),
            parsed=r.get("state"),
            prompt_tokens=r.get("prompt_tokens"),
            completion_tokens=r.get("completion_tokens"),
            latency_s=r.get("latency_s"),
        )
    if command == "deliberate":
        resp, parse = r.get("response") or {}, r.get("parse") or {}
        return dict(
            group=f"{r['strategy']} · run {r['run']}" if r.get("strategy") else f"run {r['run']}",
            where=f"round {r['round']} · agent {r['agent']} · attempt {r['attempt']}",
            stage="round 0" if r["round"] == 0 else "rounds 1+",
            messages=r.get("messages") or [],
            reply=resp.get("text") or "",
            finish_reason=resp.get("finish_reason"),
            error=resp.get("error"),
            parse_ok=None if resp.get("error") else bool(parse.get("ok")),
            parse_reason=parse.get("reason"),
            parsed=None,
            clipped=parse.get("clipped") if isinstance(parse.get("clipped"), int) else None,
            prompt_tokens=resp.get("prompt_tokens"),
            completion_tokens=resp.get("completion_tokens"),
            latency_s=resp.get("latency_s"),
        )
    tagged = r.get("decision") not in (None, "NONE")
    return dict(
        group=f"run {r['run']}",
        where=f"round {r['round']} · {r['agent']}",
        stage="round 1" if r["round"] == 1 else "rounds 2+",
        messages=[
            {"role": "system", "content": r.get("system") or ""},
            {"role": "user", "content": r.get("user") or ""},
        ],
        reply=r.get("reply") or "",
        finish_reason=r.get("finish_reason"),
        error=r.get("error"),
        parse_ok=None if r.get("error") else tagged,
        parse_reason=r.get("ballot_reason"),
        parsed={"decision": r.get("decision"), "confidence": r.get("confidence")},
        prompt_tokens=r.get("prompt_tokens"),
        completion_tokens=r.get("completion_tokens"),
        latency_s=r.get("latency_s"),
    )


def _join_carried(run: Path, records: list[dict]) -> None:
    """Each trials record learns whether its unit carried its state at that step (``trials.parquet``)."""
    if not (run / "trials.parquet").is_file():
        return
    import pandas as pd

    t = pd.read_parquet(run / "trials.parquet", columns=["topology", "trial", "perturbed", "step", "carried"])
    carried = {
        (a, int(b), bool(c), int(d)): bool(e)
        for a, b, c, d, e in t.itertuples(index=False)  # (the committed steps only)
    }
    for r in records:
        r["carried"] = carried.get(r.pop("key"))


def summarise(records: list[dict], command: str | None = None, max_tokens: int | None = None) -> dict:
    """Counts over ``records``: requests, answered, errors, parse outcomes and reasons, finish reasons, tokens,
    latency per stage (median and 90th percentile, over the requests that report one), and ``cut``: the warning
    a run gives when most replies stopped at the token limit, with whether a higher limit would help
    (:class:`mascot.backends.base.CutWatch`; ``command`` ``"debate"``: the answer is a leading tag)."""
    from types import SimpleNamespace

    import numpy as np

    from mascot.backends.base import CutWatch

    quiet = {"say": lambda message: None}  # counted here, said in the summary (not through the logger)
    watch = CutWatch.tagged(max_tokens, **quiet) if command == "debate" else CutWatch(max_tokens, **quiet)
    watch.add(
        [
            SimpleNamespace(
                error=r["error"],
                text=r["reply"],
                finish_reason=r["finish_reason"],
                completion_tokens=r["completion_tokens"],
            )
            for r in records
        ],
        [bool(r["parse_ok"]) for r in records],
    )

    answered = [r for r in records if not r["error"]]
    by_stage: dict[str, list[float]] = {}
    for r in answered:
        if isinstance(r.get("latency_s"), (int, float)):
            by_stage.setdefault(r["stage"], []).append(float(r["latency_s"]))
    return dict(
        requests=len(records),
        answered=len(answered),
        errors=Counter(printable(str(r["error"]))[:80] for r in records if r["error"]),
        parsed=sum(bool(r["parse_ok"]) for r in answered),
        unparsed=Counter(printable(str(r["parse_reason"]))[:80] for r in answered if not r["parse_ok"]),
        finish=Counter(str(r["finish_reason"]) for r in answered),
        prompt_tokens=sum(int(r["prompt_tokens"] or 0) for r in records),
        completion_tokens=sum(int(r["completion_tokens"] or 0) for r in records),
        latency={s: (len(v), float(np.median(v)), float(np.quantile(v, 0.9))) for s, v in sorted(by_stage.items())},
        carried=Counter(r.get("carried") for r in records if "carried" in r),
        cut=watch.message(first=False) if watch.replies and watch.most_cut else None,
        # deliberation: parsed replies with vector entries outside [0, 1], which the harness clips
        clipped=sum(1 for r in answered if r["parse_ok"] and (r.get("clipped") or 0) > 0),
    )


def summary_text(command: str, meta: dict, s: dict, run) -> str:
    sess = (meta.get("sessions") or [{}])[-1]
    backend = (sess.get("backend") or {}) if isinstance(sess.get("backend"), dict) else {}
    lines = [
        f"{run}: mascot {command}, backend {backend.get('name', '?')} ({printable(str(backend.get('model', '?')))}), "
        + ("complete" if meta.get("complete") else "not complete (rerun the same command to resume)"),
        f"requests: {s['requests']:,} recorded, {s['answered']:,} answered, {s['requests'] - s['answered']:,} got no "
        f"answer; {s['parsed']:,} of the answers parsed",
    ]
    for title, counts in (("no answer", s["errors"]), ("not parsed", s["unparsed"]), ("finish reasons", s["finish"])):
        if counts:
            lines.append(f"{title}: " + "; ".join(f"{n:,} x {k}" for k, n in counts.most_common(5)))
    if s.get("cut"):
        lines.append(f"warning: {s['cut']}")
    if s.get("clipped"):
        lines.append(
            f"warning: {s['clipped']:,} of the {s['parsed']:,} parsed replies had vector entries outside [0, 1], clipped "
            "by the harness (clipping can itself make agents agree: read D with that in mind)"
        )
    skipped = meta.get("_skipped") or []
    if skipped:
        lines.append(f"warning: {len(skipped):,} line(s) left out: {skipped[0]}" + (" ..." if len(skipped) > 1 else ""))
    lines.append(f"tokens: {s['prompt_tokens']:,} prompt, {s['completion_tokens']:,} completion (every request)")
    for stage, (n, med, p90) in s["latency"].items():
        lines.append(f"latency {stage}: median {med:.3g} s, 90th percentile {p90:.3g} s ({n:,} answers)")
    if s["carried"]:
        lines.append(
            f"carried: {s['carried'].get(True, 0):,} of the requests belong to a step whose state was carried forward "
            "(no parsed reply after the retries)"
        )
    return printable("\n".join(lines))  # finish reasons and parse reasons come from the server and the model


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:70em;color:#222}
h1{font-size:1.3em} pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5em;margin:.3em 0}
details{border:1px solid #ddd;border-radius:4px;margin:.3em 0;padding:.2em .6em}
summary{cursor:pointer} .bad{color:#b00020} .ok{color:#1b7a1b} .dim{color:#666}
table{border-collapse:collapse} td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left}
.role{font-weight:600;color:#555}
"""


def write_html(command: str, meta: dict, records: list[dict], s: dict, path, run, limit: int = 2000) -> int:
    """One self-contained page (no script, nothing loaded) with the summary and, per group, each request's prompt,
    reply, parse result and timing; at most ``limit`` requests (said on the page). Returns how many it shows."""
    e = lambda x: html.escape(printable(str(x)))  # noqa: E731
    shown = records[:limit]
    out = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>mascot show {e(Path(run).name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>mascot {e(command)}: {e(run)}</h1>",
        f"<pre>{e(summary_text(command, meta, s, run))}</pre>",
    ]
    if len(records) > limit:
        out.append(f"<p class='bad'>Showing the first {limit:,} of {len(records):,} requests (--limit).</p>")
    groups: dict[str, list[dict]] = {}
    for r in shown:
        groups.setdefault(r["group"], []).append(r)
    first = next(
        (g for g, rs in groups.items() if any(r["parse_ok"] is not True for r in rs)), next(iter(groups), None)
    )
    for g, rs in groups.items():
        bad = sum(1 for r in rs if r["parse_ok"] is not True)
        # the first group with a problem (else the first group) is open, at its first problem
        opened = next((r for r in rs if r["parse_ok"] is not True), rs[0]) if g == first else None
        out.append(
            f"<details{' open' if opened else ''}><summary><b>{e(g)}</b> <span class='dim'>{len(rs)} request{'s' if len(rs) != 1 else ''}"
            + (f", <span class='bad'>{bad} not parsed or unanswered</span>" if bad else "")
            + "</span></summary>"
        )
        for r in rs:
            if r["error"]:
                verdict = f"<span class='bad'>no answer: {e(r['error'])}</span>"
            elif r["parse_ok"]:
                verdict = "<span class='ok'>parsed</span>"
            else:
                verdict = f"<span class='bad'>not parsed: {e(r['parse_reason'])}</span>"
            carried = " · <span class='bad'>state carried forward</span>" if r.get("carried") else ""
            timing = f"{r['latency_s']:.3g} s" if isinstance(r.get("latency_s"), (int, float)) else "-"
            out.append(
                f"<details{' open' if r is opened else ''}><summary>{e(r['where'])} · {verdict}{carried} <span class='dim'>· finish "
                f"{e(r['finish_reason'])} · {e(r['prompt_tokens'])}+{e(r['completion_tokens'])} tokens · {timing}"
                "</span></summary>"
            )
            for m in r["messages"]:
                out.append(f"<div class='role'>{e(m.get('role', '?'))}</div><pre>{e(m.get('content', ''))}</pre>")
            out.append(f"<div class='role'>reply</div><pre>{e(r['reply'])}</pre>")
            if r.get("parsed") is not None:
                out.append(f"<div class='role'>parsed</div><pre>{e(json.dumps(r['parsed']))}</pre>")
            out.append("</details>")
        out.append("</details>")
    out.append("</body></html>")
    from mascot.io import atomic_write_text

    atomic_write_text(Path(path), "\n".join(out))
    return len(shown)
