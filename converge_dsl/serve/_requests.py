"""What a request asks for, checked before a run is queued: inputs, budget, decisions.

`run_request(pipeline, body)` reads the body of `POST /v1/pipelines/{name}/runs`,
`{"inputs": {...}, "budget": {...}}` (both optional), and returns the
`RunRequest` to store, or raises `Refused` with every problem found, each a
`Problem` located by a JSON pointer into the body. Inputs are checked as
`--input` is (`converge_dsl.compiler.resolve_inputs`: the same messages and
"did you mean" hints; the body's JSON is read by `_bodies`); a budget may
lower any limit of the pipeline's `budget:` but never raise one.
`decisions_request(body)` reads `POST /v1/runs/{id}/decisions`:
`{"approve": [ID...], "reject": [ID...]}` or `{"decisions": {ID: true|false}}`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._json_pointer import pointer
from converge_dsl._json_types import JsonObject
from converge_dsl.diagnostics import SourceSpan
from converge_dsl.errors import ConvergeError, UsageError

if TYPE_CHECKING:
    from starlette.datastructures import Headers

    from converge_dsl.batch import Pipeline
    from converge_dsl.engine import Budget

# The limits a request may lower: integers, and the wall-clock seconds.
BUDGET_FIELDS = ("max_cycles", "max_facts", "max_model_calls", "max_tokens", "max_wall_s")


@dataclass(frozen=True)
class Problem:
    """One located problem of a request: code, message, JSON pointer into the body, hint;
    `declared` is where in the pipeline the rule it breaks is written (an input's
    declaration, a budget limit), when there is such a place."""

    code: str
    message: str
    pointer: str
    hint: str | None = None
    declared: SourceSpan | None = None

    def data(self) -> dict[str, Any]:
        """As JSON: the fields, and `text`, the line the command line would print."""
        out: dict[str, Any] = {"code": self.code, "message": self.message, "pointer": self.pointer}
        if self.hint is not None:
            out["hint"] = self.hint
        if self.declared is not None:
            where = self.declared
            out["declared_at"] = {"file": where.file, "line": where.line, "column": where.column}
        out["text"] = self.text()
        return out

    def text(self) -> str:
        where = f" (at {self.pointer})" if self.pointer else ""
        declared = self.declared
        rule = "" if declared is None else f"\n --> {declared}"
        hint = "" if self.hint is None else f"\n  hint: {self.hint}"
        return f"error[{self.code}]: {self.message}{where}{rule}{hint}"


class Refused(ConvergeError):
    """A request the service answers with `status` and `problems` (never a traceback)."""

    def __init__(
        self, status: int, problems: tuple[Problem, ...], *, retry_after: int | None = None
    ) -> None:
        first = problems[0] if problems else None
        super().__init__(
            "refused" if first is None else first.message,
            code=None if first is None else first.code,
        )
        self.status = status
        self.problems = problems
        self.retry_after = retry_after


def refused(
    status: int, code: str, message: str, where: str = "", hint: str | None = None
) -> Refused:
    return Refused(status, (Problem(code, message, where, hint),))


def one_header(headers: Headers, name: str, code: str) -> str | None:
    """The value of the header `name` (None without it); 400 (`code`) when the request
    gives it more than once with different values: which one the client meant (or a proxy
    added) is not to be guessed, and no other part of the chain may read another. The
    values are not shown (an `Authorization` holds a token); an `Authorization`'s scheme
    is compared as HTTP reads it, whatever its case."""
    values = headers.getlist(name)
    if len({_compared(name, value) for value in values}) > 1:
        raise refused(
            400,
            code,
            f"the request gives the {name} header {len(values)} times, with different values",
            "",
            f"send one {name} header",
        )
    return values[0] if values else None


def _compared(name: str, value: str) -> str:
    if name.lower() != "authorization":
        return value
    scheme, _, credentials = value.strip().partition(" ")
    return f"{scheme.lower()} {credentials.strip()}"


def failed(error: ConvergeError) -> Refused:
    """500: `error` stopped a request inside the service; the problem carries its own
    code, message and hint (CD996 for an error without a CD code; a model's `E_*`
    stays in front of its message)."""
    if error.code is not None and error.code.startswith("CD"):
        return Refused(500, (Problem(error.code, error.text, "", error.hint),))
    text = error.text if error.code is None else f"{error.code}: {error.text}"
    return Refused(500, (Problem(codes.SERVE_RUN_FAILED, text, "", error.hint),))


def queue_full(pipeline: str, size: int) -> Refused:
    """429: the queue of `pipeline` holds `size` runs, its most; retry after a second."""
    problem = Problem(
        codes.SERVE_QUEUE_FULL,
        f"the queue of pipeline {pipeline!r} is full ({size} runs waiting)",
        "",
        "retry after the number of seconds Retry-After gives, or start the server with a "
        "larger --queue",
    )
    return Refused(429, (problem,), retry_after=1)


@dataclass(frozen=True)
class RunRequest:
    """The inputs and the lowered budget limits one run was asked with (stored as JSON)."""

    inputs: JsonObject
    budget: Mapping[str, float]

    def data(self) -> JsonObject:
        return {"inputs": dict(self.inputs), "budget": dict(self.budget)}

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> RunRequest:
        return cls(dict(data.get("inputs") or {}), dict(data.get("budget") or {}))

    def lowered(self, budget: Budget) -> Budget:
        """`budget` with this request's limits where they are lower."""
        from converge_dsl.batch import lowered_budget

        return lowered_budget(budget, self.budget)


def _object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise refused(422, codes.SERVE_BAD_BODY, f"{what} must be a JSON object", "")
    return body


def run_request(pipeline: Pipeline, body: Any) -> RunRequest:
    """The checked request (see the module docstring); `Refused` (422) with every problem."""
    from converge_dsl.compiler import resolve_inputs

    body = _object(body, "the request body")
    problems: list[Problem] = []
    for name in body:
        if name not in ("inputs", "budget"):
            problems.append(
                Problem(
                    codes.SERVE_BAD_BODY,
                    f"unknown field {name!r}",
                    pointer((name,)),
                    "a run request holds `inputs` and `budget`",
                )
            )
    inputs = body.get("inputs")
    if inputs is None:  # none given (`null` says so too, as for `budget`)
        inputs = {}
    elif not isinstance(inputs, dict):
        problems.append(
            Problem(codes.SERVE_BAD_BODY, "`inputs` must be a JSON object", pointer(("inputs",)))
        )
        inputs = {}
    declared = pipeline.declared_inputs
    for name in inputs:
        if name not in declared:
            error = _usage(lambda n=name: resolve_inputs(declared, {n: None}))
            problems.append(
                Problem(
                    codes.SERVE_UNKNOWN_INPUT,
                    error.message,
                    pointer(("inputs", name)),
                    error.hint,
                    pipeline.document.source_map.span(("inputs",)),  # only when refused
                )
            )
    for name, spec in declared.items():
        if spec.required and not spec.has_default and name not in inputs:
            given = {n: v for n, v in inputs.items() if n in declared}
            error = _usage(lambda g=given: resolve_inputs(declared, g))
            problems.append(
                Problem(
                    codes.SERVE_MISSING_INPUT,
                    error.message,
                    pointer(("inputs", name)),
                    f'add "{name}" to the request\'s "inputs"',
                    spec.span,
                )
            )
    budget = _budget(pipeline, body.get("budget"), problems)
    if problems:
        raise Refused(422, tuple(problems))
    return RunRequest(dict(inputs), budget)


def _usage(call: Any) -> UsageError:
    """The `UsageError` that `resolve_inputs` raises for a given problem (its exact words)."""
    try:
        call()
    except UsageError as exc:
        return exc
    raise AssertionError("resolve_inputs accepted what the service refuses")  # pragma: no cover


def _budget(pipeline: Pipeline, asked: Any, problems: list[Problem]) -> dict[str, float]:
    if asked is None:
        return {}
    limits = pipeline.budget
    if not isinstance(asked, dict):
        problems.append(
            Problem(codes.SERVE_BAD_BODY, "`budget` must be a JSON object", pointer(("budget",)))
        )
        return {}
    out: dict[str, float] = {}
    for name, value in asked.items():
        where = pointer(("budget", name))
        if name not in BUDGET_FIELDS:
            problems.append(
                Problem(
                    codes.SERVE_BAD_BODY,
                    f"unknown budget limit {name!r}",
                    where,
                    f"a request may lower: {', '.join(BUDGET_FIELDS)}",
                )
            )
            continue
        number = name == "max_wall_s"
        kinds = (int, float) if number else (int,)
        if (
            isinstance(value, bool)
            or not isinstance(value, kinds)
            or not math.isfinite(value)
            or value <= 0
        ):
            what = "a positive number" if number else "a positive integer"
            problems.append(Problem(codes.SERVE_BAD_BODY, f"budget.{name} must be {what}", where))
            continue
        limit = getattr(limits, name)
        if limit is not None and value > limit:
            problems.append(
                Problem(
                    codes.SERVE_BUDGET_RAISED,
                    f"budget.{name} {value} is above the pipeline's {limit}: a request may lower a "
                    "limit, never raise it",
                    where,
                    f"ask for at most {limit}, or raise budget.{name} in the pipeline",
                    pipeline.document.source_map.span(("budget", name)),
                )
            )
            continue
        out[name] = value
    return out


class Decisions(dict[str, bool]):
    """Proposal id -> approved, and `places`: the JSON pointer each id was decided at."""

    def __init__(self) -> None:
        super().__init__()
        self.places: dict[str, str] = {}


def decisions_request(body: Any) -> Decisions:
    """`{id: approve}` from a decisions body, or `Refused` (422) naming what is wrong: a
    field of another shape, or one id both approved and rejected."""
    body = _object(body, "the request body")
    problems: list[Problem] = []
    out = Decisions()

    def decide(item: str, approve: bool, where: str) -> None:
        if out.get(item, approve) != approve:
            problems.append(
                Problem(
                    codes.SERVE_BAD_DECISION,
                    f"proposal {item!r} is both approved and rejected",
                    where,
                    f"decide it once (it is also decided at {out.places[item]})",
                )
            )
            return
        out[item] = approve
        out.places.setdefault(item, where)

    for name, value in body.items():
        if name in ("approve", "reject"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                problems.append(
                    Problem(
                        codes.SERVE_BAD_DECISION,
                        f"`{name}` must be a list of proposal ids",
                        pointer((name,)),
                    )
                )
                continue
            for index, item in enumerate(value):
                decide(item, name == "approve", pointer((name, index)))
        elif name == "decisions":
            if not isinstance(value, dict) or not all(isinstance(v, bool) for v in value.values()):
                problems.append(
                    Problem(
                        codes.SERVE_BAD_DECISION,
                        "`decisions` must map proposal ids to true or false",
                        pointer((name,)),
                    )
                )
                continue
            for item, approve in value.items():
                decide(item, approve, pointer((name, item)))
        else:
            problems.append(
                Problem(
                    codes.SERVE_BAD_DECISION,
                    f"unknown field {name!r}",
                    pointer((name,)),
                    'send {"approve": [ID...], "reject": [ID...]}',
                )
            )
    if not out and not problems:
        problems.append(
            Problem(
                codes.SERVE_BAD_DECISION,
                "no decision given",
                "",
                'send {"approve": [ID...], "reject": [ID...]}',
            )
        )
    if problems:
        raise Refused(422, tuple(problems))
    return out
