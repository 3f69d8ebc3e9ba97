"""TraceWriter: one JSONL line per event, flushed as it happens, with type, seq and span."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from pydantic import BaseModel

from converge_dsl.agents._events import SpanCleared
from converge_dsl.clock import FakeClock
from converge_dsl.diagnostics import SourceSpan
from converge_dsl.engine import CycleStarted, SuggestorStarted
from converge_dsl.errors import RunError, UsageError
from converge_dsl.runtime import TraceWriter


def test_each_event_is_on_disk_before_the_next(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    seen: list[BaseModel] = []
    writer = TraceWriter({"r": SourceSpan("p.yaml", 4, 5, 4, 9)}, path, (seen.append,))
    assert writer.listening
    writer(CycleStarted(cycle=1, dirty_keys=("seeds",), candidates=("r",)))
    # read by another handle while the writer is still open: already flushed
    first = json.loads(path.read_text().splitlines()[0])
    assert (first["seq"], first["type"], first["span"]) == (0, "cycle_started", None)
    writer(SuggestorStarted(cycle=1, suggestor="r"))
    second = json.loads(path.read_text().splitlines()[1])
    assert (second["seq"], second["type"], second["suggestor"]) == (1, "suggestor_started", "r")
    assert second["span"] == {
        "file": "p.yaml",
        "line": 4,
        "column": 5,
        "end_line": 4,
        "end_column": 9,
    }
    writer.close()
    assert len(seen) == 2


def test_a_writer_without_file_or_listener_is_not_listening() -> None:
    assert not TraceWriter({}).listening


def test_an_unusable_path_is_a_usage_error_naming_the_path(tmp_path: Path) -> None:
    target = tmp_path / "no" / "t.jsonl"
    with pytest.raises(UsageError) as caught:
        TraceWriter({}, target)
    assert caught.value.message.startswith(f"cannot write trace file '{target}' (--trace): ")


def test_a_failed_write_keeps_earlier_lines_and_stays_failed(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    writer = TraceWriter({}, path)
    writer(CycleStarted(cycle=1, dirty_keys=(), candidates=()))

    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

    writer._file.close()  # type: ignore[union-attr]
    writer._file = Full()
    for _ in range(2):  # the first failure, then every later event
        with pytest.raises(RunError, match="No space left on device"):
            writer(CycleStarted(cycle=2, dirty_keys=(), candidates=()))
    assert writer.failure is not None
    assert len(path.read_text().splitlines()) == 1
    writer.close()


def test_wall_clock_is_the_clock_that_tells_the_time_of_day(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`wall_clock` answers as `isinstance(clock, WallClock)` would, without asking the
    runtime protocol (a check that costs every served run twice)."""
    import typing

    from converge_dsl.clock import FakeClock, SystemClock
    from converge_dsl.runtime import wall_clock

    class Plain:
        def monotonic(self) -> float:
            return 0.0

        async def sleep(self, seconds: float) -> None:
            return None

    def refuse(*args: object) -> bool:
        raise AssertionError("the runtime protocol was asked")

    monkeypatch.setattr(type(typing.Protocol), "__instancecheck__", refuse)
    fake, system = FakeClock(), SystemClock()
    assert wall_clock(fake) is fake
    assert wall_clock(system) is system
    assert isinstance(wall_clock(Plain()), SystemClock)


def test_an_agents_numbers_json_cannot_hold_are_traced_as_null() -> None:
    call = {"type": "tool_call", "id": "c", "name": "t", "input": {"n": [math.nan, math.inf, 1.5]}}
    turn = {"turn": 1, "messages": [{"role": "assistant", "parts": [call]}]}
    cleared = SpanCleared.model_validate(
        {"suggestor": "a", "cycle": 1, "reduction_id": "r", "first_turn": 1, "last_turn": 1}
        | {"turns": [turn]}
    )
    line = TraceWriter({}, wall=FakeClock()).line(cleared)
    assert line["turns"][0]["messages"][0]["parts"][0]["input"] == {"n": [None, None, 1.5]}


def test_a_pipeline_on_one_long_line_gives_each_suggestor_a_cut_excerpt(tmp_path: Path) -> None:
    # Each suggestor's excerpt held the whole line: 300 rules on a 631 KB line wrote a
    # 190 MB trace, whose first line the report then refused as longer than 8 MiB.
    from converge_dsl._long_lines import EXCERPT_LINE_CHARS
    from converge_dsl.cli import run

    rules = [
        {"name": f"r{i}", "kind": "rule", "emit": [{"key": "k", "id": f"f{i}", "content": "x"}]}
        for i in range(50)
    ]
    pipeline = {
        "apiVersion": "converge-dsl/v1",
        "kind": "Pipeline",
        "name": "one-line",
        "description": "d" * 50_000,
        "keys": [{"name": "k", "description": "k"}],
        "suggestors": rules,
    }
    path = tmp_path / "one.yaml"
    path.write_text(json.dumps(pipeline), encoding="utf-8")  # JSON is YAML: one line
    trace = tmp_path / "t.jsonl"
    assert run(["run", str(path), "--trace", str(trace), "-q"], io.StringIO(), io.StringIO()) == 0
    assert trace.stat().st_size < 200_000  # the line once would be 50 x 50 KB
    excerpts = json.loads(trace.read_text().splitlines()[0])["excerpts"]
    assert len(excerpts["r7"]) == EXCERPT_LINE_CHARS
    assert '{"name": "r7", "kind": "rule"' in excerpts["r7"]  # its own text, not the file's start
    from converge_dsl.runtime._report_data import report_data

    shown = report_data(trace)["sources"]["r7"]["text"]
    assert shown == excerpts["r7"]  # the report keeps the trace's cut
