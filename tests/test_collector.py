"""The collector during a run or a check: objects older are frozen for it, then given back."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from converge_dsl._collector import quiet_collector
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.engine import Budget, ContextView, Engine, ProposedFact, Provenance, freeze_alive
from converge_dsl.engine.testing import FnSuggestor
from converge_dsl.frontend import PipelineFacts, check_pipeline


@pytest.fixture(autouse=True)
def _collector_restored(unfrozen_collector: None) -> None:
    # Counts of frozen objects are compared by halves: a frozen object that its last
    # reference leaves is freed, so an exact count drifts by the few freed meanwhile.
    # A run abandoned mid-way (its loop closed under it) holds its freeze until the
    # collector finalizes its coroutine: each test starts, and leaves, with none.
    pass


def test_objects_older_than_the_run_are_frozen_during_it_and_given_back() -> None:
    gc.enable()
    old = [[] for _ in range(100)]  # tracked objects made before the run
    seen: list[int] = []

    def propose(ctx: ContextView) -> list[ProposedFact]:
        seen.append(gc.get_freeze_count())
        return [ProposedFact("signals", f"s{ctx.cycle}", "x", 1.0, Provenance("t"))]

    engine = Engine(budget=Budget(max_cycles=3), record_events=False)
    engine.register(FnSuggestor("w", [], propose, accepts=lambda ctx: ctx.cycle <= 2))
    result = asyncio.run(engine.run())
    assert result.converged
    assert seen
    assert all(count >= len(old) for count in seen)
    assert gc.get_freeze_count() == 0  # given back: garbage among them is collectable again


def test_nested_runs_unfreeze_once_at_the_outermost() -> None:
    gc.enable()
    with quiet_collector():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with quiet_collector():
            assert gc.get_freeze_count() > frozen // 2
        assert gc.get_freeze_count() > frozen // 2  # the inner one gave nothing back
    assert gc.get_freeze_count() == 0


def test_overlapping_runs_keep_the_freeze_until_the_last_ends() -> None:
    """Two checks side by side (the language server's, in two threads): the first to end
    gave the objects back while the other still ran, whose collections then walked the
    server's whole state again."""
    gc.enable()
    first, second = quiet_collector(), quiet_collector()
    first.__enter__()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_freeze_count() > frozen // 2
    second.__exit__(None, None, None)
    assert gc.get_freeze_count() == 0


def test_a_caller_s_own_freeze_is_left_alone() -> None:
    gc.enable()
    gc.freeze()
    frozen = gc.get_freeze_count()
    with quiet_collector():
        pass
    assert gc.get_freeze_count() > frozen // 2


def test_a_disabled_collector_is_left_alone() -> None:
    gc.disable()
    with quiet_collector():
        assert gc.get_freeze_count() == 0
    assert not gc.isenabled()


def test_a_run_s_cyclic_garbage_is_still_collected() -> None:
    gc.enable()

    class Cycle:
        pass

    with quiet_collector():
        node = Cycle()
        node.self = node  # type: ignore[attr-defined]
        del node
        assert gc.collect() >= 1


def test_after_freeze_alive_runs_neither_freeze_nor_count_the_frozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.enable()
    freeze_alive()
    frozen = gc.get_freeze_count()
    assert frozen > 0

    def walked() -> int:  # walks every frozen object: once per run was a batch's cost
        raise AssertionError("the frozen objects were counted")

    monkeypatch.setattr(gc, "get_freeze_count", walked)
    with quiet_collector():
        pass
    monkeypatch.undo()
    assert gc.get_freeze_count() > frozen // 2  # nothing given back: they stay frozen


def test_a_run_inside_a_run_does_not_count_the_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    gc.enable()
    with quiet_collector():
        monkeypatch.setattr(gc, "get_freeze_count", lambda: pytest.fail("counted"))
        with quiet_collector():
            pass
        monkeypatch.undo()
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_check_freezes_the_loaded_document_and_gives_it_back(tmp_path: Path) -> None:
    gc.enable()
    seen: list[int] = []
    path = tmp_path / "p.yaml"
    path.write_text(
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: p\nseeds: [{id: s, content: x}]\n",
        encoding="utf-8",
    )

    def probe(_: PipelineFacts) -> Iterator[Diagnostic]:
        seen.append(gc.get_freeze_count())
        yield from ()

    checked = check_pipeline(path, checks=[probe])
    assert checked.ok
    assert len(seen) == 1
    assert seen[0] > 0  # the loaded document and every object older
    assert gc.get_freeze_count() == 0
