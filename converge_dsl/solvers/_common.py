"""Shared plumbing of the built-in optimisation solvers.

- `BaseSolver` carries the name, complexity hint and input schema, and
  validates a problem against that schema before `solve` or `check` reads it
  (callers validate too; we never trust them to).
- `thaw` turns frozen context content (`FrozenDict`, tuples) into plain JSON.
- `index_by_id` and `lookup` check id uniqueness and references, raising
  `SolverError` whose message starts with the JSON path of the bad field.
- `Findings` collects invariant violations into a `PlanCheck`.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from converge_dsl.diagnostics import did_you_mean, format_path, suggestion
from converge_dsl.sandbox import fast_validator, python_validator
from converge_dsl.solvers._protocol import PlanCheck, SolverError, SolverPlan

JsonObject = dict[str, Any]
Path = tuple[str | int, ...]

# Absolute tolerance for comparing times and costs computed in floating point.
EPSILON = 1e-9

# Schema fragments reused by several solvers.
ID: JsonObject = {"type": "string", "minLength": 1, "description": "Unique identifier."}
NON_NEGATIVE: JsonObject = {"type": "number", "minimum": 0}
ID_LIST: JsonObject = {"type": "array", "items": ID, "uniqueItems": True}


def schema_document(title: str, description: str, body: JsonObject) -> JsonObject:
    """A Draft 2020-12 object schema with a stable `$id` derived from `title`."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://converge-dsl.dev/schemas/optimization/{title}.input.json",
        "title": f"optimization.{title} input",
        "description": description,
        "type": "object",
        **body,
    }


def thaw(value: Any) -> Any:
    """Deep-copy a JSON-like value into plain `dict`/`list` (context content is frozen)."""
    if isinstance(value, Mapping):
        return {str(key): thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    return value


def where(path: Path) -> str:
    """`$.tasks[2].id`-style rendering of a JSON path."""
    if not path:
        return "$"
    rendered = format_path(path)
    return f"${rendered}" if rendered.startswith("[") else f"$.{rendered}"


def fail(path: Path, message: str, hint: str | None = None) -> SolverError:
    return SolverError(f"{where(path)}: {message}", hint=hint)


@functools.lru_cache(maxsize=16)
def _validators(schema_text: str) -> tuple[Any, Any]:
    schema = json.loads(schema_text)
    return fast_validator(schema), python_validator(schema)


def _validate(validators: tuple[Any, Any], problem: Any) -> None:
    # jsonschema-rs is the fast yes/no; the Python validator picks the most
    # relevant error (best_match) only when there is one to report.
    fast, thorough = validators
    if fast.is_valid(problem):
        return
    error = thorough.best_error(problem)
    if error is None:
        return
    if error.validator in ("oneOf", "anyOf"):
        # jsonschema would print the whole instance; say what the forms are instead.
        described = error.schema.get("description") if isinstance(error.schema, dict) else None
        raise fail(tuple(error.absolute_path), "matches none of the accepted forms", described)
    raise fail(tuple(error.absolute_path), error.message)


def index_by_id(items: Sequence[JsonObject], path: Path) -> dict[str, JsonObject]:
    """Map id -> item, refusing duplicate ids (the error names the second one)."""
    seen: dict[str, JsonObject] = {}
    for position, item in enumerate(items):
        ident = item["id"]
        if ident in seen:
            raise fail((*path, position, "id"), f"duplicate id {ident!r}")
        seen[ident] = item
    return seen


def lookup(ident: str, known: Collection[str], path: Path, what: str) -> str:
    """Return `ident` if it is one of `known`, else raise with a did-you-mean hint."""
    if ident in known:
        return ident
    guess = did_you_mean(ident, known)
    raise fail(path, f"unknown {what} {ident!r}", suggestion(guess) if guess else None)


def number_text(value: float) -> str:
    """A number for a summary: integers without `.0`, others to two decimals."""
    if math.isfinite(value) and float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


class Findings:
    """Violations of one named plan invariant; `result()` makes the `PlanCheck`."""

    def __init__(self, name: str, *, critical: bool = True) -> None:
        self.name = name
        self.critical = critical
        self.problems: list[str] = []

    def add(self, message: str) -> None:
        self.problems.append(message)

    def require(self, condition: bool, message: str) -> None:
        if not condition:
            self.problems.append(message)

    def result(self) -> PlanCheck:
        shown = "; ".join(self.problems[:3])
        if len(self.problems) > 3:
            shown += f" (and {len(self.problems) - 3} more)"
        return PlanCheck(self.name, not self.problems, self.critical, shown)


def at_most_once(name: str, idents: Iterable[str], known: Iterable[str], what: str) -> PlanCheck:
    """The invariant "every <what> appears at most once, and only known ones"."""
    findings = Findings(name)
    allowed = set(known)
    seen: set[str] = set()
    for ident in idents:
        findings.require(ident in allowed, f"unknown {what} {ident!r}")
        findings.require(ident not in seen, f"{what} {ident!r} appears more than once")
        seen.add(ident)
    return findings.result()


def no_overlap(name: str, entries: list[JsonObject], resource: str, item: str) -> PlanCheck:
    """The invariant "a resource handles one item at a time" over start/end intervals."""
    findings = Findings(name)
    by_resource: dict[str, list[JsonObject]] = {}
    for entry in entries:
        by_resource.setdefault(entry[resource], []).append(entry)
    for owner, mine in sorted(by_resource.items()):
        mine.sort(key=lambda e: (e["start"], e["end"]))
        for before, after in itertools.pairwise(mine):
            findings.require(
                after["start"] + EPSILON >= before["end"],
                f"{before[item]} and {after[item]} overlap on {owner!r}",
            )
    return findings.result()


class BaseSolver:
    """Name, complexity hint and schema handling shared by the built-in solvers.

    Subclasses set `NAME`, `COMPLEXITY`, `SCHEMA` and implement `_solve` and
    `_check` on a validated, thawed problem.
    """

    NAME: ClassVar[str]
    COMPLEXITY: ClassVar[str]
    SCHEMA: ClassVar[JsonObject]

    @property
    def name(self) -> str:
        return self.NAME

    def complexity_hint(self) -> str:
        return self.COMPLEXITY

    def input_schema(self) -> Mapping[str, Any]:
        return copy.deepcopy(self.SCHEMA)

    @classmethod
    @functools.cache
    def _validators(cls) -> tuple[Any, Any]:
        """The validators of `SCHEMA`, made once per solver class (not per problem)."""
        return _validators(json.dumps(cls.SCHEMA, sort_keys=True))

    def prepare(self, problem: Mapping[str, Any]) -> JsonObject:
        """Thaw and schema-validate `problem`; raises `SolverError` naming the bad field."""
        plain = thaw(problem)
        _validate(self._validators(), plain)
        return plain  # type: ignore[no-any-return]

    def solve(self, problem: Mapping[str, Any]) -> SolverPlan:
        return self._solve(self.prepare(problem))

    def check(self, problem: Mapping[str, Any], plan: Mapping[str, Any]) -> tuple[PlanCheck, ...]:
        return self._well_formed(lambda: self._check(self.prepare(problem), thaw(plan)))

    def solve_valid(self, problem: JsonObject) -> SolverPlan:
        """`solve` of a plain JSON problem its caller has just checked against
        `input_schema()` (the pack suggestor does): not copied, not checked again."""
        return self._solve(problem)

    def check_valid(self, problem: JsonObject, plan: Mapping[str, Any]) -> tuple[PlanCheck, ...]:
        """`check` of a problem as `solve_valid` takes it."""
        return self._well_formed(lambda: self._check(problem, thaw(plan)))

    def solve_checked(self, problem: JsonObject) -> tuple[SolverPlan, tuple[PlanCheck, ...]]:
        """`solve_valid`, then `check_valid` of the plan it gave: that plan is this solver's
        own plain JSON, so it is not thawed into a copy first (no `_check` changes a plan)."""
        answer = self._solve(problem)
        return answer, self._well_formed(lambda: self._check(problem, dict(answer.plan)))

    @staticmethod
    def _well_formed(checks: Callable[[], tuple[PlanCheck, ...]]) -> tuple[PlanCheck, ...]:
        """`checks()`, or the one failed check of a plan so malformed that the invariants
        cannot even be read."""
        try:
            return checks()
        except (KeyError, TypeError, ValueError) as exc:
            return (PlanCheck("plan-well-formed", False, True, f"malformed plan: {exc!r}"),)

    def _solve(self, problem: JsonObject) -> SolverPlan:
        raise NotImplementedError

    def _check(self, problem: JsonObject, plan: JsonObject) -> tuple[PlanCheck, ...]:
        """The checks of `plan`, which they only read: `solve_checked` hands over the
        plan it proposes, not a copy."""
        raise NotImplementedError
