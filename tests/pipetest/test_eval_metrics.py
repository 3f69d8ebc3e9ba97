"""The measures of an evaluation, case by case, and the Wilson interval."""

from __future__ import annotations

from typing import Any

import pytest

from converge_dsl.pipetest._eval_dataset import EvalCase
from converge_dsl.pipetest._eval_metrics import is_subset, score, set_score, wilson
from converge_dsl.pipetest._eval_spec import Metric
from converge_dsl.pipetest._json_equal import same_json

_RESULT: dict[str, Any] = {
    "stop_reason": "converged",
    "usage": {"model_calls": 1, "input_tokens": 30, "output_tokens": 12},
    "facts": {
        "tickets": [
            {"id": "t-1", "data": {"category": "bug", "urgency": 3, "tags": ["a", "b"]}},
            {"id": "t-2", "data": {"category": "billing", "urgency": 1.5, "tags": ["c"]}},
        ]
    },
}
_CASE = EvalCase(
    "c",
    {},
    {"category": "bug", "urgency": 2.6, "ids": ["t-1", "t-3"], "shape": {"tags": ["b"]}},
    1,
)


def _score(kind: str, **spec: Any) -> float | None:
    return score(Metric("m", kind, spec, None, ("metrics", 0)), _CASE, _RESULT)


def test_exact_match_reads_the_first_fact_at_the_field() -> None:
    assert _score("exact", key="tickets", field="/category", expected="category") == 1.0
    assert _score("exact", key="tickets", field="/urgency", expected="category") == 0.0
    assert _score("exact", key="nothing", field="/category", expected="category") == 0.0


@pytest.mark.parametrize(
    ("found", "expected", "same"),
    [
        (True, 1, False),  # Python's True == 1 passed an exact match
        ({"ok": False}, {"ok": 0}, False),
        ([1, True], [1, 1], False),
        ({"n": 1}, {"n": 1.0}, True),
        ([{"a": [1, "x"]}], [{"a": [1.0, "x"]}], True),
    ],
)
def test_exact_compares_as_json_does(found: object, expected: object, same: bool) -> None:
    case = EvalCase("c", {}, {"want": expected}, 1)
    result = {"facts": {"k": [{"id": "f", "data": found}]}}
    metric = Metric("m", "exact", {"key": "k", "expected": "want"}, None, ("metrics", 0))
    assert score(metric, case, result) == float(same)


def test_set_members_are_compared_as_json() -> None:
    # true met 1, and an object met the string of its JSON text
    assert set_score([True, {"a": 1}], [1, '{"a": 1}'], "recall") == 0.0
    assert set_score([1.0, "x", None, {"a": [1]}], [1, "x", None, {"a": [1]}], "f1") == 1.0


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        ({"qty": 2.0}, {"qty": 2}),
        ([1.0], [1]),
        ({"a": -0.0}, {"a": 0}),
        ({"b": 1, "a": [2.0, {"c": -0.0}]}, {"a": [2, {"c": 0}], "b": 1.0}),
    ],
)
def test_set_members_inside_objects_and_lists_are_equal_as_exact_finds_them(
    found: object, expected: object
) -> None:
    # Members were compared by their json.dumps text: {"qty": 2.0} missed {"qty": 2},
    # which exact takes as equal.
    assert same_json(found, expected)
    assert set_score([found], [expected], "f1") == 1.0
    assert set_score([found], [{"qty": True}, [True], {"a": False}], "f1") == 0.0


def test_a_case_without_the_expected_value_is_not_scored() -> None:
    assert _score("exact", key="tickets", field="/category", expected="absent") is None


def test_numeric_tolerance_and_json_subset() -> None:
    assert _score("numeric", key="tickets", field="/urgency", expected="urgency", tolerance=0.5)
    assert not _score("numeric", key="tickets", field="/urgency", expected="urgency", tolerance=0.3)
    assert _score("subset", key="tickets", expected="shape") == 1.0
    assert is_subset({"a": [1]}, {"a": [2, 1], "b": 0})
    assert not is_subset({"a": True}, {"a": 1})


@pytest.mark.parametrize(
    ("found", "expected", "tolerance", "scored"),
    [
        (1.5, 10**400, 1.0, 0.0),
        (10**400, 10**400 + 1, 1.0, 1.0),
        (10**400, 10**400 + 2, 1.0, 0.0),
        (10**400, float("inf"), 1.0, 0.0),
        (1.5, 10**400, float("inf"), 1.0),
        (2**53 + 1, 9007199254740992.0, 0.0, 0.0),  # the float difference rounded to 0
        (9007199254740992.0, 2**53 + 1, 1.0, 1.0),
        (2**60, float("nan"), float("inf"), 0.0),  # as 5 against NaN is: never within
    ],
    ids=[
        "float-vs-huge",
        "huge-within",
        "huge-beyond",
        "huge-vs-inf",
        "infinite-tolerance",
        "beyond-2**53-exact",
        "beyond-2**53-within",
        "nan-with-infinite-tolerance",
    ],
)
def test_numeric_compares_integers_too_large_for_a_float(
    found: object, expected: object, tolerance: float, scored: float
) -> None:
    # A dataset's 400-digit integer made `eval` end in an OverflowError traceback.
    result = {"facts": {"k": [{"id": "a", "data": {"n": found}}]}}
    case = EvalCase("c", {}, {"n": expected}, 1)
    spec = {"key": "k", "field": "/n", "expected": "n", "tolerance": tolerance}
    assert score(Metric("m", "numeric", spec, None, ("metrics", 0)), case, result) == scored


def test_regex_and_schema_hold_for_every_fact() -> None:
    assert _score("regex", key="tickets", field="/category", pattern="^b") == 1.0
    assert _score("regex", key="tickets", field="/category", pattern="^bug$") == 0.0
    schema = {"type": "object", "required": ["urgency"]}
    assert _score("schema", key="tickets", schema=schema) == 1.0
    assert _score("schema", key="tickets", schema={"required": ["missing"]}) == 0.0


def test_a_regex_reads_text_re2_cannot_encode_as_the_sandbox_does() -> None:
    # A lone surrogate is matched as U+FFFD (the sandbox's `search`), not a crash.
    result = {"facts": {"tickets": [{"id": "t", "data": {"category": "b\ud800"}}]}}
    metric = Metric(
        "m", "regex", {"key": "tickets", "field": "/category", "pattern": "^b.$"}, None, ()
    )
    assert score(metric, _CASE, result) == 1.0


def test_set_measures_over_fact_ids() -> None:
    assert _score("set", key="tickets", expected="ids", measure="precision") == 0.5
    assert _score("set", key="tickets", expected="ids", measure="recall") == 0.5
    assert _score("set", key="tickets", expected="ids", measure="f1") == 0.5
    assert set_score(["a"], [], "precision") == 0.0
    assert set_score([], [], "f1") == 1.0


def test_stop_reason_and_usage_bounds() -> None:
    assert _score("stop_reason", equals="converged") == 1.0
    assert _score("stop_reason", equals="budget") == 0.0
    assert _score("usage", max_tokens=42) == 1.0
    assert _score("usage", max_tokens=41) == 0.0


@pytest.mark.parametrize(
    ("passes", "n", "low", "high"),
    [(10, 10, 0.7225, 1.0), (7, 10, 0.3968, 0.8922), (0, 0, 0.0, 1.0)],
)
def test_the_wilson_interval(passes: int, n: int, low: float, high: float) -> None:
    got = wilson(passes, n)
    assert got == pytest.approx((low, high), abs=1e-4)
