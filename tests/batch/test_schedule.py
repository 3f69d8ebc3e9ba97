"""The case scheduler: cases with their own models and budget, their wall time, any executor."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import converge_dsl
from converge_dsl.batch import (
    BatchOptions,
    Case,
    CaseBudget,
    ModelOverride,
    drive,
    ordered,
    run_cases,
)
from converge_dsl.engine import Budget
from converge_dsl.errors import ConvergeError

from .conftest import ECHO

_OTHER = """\
apiVersion: converge-dsl/v1
kind: ModelScript
default: {reply: "said it otherwise"}
"""


def _override(tmp_path: Path) -> dict[str, ModelOverride]:
    (tmp_path / "other.script.yaml").write_text(_OTHER, encoding="utf-8")
    spec = {"adapter": "scripted", "script": "other.script.yaml"}
    return {"default": ModelOverride(spec, tmp_path)}


def _answers(results: list[object]) -> list[str]:
    return [r.body["facts"]["hypotheses"][0]["content"] for r in results]  # type: ignore[attr-defined]


def test_a_case_runs_with_the_models_it_declares_anew_and_keeps_its_time(tmp_path: Path) -> None:
    pipeline = converge_dsl.load(ECHO)
    models = _override(tmp_path)
    cases = [Case(0, "a", {"word": "tea"}), Case(1, "b", {"word": "tea"}, models=models)]
    results = [r for _, r in drive(pipeline, ordered(pipeline, cases, concurrency=2))]
    assert _answers(results) == ["said it", "said it otherwise"]
    assert all(r.seconds > 0 for r in results)
    assert '"seconds"' not in results[1].line()
    assert results[0].body == converge_dsl.load(ECHO).run({"word": "tea"}).model_dump(mode="json")


def test_a_case_budget_takes_the_lower_of_each_limit() -> None:
    budget = Budget(max_model_calls=3, max_tokens=None, max_wall_s=600)
    lowered = CaseBudget(max_model_calls=10, max_tokens=50, max_wall_s=2)(budget)
    assert (lowered.max_model_calls, lowered.max_tokens, lowered.max_wall_s) == (3, 50, 2)
    assert CaseBudget()(budget) == budget


def test_a_case_budget_stops_the_case_at_its_own_limit() -> None:
    pipeline = converge_dsl.load(ECHO)
    cases = [Case(0, None, {"word": "tea"}, budget=CaseBudget(max_tokens=1))]
    ((_, result),) = list(drive(pipeline, ordered(pipeline, cases, concurrency=1)))
    assert result.stop_reason == "token_budget_exhausted"


def test_a_model_the_pipeline_does_not_declare_is_the_cases_usage_error(tmp_path: Path) -> None:
    pipeline = converge_dsl.load(ECHO)
    models = {"defualt": _override(tmp_path)["default"]}
    cases = [Case(0, None, {"word": "tea"}, models=models)]
    ((_, result),) = list(drive(pipeline, ordered(pipeline, cases, concurrency=1)))
    assert result.stop_reason == "usage_error"
    assert "declares no model 'defualt'" in result.body["diagnostics"][0]["message"]


def test_run_cases_runs_overridden_cases_in_worker_processes(tmp_path: Path) -> None:
    models = _override(tmp_path)
    options = BatchOptions(
        pipeline=ECHO, cases=ECHO, out=tmp_path / "unused", executor="process", concurrency=2
    )
    cases = [Case(i, i, {"word": "tea"}, models=models if i % 2 else None) for i in range(4)]
    results = sorted(run_cases(options, cases), key=lambda r: r.index)
    assert _answers(results) == ["said it", "said it otherwise"] * 2
    assert not (tmp_path / "unused").exists()


class _Interrupted:
    """A loaded pipeline whose case `stop` is running when Ctrl-C comes; the others fail."""

    path = Path("interrupted.yaml")

    def __init__(self) -> None:
        self.closed = False

    async def outcome(self, inputs: Mapping[str, Any], **_: object) -> object:
        await asyncio.gather(*(self._suggest(inputs, n) for n in range(3)))  # as a cycle does
        raise ConvergeError("no run here")

    async def _suggest(self, inputs: Mapping[str, Any], n: int) -> None:
        await asyncio.sleep(0)
        if inputs.get("stop") and n == 1:
            signal.raise_signal(signal.SIGINT)  # what a Ctrl-C does while this case runs
        await asyncio.sleep(0.001 * n)

    async def aclose(self) -> None:
        self.closed = True


def test_a_ctrl_c_while_cases_run_cancels_them_and_is_raised_once_the_loop_is_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pipeline = _Interrupted()
    cases = [Case(i, None, {"stop": i == 5, "pad": i}) for i in range(40)]
    seen: list[int] = []
    steps = drive(pipeline, ordered(pipeline, cases, concurrency=4))  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):  # noqa: PT012 (the loop is what is interrupted)
        for index, _ in steps:
            seen.append(index)
    assert pipeline.closed
    assert seen == list(range(len(seen)))
    assert len(seen) < len(cases)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not [r.message for r in caplog.records if r.name == "asyncio"]  # no task left pending


class _InterruptedAgain(_Interrupted):
    """Ctrl-C again while the first one cancels the cases, and again while the batch closes."""

    async def _suggest(self, inputs: Mapping[str, Any], n: int) -> None:
        try:
            await super()._suggest(inputs, n)
        except asyncio.CancelledError:
            if inputs.get("stop") and n == 1:
                signal.raise_signal(signal.SIGINT)
                await asyncio.sleep(0)  # the cancellation is still under way
            raise

    async def aclose(self) -> None:
        signal.raise_signal(signal.SIGINT)
        await asyncio.sleep(0)
        self.closed = True


def test_more_ctrl_c_while_the_first_is_handled_still_close_everything_and_end_as_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pipeline = _InterruptedAgain()
    cases = [Case(i, None, {"stop": i == 5, "pad": i}) for i in range(10)]
    seen: list[int] = []
    # One at a time: the step waits for the interrupted case when Ctrl-C comes.
    steps = drive(pipeline, ordered(pipeline, cases, concurrency=1))  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):  # noqa: PT012 (the loop is what is interrupted)
        for index, _ in steps:
            seen.append(index)
    assert pipeline.closed
    assert seen == list(range(5))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not [r.message for r in caplog.records if r.name == "asyncio"]


def test_a_ctrl_c_while_a_finished_batch_closes_is_raised_once_it_is_closed() -> None:
    pipeline = _InterruptedAgain()
    cases = [Case(i, None, {"pad": i}) for i in range(3)]
    steps = drive(pipeline, ordered(pipeline, cases, concurrency=2))  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        list(steps)
    assert pipeline.closed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
