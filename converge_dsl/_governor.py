"""The one resource governor of user-controlled computation (docs/architecture.md §3).

Everything a pipeline or pack makes this process compute, templates,
expressions (`when`, `check`, pack invariants), regex matches and the JSON
Schema validation of data, runs under one `Budget`: a number of steps, an
amount of work (sizes built or scanned, counted *before* building), and the
run's deadline. Work is charged cooperatively with `spend`: a crossed bound
raises `Exhausted`; past the deadline `spend` raises `DeadlinePassed`.

- `run_deadline(clock, at)` makes `at` (on the injected `clock`) the deadline of
  everything computed inside it (the engine wraps each run; contexts copy into
  the tasks the run starts). `deadline_passed()` tells a caller whether a
  failure happened past it, so the run stops with `time_budget_exhausted`.
- `governed(steps, work)` opens one budget (one render, one expression, one
  validation) bound to the current deadline; nested `governed` blocks share
  the outer budget, so a validation inside a render counts against the render.
- `spend(steps, size)` charges the current budget; with no budget open nothing
  is counted (only the deadline is checked, when one is set).
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import chain, repeat
from typing import Any

from converge_dsl._record import Record
from converge_dsl.clock import Clock
from converge_dsl.errors import RunError

# The clock is read once every this many `spend` calls (and at the first),
# so metering stays cheap and a clock that ticks when read barely moves.
CLOCK_EVERY = 256
_TEXT = (str, bytes, bytearray)
_SCALARS = (int, float, type(None))  # bool is an int
_END = object()


class Exhausted(RunError):
    """A bound of the governor was crossed; `message` says which."""


class DeadlinePassed(Exhausted):
    """The run's deadline (`max_wall_s`) passed while this computation ran."""


class Deadline(Record):
    """The run's deadline: `at` on `clock` (monotonic seconds)."""

    _fields = ("clock", "at")
    __slots__ = _fields

    def __init__(self, clock: Clock, at: float) -> None:
        self.clock = clock
        self.at = at

    def passed(self) -> bool:
        return self.clock.monotonic() > self.at


_DEADLINE: ContextVar[Deadline | None] = ContextVar("converge_dsl_deadline", default=None)


@contextmanager
def run_deadline(clock: Clock, at: float | None) -> Iterator[None]:
    """Make `at` (None: no deadline) the deadline of everything computed inside."""
    token = _DEADLINE.set(None if at is None else Deadline(clock, at))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def deadline_passed() -> bool:
    """Whether the current run's deadline has passed (False when there is none)."""
    deadline = _DEADLINE.get()
    return deadline is not None and deadline.passed()


class Budget:
    """What one governed computation may still spend: steps, work, and the deadline."""

    __slots__ = ("deadline", "max_steps", "max_work", "steps", "tick", "what", "work")

    def __init__(self, steps: int, work: int, what: str = "template") -> None:
        self.steps = self.max_steps = steps
        self.work = self.max_work = work
        self.what = what
        self.deadline = _DEADLINE.get()
        self.tick = 0

    def spend(self, steps: int = 1, size: int = 0) -> None:
        """Charge `steps` and `size`; raise `Exhausted` or `DeadlinePassed`."""
        self.steps -= steps
        self.work -= size
        if self.steps < 0:
            raise Exhausted(f"{self.what} exceeded its budget of {self.max_steps} steps")
        if self.work < 0:
            raise Exhausted(
                f"{self.what} built or scanned more than {self.max_work} characters or items"
            )
        if self.deadline is not None:
            self.tick -= 1
            if self.tick < 0:
                self.tick = CLOCK_EVERY
                if self.deadline.passed():
                    raise DeadlinePassed(
                        f"the run's deadline (max_wall_s) passed while a {self.what} ran",
                        hint="raise budget.max_wall_s, or make this computation do less work",
                    )


BUDGET: ContextVar[Budget | None] = ContextVar("converge_dsl_budget", default=None)


@contextmanager
def governed(steps: int, work: int, what: str = "template") -> Iterator[Budget]:
    """Open a budget for one computation (or join the one already open)."""
    outer = BUDGET.get()
    if outer is not None:
        yield outer
        return
    budget = Budget(steps, work, what)
    token = BUDGET.set(budget)
    try:
        yield budget
    finally:
        BUDGET.reset(token)


def spend(steps: int = 1, size: int = 0) -> None:
    """Charge the current budget (see `Budget.spend`); nothing is counted without one."""
    budget = BUDGET.get()
    if budget is not None:
        budget.spend(steps, size)


def deep_size(value: Any, limit: int) -> int:
    """Items and characters of `value`, nested ones included, stopping once past `limit`.

    A string or bytes counts its length; a container one per item plus the
    deep size of each item; a shared reference counts each time it is reached
    (what printing, comparing or repeating it costs). Scalars count nothing.
    A flat list or tuple of scalars or of strings is counted in C.
    """
    if isinstance(value, _TEXT):
        return len(value)
    flat = _flat_size(value)
    if flat is not None:
        return flat
    total = 0
    stack: list[Iterator[Any]] = [_items(value)]
    while stack:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
            continue
        total += 1
        if isinstance(item, _TEXT):
            total += len(item)
        elif not isinstance(item, _SCALARS):
            flat = _flat_size(item)
            if flat is None:
                stack.append(_items(item))
            else:
                total += flat
        if total > limit:
            break
    return total


def _flat_size(value: Any) -> int | None:
    """The deep size of a list or tuple of scalars or of strings, else None."""
    if not isinstance(value, list | tuple):
        return None
    if all(map(isinstance, value, repeat(_SCALARS))):
        return len(value)
    if all(map(isinstance, value, repeat(str))):
        return len(value) + sum(map(len, value))
    return None


def _items(value: Any) -> Iterator[Any]:
    """The parts of a value a walk descends into (none for a scalar or an opaque object)."""
    try:
        if isinstance(value, Mapping):
            return chain.from_iterable(value.items())
        if isinstance(value, Collection):
            return iter(value)
    except Exception:  # an object that refuses iteration (an undefined value) is opaque
        return iter(())
    # No dataclass exists until `dataclasses` is imported (`validate` never does).
    dataclasses = sys.modules.get("dataclasses")
    if dataclasses is not None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (getattr(value, f.name) for f in dataclasses.fields(value))
    return iter(())


def charge_deep(*values: Any) -> None:
    """Charge the work of walking the smallest of `values` in full (a comparison)."""
    budget = BUDGET.get()
    if budget is not None:
        smallest = max(budget.work, 0) + 1
        for value in values:  # each walk stops at the smallest size so far
            smallest = min(smallest, deep_size(value, smallest))
        budget.spend(1, smallest if values else 0)
