"""What a command line that argparse refused says: whether it asked for `--format json`,
which word names the file.

Read only when argparse refuses one (`cli._dispatch`): its error is then also
the one JSON error object on standard output, as every other failure of a
`--format json` command is, or `run`'s run-result document naming the file.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from converge_dsl.cli import _option_strings


def asks_json(parser: argparse.ArgumentParser, args: Sequence[str]) -> bool:
    """Whether the command line `args`, which `parser` refused, asked for `--format json`.

    Read as argparse reads it: the last `--format` given wins, as `--format json`,
    `--format=json` or a unique abbreviation (`--form json`); nothing after `--`
    is an option. Only when the command (or one of its sub-commands) has a
    `--format` that offers `json`.
    """
    if not offers_json(parser):
        return False
    known = set(_option_strings(parser))
    asked = None
    for at, word in enumerate(args):
        if word == "--":
            break
        name, equals, value = word.partition("=")
        if not name.startswith("--"):
            continue
        if name != "--format":
            near = {option for option in known if option.startswith(name)}
            if near != {"--format"}:
                continue
        if not equals:
            value = args[at + 1] if at + 1 < len(args) else ""
        asked = value
    return asked == "json"


def offers_json(parser: argparse.ArgumentParser) -> bool:
    """Whether `parser` or one of its sub-commands' parsers has a `--format` offering `json`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if any(offers_json(sub) for sub in dict.fromkeys(action.choices.values())):
                return True
        elif "--format" in action.option_strings and "json" in (action.choices or ()):
            return True
    return False


def first_operand(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """The first word of `argv` that is neither an option nor an option's value ("" if
    none): `run --format json p.yaml` names `p.yaml`, not `json`."""
    options = parser._option_string_actions  # argparse keeps no public table of them
    words = iter(argv)
    for word in words:
        if word == "--":
            return next(words, "")
        if not word.startswith("-") or word == "-":
            return word
        action = options.get(word)
        if action is not None and action.nargs != 0:
            next(words, None)  # its value
    return ""
