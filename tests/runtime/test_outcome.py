"""The run result of every stop: located diagnostics from the engine's notes, and runs that never
started (invalid, usage error, error) in the same document shape."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import jsonschema
import pytest

from converge_dsl import codes
from converge_dsl._file_kinds import OtherKind
from converge_dsl.clock import FakeClock
from converge_dsl.compiler import CompiledPipeline, compile_pipeline, compile_settings
from converge_dsl.diagnostics import Diagnostic, SourceSpan
from converge_dsl.engine import RunResult, StopReason
from converge_dsl.engine.stops import StopNote
from converge_dsl.errors import PackError, PipelineInvalid, RunError, UsageError
from converge_dsl.frontend import load_text
from converge_dsl.runtime import (
    EXIT_BY_STOP,
    SUGGESTOR_KINDS,
    TraceWriter,
    build_engine,
    not_run_document,
    outcome,
)

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "schemas" / "run-result.v1.json").read_text("utf-8")
)

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: p
budget: {{max_cycles: 3{extra}}}
seeds: [{{id: s1, content: hello}}]
suggestors:
  - name: first
    kind: rule
    dependencies: [seeds]
    emit: [{{key: hypotheses, id: h1, content: one}}]
  - name: loop
    kind: rule
    when: "true"
    emit: [{{key: signals, id: "s-{{{{ cycle }}}}", content: tick}}]
invariants:
  - {{name: never, class: acceptance, check: "false"}}
"""


def compiled_pipeline(extra: str = "") -> CompiledPipeline:
    document = load_text(PIPELINE.format(extra=extra), "p.yaml")
    settings = compile_settings(document, inputs={})
    return compile_pipeline(settings, models={}, usage=None, kinds=SUGGESTOR_KINDS)  # type: ignore[arg-type]


def finished(compiled: CompiledPipeline) -> RunResult:
    engine = build_engine(compiled, TraceWriter({}), FakeClock())
    return asyncio.run(engine.run(compiled.seeds))


def with_note(result: RunResult, note: StopNote) -> RunResult:
    from dataclasses import replace

    return replace(result, notes=(note,))


def test_a_budget_stop_points_at_the_top_spender_and_names_the_setting() -> None:
    compiled = compiled_pipeline()
    out = outcome(compiled, finished(compiled))
    assert out.exit_code == 4
    (diagnostic,) = out.document.diagnostics
    assert diagnostic.code == codes.STOP_CYCLE_BUDGET
    assert (diagnostic.suggestor, diagnostic.path, diagnostic.line) == ("loop", "suggestors[1]", 11)
    assert diagnostic.hint is not None
    assert "budget.max_cycles is set at p.yaml:4:" in diagnostic.hint
    jsonschema.validate(json.loads(out.document.model_dump_json()), SCHEMA)


def test_a_note_without_a_suggestor_points_at_the_setting_then_the_pipeline() -> None:
    compiled = compiled_pipeline()
    result = finished(compiled)
    note = StopNote(codes.STOP_CYCLE_BUDGET, "m", setting="max_cycles")
    (diagnostic,) = outcome(compiled, with_note(result, note)).diagnostics
    assert (diagnostic.line, diagnostic.path) == (4, ("budget", "max_cycles"))
    note = StopNote(codes.STOP_FACT_BUDGET, "m", setting="max_facts")  # not set: the pipeline
    (diagnostic,) = outcome(compiled, with_note(result, note)).diagnostics
    assert (diagnostic.line, diagnostic.column, diagnostic.path) == (1, 1, ())


def test_an_invariant_note_points_at_the_invariant_even_with_a_span() -> None:
    compiled = compiled_pipeline()
    result = finished(compiled)
    span = SourceSpan("p.yaml", 17, 40, 17, 47)
    note = StopNote(codes.STOP_INVARIANT_FAILED, "m", invariant="never", span=span)
    (diagnostic,) = outcome(compiled, with_note(result, note)).diagnostics
    assert (diagnostic.line, diagnostic.column, diagnostic.path) == (17, 40, ("invariants", 0))
    note = StopNote(codes.STOP_INVARIANT_VIOLATED, "m", invariant="never")
    (diagnostic,) = outcome(compiled, with_note(result, note)).diagnostics
    assert (diagnostic.line, diagnostic.path) == (16, ("invariants", 0))


def test_a_note_with_a_span_keeps_it_and_takes_the_suggestors_path() -> None:
    compiled = compiled_pipeline()
    span = SourceSpan("p.yaml", 11, 30, 11, 40)
    note = StopNote(codes.RUN_ERROR, "m", suggestor="first", span=span, cycle=1)
    out = outcome(compiled, with_note(finished(compiled), note))
    (diagnostic,) = out.document.diagnostics
    assert (diagnostic.line, diagnostic.column, diagnostic.path) == (11, 30, "suggestors[0]")
    assert (diagnostic.suggestor, diagnostic.cycle) == ("first", 1)


def test_a_converged_document_leaves_suggestor_and_cycle_out() -> None:
    compiled = compiled_pipeline(", max_facts: 2")
    out = outcome(compiled, finished(compiled))
    assert out.result.stop_reason is StopReason.FACT_BUDGET_EXHAUSTED
    data = json.loads(out.document.model_dump_json())
    assert set(data["diagnostics"][0]) >= {"suggestor", "cycle"}
    plain = Diagnostic.at("CD208", "m", SourceSpan("p.yaml", 1, 1, 1, 2))
    doc = not_run_document(PipelineInvalid([plain]), "p.yaml")
    assert "suggestor" not in json.loads(doc.model_dump_json())["diagnostics"][0]


@pytest.mark.parametrize(
    ("error", "stop", "code", "line"),
    [
        (UsageError("unknown input 'x'", hint="declared: none"), "usage_error", "CD920", 1),
        (PackError("pack 'a' is not installed"), "error", "CD921", 1),
        (RunError("bad", span=SourceSpan("p.yaml", 7, 2, 7, 9)), "error", "CD900", 7),
    ],
)
def test_a_run_that_never_started_prints_the_run_result(
    error: Exception, stop: str, code: str, line: int
) -> None:
    doc = not_run_document(error, Path("p.yaml"))  # type: ignore[arg-type]
    data = json.loads(doc.model_dump_json())
    jsonschema.validate(data, SCHEMA)
    assert (data["stop_reason"], data["converged"], data["facts"], data["cycles"]) == (
        stop,
        False,
        {},
        0,
    )
    (diagnostic,) = data["diagnostics"]
    assert (diagnostic["code"], diagnostic["file"], diagnostic["line"]) == (code, "p.yaml", line)
    assert EXIT_BY_STOP.get(stop, 1) == getattr(error, "exit_code", 1)


def test_a_cache_store_that_cannot_be_opened_is_an_error_with_its_own_exit_code() -> None:
    # It was `usage_error`, as every error with exit 3 was.
    from converge_dsl.models.answer_store import CacheStoreError

    error = CacheStoreError("answer cache: cannot open 'a.sqlite3': file is not a database")
    doc = not_run_document(error, "p.yaml")
    assert doc.stop_reason == "error"
    assert [d.code for d in doc.diagnostics] == ["CD975"]
    assert error.exit_code == 3  # CD975 keeps its exit code (docs/stop-reasons.md)


def test_a_file_refused_with_the_usage_exit_code_is_a_usage_error() -> None:
    refused = Diagnostic.at(
        "CD818", "this is an evaluation file", SourceSpan("e.yaml", 4, 7, 4, 17)
    )
    doc = not_run_document(OtherKind(refused), "e.yaml")
    assert doc.stop_reason == "usage_error"


def test_an_invalid_pipeline_keeps_every_diagnostic_of_validate() -> None:
    found = [
        Diagnostic.at("CD208", "a", SourceSpan("p.yaml", 3, 1, 3, 2)),
        Diagnostic.at("CD100", "b", SourceSpan("p.yaml", 5, 1, 5, 2), path=("x",)),
    ]
    doc = not_run_document(PipelineInvalid(found), "p.yaml")
    assert doc.stop_reason == "invalid"
    assert [d.model_dump(exclude_none=True) for d in doc.diagnostics] == [
        {k: v for k, v in d.as_json().items() if v is not None} for d in found
    ]
    assert EXIT_BY_STOP["invalid"] == PipelineInvalid.exit_code


def test_the_streamed_json_is_the_whole_document_and_the_summary_holds_no_facts() -> None:
    import io

    compiled = compiled_pipeline()
    out = outcome(compiled, finished(compiled))
    assert out.summary.facts == {}
    assert [f.id for f in out.document.facts["seeds"]] == ["s1"]
    assert list(out.document.facts) == list(out.result.context.keys())
    stream = io.StringIO()
    out.write_json(stream)
    assert stream.getvalue() == out.document.model_dump_json(indent=2)
    assert len(repr(out)) < 200  # asyncio may format it: never the whole result


def test_a_located_run_error_with_its_own_code_keeps_it_in_its_diagnostic_text() -> None:
    # A located run error is a CD900 diagnostic; an error of another code lost that code.
    from converge_dsl.runtime import run_error_diagnostic

    span = SourceSpan("p.yaml", 3, 5, 3, 9)
    coded = RunError("the check ran out of steps", code="CD970", span=span, suggestor="s", cycle=2)
    found = run_error_diagnostic(coded)
    assert found is not None
    assert (found.code, found.message) == (
        codes.RUN_ERROR,
        "[CD970] the check ran out of steps (suggestor 's', cycle 2)",
    )
    plain = run_error_diagnostic(RunError("template failed", span=span))
    assert plain is not None
    assert plain.message == "template failed"
