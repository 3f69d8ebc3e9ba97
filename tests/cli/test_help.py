"""Every argument of every command and sub-command explains itself in `--help`."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator

import pytest

from converge_dsl.cli import run
from converge_dsl.cli._completion import build_parser


def _parsers(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[argparse.ArgumentParser, list[argparse.Action]]]:
    yield parser, parser._actions
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from _parsers(child)


def _display(action: argparse.Action) -> str:
    return action.metavar if isinstance(action.metavar, str) else action.dest


def _problems() -> list[str]:
    problems = []
    for parser, actions in _parsers(build_parser()):
        for action in actions:
            where = f"{parser.prog} {'/'.join(action.option_strings) or _display(action)}"
            if not action.help or action.help == argparse.SUPPRESS:
                problems.append(f"{where}: no help")
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    if not choice.help:
                        problems.append(f"{parser.prog} {choice.dest}: sub-command without help")
            elif not action.option_strings and not _display(action).isupper():
                problems.append(f"{where}: shown as a bare name, not a METAVAR")
    return problems


def test_every_argument_has_help_and_every_positional_a_metavar() -> None:
    assert _problems() == []


def test_the_walk_sees_every_sub_command_and_would_catch_a_bare_argument() -> None:
    """The check has teeth: it reaches `pack yank`, and a bare argument fails it."""
    progs = {parser.prog for parser, _ in _parsers(build_parser())}
    assert {"converge-dsl pack yank", "converge-dsl trace expand"} <= progs
    bare = argparse.ArgumentParser(prog="demo")
    bare.add_argument("name")
    assert [a.dest for a in bare._actions if not a.help] == ["name"]


@pytest.mark.parametrize(
    "action", ["publish", "list", "info", "fetch", "verify", "add", "yank", "keygen"]
)
def test_pack_help_shows_metavars_and_explanations(action: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run(["pack", action, "--help"], out, err, {}) == 0
    usage = out.getvalue().split("\n\n", 1)[0]
    assert not any(word in usage for word in (" name", " version", " pipeline", " pack_dir"))
