"""`kind: pack` suggestors: a pack's solver or template, used from a pipeline.

A native-solver pack suggestor behaves like the Converge PackSuggestor:

- it depends on its `input` key; it accepts when the input has a fact and
  neither its plan (in `output`) nor its rejection (in `diagnostic`) exists;
- the *problem* is the data (a JSON object) of the input key's first fact
  with the `with:` parameters laid over it, validated against the pack's
  input schema (or the solver's own). A fact without data whose content is a
  JSON object (or JSON text of one) is still read, for one version: the run
  then also gets a `diagnostic` fact `deprecated:json-text-input:{name}`
  saying so (its fixed id and content make it once per run);
- it emits ONE proposal `{name}-plan` to `output`: content the solver's
  summary (text), data `{"plan": ..., "summary": ...}`, with the confidence
  the solver reports;
- the solver's `PlanCheck`s and the pack's invariants (expressions over
  `plan`, `input`, `params`) gate it:
  * a critical failure rejects the plan: instead, a `diagnostic` proposal
    `pack:rejected:{name}` lists every failed check;
  * an advisory failure marks the plan for review: data gains
    `"review": ["<check>: <message>", ...]` and the content says so
    (confidence unchanged, so a
    reviewer sees the real figure; pipelines can gate the key for a human);
  * otherwise the plan goes to the promotion gate as is.
A malformed input or a `SolverError` also becomes a `diagnostic` proposal,
never a crash. A `diagnostic` proposal's content is the summary and the
failures in words; its data `{"suggestor", "summary", "failed"}`.

A solve (with the solver's checks of its plan) runs on a worker thread, so a
long one leaves the event loop to the other cases and model calls; a problem
of at most `INLINE_PROBLEM_CHARS` characters of JSON solves in far less time
than the hop to a thread costs, so it is solved inline (the hop was about a
tenth of a support-triage case's CPU, `bench/batch.py`).

`rule`, `llm` and `agent` pack suggestors are compiled in `_compile`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from converge_dsl._json_types import JsonObject
from converge_dsl.engine.types import (
    AgentEffect,
    ContextView,
    Fact,
    FrozenDict,
    ProposedFact,
    Provenance,
    canonical_json,
)
from converge_dsl.errors import RunError
from converge_dsl.packs._manifest import InvariantDef, SuggestorDef
from converge_dsl.sandbox import (
    GLOBALS,
    TemplateRenderError,
    compile_expression,
    deadline_passed,
    evaluate,
    python_validator,
)
from converge_dsl.solvers import (
    PlanCheck,
    PrecheckedSolver,
    SelfCheckingSolver,
    Solver,
    SolverError,
    SolverPlan,
)

if TYPE_CHECKING:
    from converge_dsl.compiler import RunParts
    from converge_dsl.sandbox import GovernedValidator

DIAGNOSTIC_KEY = "diagnostic"
# A solve and the checks of its plan, from a problem.
SolveChecked = Callable[[dict[str, Any]], tuple[SolverPlan, tuple[PlanCheck, ...]]]
# The largest problem (characters of its JSON) solved on the loop, not on a thread: with
# every built-in solver at most cubic, this few items solve in well under a millisecond.
INLINE_PROBLEM_CHARS = 2_000
_JSON_TYPES = (
    (Mapping, "an object"),
    ((list, tuple), "an array"),
    (str, "text"),
    (bool, "a boolean"),
)


def input_data(fact: Fact) -> tuple[Any, bool]:
    """What a pack reads of its input fact: its data, and whether that came from its content.

    A fact without data whose content is a JSON object, or JSON text of one, is
    read the legacy way (deprecated; True). Otherwise the data as is (maybe None).
    """
    if fact.data is not None:
        return fact.data, False
    content: Any = fact.content
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except json.JSONDecodeError:
            return None, False
    return (content, True) if isinstance(content, Mapping) else (None, False)


def _not_an_object(fact: Fact, data: Any) -> str:
    where = f"input fact {fact.key}/{fact.id} is not a JSON object"
    if data is None:
        return f"{where}: it has no data"
    kind = next((name for types, name in _JSON_TYPES if isinstance(data, types)), "a number")
    return f"{where}: its data is {kind}"


def evaluate_invariant(invariant: InvariantDef, plan: Any, problem: Any, params: Any) -> PlanCheck:
    """One pack invariant as a `PlanCheck` (an evaluation error counts as a failure)."""
    try:
        scope = {**GLOBALS, "plan": plan, "input": problem, "params": params}
        ok = bool(evaluate(compile_expression(invariant.check), scope))  # governed, like `when`
        message = "" if ok else (invariant.message or f"{invariant.check} is false")
    except TemplateRenderError as exc:
        if deadline_passed():
            raise
        ok, message = False, f"cannot evaluate {invariant.check!r}: {exc.cited}"
    return PlanCheck(invariant.name, ok, invariant.critical, message)


@dataclass(frozen=True, slots=True)
class PackSolverSuggestor:
    """A pack's native solver bound to a pipeline's input and output keys."""

    name: str
    input_key: str
    output_key: str
    solver: Solver
    definition: SuggestorDef
    invariants: tuple[InvariantDef, ...]
    params: JsonObject
    source: str
    # The input schema's validator, made on first use and kept (it holds nothing of a run).
    _validator: GovernedValidator | None = field(
        default=None, init=False, repr=False, compare=False
    )
    # Whether that schema is the solver's own (see `_prechecked`), found on first use.
    _own_schema: bool | None = field(default=None, init=False, repr=False, compare=False)
    # How it solves and checks (see `_solve_checked`), found on first use.
    _solve_and_check: SolveChecked | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def dependencies(self) -> tuple[str, ...]:
        return (self.input_key,)

    def for_run(self, run: RunParts) -> PackSolverSuggestor:
        """Itself: it holds nothing of a run (`converge_dsl.compiler.RunParts`)."""
        return self

    @property
    def plan_id(self) -> str:
        return f"{self.name}-plan"

    @property
    def rejection_id(self) -> str:
        return f"pack:rejected:{self.name}"

    def accepts(self, ctx: ContextView) -> bool:
        if not ctx.has(self.input_key):
            return False
        done = (
            ctx.fact(self.output_key, self.plan_id),
            ctx.fact(DIAGNOSTIC_KEY, self.rejection_id),
            ctx.fact(DIAGNOSTIC_KEY, f"validation:rejected:{self.plan_id}"),
        )
        pending = any(p.id == self.plan_id for p in ctx.proposals(self.output_key))
        return not pending and all(found is None for found in done)

    def provenance(self) -> Provenance:
        return Provenance(self.source)

    def complexity_hint(self) -> str | None:
        return self.definition.complexity or self.solver.complexity_hint()

    def _reject(self, summary: str, failed: list[str]) -> AgentEffect:
        data = {"suggestor": self.name, "summary": summary, "failed": failed}
        text = "; ".join([f"{self.name}: {summary}", *failed])
        return AgentEffect.of(
            [ProposedFact(DIAGNOSTIC_KEY, self.rejection_id, text, 1.0, self.provenance(), data)]
        )

    def problem(self, ctx: ContextView) -> tuple[dict[str, Any] | None, list[str]]:
        """The problem to solve, or None with the reasons it is unusable."""
        problem, reasons, _ = self._problem(ctx)
        return problem, reasons

    def _problem(self, ctx: ContextView) -> tuple[dict[str, Any] | None, list[str], int]:
        """`problem`, and the length of the problem's JSON text."""
        fact = ctx.get(self.input_key)[0]
        content, _ = input_data(fact)
        if not isinstance(content, Mapping):
            return None, [_not_an_object(fact, content)], 0
        # Without parameters the problem is the input fact's data, which keeps its text.
        frozen = not self.params and type(content) is FrozenDict
        text = canonical_json(content if frozen else {**content, **self.params})
        problem = json.loads(text)
        errors = sorted(
            self._input_validator().iter_errors(problem), key=lambda e: list(e.absolute_path)
        )
        reasons = [
            f"input {'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in errors
        ]
        return (None, reasons, len(text)) if reasons else (problem, [], len(text))

    def _input_validator(self) -> GovernedValidator:
        """The validator of the pack's input schema (else the solver's): RE2, local
        `$ref`s, governed; made once."""
        validator = self._validator
        if validator is None:
            schema = self.definition.input_schema or self.solver.input_schema()
            validator = python_validator(schema, "the input schema")
            object.__setattr__(self, "_validator", validator)
        return validator

    def _prechecked(self) -> bool:
        """Whether a problem that fits `_input_validator` fits the solver's own schema, so
        the solver may take it as checked (`PrecheckedSolver`): the pack declares no input
        schema, or the solver's own one; found once."""
        own = self._own_schema
        if own is None:
            schema = self.definition.input_schema
            own = isinstance(self.solver, PrecheckedSolver) and (
                schema is None or schema == self.solver.input_schema()
            )
            object.__setattr__(self, "_own_schema", own)
        return own

    def _solve_checked(self) -> SolveChecked:
        """How a problem is solved and its plan checked: in one call when `_prechecked` and
        the solver offers it (`SelfCheckingSolver`), else `solve` then `check`, the
        prechecked forms when `_prechecked`; found once."""
        found = self._solve_and_check
        if found is None:
            found = self._pick_solve_checked()
            object.__setattr__(self, "_solve_and_check", found)
        return found

    def _pick_solve_checked(self) -> SolveChecked:
        solver = self.solver
        if self._prechecked() and isinstance(solver, SelfCheckingSolver):
            return solver.solve_checked
        solve: Callable[[dict[str, Any]], SolverPlan] = solver.solve
        check: Callable[[dict[str, Any], Any], tuple[PlanCheck, ...]] = solver.check
        if self._prechecked():
            # The problem was just checked against the solver's own schema: once is enough.
            prechecked = cast(PrecheckedSolver, solver)
            solve, check = prechecked.solve_valid, prechecked.check_valid

        def solve_checked(problem: dict[str, Any]) -> tuple[SolverPlan, tuple[PlanCheck, ...]]:
            answer = solve(problem)
            return answer, tuple(check(problem, answer.plan))

        return solve_checked

    @property
    def deprecation_id(self) -> str:
        return f"deprecated:json-text-input:{self.name}"

    def deprecation(self, ctx: ContextView) -> ProposedFact | None:
        """The notice that the input was read from JSON content, not data (or None)."""
        fact = ctx.get(self.input_key)[0]
        if not input_data(fact)[1]:
            return None
        text = (
            f"pack suggestor {self.name!r} read its input {fact.key}/{fact.id} from the fact's "
            "content (JSON); give the fact `data` instead: reading content is deprecated "
            "and will stop in the next version"
        )
        data = {"suggestor": self.name, "input": f"{fact.key}/{fact.id}"}
        return ProposedFact(
            DIAGNOSTIC_KEY, self.deprecation_id, text, 1.0, self.provenance(), data=data
        )

    async def execute(self, ctx: ContextView) -> AgentEffect:
        effect = await self._solve(ctx)
        notice = self.deprecation(ctx)
        return effect if notice is None else AgentEffect.of([*effect.proposals, notice])

    async def _solve(self, ctx: ContextView) -> AgentEffect:
        problem, reasons, size = self._problem(ctx)
        if problem is None:
            return self._reject("the input does not fit the pack's input schema", reasons)
        solve = self._solve_checked()
        try:
            if size <= INLINE_PROBLEM_CHARS:
                answer, solver_checks = solve(problem)
            else:
                answer, solver_checks = await asyncio.to_thread(solve, problem)
        except SolverError as exc:
            return self._reject(f"the solver could not solve the problem: {exc.cited}", [])
        except Exception as exc:
            message = f"solver {self.solver.name!r} crashed: {exc}"
            raise RunError(message, suggestor=self.name) from exc
        plan = json.loads(canonical_json(answer.plan))
        params = dict(self.params)
        checks = [
            *solver_checks,
            *(evaluate_invariant(i, plan, problem, params) for i in self.invariants),
        ]
        failed = [c for c in checks if not c.ok]
        critical = [f"{c.name}: {c.message}" for c in failed if c.critical]
        if critical:
            return self._reject(f"plan rejected by {len(critical)} critical check(s)", critical)
        content: dict[str, Any] = {"plan": plan, "summary": answer.summary}
        advisory = [f"{c.name}: {c.message}" for c in failed]
        if advisory:
            content["review"] = advisory
        text = answer.summary or f"plan of {self.name}"
        if advisory:
            text += f" (to review: {'; '.join(advisory)})"
        proposal = ProposedFact(
            self.output_key, self.plan_id, text, answer.confidence, self.provenance(), content
        )
        return AgentEffect.of([proposal])
