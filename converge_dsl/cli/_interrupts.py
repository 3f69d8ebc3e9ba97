"""`converge-dsl run` interrupted (Ctrl-C, SIGINT), as the command's docstring promises.

- `stoppable(start, stop, say)` (on a loop of its own: `run_stoppable`) runs a
  run so that a first Ctrl-C asks it to stop with `cancelled`
  (`runtime.StopRequest`): it ends as any run does and its result is printed.
  A Ctrl-C while no engine runs (the pipeline loading, the run closing), or a
  second one, raises `KeyboardInterrupt` at once.
- `interrupts_held()` holds a Ctrl-C while a result is written, then raises it:
  what is written is whole.
- `interrupted_document(pipeline)` is the run-result document of a run
  interrupted before its own was printed: `cancelled`, CD908 at the pipeline
  file, no facts, cycles or usage (`_run.interrupted` writes it, called by the
  command line for a Ctrl-C at any moment before the result, one pressed while
  the command was starting included: the console entry point holds that one
  until the command runs, `cli._hold_interrupts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from converge_dsl.runtime import RunOutcome, RunResultDocument, StopRequest


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """A Ctrl-C while the block runs is held, then raised when it ends (a result being
    written is written whole). Only where a Ctrl-C would raise at once, in the block
    (`signal.default_int_handler`: after a first Ctrl-C); the event loop's handler
    (`stoppable`) runs between its callbacks, never inside one."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda number, frame: held.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if held:
        raise KeyboardInterrupt


async def stoppable(
    start: Callable[[], Coroutine[Any, Any, RunOutcome]],
    stop: StopRequest,
    say: Callable[[str], None],
) -> RunOutcome:
    """The run `start()` makes, a first Ctrl-C asking `stop` (and `say`ing so), one while
    no engine runs or a second one raising `KeyboardInterrupt` (see the module docstring).
    The run is made here, once the loop runs: one made before, that a Ctrl-C kept from
    being awaited, was reported "never awaited" on standard error."""
    loop = asyncio.get_running_loop()

    def interrupted() -> None:
        loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C interrupts at once
        if not stop.ask():
            raise KeyboardInterrupt
        say("interrupted: stopping the run (press Ctrl-C again to quit at once)")

    try:
        loop.add_signal_handler(signal.SIGINT, interrupted)
    except (RuntimeError, ValueError, NotImplementedError):  # not the main thread; Windows
        return await start()
    try:
        return await start()
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def run_stoppable(
    start: Callable[[], Coroutine[Any, Any, RunOutcome]],
    stop: StopRequest,
    say: Callable[[str], None],
) -> RunOutcome:
    """`stoppable` on a new event loop (`asyncio.run`). Its coroutine is closed however
    that ends: one a Ctrl-C kept from running (while the loop was made) is closed, not
    reported "never awaited"."""
    running = stoppable(start, stop, say)
    try:
        return asyncio.run(running)
    finally:
        running.close()


def interrupted_document(pipeline: Path) -> RunResultDocument:
    """The run-result document of a run a Ctrl-C (SIGINT) interrupted: `cancelled`."""
    from converge_dsl import codes
    from converge_dsl.diagnostics import Diagnostic, SourceSpan
    from converge_dsl.runtime import RunResultDocument, UsageModel

    message = (
        "the run was interrupted (Ctrl-C, SIGINT) before it stopped; "
        "the facts, cycles and usage it had reached are not reported"
    )
    where = SourceSpan(str(pipeline), 1, 1, 1, 1)
    hint = "run it again (a run with --checkpoint DIR continues with --resume DIR)"
    return RunResultDocument.build(
        stop_reason="cancelled",
        cycles=0,
        facts=(),
        diagnostics=[Diagnostic.at(codes.STOP_CANCELLED, message, where, hint=hint)],
        usage=UsageModel(),
    )
