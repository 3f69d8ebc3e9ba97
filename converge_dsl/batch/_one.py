"""One run on a worker: what it is asked with, and how its events and end travel back.

A service that hands each run to a worker (a process, a Ray actor) asks for
it with a `OneRun`: the pipeline's name, the inputs, the lower budget limits
of the request, and the checkpoint journal to write or resume, kept in a
SQLite database (WAL) that the worker opens by path through its own
`converge_dsl.runtime.SqliteJournals` (`open_journals`), with the decisions a
paused run resumes with.

`execute_one(pipeline, job, send, journals)` runs it in the worker
(`Pipeline.outcome`, the one run assembly) and tells the caller what happens
through `send(message)`, in order (a worker passes its `CheckpointKeys`: the checkpoint
key of each pipeline's environment is then read at its first run there and kept,
as the service keeps its own, instead of read from its file at every run):

- `("open", run)`, `("compiled", run, spans, kinds, sources)`, then
  `("event", run, event)` per engine event: `RelaySink`, the run's `RunSink`,
  forwards what a sink hears; `Relayed` plays it back on the caller's sinks.
  With `OneRun.encode` the event sent (and heard by the caller's sinks) is
  what `encode(event)` made of it in the worker: a caller whose sinks keep an
  event as text has it made where the event is, instead of the engine's event
  object pickled, sent and rebuilt (some 80 us a run each way for thirty
  events, against 3 for their text). An encoding that is a named tuple
  travels as `("event", run, fields, its class)`, a plain tuple and its class
  (which pickle writes once per message list), and is made again by `Relayed`:
  pickle writes a named tuple through a Python call of its own (some 30 us a
  run for thirty events, against 10).
  A worker that runs many runs of a pipeline (`ProcessWorkers`) sends the
  spans, kinds and sources of a compiled pipeline once, numbered
  (`("compiled", run, spans, kinds, sources, number)`), and then
  `("compiled", run, number)` for each later run of it (`SpansSent`): its
  reader makes that the full message again from what it kept (`SpansKnown`),
  the very same mappings each time, so the caller's sinks find what they made
  of them by identity (the spans and the pipeline's text are not pickled,
  sent and rebuilt per run: some 30 us a run).
- `("checkpoint", run)` each time a checkpoint record is queued (from the
  journal's commit thread: `send` must be thread-safe): the caller stores
  the events it has so far, so a run resumed from that record after a crash
  goes on from stored events.
- last, `("end", run, RunEnd)`: `done` with the run-result document (a pause
  too: `stop_reason` `hitl_pause`), `failed` with the run-result document of
  an error, or `cancelled`.

When the run ends the worker settles its journal before the end is sent: a
pause's records are committed (the resumed run, perhaps on another worker,
reads them from the database), and so are those of a run cancelled because
the workers close (it continues from them at the next start); a run that
ended, or that its user cancelled, drops its queued records (the caller's
transaction that stores the result deletes the journal). So no write of the
worker lands after the caller's.

`RunWorkers` is what workers offer a caller (`_one_workers`, `_one_ray`):
`submit` gives a `RunTicket` whose future is the run's `RunEnd`; `WorkerError`
(CD999) says they cannot be used. `close` stops taking runs, cancels the runs
in flight and waits (bounded) for each to end where it runs, and only then has
the workers close their pipelines (stopping the tool servers those runs were
using): a run is never cut off from its tools mid-run. Such a run's ticket ends
`lost` (`CLOSED`) once its worker has ended it: like a run whose worker died,
it continues from its journal (what the service's recovery does at its next
start). Until then its events and checkpoint messages are still played back
(the worker may commit a record after the close began: the caller stores the
events that go with it).
`InFlight` is how an actor (a run's, or a batch's) keeps that order.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import dataclasses
import functools
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from converge_dsl import codes
from converge_dsl._sqlite import open_wal
from converge_dsl.clock import Clock, SystemClock
from converge_dsl.errors import ConvergeError
from converge_dsl.runtime import CompiledMemo, RunSink

if TYPE_CHECKING:
    from pydantic import BaseModel

    from converge_dsl._json_types import JsonObject
    from converge_dsl.compiler import CompiledPipeline
    from converge_dsl.engine import Budget
    from converge_dsl.runtime import SqliteJournals

    from ._pipeline import Pipeline

__all__ = [
    "CheckpointKeys",
    "InFlight",
    "OneRun",
    "RunEnd",
    "RunTicket",
    "RunWorkers",
    "SpansKnown",
    "SpansSent",
    "WorkerError",
    "close_pipelines",
    "execute_one",
    "lowered_budget",
    "open_journals",
]

# The message of a run whose workers were closed while it ran (`RunEnd` `lost`).
CLOSED = "the workers were closed while it ran"
# How long a worker waits for its cancelled runs to end before it closes its pipelines
# anyway (seconds).
CANCEL_S = 5.0

# A message from a worker: its kind, the run's id, then what the kind carries.
Message = tuple[Any, ...]
Send = Callable[[Message], None]


@dataclass(frozen=True)
class OneRun:
    """One run to execute on a worker (see the module docstring).

    `budget` holds limits (`max_model_calls`, `max_wall_s`, ...) each applied where it
    is lower than the pipeline's own; `resume` continues the run from its journal in
    `journal` (the database), with `decisions` on the proposals it paused on, each
    recorded as decided by `decided_by`. `encode`: what the caller's sinks hear of each
    event instead of the event (see the module docstring); a function the worker can
    unpickle (a module's own), None for the events themselves.
    """

    run: str
    pipeline: str
    inputs: Mapping[str, Any]
    journal: Path
    budget: Mapping[str, float] = field(default_factory=dict)
    resume: bool = False
    decisions: Mapping[str, bool] = field(default_factory=dict)
    decided_by: str = "api"
    encode: Callable[[BaseModel], object] | None = None

    def lowered(self, budget: Budget) -> Budget:
        """`budget` with this run's limits where they are lower."""
        return lowered_budget(budget, self.budget)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled for every run sent to a worker: its fields as a tuple and the path as
        # text, against a dataclass's and a path's own reductions (some 25 us a run, the
        # two ways together).
        head = (self.run, self.pipeline, self.inputs)
        tail = (self.budget, self.resume, self.decisions, self.decided_by, self.encode)
        return (_one_run, (head, str(self.journal), tail))


def _one_run(head: tuple[Any, ...], journal: str, tail: tuple[Any, ...]) -> OneRun:
    """A `OneRun` unpickled (`OneRun.__reduce__`)."""
    run, pipeline, inputs = head
    budget, resume, decisions, decided_by, encode = tail
    return OneRun(
        run, pipeline, inputs, _path(journal), budget, resume, decisions, decided_by, encode
    )


@functools.lru_cache(maxsize=16)
def _path(text: str) -> Path:
    """`Path(text)`, made once: every run a worker is sent names the same database."""
    return Path(text)


def lowered_budget(budget: Budget, asked: Mapping[str, float]) -> Budget:
    """`budget` with each limit of `asked` that is lower (a request may lower a
    pipeline's budget, never raise it)."""
    out: dict[str, Any] = {}
    for name, value in asked.items():
        limit = getattr(budget, name)
        if limit is None or value <= limit:
            out[name] = value if name == "max_wall_s" else int(value)
    return dataclasses.replace(budget, **out)


@dataclass(frozen=True)
class RunEnd:
    """How a run on a worker ended: `done` (its run-result document as JSON, a pause
    too), `failed` (the run-result document of the error it stopped on), `cancelled`,
    or `lost` (the worker died or could not be reached: `message` says how; the run
    may continue from its journal)."""

    status: str
    body: JsonObject | None = None
    message: str = ""


@dataclass(frozen=True)
class CompiledSpans:
    """What a sink reads of a compiled pipeline, as a worker sends it: the suggestors'
    source spans and kinds."""

    spans: Mapping[str, Any]
    kinds: Mapping[str, str]


# The compiled pipelines a `SpansSent` keeps (a worker serves a few pipelines).
_SPANS_KEPT = 64


class SpansSent:
    """The compiled pipelines whose spans, kinds and sources a worker sent its caller,
    by the identity of their spans (see the module docstring). A worker's loop uses it:
    not thread-safe."""

    def __init__(self) -> None:
        self._sent: CompiledMemo[int] = CompiledMemo(_SPANS_KEPT)
        self._next = 0

    def message(self, run: str, compiled: CompiledPipeline, sources: Mapping[str, str]) -> Message:
        """The `compiled` message of `run`: its number alone when it was sent before."""
        spans, kinds = compiled.spans, compiled.kinds
        number = self._sent.find(spans, kinds, sources)
        if number is not None:
            return ("compiled", run, number)
        # A memo full forgets every number; none is used again: see `SpansKnown`.
        number, self._next = self._next, self._next + 1
        self._sent.keep(spans, kinds, sources, number)
        return ("compiled", run, dict(spans), dict(kinds), dict(sources), number)


class SpansKnown:
    """The caller's side of one worker's `SpansSent`: what each number stands for. One
    thread reads that worker's messages, in order: not thread-safe."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, ...]] = {}

    def full(self, message: Message) -> Message:
        """The `compiled` `message` as `Relayed` reads it, `("compiled", run, spans, kinds,
        sources)`: a numbered one kept, a number alone made whole again."""
        if len(message) == 3:
            return ("compiled", message[1], *self._known[message[2]])
        if len(message) == 6:
            # The worker keeps at most `_SPANS_KEPT` numbers, all among the latest it sent.
            if len(self._known) >= _SPANS_KEPT:
                del self._known[next(iter(self._known))]
            self._known[message[5]] = message[2:5]
            return message[:5]
        return message


class RelaySink(RunSink):
    """The worker's side of the caller's sinks: every hook it hears, sent on (each event
    as `encode` makes it, when given; the compiled pipeline once per `sent`)."""

    listens = True

    def __init__(
        self,
        run: str,
        send: Send,
        encode: Callable[[BaseModel], object] | None = None,
        sent: SpansSent | None = None,
    ) -> None:
        self._run = run
        self._send = send
        self._encode = encode
        self._sent = sent

    def open(self, clock: Clock) -> None:
        self._send(("open", self._run))

    def on_compiled(self, compiled: CompiledPipeline, sources: Mapping[str, str]) -> None:
        if self._sent is not None:
            self._send(self._sent.message(self._run, compiled, sources))
            return
        spans = dict(compiled.spans)
        self._send(("compiled", self._run, spans, dict(compiled.kinds), dict(sources)))

    def on_event(self, event: BaseModel) -> None:
        encode = self._encode
        if encode is None:
            self._send(("event", self._run, event))
            return
        encoded = encode(event)
        made = type(encoded)
        if made is not tuple and isinstance(encoded, tuple):  # a named tuple
            self._send(("event", self._run, tuple(encoded), made))
        else:
            self._send(("event", self._run, encoded))


class Relayed:
    """The caller's side: plays a run's messages back on its `sinks`, calls
    `on_checkpoint` for each checkpoint record, and keeps the end. Not thread-safe:
    one thread delivers a run's messages, in order."""

    def __init__(
        self,
        sinks: Sequence[RunSink],
        on_checkpoint: Callable[[], object] = lambda: None,
        clock: Clock | None = None,
    ) -> None:
        self._sinks = tuple(sinks)
        self._on_checkpoint = on_checkpoint
        self._clock = clock or SystemClock()
        self._opened = False

    def deliver(self, message: Message) -> RunEnd | None:
        """Play `message` back; the run's `RunEnd` when it is the last one."""
        kind = message[0]
        if kind == "event":
            event = message[2] if len(message) == 3 else message[3]._make(message[2])
            for sink in self._sinks:
                sink.on_event(event)
        elif kind == "checkpoint":
            self._on_checkpoint()
        elif kind == "open":
            self._opened = True
            for sink in self._sinks:
                sink.open(self._clock)
        elif kind == "compiled":
            compiled = cast("CompiledPipeline", CompiledSpans(message[2], message[3]))
            for sink in self._sinks:
                sink.on_compiled(compiled, message[4])
        elif kind == "end":
            self.close()
            return cast("RunEnd", message[2])
        return None

    def close(self) -> None:
        """Close the sinks if they were opened (once)."""
        if self._opened:
            self._opened = False
            for sink in self._sinks:
                sink.close()


class CheckpointKeys:
    """The checkpoint key of each pipeline's environment, read at the first run of the
    pipeline (on a worker, or in a service) and kept (`CheckpointRefused`, CD954, when it
    cannot be read: that run fails, and the next one reads it again). Threads may share
    it: at worst two read the file at once."""

    def __init__(self) -> None:
        self._keys: dict[str, bytes] = {}

    def of(self, pipeline: Pipeline) -> bytes:
        from converge_dsl.runtime import checkpoint_key

        key = self._keys.get(pipeline.name)
        if key is None:
            key = self._keys[pipeline.name] = checkpoint_key(pipeline.env)
        return key


def open_journals(database: Path) -> tuple[SqliteJournals, threading.Lock]:
    """A worker's own connection to the journals in `database` (WAL), and its lock.

    `ConvergeError` (CD999) when the database cannot be opened."""
    from converge_dsl.runtime import SqliteJournals

    lock = threading.Lock()
    try:
        db = open_wal(database, busy_timeout=10)
        return SqliteJournals(db, lock, str(database)), lock
    except sqlite3.Error as exc:
        raise ConvergeError(
            f"a worker cannot open the checkpoint journals in {str(database)!r}: {exc}",
            code=codes.EXECUTOR_UNUSABLE,
            hint="workers open the service's state by path: run them where the --state folder is",
        ) from None


async def execute_one(
    pipeline: Pipeline,
    job: OneRun,
    send: Send,
    journals: tuple[SqliteJournals, threading.Lock],
    *,
    ident: str | None = None,
    closing: Callable[[], bool] = lambda: False,
    keys: CheckpointKeys | None = None,
    sent: SpansSent | None = None,
) -> None:
    """Run `job` to its end and send its messages (see the module docstring), each
    naming the run as `ident` (default: `job.run`; a worker tells attempts apart); a
    cancelled task sends `cancelled` and raises `CancelledError`. Cancelled while
    `closing()` (the workers close under it), the run keeps its queued records: it
    continues from them at the next start; cancelled by its user, it drops them.
    `keys`: the worker's checkpoint keys (None: read from the key file as the run
    starts); `sent`: the compiled pipelines the worker sent its caller already."""
    from converge_dsl.runtime import Checkpointing, not_run_document

    store, lock = journals
    run = job.run
    key = ident or run

    def checkpointed() -> Sequence[Any]:
        send(("checkpoint", key))
        return ()

    end: RunEnd
    try:
        checkpoint = Checkpointing(
            job.journal.parent,
            resume=job.resume,
            decisions=dict(job.decisions),
            env=pipeline.env,
            decided_by=dict.fromkeys(job.decisions, job.decided_by),
            journal=store.journal(run, alongside=checkpointed),
            key=None if keys is None else keys.of(pipeline),
        )
        out = await pipeline.outcome(
            job.inputs,
            sinks=(RelaySink(key, send, job.encode, sent),),
            checkpoint=checkpoint,
            budget=job.lowered,
        )
        end = RunEnd("done", out.plain)
    except asyncio.CancelledError:
        _settle(store, lock, run, keep=closing())
        send(("end", key, RunEnd("cancelled")))
        raise
    except ConvergeError as exc:
        end = RunEnd("failed", _not_run(not_run_document(exc, pipeline.path)))
    except Exception as exc:  # a fault of the worker, not of the request
        error = ConvergeError(f"the run failed: {exc!r}", code=codes.SERVE_RUN_FAILED)
        end = RunEnd("failed", _not_run(not_run_document(error, pipeline.path)))
    paused = end.body is not None and end.body.get("stop_reason") == "hitl_pause"
    _settle(store, lock, run, keep=paused)
    send(("end", key, end))


def _not_run(document: Any) -> JsonObject:
    body: JsonObject = document.model_dump(mode="json")
    return body


def _settle(store: SqliteJournals, lock: threading.Lock, run: str, *, keep: bool) -> None:
    """Commit the queued records of `run` (`keep`: a pause) or drop them (it ended),
    after any group commit in progress (which holds `lock`)."""
    if keep:
        store.commit_now(run)
        return
    with lock:
        store.take(run)


class WorkerError(ConvergeError):
    """The workers cannot be used (CD999): not installed, unreachable, did not start."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, code=codes.EXECUTOR_UNUSABLE)


@dataclass
class RunTicket:
    """A run submitted to the workers: its end, once it comes."""

    run: str
    future: Future[RunEnd] = field(default_factory=Future)


class Flight:
    """A run in flight (for the workers): who plays its messages back, and its ticket."""

    def __init__(self, ticket: RunTicket, relayed: Relayed) -> None:
        self.ticket = ticket
        self.relayed = relayed
        self._cut: str | None = None

    def cut(self, why: str) -> None:
        """The workers are closing under the run: its end, once its worker sends it, is
        `lost` with `why` (its events and checkpoints until then are played back)."""
        self._cut = why

    def deliver(self, message: Message) -> bool:
        """Play `message` back; False when a sink failed (the run then ended `lost`: the
        caller cancels it where it runs)."""
        if self._cut is not None and message[0] == "end":
            self.end(RunEnd("lost", message=self._cut))
            return True
        try:
            end = self.relayed.deliver(message)
        except Exception as exc:  # a sink that failed must not lose the run's end
            self.end(RunEnd("lost", message=f"a sink of the run failed: {exc!r}"))
            return False
        if end is not None:
            self.end(end)
        return True

    def end(self, end: RunEnd) -> None:
        self.relayed.close()
        if not self.ticket.future.done():
            self.ticket.future.set_result(end)


class InFlight:
    """The runs an actor has in flight (tasks on its loop), so that its `close` first
    cancels them and waits (at most `CANCEL_S`) for them to end, and only then stops the
    tool servers they use. A run added once `closing` is cancelled at once, before its
    first step: one that must say how it ended looks at `closing` first."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closing = False

    def add(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if self.closing:
            task.cancel()

    async def cancel(self) -> None:
        """Cancel every run in flight and wait (bounded) for them to end; take no more."""
        self.closing = True
        await asyncio.sleep(0)  # each run added before now takes its first step
        running = list(self._tasks)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running, timeout=CANCEL_S)


async def close_pipelines(pipelines: Iterable[Pipeline]) -> None:
    """Close every pipeline of a worker (its tool servers, its connection pools), the
    others still closed when one fails."""
    for pipeline in pipelines:
        with contextlib.suppress(ConvergeError, OSError):
            await pipeline.aclose()


class RunWorkers(abc.ABC):
    """What a service dispatches single runs through (see the module docstring)."""

    @abc.abstractmethod
    def start(self) -> None:
        """Start the workers (bounded: `START_S`); again, nothing. `WorkerError` when
        they cannot start."""

    @abc.abstractmethod
    def submit(
        self,
        job: OneRun,
        sinks: Sequence[RunSink] = (),
        on_checkpoint: Callable[[], object] = lambda: None,
    ) -> RunTicket:
        """Run `job` on a worker; `sinks` hear its events, `on_checkpoint` each record
        (both on a thread of the workers')."""

    @abc.abstractmethod
    def cancel(self, run: str) -> None:
        """Cancel the run `run` where it runs (its ticket then ends `cancelled`)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the workers (bounded): no run is taken any more, the runs in flight are
        cancelled and end `lost` (`CLOSED`), left to their journals, and then the workers
        close their pipelines (see the module docstring)."""

    def pids(self) -> tuple[int, ...]:
        """The worker processes' ids (of this machine), for a test's look at orphans."""
        return ()
