"""The `process` executor: workers started before the pipeline loads, the pipeline sent
with the chunks and unpickled once per worker, no worker left by a pipeline that fails."""

from __future__ import annotations

import multiprocessing
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import converge_dsl
from converge_dsl.batch import BatchOptions, Case, _process, run_cases
from converge_dsl.batch._outputs import CaseOutputs
from converge_dsl.errors import ConvergeError

from .conftest import ECHO


def test_a_worker_unpickles_the_pipeline_its_chunks_carry_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_process, "_die_with_parent", lambda parent: None)
    monkeypatch.setattr(_process, "freeze_alive", lambda: None)
    monkeypatch.setattr(_process._Worker, "pipeline", None)
    _process.set_up_worker(None, None, CaseOutputs(), 0)
    loop = _process._Worker.loop
    assert loop is not None
    try:
        pickled = pickle.dumps(converge_dsl.load(ECHO))
        first = _process._run([Case(0, "a", {"word": "tea"})], pickled)
        kept = _process._Worker.pipeline
        second = _process._run([Case(1, "b", {"word": "tea"})], pickled)
        assert kept is not None
        assert _process._Worker.pipeline is kept
        assert [r.id for r in first + second] == ["a", "b"]
        assert all(r.text is not None and r.text == r.line() for r in first + second)
    finally:
        if _process._Worker.pipeline is not None:
            loop.run_until_complete(_process._Worker.pipeline.aclose())
        loop.close()


def test_a_pipeline_that_does_not_load_leaves_no_worker_running(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: converge-dsl/v1\nkind: Pipeline\n", encoding="utf-8")
    options = BatchOptions(
        pipeline=broken, cases=broken, out=tmp_path / "unused", executor="process"
    )
    with pytest.raises(ConvergeError):
        run_cases(options, [Case(0, None, {})])
    assert multiprocessing.active_children() == []


def test_a_worker_with_the_cache_off_imports_no_answer_store_or_report_page(
    tmp_path: Path,
) -> None:
    pickled = tmp_path / "pipeline.pickle"
    pickled.write_bytes(pickle.dumps(converge_dsl.load(ECHO)))
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from converge_dsl.batch import Case, _process\n"
        "from converge_dsl.batch._outputs import CaseOutputs\n"
        "_process.set_up_worker(None, None, CaseOutputs(), os.getppid())\n"
        "done = _process._run([Case(0, 'a', {'word': 'tea'})], Path(sys.argv[1]).read_bytes())\n"
        "assert done[0].stop_reason == 'converged', done\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code, str(pickled)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    modules = set(ran.stdout.split())
    assert "converge_dsl.runtime._assembly" in modules  # the case did run here
    assert {
        "converge_dsl.models.answer_store",
        "converge_dsl.frontend._run_config",
        "converge_dsl.runtime._report_html",
    }.isdisjoint(modules)
