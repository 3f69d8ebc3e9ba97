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
- `governed(..., pool=(name, total))` also draws on a run-wide pool: every
  budget of that name opened inside one `run_deadline` shares `total` steps
  (the run's total of JSON Schema validation); crossing it says so.
- `spend(steps, size)` charges the current budget; with no budget open nothing
  is counted (only the deadline is checked, every `CLOCK_EVERY` calls, when one
  is set).
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
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
_CONTAINERS = (list, tuple, set, frozenset)
_END = object()


class Exhausted(RunError):
    """A bound of the governor was crossed; `message` says which.

    `code` is the diagnostic code a caller that located the computation gives
    it (a schema validation: which key, which keyword); None until then.
    `pooled` is true when the run-wide pool, not the one budget, ran out.
    """

    code: str | None = None
    pooled: bool = False
    trail: Any = None  # where inside the computation, gathered by the caller that locates it


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
# Pool name -> steps the run has left; one dict per run, shared by the tasks it starts.
_POOLS: ContextVar[dict[str, int] | None] = ContextVar("converge_dsl_pools", default=None)
_UNBUDGETED_TICK = [0]  # `spend` calls with no budget open until the next clock read


@contextmanager
def run_deadline(clock: Clock, at: float | None) -> Iterator[None]:
    """Make `at` (None: no deadline) the deadline of everything computed inside,
    and open the run-wide pools (see `governed`)."""
    token = _DEADLINE.set(None if at is None else Deadline(clock, at))
    pools = _POOLS.set({})
    try:
        yield
    finally:
        _POOLS.reset(pools)
        _DEADLINE.reset(token)


def deadline_passed() -> bool:
    """Whether the current run's deadline has passed (False when there is none)."""
    deadline = _DEADLINE.get()
    return deadline is not None and deadline.passed()


class Budget:
    """What one governed computation may still spend: steps, work, and the deadline."""

    __slots__ = (
        "deadline",
        "max_steps",
        "max_work",
        "pool",
        "pool_total",
        "steps",
        "tick",
        "what",
        "work",
    )

    def __init__(
        self, steps: int, work: int, what: str = "template", pool: tuple[str, int] | None = None
    ) -> None:
        self.pool: str | None = None
        self.pool_total = 0
        pools = _POOLS.get() if pool is not None else None
        if pool is not None and pools is not None:
            name, total = pool
            left = pools.setdefault(name, total)
            if left < steps:  # the run's pool binds before this budget does
                self.pool, self.pool_total, steps = name, total, max(left, 0)
        self.steps = self.max_steps = steps
        self.work = self.max_work = work
        self.what = what
        self.deadline = _DEADLINE.get()
        # `spend` reads the clock when the tick runs out: at once with a deadline, else never.
        self.tick = 0 if self.deadline is not None else sys.maxsize

    def spend(self, steps: int = 1, size: int = 0) -> None:
        """Charge `steps` and `size`; raise `Exhausted` or `DeadlinePassed`."""
        self.steps -= steps
        self.work -= size
        if self.steps < 0:
            if self.pool is not None:
                exc = Exhausted(
                    f"{self.what} took the run past its total of {self.pool_total} steps "
                    f"of {self.pool}"
                )
                exc.pooled = True
                raise exc
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


class governed:  # lower case: it reads as the function it was, `with governed(...)`
    """Open a budget for one computation (or join the one already open).

    With `pool` (name, total), the steps this budget spends are also taken
    from the run's pool of that name, which starts at `total` in each
    `run_deadline`; outside a run there is no pool.

    A class, not a generator-based context manager: every render, expression
    and validation opens one, and the generator's frames cost a tenth of a
    template's render (`bench/batch.py`, CPU per case).
    """

    __slots__ = ("_budget", "_pool", "_steps", "_token", "_what", "_work")

    def __init__(
        self, steps: int, work: int, what: str = "template", pool: tuple[str, int] | None = None
    ) -> None:
        self._steps = steps
        self._work = work
        self._what = what
        self._pool = pool
        self._budget: Budget | None = None
        self._token: Token[Budget | None] | None = None

    def __enter__(self) -> Budget:
        outer = BUDGET.get()
        if outer is not None:
            return outer
        budget = self._budget = Budget(self._steps, self._work, self._what, self._pool)
        self._token = BUDGET.set(budget)
        return budget

    def __exit__(self, *exc: object) -> None:
        budget, token, pool = self._budget, self._token, self._pool
        if budget is None or token is None:
            return  # joined the outer budget
        self._budget = self._token = None
        BUDGET.reset(token)
        pools = _POOLS.get() if pool is not None else None
        if pool is not None and pools is not None:
            pools[pool[0]] = pools.get(pool[0], pool[1]) - (budget.max_steps - budget.steps)


def spend(steps: int = 1, size: int = 0) -> None:
    """Charge the current budget (see `Budget.spend`); without one, only the run's
    deadline is checked (every `CLOCK_EVERY` calls)."""
    budget = BUDGET.get()
    if budget is not None:
        # `Budget.spend` inlined while no bound is crossed and no clock read is due:
        # every attribute read, call and filter of a render comes here (`bench/batch.py`).
        steps_left, work_left = budget.steps - steps, budget.work - size
        if steps_left >= 0 and work_left >= 0 and budget.tick > 0:
            budget.steps, budget.work = steps_left, work_left
            budget.tick -= 1
        else:
            budget.spend(steps, size)
        return
    _UNBUDGETED_TICK[0] -= 1
    if _UNBUDGETED_TICK[0] < 0:
        _UNBUDGETED_TICK[0] = CLOCK_EVERY
        deadline = _DEADLINE.get()
        if deadline is not None and deadline.passed():
            raise DeadlinePassed(
                "the run's deadline (max_wall_s) passed while a computation ran",
                hint="raise budget.max_wall_s, or make this computation do less work",
            )


def deep_size(value: Any, limit: int) -> int:
    """Items and characters of `value`, nested ones included, stopping once past `limit`.

    A string or bytes counts its length; a container one per item plus the
    deep size of each item; a shared reference counts each time it is reached
    (what printing, comparing or repeating it costs). Scalars count nothing.
    A flat list or tuple of scalars or of strings is counted in C.
    """
    if isinstance(value, _TEXT):
        return len(value)
    if isinstance(value, _SCALARS):  # most comparisons are of numbers: no walk
        return 0
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
    if isinstance(value, dict):  # the usual containers, before the slower ABC checks
        return chain.from_iterable(value.items())
    if isinstance(value, _CONTAINERS):
        return iter(value)
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
        if values and isinstance(values[0], _SCALARS):  # what the loop below ends with at once
            spend(1, 0)
            return
        smallest = max(budget.work, 0) + 1
        for value in values:  # each walk stops at the smallest size so far
            if isinstance(value, _SCALARS):  # nothing to walk: the comparison is a step
                smallest = 0
                break
            smallest = min(smallest, deep_size(value, smallest))
        spend(1, smallest if values else 0)  # the same budget, by its inlined fast path
