"""The Python API: load once, run many times, sync and async, results in input order."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import converge_dsl
from converge_dsl.batch import Pipeline
from converge_dsl.errors import PipelineInvalid, UsageError
from tests.loop_chain import schedule_chain

from .conftest import DATA, ECHO


def test_import_stays_cheap_and_load_is_lazy() -> None:
    code = (
        "import sys, converge_dsl; "
        "assert 'converge_dsl.batch' not in sys.modules; "
        "assert 'converge_dsl.runtime' not in sys.modules; "
        "converge_dsl.load; assert 'converge_dsl.batch' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_run_returns_the_run_result() -> None:
    pipeline = converge_dsl.load(ECHO)
    assert isinstance(pipeline, Pipeline)
    result = pipeline.run(inputs={"word": "tea"})
    assert result.stop_reason == "converged"
    assert [f.content for f in result.facts["signals"]] == ["answered tea"]
    assert result.usage.model_calls == 1


def test_a_model_failure_is_a_result_not_an_exception() -> None:
    result = converge_dsl.load(ECHO).run(inputs={"word": "boom"})
    assert result.stop_reason == "error"
    assert [d.code for d in result.diagnostics] == ["CD911"]


def test_errors_are_the_projects_exceptions(tmp_path) -> None:
    pipeline = converge_dsl.load(ECHO)
    with pytest.raises(UsageError, match="unknown input 'nope'"):
        pipeline.run(inputs={"nope": 1})
    with pytest.raises(UsageError, match="no such pipeline file"):
        converge_dsl.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: converge-dsl/v1\nkind: Pipeline\nname: x\nbogus: 1\n")
    with pytest.raises(PipelineInvalid) as caught:
        converge_dsl.load(bad)
    assert caught.value.diagnostics


def test_run_many_yields_in_input_order_when_later_cases_finish_first() -> None:
    pipeline = converge_dsl.load(ECHO)
    words = ["slow", "a", "b", "slow", "c", "d"]
    started = time.monotonic()
    results = list(pipeline.run_many([{"word": w} for w in words], concurrency=6))
    assert time.monotonic() - started < 2.0  # concurrent: not 2 x 0.3 s in a row per case
    assert [r.facts["signals"][0].content for r in results] == [f"answered {w}" for w in words]


def test_run_many_keeps_going_past_a_failing_case() -> None:
    pipeline = converge_dsl.load(ECHO)
    cases: list[Any] = [{"word": "a"}, ["not", "a", "mapping"], {"word": "boom"}, {"word": "b"}]
    stops = [r.stop_reason for r in pipeline.run_many(cases, concurrency=2)]
    assert stops == ["converged", "usage_error", "error", "converged"]


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The inputs of every run a `Pipeline` starts from now on."""
    started: list[object] = []
    outcome = Pipeline.outcome

    async def spy(self: Pipeline, inputs: Any = None, **options: Any) -> Any:
        started.append(inputs)
        return await outcome(self, inputs, **options)

    monkeypatch.setattr(Pipeline, "outcome", spy)
    return started


def test_run_many_refuses_an_undeclared_input_before_any_case_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before, each case giving it ran and came back as its own usage_error result, the
    # cases before and after it run (and paid for); `run --cases` refused it up front.
    from converge_dsl.batch import CasesRefused

    pipeline = converge_dsl.load(ECHO)
    started = _spied(monkeypatch)
    cases = [{"word": "a"}, {"wrod": "b"}, {"id": "c", "wrod": "c"}, {"id": 7, "lang": "en"}]
    with pytest.raises(CasesRefused) as caught:
        list(pipeline.run_many(cases, concurrency=1))
    said = "pipeline 'echo' has no input 'wrod', given by case #1 (no id) and 1 more"
    assert str(caught.value) == f"[CD802] {said}"
    assert [(d.code, d.message, d.hint) for d in caught.value.diagnostics] == [
        ("CD802", said, "did you mean 'word'?"),
        ("CD802", "pipeline 'echo' has no input 'lang', given by case 7", "declared inputs: word"),
    ]
    assert caught.value.exit_code == 3
    assert isinstance(caught.value, PipelineInvalid)  # the error root, as the CLI's

    async def main() -> list[str]:
        return [r.stop_reason async for r in pipeline.arun_many(cases, concurrency=1)]

    with pytest.raises(CasesRefused):
        asyncio.run(main())
    assert started == []


def test_arun_runs_concurrently_on_one_loop_with_equal_results() -> None:
    pipeline = converge_dsl.load(ECHO)

    async def main() -> list[object]:
        async with pipeline:
            return list(await asyncio.gather(*(pipeline.arun({"word": "x"}) for _ in range(20))))

    results = asyncio.run(main())
    assert all(r == results[0] for r in results)


def test_arun_many_in_async_code() -> None:
    pipeline = converge_dsl.load(ECHO)

    async def main() -> list[str]:
        return [r.stop_reason async for r in pipeline.arun_many([{}, {}], concurrency=2)]

    assert asyncio.run(main()) == ["converged", "converged"]


def test_sync_calls_inside_a_running_loop_are_refused() -> None:
    pipeline = converge_dsl.load(ECHO)

    async def main() -> None:
        with pytest.raises(UsageError, match="running event loop"):
            pipeline.run()

    asyncio.run(main())


def test_run_lets_what_its_end_scheduled_run_before_its_loop_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Connections closed at a run's end close their sockets in callbacks scheduled one
    after the other: a loop closed at once never ran them (sockets left to the collector)."""
    ran: list[int] = []
    run_and_close = Pipeline._run_and_close

    async def then_schedule(self: Pipeline, *args: Any) -> Any:
        result = await run_and_close(self, *args)
        schedule_chain(ran)
        return result

    monkeypatch.setattr(Pipeline, "_run_and_close", then_schedule)
    assert converge_dsl.load(ECHO).run({"word": "x"}).stop_reason == "converged"
    assert ran == [1, 2, 3]


def test_ctrl_c_during_run_cancels_the_run_then_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    cancelled: list[bool] = []

    async def waits(self: Pipeline, *args: Any) -> Any:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    monkeypatch.setattr(Pipeline, "_run_and_close", waits)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            converge_dsl.load(ECHO).run({"word": "x"})
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert cancelled == [True]


def test_a_pipeline_is_immutable_and_shared_across_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    pipeline = converge_dsl.load(DATA / "echo.yaml")
    with pytest.raises(AttributeError):
        pipeline.extra = 1  # type: ignore[attr-defined]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda w: pipeline.run({"word": w}), ["a", "b", "c", "d"]))
    assert [r.facts["signals"][0].content for r in results] == [
        "answered a",
        "answered b",
        "answered c",
        "answered d",
    ]


def test_a_pickled_pipeline_carries_the_packs_its_validation_read(monkeypatch) -> None:
    import pickle
    from pathlib import Path

    import converge_dsl.packs._compile as compiling

    pipeline = converge_dsl.load(Path(__file__).parents[2] / "pipelines" / "support-triage.yaml")
    again = pickle.loads(pickle.dumps(pipeline))  # what a batch worker is handed
    reads: list[Path] = []
    real = compiling.load_locked_packs
    monkeypatch.setattr(
        compiling, "load_locked_packs", lambda path: reads.append(path) or real(path)
    )
    assert again.run().stop_reason == "converged"
    assert reads == []  # compiled with the packs the parent's validation read


def test_a_pickled_pipeline_is_the_loaded_one_without_loading_again(tmp_path) -> None:
    import pickle
    import shutil

    copy = tmp_path / "echo.yaml"
    for file in ECHO.parent.iterdir():
        if file.is_file():
            shutil.copy(file, tmp_path / file.name)
    shutil.copy(ECHO, copy)
    pipeline = converge_dsl.load(copy, env={"SOME_KEY": "x"})
    text = copy.read_text(encoding="utf-8")
    copy.write_text(text.replace("kind: Pipeline", "kind: Broken"), encoding="utf-8")
    again = pickle.loads(pickle.dumps(pipeline))
    assert (again.name, again.path, again.keys) == (pipeline.name, pipeline.path, pipeline.keys)
    result = again.run(inputs={"word": "tea"})  # what load checked, not the broken file
    assert result == pipeline.run(inputs={"word": "tea"})


def test_an_input_name_that_is_not_a_string_is_a_usage_error() -> None:
    # `run({1: "x"})` and `run_many([{1: "x"}])` raised AttributeError from quoting the name.
    pipeline = converge_dsl.load(ECHO)
    with pytest.raises(UsageError, match=r"^\[CD338\] inputs: input name 1 is not a string"):
        pipeline.run({1: "x"})  # type: ignore[dict-item]
    with pytest.raises(UsageError, match=r"^\[CD338\] case #0: input name 1 is not a string"):
        list(pipeline.run_many([{1: "x"}]))  # type: ignore[dict-item]
