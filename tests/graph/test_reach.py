"""Static reachability (`graph._reach`): the engine's candidate rule as a fixed point."""

from __future__ import annotations

from converge_dsl.graph._reach import Flow, reach


def test_a_chain_from_the_seeds_is_reachable_to_its_end() -> None:
    flows = [Flow("a", ("seeds",), ("x",)), Flow("b", ("x",), ("y",)), Flow("c", ("y",), ("z",))]
    found = reach(["seeds"], flows)
    assert found.suggestors == {"a", "b", "c"}
    assert {"seeds", "x", "y", "z"} <= found.keys


def test_any_one_dependency_makes_a_candidate() -> None:
    found = reach(["seeds"], [Flow("join", ("never", "seeds"), ("out",))])
    assert found.suggestors == {"join"}
    assert "out" in found.keys
    assert "never" not in found.keys


def test_a_suggestor_without_dependencies_always_fires() -> None:
    found = reach([], [Flow("seed", (), ("signals",)), Flow("next", ("signals",), ("done",))])
    assert found.suggestors == {"seed", "next"}
    assert {"signals", "done"} <= found.keys


def test_nothing_fires_without_seeds_or_sources() -> None:
    found = reach([], [Flow("a", ("x",), ("y",)), Flow("b", ("y",), ("x",))])
    assert found.suggestors == frozenset()
    assert found.keys == frozenset()


def test_a_cycle_nothing_enters_stays_unreachable_and_one_entered_fills() -> None:
    loop = [Flow("echo", ("evaluations",), ("evaluations",))]
    assert reach(["seeds"], loop).suggestors == frozenset()
    entered = [*loop, Flow("start", ("seeds",), ("evaluations",))]
    assert reach(["seeds"], entered).suggestors == {"echo", "start"}


def test_rejections_make_diagnostic_reachable_once_anything_fires() -> None:
    watcher = Flow("watch", ("diagnostic",), ("signals",))
    assert reach([], [watcher]).suggestors == frozenset()
    found = reach(["seeds"], [watcher, Flow("a", ("seeds",), ("x",))])
    assert found.suggestors == {"a", "watch"}
