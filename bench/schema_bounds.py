"""Schema checks of data: time against size, for `uniqueItems` and for wide schemas.

Run `python bench/schema_bounds.py`. For each case and size n it prints the
seconds one governed check takes, the governor's charges (steps plus work) and,
from the second size on, the ratios of time and charges to the previous size
(the size doubles: linear growth shows ratios near 2, quadratic near 4). It
times python-jsonschema's governed check, never the quick yes of small data
(`converge_dsl.sandbox._schema_quick`).

- `uniqueItems`: an array of n integers and strings, alternating, all distinct;
- `enum x items`: n strings, each checked against an `enum` of 1,000 values;
- `wide object`: an object of n members against `properties` of n members (up
  to the limit of 1,000, then objects of 1,000 members: n/1000 of them);
- `anyOf x items`: n integers against 100 object branches and one integer one,
  until the bound of one check stops it (printed as `bound`).

Then it times refusing a schema too large (`size_problems`, what validate and
a run do first) against its size n, from just past the limit of 20,000
members (the baseline, measured in the same run) to 1,000,000: a walk that
stops once past the limit shows ratios to the baseline near 1 whatever n is.
Shapes: `wide properties` (n properties), `deep not` (n schemas nested),
`data under default` (a property named `default` whose `anyOf` has n
branches), `wide enum` (n values), `nested data` (a `const` of n/1000 arrays
of 1,000 items).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from converge_dsl.sandbox import (
    MAX_MEMBERS,
    SCHEMA_STEPS,
    SCHEMA_WORK,
    Exhausted,
    GovernedValidator,
    governed,
    python_validator,
    size_problems,
)

Case = Callable[[int], tuple[dict[str, Any], Any]]


def unique_items(n: int) -> tuple[dict[str, Any], Any]:
    return {"type": "array", "uniqueItems": True}, [i if i % 2 else f"s{i:07d}" for i in range(n)]


def enum_items(n: int) -> tuple[dict[str, Any], Any]:
    values = [f"v{i:04d}" for i in range(1_000)]
    return {"items": {"enum": values}}, [values[i % 1_000] for i in range(n)]


def wide_object(n: int) -> tuple[dict[str, Any], Any]:
    width = min(n, MAX_MEMBERS)
    schema = {"properties": {f"p{i:04d}": {"type": "integer"} for i in range(width)}}
    one = {f"p{i:04d}": i for i in range(width)}
    if n <= MAX_MEMBERS:
        return schema, one
    return {"items": schema}, [one] * (n // MAX_MEMBERS)


def any_of_items(n: int) -> tuple[dict[str, Any], Any]:
    branches = [{"type": "object", "required": [f"k{i}"]} for i in range(100)]
    return {"items": {"anyOf": [*branches, {"type": "integer"}]}}, list(range(n))


CASES: dict[str, Case] = {
    "uniqueItems": unique_items,
    "enum x items": enum_items,
    "wide object": wide_object,
    "anyOf x items": any_of_items,
}
SIZES = (1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000)
SMALL = (25, 50, 100, 200, 400, 800, 1_600)  # anyOf x items meets its bound sooner


def measure(case: Case, n: int) -> tuple[float, int | None]:
    """(seconds, charges) of one governed check; charges None when a bound stopped it."""
    schema, data = case(n)
    # python-jsonschema's governed check, without the quick yes (`bench/schema_quick.py`).
    validator = GovernedValidator(python_validator(schema).validator, "bench")
    start = time.perf_counter()
    try:
        # The check joins this budget, of its own bounds, so the charges can be read.
        with governed(SCHEMA_STEPS, SCHEMA_WORK, "bench") as outer:
            validator.best_error(data)
        charges: int | None = (outer.max_steps - outer.steps) + (outer.max_work - outer.work)
    except Exhausted:
        charges = None
    return time.perf_counter() - start, charges


def _deep(n: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(n):
        node["not"] = node = {}
    return root


REFUSED: dict[str, Callable[[int], Any]] = {
    "wide properties": lambda n: {"properties": {f"p{i}": {} for i in range(n)}},
    "deep not": _deep,
    "data under default": lambda n: {"properties": {"default": {"anyOf": [{}] * n}}},
    "wide enum": lambda n: {"enum": list(range(n))},
    "nested data": lambda n: {"const": [[0] * 1_000] * (n // 1_000)},
}
REFUSED_SIZES = (20_001, 100_000, 1_000_000)


def refusal_seconds(schema: Any) -> float:
    """The seconds `size_problems` takes to refuse `schema` (the best of three)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        problems = size_problems(schema)
        best = min(best, time.perf_counter() - start)
    if not problems or problems[-1][0] != ():
        raise AssertionError("not refused as too large")
    return best


def refusals() -> None:
    print(f"\n{'refused':<19} {'n':>9} {'seconds':>9} {'to baseline':>12}")
    for name, make in REFUSED.items():
        baseline = 0.0
        for n in REFUSED_SIZES:
            seconds = refusal_seconds(make(n))
            baseline = baseline or seconds
            print(f"{name:<19} {n:>9} {seconds:>9.5f} {seconds / baseline:>12.2f}")


def main() -> None:
    print(f"{'case':<15} {'n':>7} {'seconds':>9} {'charges':>11} {'t ratio':>8} {'c ratio':>8}")
    for name, case in CASES.items():
        before: tuple[float, int | None] | None = None
        for n in SMALL if case is any_of_items else SIZES:
            seconds, charges = measure(case, n)
            shown = "bound" if charges is None else str(charges)
            ratios = ""
            if before is not None and before[0] > 0:
                ratios = f"{seconds / before[0]:8.2f}"
                if charges is not None and before[1]:
                    ratios += f" {charges / before[1]:8.2f}"
            print(f"{name:<15} {n:>7} {seconds:>9.4f} {shown:>11} {ratios}")
            before = (seconds, charges)
    refusals()


if __name__ == "__main__":
    main()
