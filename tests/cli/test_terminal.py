"""Colour and live displays: NO_COLOR, FORCE_COLOR, TERM=dumb, terminals and pipes."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.cli._terminal import Style, console, decide

ROOT = Path(__file__).resolve().parent.parent.parent
INVALID = ROOT / "tests" / "data" / "invalid" / "duplicate_key.yaml"
ANSI = "\x1b["


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("tty", "environ", "expected"),
    [
        (True, {}, Style(color=True, live=True, terminal=True)),
        (False, {}, Style(color=False, live=False, terminal=False)),
        (True, {"NO_COLOR": "1"}, Style(color=False, live=True, terminal=True)),
        (True, {"NO_COLOR": ""}, Style(color=True, live=True, terminal=True)),
        (False, {"FORCE_COLOR": "1"}, Style(color=True, live=False, terminal=False)),
        (True, {"NO_COLOR": "1", "FORCE_COLOR": "1"}, Style(False, True, True)),
        (True, {"TERM": "dumb"}, Style(color=False, live=False, terminal=False)),
        (True, {"TERM": "dumb", "FORCE_COLOR": "1"}, Style(True, False, False)),
        (True, {"TERM": "xterm-256color"}, Style(True, True, True)),
    ],
)
def test_the_rules_decide_colour_and_live_displays(
    tty: bool, environ: dict[str, str], expected: Style
) -> None:
    stream = Terminal() if tty else io.StringIO()
    assert decide(stream, environ) == expected


def test_quiet_turns_live_displays_off_but_not_colour() -> None:
    assert decide(Terminal(), {}, quiet=True) == Style(color=True, live=False, terminal=True)


def test_a_closed_or_plain_stream_is_not_a_terminal() -> None:
    closed = io.StringIO()
    closed.close()
    assert decide(closed, {}).color is False
    assert decide(object(), {}).live is False  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("environ", "coloured"),
    [({}, True), ({"NO_COLOR": "1"}, False), ({"TERM": "dumb"}, False)],
)
def test_the_rich_console_follows_the_style_not_its_own_reading(
    environ: dict[str, str], coloured: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # the process's environment is not ours
    stream = Terminal()
    console(stream, decide(stream, environ), environ).print("[red]hot[/red]")
    assert (ANSI in stream.getvalue()) is coloured


def test_forced_colour_reaches_a_pipe_and_a_dumb_terminal() -> None:
    for stream, environ in (
        (io.StringIO(), {"FORCE_COLOR": "1"}),
        (Terminal(), {"FORCE_COLOR": "1", "TERM": "dumb"}),
    ):
        console(stream, decide(stream, environ), environ).print("[red]hot[/red]")
        assert ANSI in stream.getvalue()


@pytest.mark.parametrize(
    ("tty", "environ", "coloured"),
    [
        (True, {}, True),
        (True, {"NO_COLOR": "1"}, False),
        (True, {"TERM": "dumb"}, False),
        (False, {}, False),
        (False, {"FORCE_COLOR": "1"}, True),
    ],
)
def test_validate_colours_its_diagnostics_by_the_rules(
    tty: bool, environ: dict[str, str], coloured: bool
) -> None:
    out, err = (Terminal() if tty else io.StringIO()), io.StringIO()
    assert run(["validate", str(INVALID)], out, err, environ) == 2
    assert "error[CD002]" in re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    assert (ANSI in out.getvalue()) is coloured


# Every place that decides colour goes through cli/_terminal.py. A rich Console
# in frontend/_render.py only renders into a string, when its caller said colour.
_DECIDERS = re.compile(r"\bisatty\b|\bConsole\(")
_ALLOWED = {"converge_dsl/cli/_terminal.py", "converge_dsl/frontend/_render.py"}


def test_nothing_else_decides_colour_or_builds_a_console_for_a_real_stream() -> None:
    offenders = []
    for path in sorted((ROOT / "converge_dsl").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if _DECIDERS.search(code) and name not in _ALLOWED and "`isatty`" not in code:
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert offenders == []
