"""A finished run as the user sees it: the run-result document, exit code and located errors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from converge_dsl import codes
from converge_dsl.compiler import CompiledPipeline
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.engine.state import RunResult
from converge_dsl.errors import ConvergeError, RunError

from ._documents import RunResultDocument, UsageModel

EXIT_BY_STOP: Mapping[str, int] = {
    "converged": 0,
    "cycle_budget_exhausted": 4,
    "fact_budget_exhausted": 4,
    "token_budget_exhausted": 4,
    "model_call_budget_exhausted": 4,
    "time_budget_exhausted": 4,
    "invariant_violated": 5,
    "hitl_pause": 6,
}
RUN_ERROR_CODE = codes.RUN_ERROR


@dataclass(frozen=True)
class RunOutcome:
    """A finished run: the engine result, its JSON document, exit code and located problems."""

    pipeline: CompiledPipeline
    result: RunResult
    document: RunResultDocument
    exit_code: int
    error: ConvergeError | None
    diagnostics: tuple[Diagnostic, ...] = ()

    def __repr__(self) -> str:
        # Short on purpose, like `RunResult.__repr__`: asyncio formats a finished
        # task's result on some paths, and a whole compiled pipeline's repr is huge.
        return f"RunOutcome(exit_code={self.exit_code}, result={self.result!r})"


def run_error_diagnostic(error: ConvergeError) -> Diagnostic | None:
    """A located run error (a template failing at cycle 7) as a diagnostic for the output."""
    if not isinstance(error, RunError) or error.span is None:
        return None
    who = f" (suggestor {error.suggestor!r}, cycle {error.cycle})" if error.suggestor else ""
    return Diagnostic.at(RUN_ERROR_CODE, f"{error.message}{who}", error.span, hint=error.hint)


def outcome(
    compiled: CompiledPipeline,
    result: RunResult,
    decided: Mapping[str, bool] | None = None,
) -> RunOutcome:
    """The run-result document and exit code of `result` (`decided`: ids already decided)."""
    stop = str(result.stop_reason)
    diagnostics = []
    if result.error is not None:
        located = run_error_diagnostic(result.error)
        if located is not None:
            diagnostics.append(located)
    usage = result.usage
    pending = () if result.pause is None else result.pause.pending
    document = RunResultDocument.build(
        stop_reason=stop,
        cycles=result.cycles,
        facts=tuple(result.context),
        diagnostics=diagnostics,
        usage=UsageModel(
            model_calls=usage.model_calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        ),
        pending=tuple(item for item in pending if item.id not in (decided or {})),
        held=dict(decided or {}) if pending else {},
    )
    return RunOutcome(
        compiled, result, document, EXIT_BY_STOP.get(stop, 1), result.error, tuple(diagnostics)
    )
