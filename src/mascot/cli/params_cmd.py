"""``mascot params [KIND] [--json]``: every key of a sweep kind, of ``[experiment]``, of a trials config, or of a
deliberation or debate config file, with type, default, allowed range, unit and meaning, from the same tables
that validate configs."""

from __future__ import annotations

import json
import textwrap

__all__ = ["add_parser", "param_rows", "TOPICS"]

TOPICS = ("experiment", "consensus", "spectra", "affine_noise", "trials", "deliberate", "debate")


def _trials_rows(sub) -> list[dict]:
    """The trials config's keys: the long options of ``sub`` (the ``mascot trials`` parser; a ``[trials]``
    table takes each)."""
    import argparse

    from mascot.cli.trials_config import NOT_CONFIG_KEYS

    rows = []
    for a in sub._actions:
        longs = [s for s in a.option_strings if s.startswith("--")]
        if not longs or a.dest in NOT_CONFIG_KEYS or a.help == argparse.SUPPRESS:
            continue
        flag = isinstance(a, (argparse._StoreTrueAction, argparse._StoreConstAction)) or a.nargs == 0
        rows.append(
            dict(
                key=longs[0][2:].replace("-", "_"),
                type="bool" if flag else (a.type.__name__ if a.type in (int, float, str) else "str"),
                default=False if flag else a.default,
                range=", ".join(map(str, a.choices)) if a.choices else "",
                unit="",
                meaning=" ".join((a.help or "").replace("%%", "%").split()),
                simulated_by="",
            )
        )
    return rows


def param_rows(topic: str, trials_parser=None) -> list[dict]:
    """The rows ``mascot params TOPIC`` prints (``TOPIC`` in :data:`TOPICS`; ``trials`` needs the ``mascot
    trials`` parser)."""
    if topic == "experiment":
        from mascot.sweep.schema import EXPERIMENT_DOCS, EXPERIMENT_KEYS

        return [
            dict(
                key=k,
                type=t.__name__,
                default=EXPERIMENT_DOCS[k][0],
                range=EXPERIMENT_DOCS[k][1],
                unit="",
                meaning=EXPERIMENT_DOCS[k][2],
                simulated_by="",
            )
            for k, t in EXPERIMENT_KEYS.items()
        ]
    if topic == "trials":
        return _trials_rows(trials_parser)
    if topic in ("deliberate", "debate"):
        from mascot.protocols.config_keys import debate_rows, deliberation_rows

        return deliberation_rows() if topic == "deliberate" else debate_rows()
    from mascot.sweep.reference import describe

    return describe(topic)


def _where(topic: str) -> str:
    return {
        "experiment": "[experiment] of a sweep config",
        "trials": "[trials] of a trials config (each is also a `mascot trials` option: --key-with-dashes)",
        "deliberate": "a deliberation config file (`mascot deliberate FILE`; a dotted key is a key of "
        "that table, `roles[].name` a key of each [[roles]] entry)",
        "debate": "a debate config file (`mascot debate FILE`; `agents[].name` a key of each [[agents]] entry)",
    }.get(topic, f'[fixed] or [grid] of a sweep config with kind = "{topic}"')


def _print(topic: str, rows: list[dict]) -> None:
    from mascot.sweep.reference import kind_note

    print(f"{topic}: keys of {_where(topic)}")
    for r in rows:
        default = "-" if r["default"] is None else r["default"]
        head = f"  {r['key']} ({r['type']}, default {default}"
        head += f"; {r['range']}" if r["range"] else ""
        head += f"; unit: {r['unit']}" if r["unit"] else ""
        print(head + ")")
        text = r["meaning"] + (
            f" [simulated when {r['simulated_by']}]" if r.get("simulated_by") not in ("", "every point") else ""
        )
        print(textwrap.fill(text, width=100, initial_indent="      ", subsequent_indent="      "))
    note = kind_note(topic)
    if note:
        print(textwrap.fill("note: " + note, width=100, initial_indent="  ", subsequent_indent="  "))


def _cmd_params(args) -> int:
    topics = [args.kind] if args.kind else list(TOPICS)
    table = {t: param_rows(t, args.subparsers.choices.get("trials")) for t in topics}
    if args.json:
        print(json.dumps(table if not args.kind else table[args.kind], indent=1, default=str))
        return 0
    for i, t in enumerate(topics):
        if i:
            print()
        _print(t, table[t])
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser(
        "params",
        help="every config key with type, default, range, unit and meaning",
        description="Every key of a sweep kind's [fixed]/[grid] tables, of [experiment], of a trials config, or "
        "of a deliberation or debate config file: type, default, allowed range, unit, meaning and (sweeps) which "
        "points simulate with it.",
    )
    p.add_argument("kind", nargs="?", choices=TOPICS, help="one topic (default: all)")
    p.add_argument("--json", action="store_true", help="print JSON (a list of rows; an object of lists for all)")
    p.set_defaults(func=_cmd_params, subparsers=sub)  # the trials topic reads `mascot trials`' options
