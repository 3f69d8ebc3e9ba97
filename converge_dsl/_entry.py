"""A Ctrl-C held while the command line starts: `hold_interrupts()`, its count in `ENTRY`.

An installer's console script imports the function it names before it calls
it, so a Ctrl-C pressed while `converge_dsl.cli` and what it needs load would
end in a traceback out of an import, before `cli.main` could hold it. The
console script's function is therefore `converge_dsl.__main__.main`, which
holds a Ctrl-C through this module first, then imports the command line; `cli`
raises a held one once its command runs (`cli._release_interrupts`: exit 130,
as one pressed a moment later). This module imports nothing but `_signal`
(what `signal` wraps: `signal`'s enums cost 0.6 ms of every start). What runs
before it (the interpreter's start, `site`, the script's own imports,
`converge_dsl`'s `__init__`) no code of the package can reach.
"""

from __future__ import annotations

try:
    import _signal  # type: ignore[import-not-found]  # no stub: `signal` re-exports it
except ImportError:  # an interpreter without the C module: the module that wraps it
    import signal as _signal


class EntryPoint:
    """Whether `run` was called by the console entry point (`main`), whose process ends with
    it; how many Ctrl-Cs it held while the command started (`hold_interrupts`)."""

    __slots__ = ("ends_process", "held")

    def __init__(self) -> None:
        self.ends_process = False
        self.held = 0

    def hold(self, number: int, frame: object) -> None:
        """Hold a first Ctrl-C; a second one is not held: it interrupts at once."""
        self.held += 1
        if self.held > 1:
            _signal.signal(_signal.SIGINT, _signal.default_int_handler)
            raise KeyboardInterrupt


ENTRY = EntryPoint()


def hold_interrupts() -> None:
    """Hold a Ctrl-C (SIGINT) from now until the command runs; not when SIGINT is
    ignored (a background job) or handled by someone else."""
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, ENTRY.hold)
