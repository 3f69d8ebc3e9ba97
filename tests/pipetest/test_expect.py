"""The expectation checks on a run view: each kind of expectation holds and fails."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl.pipetest import subset_mismatch
from converge_dsl.pipetest._expect import (
    Expectations,
    FactView,
    RunView,
    expectation_problems,
    failures,
)


def _view(**facts: list[tuple[str, str, Any]]) -> RunView:
    return RunView(
        stop_reason="converged",
        facts={key: tuple(FactView(*f) for f in items) for key, items in facts.items()},
        model_calls=2,
        tokens=150,
        holds=lambda name: None if name == "fine" else "no schedule was made",
    )


VIEW = _view(
    tickets=[("t1", "T-1: billing", {"id": "T-1", "urgency": 2, "tags": ["a", "b"]})],
    signals=[("escalate", "Escalate T-1", None)],
)


@pytest.mark.parametrize(
    "expect",
    [
        {"stop_reason": "converged"},
        {"facts": [{"key": "tickets", "id": "t1", "content": "T-1: billing"}]},
        {"facts": [{"key": "tickets", "contains": "billing", "matches": "^T-\\d"}]},
        {"facts": [{"key": "tickets", "data": {"urgency": 2, "tags": ["a", "b"]}}]},
        {"absent": [{"key": "strategies"}, {"key": "signals", "id": "calm"}]},
        {"counts": {"tickets": 1, "strategies": 0}},
        {"usage": {"max_model_calls": 2, "max_tokens": 150}},
        {"invariants": ["fine"]},
        {"snapshot": {"signals": {"escalate": "Escalate T-1"}, "strategies": {}}},
    ],
)
def test_expectations_that_hold(expect: dict[str, Any]) -> None:
    assert failures(Expectations.of(expect), VIEW, ("expect",)) == []


@pytest.mark.parametrize(
    ("expect", "path", "actual"),
    [
        ({"stop_reason": "error"}, ("expect", "stop_reason"), "converged"),
        ({"facts": [{"key": "tickets", "id": "t2"}]}, ("expect", "facts", 0), "absent; the run"),
        ({"facts": [{"key": "tickets", "contains": "bug"}]}, ("expect", "facts", 0), "content"),
        ({"facts": [{"key": "tickets", "matches": "^X"}]}, ("expect", "facts", 0), "content"),
        (
            {"facts": [{"key": "tickets", "data": {"urgency": 3}}]},
            ("expect", "facts", 0),
            "data.urgency: expected 3, got 2",
        ),
        ({"facts": [{"key": "strategies"}]}, ("expect", "facts", 0), "no fact of 'strategies'"),
        ({"absent": [{"key": "signals"}]}, ("expect", "absent", 0), "1; the run has:"),
        ({"absent": [{"key": "tickets", "id": "t1"}]}, ("expect", "absent", 0), "present"),
        ({"counts": {"tickets": 2}}, ("expect", "counts", "tickets"), "1; the run has:"),
        ({"usage": {"max_model_calls": 1}}, ("expect", "usage", "max_model_calls"), "2"),
        ({"usage": {"max_tokens": 100}}, ("expect", "usage", "max_tokens"), "150"),
        ({"invariants": ["scheduled"]}, ("expect", "invariants", 0), "violated: no schedule"),
        ({"snapshot": {"signals": {}}}, ("expect", "snapshot", "signals"), "escalate: "),
    ],
)
def test_expectations_that_fail_name_their_path(
    expect: dict[str, Any], path: tuple[str | int, ...], actual: str
) -> None:
    (failure,) = failures(Expectations.of(expect), VIEW, ("expect",))
    assert failure.path == path
    assert failure.actual.startswith(actual)


def test_only_snapshot_expectations_are_updatable() -> None:
    found = failures(
        Expectations.of(
            {"stop_reason": "error", "counts": {"tickets": 3}, "usage": {"max_model_calls": 0}}
        ),
        VIEW,
        (),
    )
    assert [(f.path[0], f.updatable) for f in found] == [
        ("stop_reason", True),
        ("counts", True),
        ("usage", False),
    ]
    assert [f.snapshot for f in found if f.updatable] == ["converged", 1]


def test_data_null_is_an_expectation_and_no_data_is_none() -> None:
    view = _view(signals=[("escalate", "Escalate T-1", None)], tickets=[("t1", "T-1", {"a": 1})])
    null = {"facts": [{"key": "tickets", "data": None}]}
    (failure,) = failures(Expectations.of(null), view, ())
    assert failure.actual == 'data: expected null, got {"a": 1}'
    assert failures(Expectations.of({"facts": [{"key": "signals", "data": None}]}), view, ()) == []
    assert failures(Expectations.of({"facts": [{"key": "tickets"}]}), view, ()) == []


@pytest.mark.parametrize(
    ("expect", "problem"),
    [
        ({"facts": [{"kye": "tickets"}]}, "expect.facts[0].kye: unknown key 'kye' in expect."),
        ({"stop_reason": "done"}, "expect.stop_reason: "),
        ({"counts": {"tickets": -1}}, "expect.counts.tickets: "),
        ({"usage": {"max_calls": 1}}, "expect.usage.max_calls: unknown key"),
        ({"facts": [{"key": "tickets", "data": object()}]}, "expect: holds a value that is not"),
        (["stop_reason"], "expect: "),
    ],
)
def test_expectation_problems_locate_what_the_schema_refuses(expect: Any, problem: str) -> None:
    found = expectation_problems(expect)
    assert found, expect
    assert found[0].startswith(problem), found


def test_expectation_problems_say_did_you_mean() -> None:
    (found,) = expectation_problems({"facts": [{"key": "tickets", "contans": "billing"}]})
    assert "did you mean 'contains'" in found


def test_a_well_written_expectation_has_no_problems() -> None:
    assert expectation_problems({"facts": [{"key": "tickets", "data": {"a": [1]}}]}) == []


@pytest.mark.parametrize(
    ("expected", "actual", "problem"),
    [
        ({"a": 1}, {"a": 1, "b": 2}, None),
        ({"a": {"b": [1, {"c": 2}]}}, {"a": {"b": [1, {"c": 2, "d": 3}]}}, None),
        (1, 1.0, None),
        ({"a": 1}, {"b": 1}, "a: missing"),
        ({"urgncy": 1}, {"urgency": 1}, "urgncy: missing (did you mean 'urgency'?)"),
        ([1, 2], [1], "<root>: expected 2 items, got 1: [1]"),
        ({"a": [1]}, {"a": {"0": 1}}, 'a: expected a list, got {"0": 1}'),
        ({"a": {}}, {"a": []}, "a: expected a mapping, got []"),
        (True, 1, "<root>: expected true, got 1"),
        ({"a": "x"}, {"a": "y"}, 'a: expected "x", got "y"'),
    ],
)
def test_subset_match(expected: Any, actual: Any, problem: str | None) -> None:
    assert subset_mismatch(expected, actual) == problem


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(JSON)
def test_every_json_value_is_a_subset_of_itself(value: Any) -> None:
    assert subset_mismatch(value, value) is None


@given(st.dictionaries(st.text(max_size=3), JSON, min_size=1, max_size=4), st.data())
def test_a_mapping_with_fewer_keys_is_a_subset(value: dict[str, Any], data: st.DataObject) -> None:
    kept = data.draw(st.sets(st.sampled_from(sorted(value))))
    assert subset_mismatch({k: value[k] for k in kept}, value) is None
    missing = data.draw(st.text(max_size=4).filter(lambda k: k not in value))
    assert subset_mismatch({missing: 1}, value) is not None
