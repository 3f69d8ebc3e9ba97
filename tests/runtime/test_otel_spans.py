"""The spans of a run, caught by the SDK's in-memory exporter: tree, names, timing, gen_ai.*.

Every example pipeline is run twice over (with a JSONL trace beside the spans):
the span tree must mirror the trace's events, model-call spans must carry the
GenAI attributes, and no prompt, answer or fact text may appear anywhere in a
span unless content is opted in. With content on, a model's API key that
reaches a prompt and an answer is still masked.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (the otel extra)")

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from converge_dsl.clock import FAKE_WALL_START, FakeClock
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply
from converge_dsl.runtime import OtelOptions, RunOptions, TraceSink, run_pipeline

ROOT = Path(__file__).resolve().parents[2]
# The example pipelines, without their tests and model scripts.
EXAMPLES = [
    p
    for p in sorted((ROOT / "pipelines").glob("*.yaml"))
    if not p.name.endswith((".test.yaml", ".script.yaml"))
]


def _run(
    pipeline: Path, *, content: bool = False, trace: Path | None = None, **extra: Any
) -> tuple[list[ReadableSpan], Any]:
    exporter = InMemorySpanExporter()
    options = RunOptions(
        pipeline=pipeline,
        env=extra.pop("env", {}),
        clock=FakeClock(),
        otel=OtelOptions(
            exporter=exporter, content=content, on_warning=extra.pop("on_warning", None)
        ),
        sinks=() if trace is None else (TraceSink(trace),),
    )
    outcome = asyncio.run(run_pipeline(options))
    return list(exporter.get_finished_spans()), outcome


def _strings(spans: Sequence[ReadableSpan]) -> Iterator[str]:
    """Every string a span carries: its name, status, attributes and events."""
    for span in spans:
        yield span.name
        yield span.status.description or ""
        for attributes in (span.attributes, *(e.attributes for e in span.events)):
            for key, value in (attributes or {}).items():
                yield key
                for item in value if isinstance(value, tuple) else (value,):
                    if isinstance(item, str):
                        yield item


def _children(spans: Sequence[ReadableSpan]) -> dict[int | None, list[ReadableSpan]]:
    tree: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        tree.setdefault(span.parent.span_id if span.parent else None, []).append(span)
    return tree


@pytest.mark.parametrize("pipeline", EXAMPLES, ids=lambda p: p.stem)
def test_the_span_tree_mirrors_the_trace(pipeline: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    spans, outcome = _run(pipeline, trace=trace)
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    types = Counter(event["type"] for event in events)
    tree = _children(spans)
    by_id = {span.context.span_id: span for span in spans}

    # One root, the run, under which everything hangs; one trace id.
    (root,) = tree[None]
    assert root.name == f"run {outcome.pipeline.name}"
    assert root.attributes["converge_dsl.pipeline.name"] == outcome.pipeline.name
    assert root.attributes["converge_dsl.run.stop_reason"] == outcome.document.stop_reason
    assert len({span.context.trace_id for span in spans}) == 1
    assert all(span.parent is None or span.parent.span_id in by_id for span in spans)

    cycles = [s for s in spans if s.name.startswith("cycle ")]
    executions = [s for s in spans if "converge_dsl.suggestor.kind" in (s.attributes or {})]
    calls = [s for s in spans if s.kind is SpanKind.CLIENT]
    turns = [s for s in spans if s.name.startswith("turn ")]
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert len(cycles) == types["cycle_started"]
    assert len(executions) == types["suggestor_started"]
    assert len(calls) == types["model_call_started"]
    assert len(turns) == types["agent_turn_started"]
    assert len(tools) == types["mcp_tool_called"]
    assert len(spans) == 1 + len(cycles) + len(executions) + len(calls) + len(turns) + len(tools)

    assert all(by_id[s.parent.span_id] is root for s in cycles)  # type: ignore[union-attr]
    assert all(by_id[s.parent.span_id] in cycles for s in executions)  # type: ignore[union-attr]
    assert all(by_id[s.parent.span_id] in executions for s in turns)  # type: ignore[union-attr]
    assert all(by_id[s.parent.span_id] in executions + turns for s in calls)  # type: ignore[union-attr]
    assert all(by_id[s.parent.span_id] in executions + turns for s in tools)  # type: ignore[union-attr]

    # Facts promoted, as the trace counts them per suggestor (seeds, in cycle 0, run none).
    promoted = Counter(
        e["suggestor"]
        for e in events
        if e["type"] == "fact_promoted" and e["cycle"] > 0 and e["suggestor"]
    )
    counted: Counter[str] = Counter()
    for span in executions:
        counted[span.attributes["converge_dsl.suggestor.name"]] += span.attributes[
            "converge_dsl.suggestor.facts_promoted"
        ]
    assert +counted == promoted

    # Model calls: the GenAI conventions, and the trace's tokens.
    finished = [e for e in events if e["type"] == "model_call_finished"]
    for span in calls:
        attributes = span.attributes or {}
        assert span.name == f"chat {attributes['gen_ai.request.model']}"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == attributes["gen_ai.system"] == "scripted"
        assert attributes["gen_ai.response.finish_reasons"][0] in ("stop", "tool_call", "length")
        assert span.status.status_code is StatusCode.UNSET
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in calls) == sum(
        e["input_tokens"] for e in finished
    )
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in calls) == sum(
        e["output_tokens"] for e in finished
    )

    # The injected clock's times: every span inside the run's.
    start = int(datetime.fromisoformat(FAKE_WALL_START).timestamp() * 1e9)
    assert root.start_time == start
    for span in spans:
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time  # type: ignore[operator]


def test_kinds_and_agent_turns_are_named_as_the_conventions_say() -> None:
    spans, _ = _run(ROOT / "pipelines" / "agent-review.yaml")
    (agent,) = [s for s in spans if s.name == "invoke_agent reviewer"]
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "reviewer"
    assert agent.attributes["converge_dsl.suggestor.kind"] == "agent"
    assert agent.attributes["converge_dsl.agent.status"]
    turn_numbers = sorted(
        s.attributes["converge_dsl.agent.turn"] for s in spans if s.name.startswith("turn ")
    )
    assert turn_numbers == list(range(len(turn_numbers)))
    tools = [e for s in spans for e in s.events if e.name == "agent_tool_called"]
    assert tools
    assert all("gen_ai.tool.name" in e.attributes for e in tools)  # type: ignore[operator]


def _content_texts(spans: Sequence[ReadableSpan]) -> set[str]:
    """Every prompt and answer text of a content-on run (at least 12 characters long)."""
    texts: set[str] = set()
    for span in spans:
        for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
            for message in json.loads(str((span.attributes or {}).get(key, "[]"))):
                for part in message["parts"]:
                    text = part.get("content") or part.get("response") or ""
                    texts |= {line.strip() for line in text.splitlines() if len(line.strip()) >= 12}
    return texts


@pytest.mark.parametrize("name", ["support-triage", "agent-review"])
def test_no_prompt_answer_or_fact_text_unless_opted_in(name: str) -> None:
    pipeline = ROOT / "pipelines" / f"{name}.yaml"
    with_content, outcome = _run(pipeline, content=True)
    texts = _content_texts(with_content)
    assert len(texts) >= 3  # the opt-in recorded them: the check below can fail
    texts |= {
        fact.content
        for facts in outcome.document.facts.values()
        for fact in facts
        if len(fact.content) >= 12
    }

    without, _ = _run(pipeline)
    carried = "\n".join(_strings(without))
    assert not [text for text in texts if text in carried]
    assert "gen_ai.input.messages" not in carried
    assert "gen_ai.output.messages" not in carried


def test_content_follows_the_genai_message_format() -> None:
    spans, _ = _run(
        ROOT / "pipelines" / "support-triage.yaml",
        env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    )
    (call,) = [s for s in spans if s.kind is SpanKind.CLIENT]
    inputs = json.loads(str(call.attributes["gen_ai.input.messages"]))
    outputs = json.loads(str(call.attributes["gen_ai.output.messages"]))
    assert inputs[0]["role"] == "user"
    assert inputs[0]["parts"][0]["type"] == "text"
    assert outputs == [{"role": "assistant", "parts": outputs[0]["parts"], "finish_reason": "stop"}]


SECRET = "sk-otel-secret-0123456789"
HTTP_PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: http-otel
models:
  remote:
    adapter: openai
    base_url: "{url}"
    model: gpt-test
    max_tokens: 64
    retries: 0
    accounts: [{{name: main, api_key_env: OTEL_TEST_API_KEY}}]
seeds:
  - {{id: topic, content: "the key is {secret}"}}
suggestors:
  - name: ask
    kind: llm
    model: remote
    dependencies: [seeds]
    target: hypotheses
    prompt:
      system: "Never repeat {secret}"
      user: "Say something about {{{{ facts.seeds[0].content }}}}"
    output: {{format: text}}
"""


def _http_run(
    tmp_path: Path, reply: FakeReply, *, content: bool
) -> tuple[list[ReadableSpan], Any, int]:
    with FakeProviderServer() as server:
        server.reset(reply)
        pipeline = tmp_path / "http.yaml"
        pipeline.write_text(
            HTTP_PIPELINE.format(url=server.openai_base_url, secret=SECRET), encoding="utf-8"
        )
        spans, outcome = _run(pipeline, content=content, env={"OTEL_TEST_API_KEY": SECRET})
        return spans, outcome, int(server.url.rsplit(":", 1)[1])


def test_an_http_call_names_its_server_and_never_exports_the_key(tmp_path: Path) -> None:
    spans, outcome, port = _http_run(tmp_path, FakeReply(text=f"echo: {SECRET}"), content=True)
    assert outcome.document.stop_reason == "converged"
    (call,) = [s for s in spans if s.kind is SpanKind.CLIENT]
    attributes = call.attributes or {}
    assert call.name == "chat gpt-test"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == "gpt-test"
    assert attributes["gen_ai.response.model"] == "gpt-test"
    assert attributes["gen_ai.request.max_tokens"] == 64
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["server.port"] == port
    assert attributes["http.response.status_code"] == 200
    carried = "\n".join(_strings(spans))
    assert "[REDACTED]" in str(attributes["gen_ai.input.messages"])
    assert "[REDACTED]" in str(attributes["gen_ai.system_instructions"])
    assert "[REDACTED]" in str(attributes["gen_ai.output.messages"])
    assert SECRET not in carried


def test_a_failed_call_is_an_error_span_with_its_error_type(tmp_path: Path) -> None:
    spans, outcome, _ = _http_run(tmp_path, FakeReply(status=500), content=False)
    (call,) = [s for s in spans if s.kind is SpanKind.CLIENT]
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes["error.type"] == "E_PROVIDER"
    assert call.attributes["http.response.status_code"] == 500
    (execution,) = [s for s in spans if s.name == "suggestor ask"]
    assert execution.status.status_code is StatusCode.ERROR
    assert execution.attributes["error.type"] == "E_PROVIDER"
    assert not execution.status.description  # the message may quote an answer: not without content
    assert outcome.document.stop_reason != "converged" or outcome.document.facts.get("diagnostic")


def test_a_broken_exporter_never_fails_the_run() -> None:
    class Broken(InMemorySpanExporter):
        def export(self, spans: Any) -> Any:
            raise ConnectionError("collector exploded")

    warnings: list[str] = []
    options = RunOptions(
        pipeline=ROOT / "pipelines" / "support-triage.yaml",
        env={},
        clock=FakeClock(),
        otel=OtelOptions(exporter=Broken(), on_warning=warnings.append),
    )
    outcome = asyncio.run(run_pipeline(options))
    assert outcome.exit_code == 0
    (warning,) = warnings
    assert warning.startswith("warning[CD982]: OpenTelemetry: 9 of 9 span(s) could not be sent")
    assert "collector exploded" in warning


def test_a_recorder_that_breaks_stops_recording_not_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from converge_dsl.runtime._otel_spans import SpanRecorder

    def broken(self: SpanRecorder, event: Any, at: int) -> None:
        raise KeyError("no such span")

    monkeypatch.setattr(SpanRecorder, "_on_cycle_started", broken)
    warnings: list[str] = []
    spans, outcome = _run(ROOT / "pipelines" / "support-triage.yaml", on_warning=warnings.append)
    assert outcome.exit_code == 0
    assert warnings == [
        "warning[CD982]: OpenTelemetry: recording spans stopped (KeyError: 'no such span'); "
        "the run itself is not affected"
    ]
    # What was open is ended and sent: the run's span, marked as not finished.
    (root,) = spans
    assert root.status.status_code is StatusCode.ERROR


def test_the_sampler_of_the_environment_is_used() -> None:
    spans, outcome = _run(
        ROOT / "pipelines" / "support-triage.yaml", env={"OTEL_TRACES_SAMPLER": "always_off"}
    )
    assert outcome.exit_code == 0
    assert spans == []


STOPS = ROOT / "tests" / "e2e" / "data" / "stops"


@pytest.mark.parametrize(
    "name",
    [
        *("calls", "conflict", "cycles", "facts", "invariant", "invariant-error"),
        *("model-error", "pause", "time", "tokens"),
    ],
)
def test_every_stop_ends_every_span_under_the_run(name: str) -> None:
    spans, outcome = _run(STOPS / f"{name}.yaml")
    stop = outcome.document.stop_reason
    (root,) = _children(spans)[None]
    assert root.attributes["converge_dsl.run.stop_reason"] == stop
    failed = stop in ("error", "invariant_violated", "cancelled")
    assert (root.status.status_code is StatusCode.ERROR) is failed
    if failed:
        assert root.attributes["error.type"] == stop
    assert all(span.end_time is not None for span in spans)
    assert len({span.context.trace_id for span in spans}) == 1
    if stop == "hitl_pause":
        assert root.attributes["converge_dsl.run.pending"] >= 1
    calls = [s for s in spans if s.kind is SpanKind.CLIENT]
    if name == "model-error":
        assert any(call.status.status_code is StatusCode.ERROR for call in calls)
        assert all(
            "error.type" in (c.attributes or {})
            for c in calls
            if c.status.status_code is StatusCode.ERROR
        )


def test_an_exporter_the_sdk_refuses_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import logging

    from converge_dsl.runtime import _otel
    from converge_dsl.runtime._otel_config import OtelRefused

    def refuse(settings: Any) -> Any:
        raise ValueError("bad certificate")

    monkeypatch.setattr(_otel, "otlp_exporter", refuse)
    options = RunOptions(
        pipeline=ROOT / "pipelines" / "support-triage.yaml", env={}, otel=OtelOptions(flag=True)
    )
    refused = r"^\[CD981\] OpenTelemetry: the trace exporter cannot be set up: "
    with pytest.raises(OtelRefused, match=refused):
        asyncio.run(run_pipeline(options))
    assert logging.getLogger("opentelemetry").propagate  # given back as it was


def test_a_collector_answer_cannot_drive_the_terminal() -> None:
    class Hostile(InMemorySpanExporter):
        def export(self, spans: Any) -> Any:
            raise ConnectionError("503 \x1b[2J\x1b]0;title\x07Bad\r\x9b")

    warnings: list[str] = []
    options = RunOptions(
        pipeline=ROOT / "pipelines" / "support-triage.yaml",
        env={},
        clock=FakeClock(),
        otel=OtelOptions(exporter=Hostile(), on_warning=warnings.append),
    )
    assert asyncio.run(run_pipeline(options)).exit_code == 0
    (warning,) = warnings
    assert "503 \\x1b[2J\\x1b]0;title\\x07Bad\\x0d\\x9b)" in warning
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in warning)


TOOLS = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: tool-spans
tools:
  fixture:
    command: [{python}, {fixture}, stdio, "0"]
    allow: [echo, fail, getenv]
    env: {{pass: [SPAN_SECRET]}}
models:
  default: {{adapter: scripted, script: tools.script.yaml}}
seeds: [{{id: go, content: go}}]
suggestors:
  - name: look
    kind: tool
    call: mcp:fixture/echo
    dependencies: [seeds]
    arguments: {{text: '{{"id": "seen", "content": "looked"}}'}}
    target: hypotheses
  - name: clerk
    kind: agent
    model: default
    dependencies: [hypotheses]
    target: evaluations
    goal: Look things up.
    tools: [finish, "mcp:fixture/*"]
"""

TOOLS_SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {suggestor: clerk, turn: 0}
    tool_calls: [{name: "mcp:fixture/getenv", input: {name: SPAN_SECRET}}]
  - match: {suggestor: clerk, turn: 1}
    tool_calls: [{name: "mcp:fixture/fail", input: {reason: index-down}}]
  - match: {suggestor: clerk, turn: 2}
    tool_calls: [{name: finish, input: {}}]
default: {reply: Done.}
"""


@pytest.mark.parametrize("content", [False, True], ids=["plain", "content"])
def test_every_tool_call_is_an_execute_tool_span(tmp_path: Path, content: bool) -> None:
    import sys

    fixture = ROOT / "tests" / "tools" / "fastmcp_server.py"
    pipeline = tmp_path / "tools.yaml"
    pipeline.write_text(
        TOOLS.format(python=json.dumps(sys.executable), fixture=json.dumps(str(fixture)))
    )
    (tmp_path / "tools.script.yaml").write_text(TOOLS_SCRIPT)
    secret = "span-secret-0123456789"
    # The run's servers read the run's environment (here the options'), not the process's.
    spans, outcome = _run(pipeline, content=content, env={"SPAN_SECRET": secret})
    assert outcome.document.stop_reason == "converged"
    tools = sorted(
        (s for s in spans if s.name.startswith("execute_tool ")), key=lambda s: s.start_time
    )
    assert [s.name for s in tools] == [
        "execute_tool mcp:fixture/echo",
        "execute_tool mcp:fixture/getenv",
        "execute_tool mcp:fixture/fail",
    ]
    by_id = {span.context.span_id: span for span in spans}
    look, getenv, fail = tools
    for span in tools:
        attributes = span.attributes or {}
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["converge_dsl.tool.server"] == "fixture"
        assert span.kind is SpanKind.INTERNAL
        assert span.start_time <= span.end_time  # type: ignore[operator]
    assert by_id[look.parent.span_id].name == "suggestor look"  # type: ignore[union-attr]
    assert "gen_ai.tool.call.id" not in (look.attributes or {})  # a tool suggestor has none
    assert by_id[getenv.parent.span_id].name == "turn 0"  # type: ignore[union-attr]
    assert getenv.attributes["gen_ai.tool.call.id"]
    assert getenv.status.status_code is StatusCode.UNSET
    assert fail.status.status_code is StatusCode.ERROR
    assert fail.attributes["error.type"] == "tool_error"
    carried = "\n".join(_strings(spans))
    assert secret not in carried
    if content:
        assert getenv.attributes["gen_ai.tool.call.arguments"] == '{"name":"SPAN_SECRET"}'
        assert getenv.attributes["gen_ai.tool.call.result"] == "[REDACTED]"
        assert "index-down" in fail.attributes["gen_ai.tool.call.result"]
    else:
        assert "index-down" not in carried
