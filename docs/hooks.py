"""MkDocs hook: the reference pages that are generated, never written by hand, so they cannot drift from the code.

* ``reference/cli.md``: every ``mascot`` command and option, from the argument parser (``mascot.cli.main.build_parser``);
* ``reference/config.md``: every configuration key, from the schema ``mascot params`` prints (one source with
  ``mascot validate``);
* ``reference/api/mascot.md``: the top-level names, from ``mascot``'s export table;
* ``reference/errata.md``, ``reference/benchmarks.md``, ``reference/device-h200.md``: the computed errata and the
  measured benchmark tables, read from the files the project's commands write (``results/``, ``benchmarks/``).

Links in those files that point outside the documentation are written as plain paths (the page still names them).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
ERRATA = ("results/consensus/errata.md", "results/spectra/errata.md")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _unlink(text: str) -> str:
    """Links to files outside the site become the link text and the repository path."""

    def sub(m):
        label, target = m.group(1), m.group(2)
        if target.startswith(("http://", "https://", "#", "mailto:")):
            return m.group(0)
        return label if label.strip("`") == target else f"{label} (`{target}`)"

    return _LINK.sub(sub, text)


def _demote(text: str) -> str:
    """Headings one level down, so a copied file sits under the page's own title."""
    return re.sub(r"^(#+) ", lambda m: "#" + m.group(1) + " ", text, flags=re.M)


def _cell(x) -> str:
    s = "" if x is None else str(x)
    return s.replace("|", "\\|").replace("\n", " ")


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for a in parser._actions:
        if a.help == argparse.SUPPRESS or isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.dest}` (positional)"
        if a.metavar and a.option_strings and a.nargs != 0:
            name += f" `{a.metavar if isinstance(a.metavar, str) else ' '.join(a.metavar)}`"
        if a.choices and not isinstance(a.choices, dict):
            name += " {" + ", ".join(map(str, a.choices)) + "}"
        default = "" if a.default in (None, argparse.SUPPRESS, False) or a.nargs == 0 else f"`{a.default}`"
        helptext = (a.help or "").replace("%%", "%")
        if "%(default)" in helptext:
            helptext = helptext.replace("%(default)s", str(a.default))
        rows.append(f"| {_cell(name)} | {_cell(default)} | {_cell(' '.join(helptext.split()))} |")
    return rows if len(rows) > 2 else []


def _subcommands(parser):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in a._choices_actions}
            for name, sub in a.choices.items():
                yield name, sub, helps.get(name)


def cli_page() -> str:
    import os

    from mascot.cli.main import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps usage lines at this width

    p = build_parser()
    out = [
        "# Command line",
        "",
        "Generated from mascot's argument parser at build time: every command and option, as `mascot COMMAND "
        "--help` prints it.",
        "",
    ]

    def walk(parser, prefix, depth):
        for name, sub, short in _subcommands(parser):
            cmd = f"{prefix} {name}"
            out.extend([f"{'#' * min(depth, 4)} `{cmd}`", ""])
            desc = sub.description or short or ""
            if desc:
                out.extend([" ".join(desc.split()), ""])
            usage = sub.format_usage().replace("usage: ", "").rstrip()
            out.extend(["```text", usage, "```", ""])
            rows = _option_rows(sub)
            if rows:
                out.extend(rows + [""])
            walk(sub, cmd, depth + 1)

    walk(p, "mascot", 2)
    return "\n".join(out)


def config_page() -> str:
    from mascot.cli.main import build_parser
    from mascot.cli.params_cmd import TOPICS, _where, param_rows
    from mascot.sweep.reference import kind_note

    trials = None
    for name, sub, _ in _subcommands(build_parser()):
        if name == "trials":
            trials = sub
    out = [
        "# Configuration keys",
        "",
        "Generated at build time from the schema that validates configs (`mascot params KIND` prints the same "
        "rows; `mascot validate` checks a file against them). A sweep config is TOML with `[experiment]`, and "
        "`[fixed]` and `[grid]` tables whose keys are the kind's; every key can also be overridden on the command "
        "line, Hydra style: `mascot run CONFIG grid.n=5,8,16 fixed.eta=0.2`.",
        "",
    ]
    for t in TOPICS:
        rows = param_rows(t, trials)
        out.extend([f"## `{t}`", "", f"Keys of {_where(t)}.", ""])
        out.extend(["| key | type | default | allowed | unit | meaning |", "|---|---|---|---|---|---|"])
        for r in rows:
            meaning = r["meaning"]
            if r.get("simulated_by") not in (None, "", "every point"):
                meaning += f" (simulated when {r['simulated_by']})"
            out.append(
                f"| `{r['key']}` | {_cell(r['type'])} | {_cell(r['default'])} | {_cell(r['range'])} | "
                f"{_cell(r['unit'])} | {_cell(meaning)} |"
            )
        note = kind_note(t)
        if note:
            out.extend(["", f"Note: {note}"])
        out.append("")
    return "\n".join(out)


def mascot_page() -> str:
    import mascot

    out = [
        "# mascot",
        "",
        "The top-level names (`import mascot` loads each lazily, on first use). Generated from mascot's export table.",
        "",
    ]
    for name in sorted(mascot._EXPORTS, key=str.lower):
        out.extend([f"::: {mascot._EXPORTS[name]}.{name}", "    options:", "      show_root_full_path: false", ""])
    return "\n".join(out)


def copied_page(title: str, intro: str, paths) -> str:
    out = [f"# {title}", "", intro, ""]
    for rel in paths:
        p = ROOT / rel
        if not p.exists():
            continue
        out.extend([f"*From `{rel}`:*", "", _demote(_unlink(p.read_text())), ""])
    return "\n".join(out)


_ROLE = re.compile(r":(?:func|mod|class|meth|data|attr|obj|exc):(?=<code>)")


def on_page_content(html, page, config, files):
    """Sphinx roles left in docstrings (``:func:`x```) show as the code alone."""
    return _ROLE.sub("", html)


def on_files(files, config):
    pages = {
        "reference/cli.md": cli_page(),
        "reference/config.md": config_page(),
        "reference/api/mascot.md": mascot_page(),
        "reference/errata.md": copied_page(
            "Errata",
            "The papers' errata as mascot recomputes them (every number computed by the commands that write these "
            "files, `mascot reproduce all` and `mascot calibrate`; cells read from a paper say so).",
            ERRATA,
        ),
        "reference/benchmarks.md": copied_page(
            "Benchmarks",
            "The measured tables, dated, as `benchmarks/README.md` keeps them (each script prints JSON and a "
            "table beside its best baseline in one process; ratios are what to read).",
            ["benchmarks/README.md"],
        ),
        "reference/device-h200.md": copied_page(
            "GPU device check (H200)",
            "The last full run of `bash benchmarks/device_check.sh` on one NVIDIA H200.",
            ["benchmarks/results_device_h200_2026-12-04.md"],
        ),
    }
    for uri, content in pages.items():
        old = files.get_file_from_path(uri)
        if old is not None:
            files.remove(old)
        files.append(File.generated(config, uri, content=content))
    return files
