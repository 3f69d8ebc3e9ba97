"""Pipeline tests: `*.test.yaml` files (`kind: PipelineTest`) run and checked.

A test file names a pipeline, and cases: inputs, models to put in place of
the pipeline's (a model script, a cassette, or replies written inline) and
expectations (stop reason, facts present or absent, content, data subsets,
counts, usage limits, invariants, snapshots). `converge-dsl test` and the
pytest plugin (`converge_dsl.pipetest.pytest_plugin`) both run them.

Public surface:
- `read_test_file(path)` -> `TestFile` (raises `PipelineInvalid`, located in the
  test file); `TestFile`, `TestCase`, `ModelSource`; `test_files(paths)`.
- `run_test_file(test)` -> list of `CaseReport`; `run_case(test, case)`.
- `Failure` (one broken expectation), `format_failures(report)` (the readable diff),
  `render_report(reports, format)` (`human`, `json` or `junit`; `REPORT_FORMATS`),
  `render_junit_invalid(diagnostics)` (JUnit XML for test files that cannot be read).
- `display_name(path)`: a path as messages show it (relative to the working folder).
- `update_snapshots(reports)`: `--update`, a round trip that keeps comments.
- `subset_mismatch(expected, actual)`: the JSON subset match of `data`.

Names are imported on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_names

if TYPE_CHECKING:
    from converge_dsl.pipetest._expect import Failure, subset_mismatch
    from converge_dsl.pipetest._files import test_files
    from converge_dsl.pipetest._report import (
        REPORT_FORMATS,
        format_failures,
        render_junit_invalid,
        render_report,
    )
    from converge_dsl.pipetest._runner import CaseReport, run_case, run_test_file
    from converge_dsl.pipetest._spec import (
        ModelSource,
        TestCase,
        TestFile,
        display_name,
        read_test_file,
    )
    from converge_dsl.pipetest._update import update_snapshots

_WHERE: dict[str, str] = {
    "Failure": "converge_dsl.pipetest._expect",
    "subset_mismatch": "converge_dsl.pipetest._expect",
    "test_files": "converge_dsl.pipetest._files",
    "format_failures": "converge_dsl.pipetest._report",
    "render_report": "converge_dsl.pipetest._report",
    "render_junit_invalid": "converge_dsl.pipetest._report",
    "REPORT_FORMATS": "converge_dsl.pipetest._report",
    "display_name": "converge_dsl.pipetest._spec",
    "CaseReport": "converge_dsl.pipetest._runner",
    "run_case": "converge_dsl.pipetest._runner",
    "run_test_file": "converge_dsl.pipetest._runner",
    "ModelSource": "converge_dsl.pipetest._spec",
    "TestCase": "converge_dsl.pipetest._spec",
    "TestFile": "converge_dsl.pipetest._spec",
    "read_test_file": "converge_dsl.pipetest._spec",
    "update_snapshots": "converge_dsl.pipetest._update",
}
__getattr__ = lazy_names(__name__, _WHERE)

__all__ = [
    "REPORT_FORMATS",
    "CaseReport",
    "Failure",
    "ModelSource",
    "TestCase",
    "TestFile",
    "display_name",
    "format_failures",
    "read_test_file",
    "render_junit_invalid",
    "render_report",
    "run_case",
    "run_test_file",
    "subset_mismatch",
    "test_files",
    "update_snapshots",
]
