"""Every example pipeline in pipelines/ has a test file beside it, and its cases pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from converge_dsl.pipetest import format_failures, read_test_file, run_test_file

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = sorted(
    p
    for p in (ROOT / "pipelines").glob("*.yaml")
    if not p.name.endswith((".script.yaml", ".test.yaml"))
)
TESTS = sorted((ROOT / "pipelines").glob("*.test.yaml"))


def test_there_are_example_pipelines_and_tests() -> None:
    assert len(PIPELINES) >= 6
    assert len(TESTS) == len(PIPELINES)


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: p.name)
def test_every_example_pipeline_has_a_test_file_that_runs_it(pipeline: Path) -> None:
    test_file = pipeline.with_name(pipeline.stem + ".test.yaml")
    assert test_file.is_file(), f"{pipeline.name} has no {test_file.name}"
    test = read_test_file(test_file)
    assert {case.pipeline.resolve() for case in test.cases} == {pipeline.resolve()}


@pytest.mark.parametrize("test_file", TESTS, ids=lambda p: p.name)
def test_the_example_tests_pass(test_file: Path) -> None:
    reports = run_test_file(read_test_file(test_file))
    assert reports
    failed = [format_failures(r) for r in reports if not r.passed]
    assert failed == [], "\n".join(failed)
