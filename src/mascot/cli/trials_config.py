"""Trials config files: a TOML ``[trials]`` table whose keys are ``mascot trials`` options.

``mascot trials --config FILE`` and ``mascot slurm submit FILE`` read the same file, so the job a cluster
runs is the one a user can run (or dry-run) by hand. Keys are the long options without dashes, with
``_`` for ``-`` (``n_trials = 100`` is ``--n-trials 100``); flags take ``true``/``false``, ``topology``
a string or a list, ``initial_state`` a string ``"50,A,3"`` or a list ``[50, "A", 3]`` (the task's initial state:
the SR paper gives none, mascot's default is its own choice). ``[output] dir`` is ``--out``. Options given on the
command line come after the
file's, so they win (a ``--topology`` on the command line replaces the file's list; ``--no-unpaired``,
``--figures``, ``--probe`` and the other negations undo a flag the file turns on). Example (``configs/trials/qwen25_paper.toml``)::

    [trials]
    backend = "vllm"
    model = "Qwen/Qwen2.5-7B-Instruct"
    temp = 0.8
    n_trials = 100

    [output]
    dir = "runs/qwen25-trials"
"""

from __future__ import annotations

import argparse

from mascot.errors import InputError
from mascot.io import read_toml

__all__ = ["is_trials_config", "load_trials_config", "parse_initial_state", "trials_argv"]

NOT_CONFIG_KEYS = {"help", "config"}  # options of `mascot trials` that a [trials] table cannot set


def parse_initial_state(text: str) -> tuple:
    """``--initial-state VALUE,PARITY,LEVEL`` (e.g. ``50,A,3``) -> ``(50.0, "A", 3)``, validated like the task's
    states (Parity A or B, Level an integer in 1..9). The SR paper does not give the task's initial state;
    mascot's default ``50,A,3`` is mascot's choice."""
    from mascot.theory.state_tracking import validate_state

    parts = [x.strip() for x in str(text).split(",")]
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"--initial-state must be VALUE,PARITY,LEVEL (e.g. 50,A,3); got {text!r}")
    try:
        value = float(parts[0])
        level = int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--initial-state must be VALUE,PARITY,LEVEL with a number VALUE and an "
            f"integer LEVEL (e.g. 50,A,3); got {text!r}"
        ) from None
    try:
        validate_state({"Value": value, "Parity": parts[1], "Level": level})
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--initial-state {text!r}: {e}") from None
    if abs(value) > 1e9:  # (1e300 ran, and every reply, the surrogate's own, failed to parse)
        raise argparse.ArgumentTypeError(f"--initial-state {text!r}: |VALUE| must be at most 1e9")
    return value, parts[1], level


def is_trials_config(path) -> bool:
    """Whether ``path`` is a trials config (a ``[trials]`` table) rather than a sweep config."""
    return "trials" in read_toml(path)


def load_trials_config(path) -> dict:
    """The validated ``[trials]`` table plus ``out`` (from ``[output] dir``, if given)."""
    doc = read_toml(path)
    unknown = set(doc) - {"trials", "output"}
    if unknown:
        keys = sorted(k for k in unknown if not isinstance(doc[k], dict))
        if keys:  # (an option written above the tables: "unknown table(s) ['n_trials']" misled)
            raise InputError(f"{path}: key(s) {keys} outside any table; options go in the [trials] table")
        raise InputError(f"{path}: unknown table(s) {sorted(unknown)}; a trials config has [trials] and [output]")
    if "trials" not in doc or not isinstance(doc["trials"], dict):
        raise InputError(f"{path}: no [trials] table")
    out = dict(doc["trials"])
    output = doc.get("output", {})
    if set(output) - {"dir"}:
        raise InputError(f"{path}: [output] takes only 'dir'; got {sorted(output)}")
    if "dir" in output:
        if not isinstance(output["dir"], str) or not output["dir"]:  # (dir = 5 wrote into a directory "5")
            raise InputError(f"{path}: [output] dir must be a path (a string); got {output['dir']!r}")
        if "out" in out:
            raise InputError(f"{path}: give the run directory once ([output] dir or [trials] out)")
        out["out"] = output["dir"]
    return out


def trials_argv(path, parser: argparse.ArgumentParser, command_line=(), keys: dict | None = None) -> list[str]:
    """``mascot trials`` arguments equivalent to the file, checked against ``parser`` (the trials
    sub-parser): unknown keys and wrongly typed values are errors naming the key. A repeatable option
    (``--topology``) that ``command_line`` (the arguments after the file) also gives is left out: the command
    line's list replaces the file's, as its other options override the file's values. ``keys``, if given, is
    filled with option -> the file's key for each option the file sets and ``command_line`` does not (a later
    error about the option names the key too)."""
    table = load_trials_config(path)
    actions = {}
    for a in parser._actions:
        longs = [s for s in a.option_strings if s.startswith("--")]
        if longs and a.dest not in NOT_CONFIG_KEYS:
            actions[longs[0][2:].replace("-", "_")] = (longs[0], a)
    argv: list[str] = []
    given: dict[str, str] = {}  # option dest -> the key that set it
    for key, value in table.items():
        if key not in actions:
            raise InputError(f"{path}: unknown key '{key}' in [trials]; valid keys: {', '.join(sorted(actions))}")
        flag, action = actions[key]
        if action.dest in given:  # an alias of a key already given (temp and temperature): the last one won
            raise InputError(f"{path}: '{key}' and '{given[action.dest]}' set the same option; give one of them")
        given[action.dest] = key
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreConstAction)) or action.nargs == 0:
            if not isinstance(value, bool):
                raise InputError(f"{path}: '{key}' is a flag: true or false; got {value!r}")
            argv += [flag] if value else _opposite(parser, action)  # (false written out: the file says so)
            continue
        if key == "initial_state" and isinstance(value, list):  # [50, "A", 3] -> "50,A,3"
            if len(value) != 3 or any(isinstance(v, (dict, list, bool)) for v in value):
                raise InputError(
                    f"{path}: 'initial_state' takes [VALUE, PARITY, LEVEL] or \"VALUE,PARITY,LEVEL\"; got {value!r}"
                )
            value = ",".join(str(v) for v in value)
        repeatable = isinstance(action, argparse._AppendAction)
        values = value if isinstance(value, list) and repeatable else [value]
        if repeatable and not values:  # (an empty list used to mean the option's default: every topology)
            raise InputError(f"{path}: '{key}' is an empty list; give at least one value, or leave the key out")
        if repeatable and any(a == flag or a.startswith(flag + "=") for a in command_line):
            continue  # the command line's own list replaces the file's
        for v in values:
            if isinstance(v, (dict, list)) or isinstance(v, bool):
                kind = {None: "a string", int: "a whole number", float: "a number"}.get(action.type, "a value")
                raise InputError(f"{path}: '{key}' takes {kind}; got {v!r}")
            if callable(action.type):  # checked here, so the error names the file's key, not only the option
                try:
                    action.type(str(v))
                except (ValueError, TypeError, argparse.ArgumentTypeError) as e:
                    why = {int: "takes a whole number", float: "takes a number"}.get(action.type, str(e))
                    raise InputError(f"{path}: '{key}' = {v!r}: {why}") from None
            if action.choices is not None and str(v) not in map(str, action.choices):
                raise InputError(f"{path}: '{key}' = {v!r}: one of {', '.join(map(str, action.choices))}")
            argv += [flag, str(v)]
        if keys is not None and not any(a == flag or a.startswith(flag + "=") for a in command_line):
            keys[flag] = key
    return argv


def _opposite(parser: argparse.ArgumentParser, action) -> list[str]:
    """The flag that undoes ``action`` (a flag): ``--no-X`` of a ``--X/--no-X`` pair, or the other flag that
    sets the same option the other way (``--figures`` for ``--no-figures``); none where there is none."""
    if isinstance(action, argparse.BooleanOptionalAction):
        return [s for s in action.option_strings if s.startswith("--no-")][:1]
    for other in parser._actions:
        if other is not action and other.dest == action.dest and other.nargs == 0 and other.const != action.const:
            return [s for s in other.option_strings if s.startswith("--")][:1]
    return []


def name_config_key(msg: str, config_keys: tuple | None) -> str:
    """``msg`` with the config file's key named where it starts with an option that the file set (``--n-trials must
    be ...`` from ``n_trials = 0`` in a trials config: the user wrote the key, not the option). ``config_keys``:
    ``(path, {option: key})`` as :func:`trials_argv` fills it, or None."""
    path, keys = config_keys or (None, {})
    for flag, key in keys.items():
        after = msg[len(flag) : len(flag) + 1]
        if msg.startswith(flag) and not (after.isalnum() or after == "-"):
            return f"{msg} (set by '{key}' in {path})"
    return msg
