"""The one place the command line decides colour and live displays.

Every command asks `decide(stream, environ)` (through `CommandIO.style`) and
makes its rich consoles with `console(stream, style)`; nothing else calls
`isatty` or builds a rich `Console` for a real stream (a test greps for it).
The rules, first match wins:

- `NO_COLOR` set and not empty: no colour (https://no-color.org), whatever else says;
- `FORCE_COLOR` set and not empty: colour, even in a pipe or a CI log
  (https://force-color.org);
- `TERM=dumb`: no colour;
- otherwise colour only when the stream is a terminal.

A live display (a progress bar or status line that redraws in place) needs a
terminal whose `TERM` is not `dumb`, and `--quiet` turns it off: `FORCE_COLOR`
colours plain output but never makes a log redraw.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TextIO

from converge_dsl._record import Record

if TYPE_CHECKING:
    from rich.console import Console


class Style(Record):
    """What a stream may show: ANSI colour, displays that redraw in place (`live`),
    and rich layout such as tables (`terminal`: a terminal that is not dumb).

    A `Record`, not a dataclass: `validate` decides its style (docs/architecture.md §5)."""

    _fields = ("color", "live", "terminal")
    __slots__ = _fields

    def __init__(self, color: bool, live: bool, terminal: bool) -> None:
        self.color = color
        self.live = live
        self.terminal = terminal


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is an interactive terminal (false for anything without `isatty`)."""
    isatty: Any = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed file
        return False


def decide(stream: TextIO, environ: Mapping[str, str], *, quiet: bool = False) -> Style:
    """The `Style` of `stream` under the rules of the module docstring."""
    terminal = is_terminal(stream)
    dumb = environ.get("TERM", "") == "dumb"
    if environ.get("NO_COLOR", ""):
        color = False
    elif environ.get("FORCE_COLOR", ""):
        color = True
    else:
        color = terminal and not dumb
    capable = terminal and not dumb
    return Style(color=color, live=capable and not quiet, terminal=capable)


def console(stream: TextIO, style: Style, environ: Mapping[str, str]) -> Console:
    """A rich console on `stream` that shows exactly what `style` allows.

    Rich reads the environment itself; it is given ours (not the process's)
    and explicit answers, so the two can never disagree.
    """
    from rich.console import Console

    # Rich finds no colours on a dumb terminal; a forced colour there gets the basic eight.
    system: Literal["standard", "auto"] = (
        "standard" if environ.get("TERM", "") == "dumb" else "auto"
    )
    return Console(
        file=stream,
        force_terminal=style.color or style.live,
        no_color=not style.color,
        color_system=system if style.color else None,
        _environ=dict(environ),
    )
