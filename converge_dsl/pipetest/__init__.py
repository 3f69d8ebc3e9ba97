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
- `update_snapshots(reports)`: `--update`, a round trip that keeps comments.
- `subset_mismatch(expected, actual)`: the JSON subset match of `data`.
- Evaluations (`*.eval.yaml`, `kind: Evaluation`): `read_eval_file(path)` -> `EvalFile`,
  `run_eval(evaluation)` -> `EvalResult`, `run_configurations(evaluation, settings)`
  -> one per model configuration (`EvalSettings`: concurrency, executor, budgets, the
  cases' cassettes; `JudgeOptions`: the judges' cache and cassette; `cassette_folders(DIR)`:
  where `eval --record DIR` puts them),
  `compare(result, baseline, tolerance)` (`baseline_of` picks a configuration's part),
  `render_eval_human(result, changes)` and `render_eval_junit(result)`, and for several
  configurations `render_configurations_human` and `render_configurations_junit`;
  `parse_verdict(text, verdict)` reads a judge's answer.
- `diff_results(a, b, ignore)` -> `RunDiff`: what differs between two run results (`converge-dsl
  diff`); `read_batch_results(text, display)` -> `CaseResultLine`s, `diff_batches(a, b, ignore)`
  -> `BatchDiff`: what differs between two batch results files, case by case
  (`is_batch_results(text)` tells them apart); `ignore` leaves `DIFF_SECTIONS` out of both.
- `render_eval_html(document)` and `render_diff_html(document, kind, a, b)`: the self-contained
  HTML pages of `eval --format html` and `diff --format html`.

Names are imported on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_exports

if TYPE_CHECKING:  # the table's modules, for type checkers
    from converge_dsl.pipetest._batch_diff import *  # noqa: F403
    from converge_dsl.pipetest._eval_compare import *  # noqa: F403
    from converge_dsl.pipetest._eval_judge import *  # noqa: F403
    from converge_dsl.pipetest._eval_outputs import *  # noqa: F403
    from converge_dsl.pipetest._eval_report import *  # noqa: F403
    from converge_dsl.pipetest._eval_result import *  # noqa: F403
    from converge_dsl.pipetest._eval_run import *  # noqa: F403
    from converge_dsl.pipetest._eval_spec import *  # noqa: F403
    from converge_dsl.pipetest._expect import *  # noqa: F403
    from converge_dsl.pipetest._files import *  # noqa: F403
    from converge_dsl.pipetest._html_pages import *  # noqa: F403
    from converge_dsl.pipetest._report import *  # noqa: F403
    from converge_dsl.pipetest._run_diff import *  # noqa: F403
    from converge_dsl.pipetest._runner import *  # noqa: F403
    from converge_dsl.pipetest._spec import *  # noqa: F403
    from converge_dsl.pipetest._update import *  # noqa: F403
else:
    __all__, __getattr__ = lazy_exports(
        __name__,
        {
            "converge_dsl.pipetest._batch_diff": (
                "BatchDiff",
                "CaseResultLine",
                "diff_batches",
                "is_batch_results",
                "read_batch_results",
            ),
            "converge_dsl.pipetest._eval_compare": ("baseline_of", "compare"),
            "converge_dsl.pipetest._eval_judge": ("JudgeOptions", "parse_verdict"),
            "converge_dsl.pipetest._eval_outputs": ("cassette_folders",),
            "converge_dsl.pipetest._eval_report": (
                "render_configurations_human",
                "render_configurations_junit",
                "render_eval_human",
                "render_eval_junit",
            ),
            "converge_dsl.pipetest._eval_result": ("EvalResult",),
            "converge_dsl.pipetest._eval_run": (
                "EvalSettings",
                "run_configurations",
                "run_eval",
            ),
            "converge_dsl.pipetest._eval_spec": ("EvalFile", "read_eval_file"),
            "converge_dsl.pipetest._expect": ("Failure", "subset_mismatch"),
            "converge_dsl.pipetest._files": ("test_files",),
            "converge_dsl.pipetest._html_pages": ("render_diff_html", "render_eval_html"),
            "converge_dsl.pipetest._report": (
                "REPORT_FORMATS",
                "format_failures",
                "render_junit_invalid",
                "render_report",
            ),
            "converge_dsl.pipetest._run_diff": ("DIFF_SECTIONS", "RunDiff", "diff_results"),
            "converge_dsl.pipetest._runner": ("CaseReport", "run_case", "run_test_file"),
            "converge_dsl.pipetest._spec": (
                "ModelSource",
                "TestCase",
                "TestFile",
                "read_test_file",
            ),
            "converge_dsl.pipetest._update": ("update_snapshots",),
        },
    )
