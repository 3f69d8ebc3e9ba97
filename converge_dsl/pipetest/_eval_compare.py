"""Comparing an evaluation's result with a baseline: `compare(result, baseline, tolerance)`.

`compare` reads a baseline (the `as_json()` of an earlier result; `baseline_of` picks
a configuration's part of a document of several) and sorts each (case, metric)
into improved, regressed (fell by more than the evaluation's tolerance), new or gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._eval_spec import DEFAULT_CONFIGURATION

if TYPE_CHECKING:
    from ._eval_result import EvalResult


@dataclass(frozen=True, slots=True)
class Change:
    case: str
    metric: str
    before: float | None
    after: float | None
    verdict: str  # improved, regressed, new, gone


def baseline_of(baseline: Mapping[str, Any], configuration: str) -> Mapping[str, Any]:
    """The part of a baseline document for `configuration`: the configuration of that
    name in a document of several (none: an empty result), else the document itself."""
    several = baseline.get("configurations")
    if not isinstance(several, list):
        return baseline
    for item in several:
        if (
            isinstance(item, dict)
            and item.get("configuration", DEFAULT_CONFIGURATION) == configuration
        ):
            return item
    return {"cases": []}


def compare(result: EvalResult, baseline: Mapping[str, Any], tolerance: float) -> list[Change]:
    """Every (case, metric) whose score moved, appeared or went, against `baseline`."""
    before: dict[tuple[str, str], float | None] = {
        (str(case["name"]), str(metric)): value
        for case in baseline.get("cases", [])
        for metric, value in (case.get("scores") or {}).items()
    }
    after: dict[tuple[str, str], float | None] = {
        (case.name, metric): value for case in result.cases for metric, value in case.scores.items()
    }
    changes: list[Change] = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if key not in before:
            changes.append(Change(*key, None, new, "new"))
        elif key not in after:
            changes.append(Change(*key, old, None, "gone"))
        elif old is not None and new is not None and new < old - tolerance:
            changes.append(Change(*key, old, new, "regressed"))
        elif old is not None and new is not None and new > old:
            changes.append(Change(*key, old, new, "improved"))
    return changes
