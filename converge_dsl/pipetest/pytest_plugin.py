"""The pytest plugin of converge-dsl (entry point `pytest11`: `converge_dsl`).

Collection: every `*.test.yaml` / `*.test.yml` file pytest walks over becomes
a `PipelineTestFile` when it says it is one (a `kind: PipelineTest` or
`apiVersion: converge-dsl/...` line; another tool's `docker-compose.test.yaml`
is left alone unless named on the command line), one `PipelineTestItem` per case, named
`file.test.yaml::case name` (escaped so that every case can be selected by its
node id: `_item_name`). A failing case shows the diff `converge-dsl test`
prints (located at the expectation's file:line); an invalid test file is a
collection error showing its located diagnostics. An evaluation file
(`*.eval.yaml`, `kind: Evaluation`) is one item, `file.eval.yaml::thresholds`,
that fails with the evaluation's table when a threshold is missed (by any of its
model configurations: then with the tables side by side). Turn collection off with
the ini option `converge_dsl_tests = false` (this repository does, since its
own suite runs the example tests itself) or with `-p no:converge_dsl`.

Fixture for tests written in Python: `pipeline_tester`, a `PipelineTester`
(`load` a pipeline relative to the test module, `scripted` / `script` models,
`run` with models and optional expectations, `check` a result against
expectations written as in a test file).

Importing this module costs only pytest's import: converge-dsl is imported
when a test file is collected or the fixture is used.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from converge_dsl._json_types import JsonObject

if TYPE_CHECKING:
    from converge_dsl.batch import Pipeline
    from converge_dsl.models import Model
    from converge_dsl.pipetest._expect import RunView
    from converge_dsl.pipetest._runner import CaseReport
    from converge_dsl.pipetest._spec import TestCase, TestFile
    from converge_dsl.runtime import RunResultDocument

_INI = "converge_dsl_tests"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        _INI,
        type="bool",
        default=True,
        help="collect converge-dsl pipeline tests (*.test.yaml) as pytest items (default: true)",
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name.endswith((".eval.yaml", ".eval.yml")) and parent.config.getini(_INI):
        from converge_dsl._file_kinds import is_evaluation

        if parent.session.isinitpath(file_path) or is_evaluation(file_path):
            return EvaluationFile.from_parent(parent, path=file_path)
        return None
    if not file_path.name.endswith((".test.yaml", ".test.yml")):
        return None
    if not parent.config.getini(_INI):
        return None
    if not parent.session.isinitpath(file_path):
        from converge_dsl.pipetest._files import says_test_file

        if not says_test_file(file_path):
            return None  # another tool's file of that name (`docker-compose.test.yaml`)
    return PipelineTestFile.from_parent(parent, path=file_path)


def _item_name(case: str) -> str:
    """The name of the pytest item of the case named `case`, escaped one to one.

    pytest prints an item's name as it is, one report line each, and a case's name is
    the user's text (a newline in it could fake a PASSED line): it is shown on one line
    (`name_on_one_line`). pytest reads `::` in a node id as the start of a child's name,
    so a colon followed by another is written `\\x3a` (`std::vector` is the item
    `std\\x3a:vector`, selected as `pytest 'file.test.yaml::std\\x3a:vector'`), and a
    node id `NAME` selects an item `NAME[...]` too (a parametrized test's), so `[` is
    written `\\x5b`: every case is selected alone by its node id."""
    import re

    from converge_dsl._escapes import name_on_one_line

    return re.sub(":(?=:)", r"\\x3a", name_on_one_line(case)).replace("[", r"\x5b")


class PipelineTestFailed(AssertionError):
    """A case whose expectations do not hold (its report says which)."""

    def __init__(self, report: CaseReport) -> None:
        super().__init__(report.test_id)
        self.report = report


class PipelineTestFile(pytest.File):
    """A test file: loaded, validated and checked once, its pipelines loaded once."""

    def collect(self) -> Iterator[pytest.Item]:
        from converge_dsl.pipetest import read_test_file

        test = read_test_file(self.path)
        for case in test.cases:
            name = _item_name(case.name)
            yield PipelineTestItem.from_parent(self, name=name, test=test, case=case)

    def repr_failure(  # type: ignore[override]
        self, excinfo: pytest.ExceptionInfo[BaseException]
    ) -> str | Any:
        text = _converge_error_text(excinfo.value)
        return text if text is not None else super().repr_failure(excinfo)


class PipelineTestItem(pytest.Item):
    """One case of a test file."""

    def __init__(self, *, test: TestFile, case: TestCase, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.test = test
        self.case = case
        self.extra_keyword_matches.add(case.name)  # `-k` by the case's own name
        # No fixtures; plugins that wrap every call read an item's `funcargs`
        # (pytest-lsp's hook returns without yielding when an item has none).
        self.funcargs: dict[str, Any] = {}

    def runtest(self) -> None:
        from converge_dsl.pipetest import run_case

        report = run_case(self.test, self.case)
        if not report.passed:
            raise PipelineTestFailed(report)

    def repr_failure(  # type: ignore[override]
        self, excinfo: pytest.ExceptionInfo[BaseException]
    ) -> str | Any:
        from converge_dsl.pipetest import format_failures

        if isinstance(excinfo.value, PipelineTestFailed):
            return format_failures(excinfo.value.report)
        text = _converge_error_text(excinfo.value)
        return text if text is not None else super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.span.line - 1, self.name


class EvaluationFailed(AssertionError):
    """An evaluation that missed a threshold (its text is the result's table)."""


class EvaluationFile(pytest.File):
    """An evaluation file: one test, which fails when a threshold is missed."""

    def collect(self) -> Iterator[pytest.Item]:
        yield EvaluationItem.from_parent(self, name="thresholds")


class EvaluationItem(pytest.Item):
    """A whole evaluation: read, run over its dataset, checked against its thresholds."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.funcargs: dict[str, Any] = {}

    def runtest(self) -> None:
        from converge_dsl.pipetest import (
            EvalSettings,
            read_eval_file,
            render_configurations_human,
            render_eval_human,
            run_configurations,
        )

        evaluation = read_eval_file(self.path)
        try:
            results = run_configurations(evaluation, EvalSettings())
        finally:
            evaluation.pipeline.close()
        if not all(result.passed for result in results):
            if len(results) == 1:
                raise EvaluationFailed(render_eval_human(results[0], None))
            raise EvaluationFailed(render_configurations_human(results, None))

    def repr_failure(  # type: ignore[override]
        self, excinfo: pytest.ExceptionInfo[BaseException]
    ) -> str | Any:
        if isinstance(excinfo.value, EvaluationFailed):
            return str(excinfo.value)
        text = _converge_error_text(excinfo.value)
        return text if text is not None else super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.name


def _converge_error_text(error: BaseException) -> str | None:
    """An invalid file's diagnostics as `validate` prints them, or a converge-dsl error."""
    from converge_dsl.errors import ConvergeError, PipelineInvalid

    if isinstance(error, PipelineInvalid):
        from converge_dsl.frontend import render_human

        return render_human(error.diagnostics, {})
    if isinstance(error, ConvergeError):
        return error.printed()
    return None


class PipelineTester:
    """Helpers for testing pipelines from Python (the `pipeline_tester` fixture).

    Paths are relative to `base` (the folder of the test module).
    """

    def __init__(self, base: Path) -> None:
        self.base = base

    def load(self, path: str | Path, **options: Any) -> Pipeline:
        """`converge_dsl.load` of `path` (relative to the test module's folder)."""
        from converge_dsl.batch import load

        return load(self.base / path, **options)

    def scripted(
        self,
        rules: Sequence[Mapping[str, Any]] = (),
        *,
        default: Mapping[str, Any] | str | None = None,
        name: str = "scripted",
    ) -> Model:
        """A scripted model from rules written as in a model script (`default` may be
        the text of the reply). A fresh one is needed for every run."""
        from converge_dsl.models import ScriptedModel

        body: dict[str, Any] = {"apiVersion": "converge-dsl/v1", "kind": "ModelScript"}
        body["rules"] = [dict(rule) for rule in rules]
        if default is not None:
            body["default"] = {"reply": default} if isinstance(default, str) else dict(default)
        return ScriptedModel.from_text(json.dumps(body), "<inline script>", name=name)

    def script(self, path: str | Path, *, name: str = "scripted") -> Model:
        """A scripted model reading the model script at `path`."""
        from converge_dsl.models import ScriptedModel

        return ScriptedModel.from_file(self.base / path, name=name)

    def run(
        self,
        pipeline: Pipeline,
        inputs: JsonObject | None = None,
        *,
        models: Mapping[str, Model] | None = None,
        expect: Mapping[str, Any] | None = None,
    ) -> RunResultDocument:
        """Run once; with `expect` (as a test file writes it, invariants included),
        fail the test with the readable diff when an expectation does not hold."""
        import asyncio

        from converge_dsl.pipetest._runner import view_of

        async def go() -> Any:
            try:
                return await pipeline.outcome(inputs, models=models)
            finally:
                await pipeline.aclose()

        outcome = asyncio.run(go())
        if expect is not None:
            self._check(view_of(outcome), expect)
        document: RunResultDocument = outcome.document
        return document

    def check(self, result: RunResultDocument, expect: Mapping[str, Any]) -> None:
        """Fail the test when `result` breaks `expect` (invariants: use `run(expect=...)`)."""
        from converge_dsl.pipetest._runner import view_of_document

        self._check(view_of_document(result), expect)

    def _check(self, view: RunView, expect: Mapping[str, Any]) -> None:
        from converge_dsl.diagnostics import format_path
        from converge_dsl.pipetest._expect import Expectations, expectation_problems, failures
        from converge_dsl.pipetest._report import diff_text

        problems = expectation_problems(expect)
        if problems:
            listed = "".join(f"\n  {problem}" for problem in problems)
            pytest.fail(f"`expect` is not written as a test file writes it:{listed}", pytrace=False)
        found = failures(Expectations.of(expect), view, ())
        if found:
            text = "\n".join(
                f"{format_path(f.path)}: {f.title} differs\n{diff_text(f)}" for f in found
            )
            pytest.fail(text, pytrace=False)


@pytest.fixture
def pipeline_tester(request: pytest.FixtureRequest) -> PipelineTester:
    """Load pipelines, script models, run and check expectations from a Python test."""
    return PipelineTester(Path(request.path).parent)
