"""A finished run as the user sees it: the run-result document, exit code and located errors.

Failures are data (docs/architecture.md §12): every stop but `converged` puts
at least one diagnostic in the run result, made from the engine's
`StopNote`s and located in the pipeline: at the error's own span (a
template), at the invariant concerned, at the suggestor concerned, at the
budget setting reached, or else at the pipeline itself. A run that never
reached the engine (an invalid pipeline, a usage error, a pack or model that
cannot be used) gets the same document through `not_run_document`, with stop
reason `invalid`, `usage_error` or `error`, its diagnostics and no facts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from converge_dsl import codes
from converge_dsl.compiler import CompiledPipeline
from converge_dsl.diagnostics import Diagnostic, JsonPath, SourceSpan
from converge_dsl.engine.state import RunResult
from converge_dsl.engine.stops import StopNote
from converge_dsl.engine.types import Fact, Provenance
from converge_dsl.errors import ConvergeError, PipelineInvalid, RunError, UsageError

from ._documents import (
    DiagnosticModel,
    RunResultDocument,
    UsageModel,
    fact_models,
    fact_plain,
    write_run_result,
)

if TYPE_CHECKING:
    from converge_dsl.models.caching import AnswerCache, CallRecord

EXIT_BY_STOP: Mapping[str, int] = {
    "converged": 0,
    "cycle_budget_exhausted": 4,
    "fact_budget_exhausted": 4,
    "token_budget_exhausted": 4,
    "model_call_budget_exhausted": 4,
    "tool_call_budget_exhausted": 4,
    "time_budget_exhausted": 4,
    "invariant_violated": 5,
    "hitl_pause": 6,
    "invalid": 2,
    "usage_error": 3,
}
RUN_ERROR_CODE = codes.RUN_ERROR


@dataclass(frozen=True)
class RunOutcome:
    """A finished run: the engine result, its JSON document, exit code and located problems.

    `summary` is the run-result document without its facts; `document` the
    whole one (built on first use); `write_json` prints the whole one with
    its facts streamed from the result, never building `document`.
    """

    pipeline: CompiledPipeline
    result: RunResult
    summary: RunResultDocument
    exit_code: int
    error: ConvergeError | None
    diagnostics: tuple[Diagnostic, ...] = ()
    # Each cached model call of the run, hit or miss and why (`run --explain-cache`).
    cache_calls: tuple[CallRecord, ...] = ()

    def __repr__(self) -> str:
        # Short on purpose, like `RunResult.__repr__`: asyncio formats a finished
        # task's result on some paths, and a whole compiled pipeline's repr is huge.
        return f"RunOutcome(exit_code={self.exit_code}, result={self.result!r})"

    def facts_by_key(self) -> Iterator[tuple[str, Sequence[Fact]]]:
        """Each key (in key order) with its facts (in promotion order), straight from the
        result: what `document` and `write_json` show, without building either."""
        context = self.result.context
        keys = context.keys()  # key sort order
        for key in keys:
            yield key, context.get(key)

    @cached_property
    def document(self) -> RunResultDocument:
        """The run-result document with its facts (grouped by key, in key order)."""
        return self.summary.model_copy(update={"facts": fact_models(self.facts_by_key())})

    @cached_property
    def plain(self) -> dict[str, Any]:
        """`document.model_dump(mode="json")`, made from the result's facts without a model
        per fact (what a batch writes each case's result line from)."""
        body = self.summary.model_dump(mode="json")
        provenances: dict[Provenance, dict[str, Any]] = {}
        body["facts"] = {
            key: [fact_plain(fact, provenances) for fact in items]
            for key, items in self.facts_by_key()
        }
        return body

    def write_json(self, stream: TextIO) -> None:
        """Write `document` as `model_dump_json(indent=2)` would, facts streamed; no newline."""
        write_run_result(self.summary, self.facts_by_key(), stream)


def run_error_diagnostic(error: ConvergeError) -> Diagnostic | None:
    """A located run error (a template failing at cycle 7) as a diagnostic for the output."""
    if not isinstance(error, RunError) or error.span is None:
        return None
    who = f" (suggestor {error.suggestor!r}, cycle {error.cycle})" if error.suggestor else ""
    said = error.message if error.code == RUN_ERROR_CODE else error.cited  # its own code kept
    return Diagnostic.at(RUN_ERROR_CODE, f"{said}{who}", error.span, hint=error.hint)


def _where(note: StopNote, compiled: CompiledPipeline) -> tuple[SourceSpan, JsonPath]:
    """Where `note` points: its span, invariant, suggestor, budget setting, else the pipeline."""
    index = next((i for i, s in enumerate(compiled.suggestors) if s.name == note.suggestor), None)
    owner: JsonPath = () if index is None else ("suggestors", index)
    for position, invariant in enumerate(compiled.invariants):
        span = getattr(invariant.check, "span", None)
        if invariant.name == note.invariant and isinstance(span, SourceSpan):
            return note.span or span, ("invariants", position)
    if note.span is not None:
        return note.span, owner
    span = compiled.span_of(note.suggestor)
    if span is not None:
        return span, owner
    setting = _setting_span(note, compiled)
    if setting is not None:
        return setting, ("budget", str(note.setting))
    return compiled.span, ()


def _setting_span(note: StopNote, compiled: CompiledPipeline) -> SourceSpan | None:
    """The span of the budget setting `note` reached, when the pipeline sets it."""
    if note.setting is None:
        return None
    location = compiled.settings.document.source_map.get(("budget", note.setting))
    return None if location is None else location.span


def note_diagnostic(note: StopNote, compiled: CompiledPipeline) -> Diagnostic:
    """`note` as a diagnostic located in `compiled`'s pipeline (see `_where`)."""
    span, path = _where(note, compiled)
    hint = note.hint
    setting = _setting_span(note, compiled)
    if hint is not None and setting is not None and setting != span:
        hint += f" (budget.{note.setting} is set at {setting})"
    return Diagnostic.at(
        note.code, note.message, span, path=path, hint=hint, severity=note.severity
    )


def outcome(
    compiled: CompiledPipeline,
    result: RunResult,
    decided: Mapping[str, bool] | None = None,
    answers: AnswerCache | None = None,
) -> RunOutcome:
    """The run-result document and exit code of `result` (`decided`: ids already decided;
    `answers`: the run's answer cache, whose hits the usage counts as `cached_calls`)."""
    stop = str(result.stop_reason)
    found = [(note_diagnostic(note, compiled), note) for note in result.notes]
    if not found and result.error is not None:  # a result the engine did not explain
        located = run_error_diagnostic(result.error)
        if located is not None:
            found.append((located, StopNote(located.code, located.message)))
    diagnostics = tuple(diagnostic for diagnostic, _ in found)
    usage = result.usage
    pending = () if result.pause is None else result.pause.pending
    document = RunResultDocument.build(
        stop_reason=stop,
        cycles=result.cycles,
        facts=(),  # see `RunOutcome.document` and `RunOutcome.write_json`
        diagnostics=[DiagnosticModel.of(d, note.suggestor, note.cycle) for d, note in found],
        usage=UsageModel(
            model_calls=usage.model_calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_calls=None if answers is None or not answers.hits else answers.hits,
        ),
        pending=tuple(item for item in pending if item.id not in (decided or {})),
        held=dict(decided or {}) if pending else {},
    )
    return RunOutcome(
        compiled,
        result,
        document,
        EXIT_BY_STOP.get(stop, 1),
        result.error,
        diagnostics,
        () if answers is None else tuple(answers.records),
    )


def not_run_diagnostics(
    error: ConvergeError, pipeline: Path | str, *, inputs_at: SourceSpan | None = None
) -> tuple[Diagnostic, ...]:
    """The diagnostics of a run that stopped outside the engine with `error`.

    An invalid pipeline keeps its own (those of `validate`); a located run
    error points at its span; a usage error points at `inputs_at` when given
    (where the run's inputs were read: a batch's case line); anything else
    points at the pipeline file.
    """
    if isinstance(error, PipelineInvalid):
        return error.diagnostics
    located = run_error_diagnostic(error)
    if located is not None:
        return (located,)
    usage = isinstance(error, UsageError)
    # An error that carries its own stable code (OpenTelemetry's CD981...) keeps it;
    # other codes (a model's E_CONFIG) are no diagnostic codes: they stay in the text.
    own = error.code
    if own is not None and own.startswith("CD"):
        code, message = own, error.message
    else:
        code = codes.NOT_RUN_USAGE if usage else codes.NOT_RUN_ERROR
        message = error.coded_message
    span = inputs_at if usage and inputs_at is not None else SourceSpan(str(pipeline), 1, 1, 1, 1)
    return (Diagnostic.at(code, message, span, hint=error.hint),)


def not_run_stop_reason(error: ConvergeError) -> str:
    """`invalid`, `usage_error` or `error`: the stop reason of a run stopped outside the engine
    (docs/stop-reasons.md). A `UsageError` is a usage error, and so is a file refused as
    `PipelineInvalid` with the usage error's exit code (another kind of ours, CD818; cases
    giving undeclared inputs, CD802): what the user gave. Another error with exit 3 (the
    answer cache's store that cannot be opened, CD975) is `error`: something that cannot
    be used, not the user's usage."""
    if isinstance(error, UsageError):
        return "usage_error"
    if isinstance(error, PipelineInvalid):
        return "usage_error" if error.exit_code == UsageError.exit_code else "invalid"
    return "error"


def not_run_document(
    error: ConvergeError, pipeline: Path | str, *, inputs_at: SourceSpan | None = None
) -> RunResultDocument:
    """The run-result document of a run that stopped outside the engine with `error`.

    No facts, no usage; the stop reason says why (see `not_run_stop_reason`);
    the diagnostics are `not_run_diagnostics(error, pipeline, inputs_at=...)`.
    """
    return RunResultDocument.build(
        stop_reason=not_run_stop_reason(error),
        cycles=0,
        facts=(),
        diagnostics=[
            DiagnosticModel.of(d) for d in not_run_diagnostics(error, pipeline, inputs_at=inputs_at)
        ],
        usage=UsageModel(),
    )
