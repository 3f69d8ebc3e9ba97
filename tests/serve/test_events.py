"""The service's compact event records render as the very lines `--trace` writes."""

from __future__ import annotations

import asyncio
import json
import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any, cast

from pydantic import BaseModel

from converge_dsl import load
from converge_dsl.agents._events import SpanCleared, TextPartLine
from converge_dsl.clock import FakeClock, rfc3339
from converge_dsl.compiler import CompiledPipeline
from converge_dsl.diagnostics import SourceSpan
from converge_dsl.engine import events as ev
from converge_dsl.runtime import TraceSink, TraceWriter
from converge_dsl.serve._events import EventSink, LiveRun, event_json, render

ROOT = Path(__file__).resolve().parents[2]


def _records(live: LiveRun) -> list[str]:
    return [render(seq, record) for seq, record in live.records]


def test_a_run_streams_the_lines_its_trace_file_holds(tmp_path: Path) -> None:
    pipeline = load(ROOT / "pipelines" / "market-entry.yaml")
    trace = tmp_path / "trace.jsonl"

    async def main() -> list[str]:
        live = LiveRun(0, asyncio.get_running_loop())
        await pipeline.outcome(
            {"market": "Baltic 3PL"},
            sinks=(EventSink(live, lambda: None), TraceSink(trace)),
        )
        await pipeline.aclose()
        return _records(live)

    streamed = [json.loads(line) for line in asyncio.run(main())]
    written = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(streamed) == len(written) > 20
    for mine, theirs in zip(streamed, written, strict=True):
        assert list(mine) == list(theirs)  # the same fields in the same order
        assert {**mine, "time": None} == {**theirs, "time": None}  # read a moment apart
        assert datetime.fromisoformat(mine["time"]).tzinfo is not None
    assert "excerpts" in streamed[0]
    assert "kinds" in streamed[0]


def _pair(events: list[BaseModel]) -> tuple[list[str], list[str]]:
    """The same events through the service's sink and the trace writer, on one clock."""
    clock = FakeClock()
    writer = TraceWriter({}, None, wall=clock)

    async def main() -> list[str]:
        live = LiveRun(0, asyncio.get_running_loop())
        sink = EventSink(live, lambda: None)
        sink.open(clock)
        for event in events:
            sink.on_event(event)
            clock.advance(0.001234)
        return _records(live)

    streamed = asyncio.run(main())
    clock = FakeClock()
    writer = TraceWriter({}, None, wall=clock)
    written = []
    for event in events:
        written.append(json.dumps(writer.line(event), ensure_ascii=False, separators=(",", ":")))
        clock.advance(0.001234)
    return streamed, written


def test_numbers_json_cannot_hold_and_any_text_render_as_the_trace_writes_them() -> None:
    data: Any = {"nan": math.nan, "big": 1e300, "small": 1e-7, "text": 'é\u2028\t"\\'}
    events: list[BaseModel] = [
        ev.RunStarted(suggestors=1, seeds=0, budget={"max_wall_s": math.inf, "max_cycles": 3}),
        ev.FactPromoted(
            cycle=1,
            suggestor="s",
            key="k",
            id="i",
            gate="g",
            logical_time=1,
            data=data,
            confidence=-math.inf,
            timing=ev.Timing(at=0.1, duration_s=None),
        ),
    ]
    streamed, written = _pair(events)
    assert streamed == written
    assert "-Infinity" in streamed[1]
    assert "Infinity" in streamed[0]


def test_a_line_stored_whole_by_an_older_server_is_read_as_it_is() -> None:
    line = '{"seq":3,"type":"cycle_started"}'
    assert render(3, line) == line


def test_a_run_nobody_follows_wakes_nothing_and_a_follower_is_woken() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        live = LiveRun(0, loop)
        scheduled: list[object] = []
        original = loop.call_soon_threadsafe

        def counting(callback: Any, *args: Any) -> Any:
            scheduled.append(callback)
            return original(callback, *args)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        for seq in range(10):
            live.add(seq, "x")
        assert scheduled == []
        follower = asyncio.create_task(live.changed(9, 5.0))
        await asyncio.sleep(0)
        live.add(10, "y")
        await asyncio.wait_for(follower, 1.0)
        assert len(scheduled) == 1
        # a record added before the follower looks is seen at once, without a wake-up
        live.add(11, "z")
        await asyncio.wait_for(live.changed(10, 5.0), 1.0)

    asyncio.run(main())


def test_rfc3339_is_strftime_s_format_for_any_moment() -> None:
    moment = datetime(1999, 12, 31, 23, 59, 59, 7, tzinfo=UTC)
    plus_two = timezone(timedelta(hours=2))
    for step in range(2000):
        later = moment + timedelta(microseconds=step * 999_983)
        for shown in (later, later.astimezone(plus_two)):
            assert rfc3339(shown) == later.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_record_whose_time_an_older_server_stored_as_text_renders_that_time() -> None:
    record = '2026-01-01T00:00:00.000001Z\tnull\t\t{"type":"cycle_started","cycle":1}'
    line = json.loads(render(4, record))
    assert line == {
        "seq": 4,
        "type": "cycle_started",
        "cycle": 1,
        "span": None,
        "time": "2026-01-01T00:00:00.000001Z",
    }
    assert json.loads(render(4, record.replace("2026-01-01T00:00:00.000001Z", "1")))["time"] == (
        "1970-01-01T00:00:00.000001Z"
    )


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def test_every_event_of_a_run_is_stored_as_json_that_reads_back_as_its_trace_fields() -> None:
    pipeline = load(ROOT / "pipelines" / "market-entry.yaml")
    seen: list[BaseModel] = []

    class Recorder(EventSink):
        def on_event(self, event: BaseModel) -> None:
            seen.append(event)
            super().on_event(event)

    async def main() -> None:
        live = LiveRun(0, asyncio.get_running_loop())
        await pipeline.outcome({"market": "Baltic 3PL"}, sinks=(Recorder(live, lambda: None),))
        await pipeline.aclose()

    asyncio.run(main())
    kinds = {type(event).__module__ for event in seen}
    assert {"converge_dsl.engine.events", "converge_dsl.models.events"} <= kinds
    odd = ev.FactPromoted(
        cycle=1,
        suggestor="s",
        key="k",
        id="i",
        gate="g",
        logical_time=1,
        data={"n": [math.nan, -math.inf, 1e-7, 10**30, 2.0], "t": "\ud800\u2028é"},
        confidence=1,
        timing=ev.Timing(at=5e-6, duration_s=1e300),
    )
    cleared = SpanCleared(
        suggestor="a",
        cycle=1,
        reduction_id="r",
        first_turn=1,
        last_turn=1,
        turns=[
            {
                "turn": 1,
                "messages": [
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool_call",
                                "id": "c",
                                "name": "t",
                                "input": {"n": [math.nan, -math.inf, 1e-7, 10**30]},
                            },
                            {"type": "text", "text": "é"},
                        ],
                    }
                ],
            }
        ],
    )
    surrogate = TextPartLine(type="text", text="\ud800")
    turn = cleared.turns[0].model_copy(
        update={
            "messages": [cleared.turns[0].messages[0].model_copy(update={"parts": [surrogate]})]
        }
    )
    for event in [*seen, odd, cleared, cleared.model_copy(update={"turns": [turn]})]:
        assert _dumps(json.loads(event_json(event))) == _dumps(event.model_dump(mode="json"))


def test_a_record_on_the_system_clock_holds_its_time_of_day_in_microseconds() -> None:
    """The system clock's time is read as microseconds without a datetime; it is the
    time of day `SystemClock.wall()` tells, to the microsecond."""
    from converge_dsl.clock import SystemClock

    async def main() -> tuple[int, str, int]:
        live = LiveRun(0, asyncio.get_running_loop())
        sink = EventSink(live, lambda: None)
        sink.open(SystemClock())
        clock = SystemClock()
        before = (clock.wall() - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
        sink.on_event(ev.CycleStarted(cycle=1, dirty_keys=[], candidates=[]))
        after = (clock.wall() - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
        return before, live.records[0][1], after

    before, record, after = asyncio.run(main())
    stamp = int(record.split("\t")[0])
    assert before <= stamp <= after
    assert json.loads(render(0, record))["time"] == rfc3339(
        datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=stamp)
    )


def test_every_run_of_one_compiled_pipeline_finds_its_layout_without_hashing_its_spans() -> None:
    """A served pipeline's runs hand the sink the same spans, kinds and source text: the
    layout made for the first is found by identity; another text gets its own excerpts."""
    hashed: list[str] = []

    class CountedSpan(SourceSpan):
        __slots__ = ()

        def __hash__(self) -> int:
            hashed.append(self.file)
            return super().__hash__()

    compiled = cast(
        CompiledPipeline,
        SimpleNamespace(
            spans=MappingProxyType({"s": CountedSpan("identity.yaml", 1, 1, 2, 1)}),
            kinds=MappingProxyType({"s": "llm"}),
        ),
    )

    def excerpt(text: str) -> str:
        async def main() -> str:
            live = LiveRun(0, asyncio.get_running_loop())
            sink = EventSink(live, lambda: None)
            sink.open(FakeClock())
            sink.on_compiled(compiled, {"identity.yaml": text})
            sink.on_event(ev.RunStarted(suggestors=1, seeds=0))
            line = json.loads(render(0, live.records[0][1]))
            assert line["kinds"] == {"s": "llm"}
            return str(line["excerpts"]["s"])

        return asyncio.run(main())

    first = "first: a\nnext: b\n"
    assert excerpt(first) == "first: a"
    made = len(hashed)
    assert made > 0
    assert excerpt(first) == "first: a"
    assert len(hashed) == made  # found again without hashing a span
    assert excerpt("other: c\n") == "other: c"


def test_an_event_encoded_on_a_worker_is_kept_as_the_event_itself() -> None:
    """`encode_event` (what a worker sends instead of the event) makes the very record the
    event makes, on the same clock: its span, the `run_started` excerpts and kinds, its
    fields; and it pickles as text, not as the engine's event object."""
    import pickle

    from converge_dsl.serve._events import EncodedEvent, encode_event

    pipeline = load(ROOT / "pipelines" / "market-entry.yaml")
    heard: list[BaseModel] = []
    compiled: list[tuple[CompiledPipeline, Any]] = []

    class Hearing(EventSink):
        def on_compiled(self, pipeline: CompiledPipeline, sources: Any) -> None:
            compiled.append((pipeline, sources))

        def on_event(self, event: BaseModel | EncodedEvent) -> None:
            assert isinstance(event, BaseModel)
            heard.append(event)

    async def run() -> tuple[list[str], list[str]]:
        await pipeline.outcome({"market": "Baltic 3PL"}, sinks=(Hearing(LiveRun(0, None), int),))
        await pipeline.aclose()
        loop, clocks = asyncio.get_running_loop(), (FakeClock(), FakeClock())
        direct, encoded = LiveRun(0, loop), LiveRun(0, loop)
        sinks = (EventSink(direct, int), EventSink(encoded, int))
        for sink, clock in zip(sinks, clocks, strict=True):
            sink.open(clock)
            sink.on_compiled(*compiled[0])
        for event in heard:
            sinks[0].on_event(event)
            sinks[1].on_event(pickle.loads(pickle.dumps(encode_event(event))))
        return _records(direct), _records(encoded)

    direct, encoded = asyncio.run(run())
    assert len(direct) == len(heard) > 20
    assert encoded == direct
    assert any(json.loads(line)["span"] for line in encoded)  # a suggestor's span
    assert "excerpts" in json.loads(encoded[0])  # the run_started line's
    assert b"converge_dsl.engine" not in pickle.dumps(encode_event(heard[0]))


def _every_kind() -> list[BaseModel]:
    """One event of every kind the engine and the model calls emit, and two of an agent's,
    with text to escape, numbers JSON cannot hold, data, and fields left out when None."""
    from converge_dsl.agents._events import AgentTurnStarted
    from converge_dsl.engine.types import freeze_json
    from converge_dsl.models.events import ModelCallAttempt, ModelCallFinished, ModelCallStarted

    timing = ev.Timing(at=12.5, duration_s=0.25)
    data = freeze_json({"n": [1, 2.5, None, True, -0.0], "t": 'é\t"\\\u2028', "o": {"x": 3e-05}})
    where = {"cycle": 2, "suggestor": "scan", "key": "signals", "id": "s-1"}
    return [
        ev.RunStarted(suggestors=3, seeds=1, budget={"max_cycles": 5, "max_wall_s": math.inf}),
        ev.RunStarted(suggestors=1, seeds=0, resumed_from_cycle=4, timing=ev.Timing(at=1)),
        ev.CycleStarted(cycle=1, dirty_keys=("seeds",), candidates=("scan", "rank"), timing=timing),
        ev.SuggestorStarted(cycle=1, suggestor="scan", timing=ev.Timing(at=0.1)),
        ev.SuggestorFinished(cycle=1, suggestor="scan", proposals=2, timing=timing),
        ev.SuggestorFailed(cycle=1, suggestor="rank", error="E_MODEL: tab\there"),
        ev.ProposalRejected(**where, reason="duplicate"),
        ev.ProposalPending(**where, reason="gated", data=data),
        ev.ProposalPending(**where, reason="gated"),
        ev.ProposalDecided(**where, decision="approved", reason="gated", by="cli", data=data),
        ev.ProposalDecided(**where, decision="rejected", reason="gated"),
        ev.FactPromoted(
            **where,
            gate="auto",
            logical_time=7,
            data=data,
            content="Freightly (31% share) é",
            confidence=0.8,
            source="scan@market",
            model_id="scripted:x",
        ),
        ev.FactPromoted(**where, gate="human", logical_time=8, confidence=-math.inf, timing=timing),
        ev.FactPromoted(**{**where, "suggestor": None}, gate="seed", logical_time=0),
        ev.InvariantChecked(
            cycle=2, invariant="i", invariant_class="acceptance", critical=True, holds=False
        ),
        ev.InvariantChecked(
            cycle=2,
            invariant="i",
            invariant_class="semantic",
            critical=False,
            holds=True,
            message="ok \ud800 😀",
        ),
        ev.CycleFinished(
            cycle=2,
            promoted=3,
            dirty_keys=(),
            facts=9,
            model_calls=2,
            input_tokens=10,
            output_tokens=20,
            timing=timing,
        ),
        ev.CycleFinished(cycle=3, promoted=0, dirty_keys=("signals",)),
        ev.HitlPaused(cycle=3, pending=("s-1", "s-2")),
        ev.RunFinished(cycles=3, stop_reason="converged", facts=9, timing=timing),
        ev.RunFinished(cycles=1, stop_reason="error", facts=0, error="E_X: boom"),
        ModelCallStarted(
            call=1, model="m", suggestor="scan", purpose="turn", turn=2, timing=timing
        ),
        ModelCallStarted(call=2, model="m", suggestor=None),
        ModelCallAttempt(
            call=1,
            model="m",
            suggestor="scan",
            attempt=1,
            account="a",
            status_code=429,
            error="E_RATE",
            timing=ev.Timing(at=3.0, duration_s=1e-7),
        ),
        ModelCallFinished(
            call=1,
            model="m",
            suggestor="scan",
            purpose="answer",
            status="ok",
            status_code=200,
            attempts=2,
            model_id="gpt",
            input_tokens=5,
            output_tokens=6,
            stop_reason="end",
            cached=True,
            timing=ev.Timing(at=1e16, duration_s=math.nan),
        ),
        ModelCallFinished(
            call=2,
            model="m",
            suggestor="scan",
            status="E_TIMEOUT",
            status_code=None,
            attempts=1,
            model_id=None,
        ),
        AgentTurnStarted(suggestor="scan", cycle=1, turn=1, estimated_tokens=5, context_window=9),
    ]


# The records `_every_kind()` makes, on a `FakeClock` and a layout naming `scan`, as the
# sink made them before a served event's path was cut down (f623ba5): they stay so.
EVERY_KIND_RECORDS = ROOT / "tests" / "serve" / "expected" / "event_records.json"


def test_every_kind_of_event_is_recorded_as_it_was() -> None:
    compiled = cast(
        CompiledPipeline,
        SimpleNamespace(spans={"scan": SourceSpan("p.yaml", 2, 3, 2, 9)}, kinds={"scan": "llm"}),
    )

    async def main() -> list[str]:
        live = LiveRun(0, asyncio.get_running_loop())
        sink = EventSink(live, lambda: None)
        clock = FakeClock()
        sink.open(clock)
        sink.on_compiled(compiled, {"p.yaml": "a: 1\n  scan: x\n"})
        for event in _every_kind():
            sink.on_event(event)
            clock.advance(0.001234)
        return [record for _, record in live.records]

    records = asyncio.run(main())
    assert records == json.loads(EVERY_KIND_RECORDS.read_text(encoding="utf-8"))
    # and each renders as the trace writer writes the event's line
    streamed, written = _pair(_every_kind())
    assert streamed == written
