"""Run the cases of a test file: `run_case(test, case)` -> `CaseReport`.

Each case runs its pipeline (loaded once per test file, `_spec`) through the
public API (`Pipeline.outcome`, with the case's models put in place of the
pipeline's, and MCP tool servers answered from the case's cassettes), then its
expectations are checked (`_expect`). A case whose
inputs the pipeline refuses, or whose model cannot be built, is a case
error (CD961), not a crash.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl.diagnostics import SourceSpan, format_path
from converge_dsl.errors import ConvergeError

from ._expect import FactView, Failure, RunView, failures
from ._spec import ModelSource, TestCase, TestFile

if TYPE_CHECKING:
    from converge_dsl.batch import Pipeline
    from converge_dsl.frontend import ToolServerSpec
    from converge_dsl.models import Model
    from converge_dsl.runtime import RunOutcome, RunResultDocument
    from converge_dsl.tools import ServerFactory, ToolServer


@dataclass(frozen=True, slots=True)
class CaseReport:
    """How one case went: its failures, or the error that kept it from running."""

    test: TestFile
    case: TestCase
    failures: tuple[Failure, ...] = ()
    error: str | None = None
    error_hint: str | None = None
    seconds: float = 0.0
    stop_reason: str | None = None

    @property
    def passed(self) -> bool:
        return not self.failures and self.error is None

    @property
    def test_id(self) -> str:
        """`file::case`, as pytest and JUnit name it."""
        return f"{self.test.display}::{self.case.name}"

    def span(self, failure: Failure | None = None) -> SourceSpan:
        """Where the failure's expectation (or the case) sits in the test file."""
        return self.test.span(self.case.path if failure is None else failure.path)

    def where(self, failure: Failure | None = None) -> str:
        span = self.span(failure)
        path = self.case.path if failure is None else failure.path
        return f"{span.file}:{span.line}:{span.column}: {format_path(path)}"


def run_test_file(
    test: TestFile, *, clock: Callable[[], float] = time.perf_counter
) -> list[CaseReport]:
    """Every case of `test`, in order (see `run_case`)."""
    return [run_case(test, case, clock=clock) for case in test.cases]


def run_case(
    test: TestFile, case: TestCase, *, clock: Callable[[], float] = time.perf_counter
) -> CaseReport:
    """Run `case` once and check its expectations; a problem that keeps it from
    running is the report's `error` (CD961)."""
    pipeline = test.pipelines[case.pipeline.resolve()]
    start = clock()
    try:
        outcome = _run(pipeline, case)
    except ConvergeError as exc:
        return CaseReport(
            test,
            case,
            error=exc.coded_message,
            error_hint=_hint(exc.hint),
            seconds=clock() - start,
        )
    view = view_of(outcome)
    found = failures(case.expect, view, (*case.path, "expect"))
    return CaseReport(
        test,
        case,
        failures=tuple(found),
        seconds=clock() - start,
        stop_reason=view.stop_reason,
    )


def _hint(hint: str | None) -> str | None:
    """The command line's advice on inputs, said of the test file instead."""
    if hint is None:
        return None
    return re.sub(r"pass --input (\S+)=VALUE", r"add `\1: VALUE` under the case's `inputs:`", hint)


def _run(pipeline: Pipeline, case: TestCase) -> RunOutcome:
    async def go() -> RunOutcome:
        try:
            models = {name: build_model(source) for name, source in case.models.items()}
            servers = tool_servers(case.tools)
            return await pipeline.outcome(case.inputs, models=models, tool_servers=servers)
        finally:
            await pipeline.aclose()

    return asyncio.run(go())


def tool_servers(cassettes: Mapping[str, Path]) -> ServerFactory | None:
    """What makes a case's MCP tool servers: those named in `cassettes` answered from
    them (one replay per cassette file, none started), the others the real ones."""
    if not cassettes:
        return None
    from converge_dsl.tools import ToolReplay, real_server

    replays: dict[Path, ToolReplay] = {}
    for path in cassettes.values():
        if path.resolve() not in replays:
            replays[path.resolve()] = ToolReplay.from_file(path)

    def make(spec: ToolServerSpec, base_dir: Path, environ: Mapping[str, str]) -> ToolServer:
        cassette = cassettes.get(spec.name)
        if cassette is None:
            return real_server(spec, base_dir, environ)
        return replays[cassette.resolve()].server(spec, base_dir, environ)

    return make


def build_model(source: ModelSource) -> Model:
    """A fresh model for one run from a test's model source."""
    from converge_dsl.models import ReplayModel, ScriptedModel

    if source.cassette is not None:
        return ReplayModel.from_file(source.cassette, name=source.name)
    assert source.inline is not None  # a script, compiled when the test file was read
    return ScriptedModel(source.inline, name=source.name)


def view_of(outcome: RunOutcome) -> RunView:
    """What the expectations read of a finished run, invariants included."""
    document = outcome.document
    facts = _facts(document)
    invariants = {inv.name: inv for inv in outcome.pipeline.invariants}
    context = outcome.result.context

    def holds(name: str) -> str | None:
        try:
            return invariants[name].check(context)
        except ConvergeError as exc:
            return f"its check failed: {exc.cited}"

    return _document_view(document, facts, holds)


def view_of_document(document: RunResultDocument) -> RunView:
    """What the expectations read of a run result; invariants cannot be checked on it."""

    def holds(name: str) -> str | None:
        return "not checked: a run result holds no invariants (check them in a test file)"

    return _document_view(document, _facts(document), holds)


def _facts(document: RunResultDocument) -> dict[str, tuple[FactView, ...]]:
    return {
        key: tuple(FactView(f.id, f.content, f.data) for f in items)
        for key, items in document.facts.items()
    }


def _document_view(
    document: RunResultDocument,
    facts: dict[str, tuple[FactView, ...]],
    holds: Callable[[str], str | None],
) -> RunView:
    usage = document.usage
    return RunView(
        stop_reason=document.stop_reason,
        facts=facts,
        model_calls=usage.model_calls,
        tokens=usage.input_tokens + usage.output_tokens,
        holds=holds,
        notes=tuple(f"  {d.code}: {d.message}" for d in document.diagnostics),
    )
