"""Scoring one case of an evaluation: `score(metric, case, result)` -> 0..1 or None.

A score is 1.0 for a pass and 0.0 for a fail, or a fraction for the set
measures (precision, recall, F1); None when the metric does not apply to the
case (the case gives no expected value the metric compares with). A case expecting
its run to be refused (`expected.stop_reason: usage_error`) is measured by that alone: a
`stop_reason` metric asking for `usage_error` scores it, and no other metric applies to
it (None: it counts toward no other mean, nor its judges). `result` is
a run-result document (`converge-dsl schema run-result`): facts grouped by key,
`stop_reason`, `usage`; `seconds` the case's wall time (the `latency` measure).
A `judge` metric is scored by its judge (`_eval_judge`), not here (None).
`wilson(passes, n)` is the 95% Wilson interval of a proportion, for the
aggregates of pass/fail metrics.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from converge_dsl._json_pointer import unescape
from converge_dsl._json_types import JsonValue

if TYPE_CHECKING:
    from converge_dsl.sandbox import GovernedValidator

from ._eval_dataset import EvalCase, refused
from ._eval_spec import Metric
from ._json_equal import is_number, json_key, same_json

_MISSING = object()
_Z95 = 1.959963984540054


def score(
    metric: Metric, case: EvalCase, result: Mapping[str, Any], seconds: float = 0.0
) -> float | None:
    """The case's score under `metric` (see the module docstring)."""
    spec = metric.spec
    kind = metric.kind
    if kind == "judge":
        return None
    if refused(case):  # measured by its refusal alone
        asks = kind == "stop_reason" and spec["equals"] == "usage_error"
        return float(result.get("stop_reason") == "usage_error") if asks else None
    if kind == "latency":
        return float(seconds <= float(str(spec["max_seconds"])))
    if kind == "stop_reason":
        return float(result.get("stop_reason") == spec["equals"])
    if kind == "usage":
        return float(_within_usage(spec, result.get("usage") or {}))
    values = field_values(result, str(spec["key"]), str(spec.get("field", "")))
    if kind == "regex":
        return float(bool(values) and all(_matches(str(spec["pattern"]), v) for v in values))
    if kind == "schema":
        return float(bool(values) and all(_conforms(spec["schema"], v) for v in values))
    expected = case.expected.get(str(spec["expected"]), _MISSING)
    if expected is _MISSING:
        return None
    if kind == "set":
        got = values if "field" in spec else fact_ids(result, str(spec["key"]))
        return set_score(got, expected, str(spec["measure"]))
    if not values:
        return 0.0
    found = values[0]
    if kind == "exact":
        return float(same_json(found, expected))
    if kind == "subset":
        return float(is_subset(expected, found))
    if not (is_number(found) and is_number(expected)):
        return 0.0
    return float(within(found, expected, float(str(spec["tolerance"]))))  # type: ignore[arg-type]


def within(found: float, expected: float, tolerance: float) -> bool:
    """Whether `found` is within `tolerance` of `expected`. JSON numbers may be integers
    beyond 2**53: those are compared exactly (a float difference rounds them, or raised
    OverflowError: 2**53 + 1 was within 0 of 9007199254740992.0)."""
    if not any(isinstance(v, int) and abs(v) > _EXACT_FLOAT for v in (found, expected)):
        return abs(found - expected) <= tolerance
    floats = [v for v in (found, expected, tolerance) if isinstance(v, float)]
    if any(math.isnan(v) for v in floats):
        return False  # as the float comparison says of a NaN
    if isinstance(tolerance, float) and math.isinf(tolerance):
        return True
    if any(math.isinf(v) for v in floats):
        return False  # an integer is never within a finite tolerance of an infinity
    return abs(Fraction(found) - Fraction(expected)) <= Fraction(tolerance)


_EXACT_FLOAT = 2**53  # the integers a float holds exactly are those up to this


def field_values(result: Mapping[str, Any], key: str, pointer: str) -> list[JsonValue]:
    """The value at JSON pointer `pointer` in the data of each fact of `key` that has it."""
    out: list[JsonValue] = []
    for fact in (result.get("facts") or {}).get(key, []):
        value = _at(fact.get("data"), pointer)
        if value is not _MISSING:
            out.append(value)  # type: ignore[arg-type]
    return out


def fact_ids(result: Mapping[str, Any], key: str) -> list[JsonValue]:
    return [fact.get("id") for fact in (result.get("facts") or {}).get(key, [])]


def _at(value: object, pointer: str) -> object:
    if pointer in ("", "/"):
        return value
    for raw in pointer.lstrip("/").split("/"):
        part = unescape(raw)
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def is_subset(expected: object, found: object) -> bool:
    """Whether every field of `expected` is in `found` with a value it is a subset of."""
    if isinstance(expected, dict):
        return isinstance(found, dict) and all(
            k in found and is_subset(v, found[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return isinstance(found, list) and all(
            any(is_subset(e, f) for f in found) for e in expected
        )
    return same_json(expected, found)


def set_score(got: Sequence[JsonValue], expected: object, measure: str) -> float:
    """Precision, recall or F1 of the values `got` against the list `expected`."""
    found = {json_key(v) for v in got}
    wanted = {json_key(v) for v in (expected if isinstance(expected, list) else [expected])}
    hits = len(found & wanted)
    precision = hits / len(found) if found else float(not wanted)
    recall = hits / len(wanted) if wanted else 1.0
    if measure == "precision":
        return precision
    if measure == "recall":
        return recall
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _matches(pattern: str, value: object) -> bool:
    from converge_dsl.sandbox import search

    return search(pattern, value if isinstance(value, str) else str(value))


def _conforms(schema: object, value: object) -> bool:
    validator = _validator(json.dumps(schema, sort_keys=True))
    return next(iter(validator.iter_errors(value)), None) is None


@functools.lru_cache(maxsize=64)
def _validator(schema: str) -> GovernedValidator:
    """The governed validator of a schema metric's schema (checked when the evaluation
    file was read), built once per schema rather than once per case."""
    from converge_dsl.sandbox import python_validator

    return python_validator(json.loads(schema), "the metric's schema")


def _within_usage(spec: Mapping[str, Any], usage: Mapping[str, Any]) -> bool:
    tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    calls = int(usage.get("model_calls", 0))
    over_tokens = "max_tokens" in spec and tokens > spec["max_tokens"]
    return not over_tokens and not ("max_model_calls" in spec and calls > spec["max_model_calls"])


def wilson(passes: float, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of `passes` successes in `n` trials ((0, 1) for none)."""
    if n == 0:
        return (0.0, 1.0)
    p = passes / n
    z2 = _Z95 * _Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return (max(0.0, centre - half), min(1.0, centre + half))
