"""What one run mutates, where its events go, and how it stops. Engine-internal.

`RunState` holds everything a run changes (context, dirty keys, Lamport
time, pending and human-rejected proposals, usage) and turns into an
`EngineState` at any cycle boundary. `EventLog` delivers a run's events to
the engine's sink and records them for the `RunResult`. Every rule that ends
the run raises `Stop`, wherever it is checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel

from converge_dsl.clock import Clock
from converge_dsl.engine import events as ev
from converge_dsl.engine.budget import StopReason, UsageMeter, UsageTotals
from converge_dsl.engine.context import Context, ContextWriter
from converge_dsl.engine.events import EventSink
from converge_dsl.engine.state import EngineState, PendingProposal
from converge_dsl.engine.types import key_sort_key
from converge_dsl.errors import ConvergeError


class Stop(Exception):
    """Ends the run with `reason` (and `error`, for `error` and `invariant_violated`).

    What the stop knows for its `StopNote` (`converge_dsl.engine.stops`): `code`
    when the raise site knows the finding better than the error's type (a
    conflict), the `suggestor` concerned (the one whose proposal hit the fact
    budget or whose merge broke a structural invariant), the `invariant`, and
    the suggestors cancelled `in_flight`.
    """

    def __init__(
        self,
        reason: StopReason,
        error: ConvergeError | None = None,
        *,
        code: str | None = None,
        suggestor: str | None = None,
        invariant: str | None = None,
        in_flight: tuple[str, ...] = (),
    ) -> None:
        super().__init__(str(reason))
        self.reason = reason
        self.error = error
        self.code = code
        self.suggestor = suggestor
        self.invariant = invariant
        self.in_flight = in_flight


def sorted_keys(keys: Iterable[str]) -> tuple[str, ...]:
    """`keys` in key sort order (built-in keys first, in their order of docs/architecture.md §3)."""
    return tuple(sorted(keys, key=key_sort_key))


def restore_usage(meter: UsageMeter, totals: UsageTotals) -> None:
    """Set `meter`'s counts to `totals` (a resumed run continues its usage)."""
    meter.restore(totals)


@dataclass(slots=True, eq=False)
class RunState:
    """The mutable state of one run.

    `dirty` holds the keys that received facts since the current cycle began
    (the next cycle's dirty keys); `promoted` counts the facts promoted in the
    current cycle; `rejected` holds the ids a human rejected, which are
    dropped silently if proposed again. `ran` and `busy` count, per suggestor,
    the executions and the seconds they took in this run (what a budget stop
    names).
    """

    context: Context
    writer: ContextWriter
    usage: UsageMeter
    dirty: set[str]
    lamport: int
    rejected: set[str]
    pending: list[PendingProposal]
    promoted: int = 0
    ran: dict[str, int] = field(default_factory=dict)
    busy: dict[str, float] = field(default_factory=dict)

    @classmethod
    def restore(cls, state: EngineState, usage: UsageMeter) -> RunState:
        """The run state continuing from `state`; `usage` is reset to the state's totals."""
        context = Context.from_facts(state.facts, cycle=state.cycle)
        restore_usage(usage, state.usage)
        return cls(
            context=context,
            writer=ContextWriter(context),
            usage=usage,
            dirty=set(state.dirty),
            lamport=state.lamport,
            rejected=set(state.rejected_ids),
            pending=list(state.pending),
        )

    def snapshot(self) -> EngineState:
        """The resumable `EngineState` of the run as it stands."""
        return EngineState(
            facts=self.context.facts(),
            cycle=self.context.cycle,
            dirty=sorted_keys(self.dirty),
            lamport=self.lamport,
            rejected_ids=tuple(sorted(self.rejected)),
            pending=tuple(self.pending),
            usage=self.usage.totals,
        )


class EventLog:
    """A run's events: each goes to the sink (if any) and, with `record`, into `events`.

    `enabled` is false when nobody would see an event, so callers skip
    building them at all. `emit(event)` is bound once, when the log is made, to
    what hears it (the sink itself when nothing is recorded, as a served run's
    log is): an event costs no call of the log's own.
    """

    __slots__ = ("_clock", "_record", "emit", "enabled", "events")

    def __init__(self, sink: EventSink | None, *, record: bool, clock: Clock) -> None:
        self._record = record
        self._clock = clock
        self.enabled = sink is not None or record
        self.events: list[BaseModel] = []
        self.emit: EventSink = _delivery(sink, self.events if record else None)

    def timing(self, duration: float | None = None) -> ev.Timing:
        """A `Timing` read from the run's clock now."""
        return ev.from_fields(ev.Timing, {"at": self._clock.monotonic(), "duration_s": duration})

    def recorded(self) -> tuple[BaseModel, ...]:
        """The recorded events (empty when recording is off)."""
        return tuple(self.events) if self._record else ()


def _delivery(sink: EventSink | None, kept: list[BaseModel] | None) -> EventSink:
    """What `EventLog.emit` is: `sink`, after appending the event to `kept` when given."""
    if kept is None:
        return _drop if sink is None else sink
    if sink is None:
        return kept.append
    keep, tell = kept.append, sink

    def both(event: BaseModel) -> None:
        keep(event)
        tell(event)

    return both


def _drop(event: BaseModel) -> None:
    """Nobody hears it (callers check `EventLog.enabled` first and build none)."""
