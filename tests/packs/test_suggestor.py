from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from converge_dsl.engine.context import Context
from converge_dsl.engine.types import Fact, PromotionRecord, Provenance, freeze_json
from converge_dsl.packs import InvariantDef, PackSolverSuggestor, SuggestorDef
from converge_dsl.solvers import PlanCheck, SolverError, SolverPlan


@dataclass
class CountingSolver:
    """Plans `{"total_cost": sum(costs)}`; its own check is advisory when `advisory` is set."""

    advisory: bool = False
    name: str = "test.counting"

    def complexity_hint(self) -> str:
        return "O(n)"

    def input_schema(self) -> Mapping[str, Any]:
        return {
            "type": "object",
            "required": ["costs"],
            "properties": {"costs": {"type": "array", "items": {"type": "number"}}},
        }

    def solve(self, problem: Mapping[str, Any]) -> SolverPlan:
        if not problem["costs"]:
            raise SolverError("no costs to add up")
        return SolverPlan({"total_cost": sum(problem["costs"])}, 0.9, "added up")

    def check(self, problem: Mapping[str, Any], plan: Mapping[str, Any]) -> tuple[PlanCheck, ...]:
        return (PlanCheck("sane", not self.advisory, critical=False, message="looks odd"),)


def _suggestor(solver: CountingSolver, *invariants: InvariantDef) -> PackSolverSuggestor:
    definition = SuggestorDef(name="count", kind="solver", solver=solver.name)
    return PackSolverSuggestor(
        name="budgeter",
        input_key="constraints",
        output_key="strategies",
        solver=solver,
        definition=definition,
        invariants=invariants,
        params={"budget": 10},
        source="budgeter@demo",
    )


def _fact(key: str, fact_id: str, data: Any, content: Any = "text") -> Fact:
    """A fact with `data` (what packs read) and a text `content`."""
    return Fact(
        key,
        fact_id,
        content,
        Provenance("seed@demo"),
        1.0,
        PromotionRecord("test", "test", 0),
        data=freeze_json(data),
    )


def _view(*facts: Fact) -> Context:
    return Context.from_facts(facts)


BUDGET = InvariantDef("budget-respected", "plan.total_cost <= input.budget", critical=True)


def test_depends_on_its_input_and_accepts_until_its_plan_exists() -> None:
    suggestor = _suggestor(CountingSolver())
    assert suggestor.dependencies == ("constraints",)
    assert not suggestor.accepts(_view())
    problem = _fact("constraints", "costs", {"costs": [1, 2]})
    assert suggestor.accepts(_view(problem))
    assert not suggestor.accepts(_view(problem, _fact("strategies", "budgeter-plan", {"plan": {}})))
    assert not suggestor.accepts(_view(problem, _fact("diagnostic", "pack:rejected:budgeter", {})))


def test_a_passing_plan_is_one_proposal_with_the_solver_confidence() -> None:
    effect = asyncio.run(
        _suggestor(CountingSolver(), BUDGET).execute(
            _view(_fact("constraints", "c", {"costs": [1, 2]}))
        )
    )
    (proposal,) = effect.proposals
    assert (proposal.key, proposal.id, proposal.confidence) == ("strategies", "budgeter-plan", 0.9)
    assert proposal.content == "added up"
    assert proposal.data == {"plan": {"total_cost": 3}, "summary": "added up"}
    assert proposal.provenance.source == "budgeter@demo"


def test_a_critical_invariant_failure_rejects_into_a_diagnostic() -> None:
    view = _view(_fact("constraints", "c", {"costs": [8, 9]}))
    (proposal,) = asyncio.run(_suggestor(CountingSolver(), BUDGET).execute(view)).proposals
    assert (proposal.key, proposal.id) == ("diagnostic", "pack:rejected:budgeter")
    assert proposal.data["failed"] == (
        "budget-respected: plan.total_cost <= input.budget is false",
    )
    assert proposal.content == (
        "budgeter: plan rejected by 1 critical check(s); "
        "budget-respected: plan.total_cost <= input.budget is false"
    )


def test_an_advisory_failure_marks_the_plan_for_review() -> None:
    view = _view(_fact("constraints", "c", {"costs": [1]}))
    (proposal,) = asyncio.run(
        _suggestor(CountingSolver(advisory=True), BUDGET).execute(view)
    ).proposals
    assert proposal.key == "strategies"
    assert proposal.data["review"] == ("sane: looks odd",)
    assert proposal.content == "added up (to review: sane: looks odd)"
    assert proposal.confidence == 0.9


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "input fact constraints/c is not a JSON object: it has no data"),
        ([1, 2], "input fact constraints/c is not a JSON object: its data is an array"),
        ("costs", "input fact constraints/c is not a JSON object: its data is text"),
        ({"costs": "many"}, "input costs: 'many' is not of type 'array'"),
        ({"costs": []}, "the solver could not solve the problem: no costs to add up"),
    ],
)
def test_bad_input_or_solver_error_becomes_a_diagnostic(content: Any, reason: str) -> None:
    view = _view(_fact("constraints", "c", content))
    (proposal,) = asyncio.run(_suggestor(CountingSolver()).execute(view)).proposals
    assert proposal.key == "diagnostic"
    assert reason in str(proposal.content)


def test_an_invariant_that_cannot_evaluate_fails_closed() -> None:
    broken = InvariantDef("broken", "plan.missing.deeper > 1", critical=True)
    view = _view(_fact("constraints", "c", {"costs": [1]}))
    (proposal,) = asyncio.run(_suggestor(CountingSolver(), broken).execute(view)).proposals
    assert proposal.key == "diagnostic"
    assert "cannot evaluate" in str(proposal.content)


@pytest.mark.parametrize("content", ['{"costs": [1, 2]}', {"costs": [1, 2]}])
def test_json_content_is_still_read_once_with_a_deprecation_notice(content: Any) -> None:
    suggestor = _suggestor(CountingSolver())
    view = _view(_fact("constraints", "c", None, freeze_json(content)))
    plan, notice = asyncio.run(suggestor.execute(view)).proposals
    assert plan.data["plan"] == {"total_cost": 3}
    assert (notice.key, notice.id, notice.confidence) == (
        "diagnostic",
        "deprecated:json-text-input:budgeter",
        1.0,
    )
    assert notice.content == (
        "pack suggestor 'budgeter' read its input constraints/c from the fact's content (JSON); "
        "give the fact `data` instead: reading content is deprecated and will stop in the next "
        "version"
    )
    assert notice.data == {"suggestor": "budgeter", "input": "constraints/c"}
    # the same notice each time: admission keeps one per run
    assert asyncio.run(suggestor.execute(view)).proposals[1] == notice


def test_data_wins_over_content_and_gives_no_notice() -> None:
    view = _view(_fact("constraints", "c", {"costs": [4]}, '{"costs": [1, 2]}'))
    (plan,) = asyncio.run(_suggestor(CountingSolver()).execute(view)).proposals
    assert plan.data["plan"] == {"total_cost": 4}


def test_text_content_that_is_not_json_is_not_read() -> None:
    view = _view(_fact("constraints", "c", None, "costs: 1, 2"))
    (proposal,) = asyncio.run(_suggestor(CountingSolver()).execute(view)).proposals
    assert proposal.id == "pack:rejected:budgeter"
    assert "it has no data" in str(proposal.content)


@dataclass
class ThreadNoting(CountingSolver):
    """A `CountingSolver` that notes the thread each solve ran on."""

    threads: list[int] | None = None

    def solve(self, problem: Mapping[str, Any]) -> SolverPlan:
        import threading

        assert self.threads is not None
        self.threads.append(threading.get_ident())
        return super().solve(problem)


def test_a_small_problem_is_solved_on_the_loop_a_large_one_on_a_thread() -> None:
    import threading

    from converge_dsl.packs._suggestor import INLINE_PROBLEM_CHARS

    solver = ThreadNoting(threads=[])
    suggestor = _suggestor(solver)
    large = [1] * (INLINE_PROBLEM_CHARS // 2)
    for costs in ([1, 2], large):
        effect = asyncio.run(suggestor.execute(_view(_fact("constraints", "c", {"costs": costs}))))
        assert effect.proposals[0].data["plan"] == {"total_cost": sum(costs)}
    assert solver.threads is not None
    assert solver.threads[0] == threading.get_ident()
    assert solver.threads[1] != threading.get_ident()


@dataclass
class PrecheckedCounting(CountingSolver):
    """A `CountingSolver` that also takes a problem checked by its caller (and says so)."""

    prechecked: int = 0

    def solve_valid(self, problem: dict[str, Any]) -> SolverPlan:
        self.prechecked += 1
        return self.solve(problem)

    def check_valid(
        self, problem: dict[str, Any], plan: Mapping[str, Any]
    ) -> tuple[PlanCheck, ...]:
        self.prechecked += 1
        return self.check(problem, plan)


def test_a_prechecked_solver_takes_the_input_the_suggestor_checked_once() -> None:
    solver = PrecheckedCounting()
    suggestor = _suggestor(solver)
    effect = asyncio.run(suggestor.execute(_view(_fact("constraints", "c", {"costs": [1, 2]}))))
    assert [p.id for p in effect.proposals] == ["budgeter-plan"]
    assert solver.prechecked == 2
    bad = asyncio.run(suggestor.execute(_view(_fact("constraints", "c", {"costs": "x"}))))
    assert [p.id for p in bad.proposals] == ["pack:rejected:budgeter"]
    assert solver.prechecked == 2


def _budgeter(solver: PrecheckedCounting, input_schema: Any) -> PackSolverSuggestor:
    """A pack suggestor running `solver`, its pack's input schema `input_schema`."""
    definition = SuggestorDef(
        name="count", kind="solver", solver=solver.name, input_schema=input_schema
    )
    return PackSolverSuggestor(
        name="budgeter",
        input_key="constraints",
        output_key="strategies",
        solver=solver,
        definition=definition,
        invariants=(),
        params={},
        source="budgeter@demo",
    )


def test_a_pack_schema_of_its_own_is_checked_by_the_solver_too() -> None:
    solver = PrecheckedCounting()
    suggestor = _budgeter(solver, {"type": "object"})
    asyncio.run(suggestor.execute(_view(_fact("constraints", "c", {"costs": [1, 2]}))))
    assert solver.prechecked == 0


def test_a_pack_schema_that_is_the_solvers_own_is_checked_once() -> None:
    solver = PrecheckedCounting()
    suggestor = _budgeter(solver, solver.input_schema())
    effect = asyncio.run(suggestor.execute(_view(_fact("constraints", "c", {"costs": [1, 2]}))))
    assert [p.id for p in effect.proposals] == ["budgeter-plan"]
    assert solver.prechecked == 2
    bad = asyncio.run(suggestor.execute(_view(_fact("constraints", "c", {"costs": "x"}))))
    assert [p.id for p in bad.proposals] == ["pack:rejected:budgeter"]
    assert solver.prechecked == 2


@dataclass
class SelfChecking(PrecheckedCounting):
    """A `PrecheckedCounting` that also solves and checks in one call (and counts those)."""

    together: int = 0

    def solve_checked(self, problem: dict[str, Any]) -> tuple[SolverPlan, tuple[PlanCheck, ...]]:
        self.together += 1
        answer = self.solve(problem)
        return answer, self.check(problem, answer.plan)


def test_a_self_checking_solver_solves_and_checks_in_one_call() -> None:
    solver = SelfChecking(advisory=True)
    suggestor = _budgeter(solver, solver.input_schema())
    effect = asyncio.run(suggestor.execute(_view(_fact("constraints", "c", {"costs": [1, 2]}))))
    assert [p.id for p in effect.proposals] == ["budgeter-plan"]
    assert "review" in effect.proposals[0].data
    assert (solver.together, solver.prechecked) == (1, 0)
    own = SelfChecking()
    mine = _budgeter(own, {"type": "object"})  # a schema of its own: not prechecked
    asyncio.run(mine.execute(_view(_fact("constraints", "c", {"costs": [1, 2]}))))
    assert own.together == 0
