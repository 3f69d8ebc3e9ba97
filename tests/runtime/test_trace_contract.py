"""The trace as a contract: every line of the examples' traces fits `trace-event.v1`,
clock readings live only in `time` and `timing`, and model calls are traced."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from converge_dsl.cli import run
from converge_dsl.clock import FakeClock
from converge_dsl.engine import CycleStarted
from converge_dsl.models import Message, ModelError, ModelErrorCode, ModelRequest, ModelReturn
from converge_dsl.models import Usage as ModelUsage
from converge_dsl.models.events import report_attempt
from converge_dsl.models.port import ModelDefaults
from converge_dsl.runtime import TraceWriter
from converge_dsl.runtime._trace import NONDETERMINISTIC_FIELDS, deterministic_line
from converge_dsl.runtime._trace_schema import event_type, trace_events
from converge_dsl.runtime._traced_model import CallTracer

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "trace-event.v1.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
EXAMPLES = sorted(
    p
    for p in (ROOT / "pipelines").glob("*.yaml")
    if not p.name.endswith((".script.yaml", ".test.yaml"))
)
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def _trace(pipeline: Path, out: Path) -> list[dict[str, Any]]:
    code = run(["run", str(pipeline), "--trace", str(out)], io.StringIO(), io.StringIO())
    assert code == 0
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("pipeline", EXAMPLES, ids=lambda p: p.stem)
def test_every_line_of_an_example_trace_fits_the_schema_and_is_deterministic(
    pipeline: Path, tmp_path: Path
) -> None:
    first = _trace(pipeline, tmp_path / "a.jsonl")
    second = _trace(pipeline, tmp_path / "b.jsonl")
    for number, line in enumerate(first, start=1):
        errors = [e.message for e in VALIDATOR.iter_errors(line)]
        assert not errors, f"line {number} ({line['type']}): {errors}"
        assert RFC3339.match(line["time"]), line["time"]
    assert [deterministic_line(x) for x in first] == [deterministic_line(x) for x in second]
    assert [x["time"] for x in first] != [x["time"] for x in second]  # the clock did move


def test_the_agent_example_traces_its_model_calls(tmp_path: Path) -> None:
    lines = _trace(ROOT / "pipelines" / "agent-review.yaml", tmp_path / "t.jsonl")
    started = [x for x in lines if x["type"] == "model_call_started"]
    finished = [x for x in lines if x["type"] == "model_call_finished"]
    assert started
    assert len(started) == len(finished)
    assert [x["call"] for x in started] == list(range(1, len(started) + 1))
    assert all(x["status"] == "ok" and x["attempts"] == 1 for x in finished)
    assert sum(x["input_tokens"] + x["output_tokens"] for x in finished) > 0
    assert all(x["timing"]["duration_s"] >= 0 for x in finished)
    assert started[0]["suggestor"] == "reviewer"
    assert started[0]["turn"] == 0
    # the summarizer's side call is told from the agent's turns
    summaries = [x for x in started if x["purpose"] == "summary"]
    assert [(x["suggestor"], x["turn"]) for x in summaries] == [("reviewer", None)]
    turns = [x for x in started if x["purpose"] == "turn"]
    assert [x["turn"] for x in turns] == list(range(len(turns)))
    assert len(turns) + len(summaries) == len(started)
    purposes = {x["call"]: x["purpose"] for x in started}
    assert all(x["purpose"] == purposes[x["call"]] for x in finished)


def test_the_schema_refuses_unknown_types_and_undocumented_fields() -> None:
    line = {"seq": 0, "type": "cycle_started", "cycle": 1, "dirty_keys": [], "candidates": []}
    assert VALIDATOR.is_valid(line)
    assert not VALIDATOR.is_valid({**line, "extra": 1})
    assert not VALIDATOR.is_valid({**line, "cycle": "one"})
    assert not VALIDATOR.is_valid({**line, "type": "cycle_begun"})


def test_every_event_type_has_a_documented_payload() -> None:
    for model in trace_events():
        definition = SCHEMA["$defs"][f"{model.__name__}Line"]
        assert definition["properties"]["type"] == {"const": event_type(model)}
        assert definition["additionalProperties"] is False


def test_the_wall_time_comes_from_the_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    writer = TraceWriter({}, tmp_path / "t.jsonl", wall=clock)
    writer(CycleStarted(cycle=1, dirty_keys=(), candidates=()))
    clock.advance(1.5)
    writer(CycleStarted(cycle=2, dirty_keys=(), candidates=()))
    writer.close()
    times = [json.loads(x)["time"] for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert times == ["2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:01.500000Z"]
    assert {"time", "timing"} == NONDETERMINISTIC_FIELDS


class _Flaky(ModelDefaults):
    """Reports a 503 attempt, then a 200 one, as the HTTP adapter does; then fails once."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls = 0

    def model_id(self) -> str:
        return "flaky-1"

    async def call(self, req: ModelRequest) -> ModelReturn:
        self.calls += 1
        if self.calls > 1:
            report_attempt(self.clock.monotonic(), self.clock, "main", 401, "E_AUTH")
            raise ModelError(ModelErrorCode.AUTH, "no")
        self.clock.advance(0.25)
        report_attempt(0.0, self.clock, "main", 503, "E_PROVIDER")
        self.clock.advance(0.25)
        report_attempt(0.5, self.clock, "main", 200, None)
        return ModelReturn(
            message=Message.text("assistant", "hi"),
            usage=ModelUsage(10, 3),
            stop_reason="end_turn",
            model_id="flaky-1",
            account="main",
        )


def test_a_traced_call_reports_attempts_status_codes_tokens_and_latency() -> None:
    clock, events = FakeClock(), []
    model = CallTracer(events.append, clock).wrap("m", _Flaky(clock))
    request = ModelRequest(model="m", messages=(Message.text("user", "x"),))
    asyncio.run(model.call(request))
    with pytest.raises(ModelError):
        asyncio.run(model.call(request))
    dumped = [e.model_dump(mode="json") for e in events]
    kinds = [d["type"] for d in dumped]
    assert kinds == [
        "model_call_started",
        "model_call_attempt",
        "model_call_attempt",
        "model_call_finished",
        "model_call_started",
        "model_call_attempt",
        "model_call_finished",
    ]
    assert [d["status_code"] for d in dumped[1:3]] == [503, 200]
    ok, failed = dumped[3], dumped[6]
    assert (ok["status"], ok["status_code"], ok["attempts"]) == ("ok", 200, 2)
    assert (ok["input_tokens"], ok["output_tokens"], ok["model_id"]) == (10, 3, "flaky-1")
    assert ok["timing"]["duration_s"] == 0.5
    assert (failed["call"], failed["status"], failed["status_code"]) == (2, "E_AUTH", 401)
    for number, event in enumerate(dumped):
        line = {"seq": number, **event, "span": None}
        assert VALIDATOR.is_valid(line), list(VALIDATOR.iter_errors(line))


def test_an_http_model_reports_each_attempt_with_its_status_code() -> None:
    import random

    from converge_dsl.models import build_model
    from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

    with FakeProviderServer() as server:
        server.queue(FakeReply(status=503, retry_after="0"), FakeReply(text="ok"))
        config = {
            "adapter": "openai",
            "base_url": server.openai_base_url,
            "model": "gpt-test",
            "retries": 2,
            "accounts": [{"name": "main", "api_key_env": "KEY"}],
        }
        clock, events = FakeClock(), []
        inner = build_model(
            "m", config, base_dir=ROOT, env={"KEY": "k"}, clock=clock, rng=random.Random(0)
        )
        model = CallTracer(events.append, clock).wrap("m", inner)
        request = ModelRequest(model="m", messages=(Message.text("user", "x"),))

        async def call() -> None:
            try:
                await model.call(request)
            finally:
                await model.aclose()

        asyncio.run(call())
    dumped = [e.model_dump(mode="json") for e in events]
    attempts = [d for d in dumped if d["type"] == "model_call_attempt"]
    assert [(a["attempt"], a["status_code"], a["error"]) for a in attempts] == [
        (1, 503, "E_PROVIDER"),
        (2, 200, None),
    ]
    finished = dumped[-1]
    assert (finished["status"], finished["status_code"], finished["attempts"]) == ("ok", 200, 2)
    assert finished["input_tokens"] == 10
