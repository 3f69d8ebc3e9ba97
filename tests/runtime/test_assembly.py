"""The one run assembly and its sinks: every way of running drives a sink the same way."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import BaseModel

from converge_dsl.clock import Clock, FakeClock
from converge_dsl.errors import RunError, UsageError
from converge_dsl.runtime import (
    Output,
    RunOptions,
    RunOutcome,
    RunSink,
    TraceSink,
    run_pipeline,
)

ROOT = Path(__file__).resolve().parents[2]
TRIAGE = ROOT / "pipelines" / "support-triage.yaml"


class Journal(RunSink):
    """A sink that notes each hook it hears (events by type)."""

    listens = True

    def __init__(self, path: Path | None = None, option: str = "--journal") -> None:
        self.heard: list[str] = []
        self._path = path
        self._option = option

    def outputs(self) -> tuple[Output, ...]:
        return () if self._path is None else (Output(self._path, self._option, "journal"),)

    def check(self) -> None:
        self.heard.append("check")

    def open(self, clock: Clock) -> None:
        self.heard.append("open")

    def on_compiled(self, compiled: object, sources: object) -> None:
        self.heard.append("compiled")

    def on_event(self, event: BaseModel) -> None:
        kind = str(getattr(event, "type", ""))
        if kind in {"run_started", "run_finished"}:
            self.heard.append(kind)

    def on_result(self, outcome: RunOutcome) -> None:
        self.heard.append(f"result:{outcome.document.stop_reason}")

    def close(self) -> None:
        self.heard.append("close")


LIFECYCLE = [
    "check",
    "open",
    "compiled",
    "run_started",
    "run_finished",
    "result:converged",
    "close",
]


def test_a_single_run_drives_its_sinks_in_the_one_order() -> None:
    sink = Journal()
    options = RunOptions(pipeline=TRIAGE, clock=FakeClock(), compile_cache=False, sinks=(sink,))
    assert asyncio.run(run_pipeline(options)).exit_code == 0
    assert sink.heard == LIFECYCLE


def test_the_python_api_drives_the_same_sinks_the_same_way() -> None:
    from converge_dsl.batch import load

    sink = Journal()
    pipeline = load(TRIAGE, clock=FakeClock())

    async def go() -> RunOutcome:
        try:
            return await pipeline.outcome({}, sinks=[sink])
        finally:
            await pipeline.aclose()

    assert asyncio.run(go()).exit_code == 0
    assert sink.heard == LIFECYCLE


def test_a_sink_is_closed_when_the_run_fails_before_it_opens() -> None:
    sink = Journal()
    options = RunOptions(pipeline=TRIAGE, inputs={"nope": 1}, clock=FakeClock(), sinks=(sink,))
    with pytest.raises(UsageError):
        asyncio.run(run_pipeline(options))
    assert sink.heard == ["check", "close"]


@pytest.mark.parametrize("option", ["--journal", "--anything"])
def test_the_same_file_check_covers_every_sink_of_the_list(tmp_path: Path, option: str) -> None:
    """A new output gets the checks by naming its files: no second check to write."""
    trace = tmp_path / "t.jsonl"
    shared = Journal(trace, option)
    options = RunOptions(pipeline=TRIAGE, sinks=(TraceSink(trace), shared))
    with pytest.raises(UsageError, match=f"--trace and {option} name the same file"):
        asyncio.run(run_pipeline(options))
    assert shared.heard == []  # refused before any sink was asked anything
    reader = Journal(TRIAGE, option)
    with pytest.raises(UsageError, match=f"{option} .* is the pipeline; it would be overwritten"):
        asyncio.run(run_pipeline(RunOptions(pipeline=TRIAGE, sinks=(reader,))))


def test_a_sink_whose_write_failed_fails_the_run() -> None:
    class Failing(RunSink):
        @property
        def failure(self) -> RunError | None:
            return RunError("the journal disk is full")

    options = RunOptions(pipeline=TRIAGE, clock=FakeClock(), sinks=(Failing(),))
    with pytest.raises(RunError, match="the journal disk is full"):
        asyncio.run(run_pipeline(options))


def test_a_traced_api_run_writes_its_trace(tmp_path: Path) -> None:
    from converge_dsl.batch import load
    from converge_dsl.runtime import read_trace

    trace = tmp_path / "t.jsonl"
    pipeline = load(TRIAGE, clock=FakeClock())

    async def go() -> None:
        try:
            await pipeline.outcome({}, sinks=[TraceSink(trace)])
        finally:
            await pipeline.aclose()

    asyncio.run(go())
    types = [line["type"] for _, line in read_trace(trace)]
    assert types[0] == "run_started"
    assert types[-1] == "run_finished"
