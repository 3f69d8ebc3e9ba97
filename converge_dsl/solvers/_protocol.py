"""The native solver contract.

Native solvers are Python classes registered by installed distributions under
the entry-point group `converge_dsl.solvers` (entry-point name e.g.
`optimization.assignment`). A pack's YAML can only *name* a registered solver;
no import path is ever taken from YAML, so trust stays with pip.

A solver is deterministic: the same problem gives the same plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from converge_dsl.errors import ConvergeError

ENTRY_POINT_GROUP = "converge_dsl.solvers"


class SolverError(ConvergeError):
    """The problem is malformed or infeasible; the message says which part and why."""


@dataclass(frozen=True, slots=True)
class PlanCheck:
    """The outcome of one plan invariant (e.g. "every task assigned at most once")."""

    name: str
    ok: bool
    critical: bool = True
    message: str = ""


@dataclass(frozen=True, slots=True)
class SolverPlan:
    """A solver's answer: a JSON plan, a confidence in [0, 1] and a one-line summary."""

    plan: Mapping[str, Any]
    confidence: float
    summary: str


@runtime_checkable
class Solver(Protocol):
    @property
    def name(self) -> str:
        """The registered name, e.g. `optimization.assignment`."""
        ...

    def complexity_hint(self) -> str:
        """E.g. "O(n^3), n = agents/tasks, practical for n <= 500"."""
        ...

    def input_schema(self) -> Mapping[str, Any]:
        """JSON Schema (Draft 2020-12) of the problem `solve` accepts."""
        ...

    def solve(self, problem: Mapping[str, Any]) -> SolverPlan:
        """Solve `problem` (already valid against `input_schema`); raises `SolverError`."""
        ...

    def check(self, problem: Mapping[str, Any], plan: Mapping[str, Any]) -> tuple[PlanCheck, ...]:
        """The plan invariants evaluated on `plan` (capacities, windows, budget, ...)."""
        ...


@runtime_checkable
class PrecheckedSolver(Protocol):
    """A solver that also takes a plain problem its caller has just checked against its
    `input_schema()` (the pack suggestor does), without copying or checking it again.
    The built-in solvers are ones."""

    def solve_valid(self, problem: dict[str, Any]) -> SolverPlan:
        """`solve` of such a problem."""
        ...

    def check_valid(
        self, problem: dict[str, Any], plan: Mapping[str, Any]
    ) -> tuple[PlanCheck, ...]:
        """`check` of such a problem."""
        ...


@runtime_checkable
class SelfCheckingSolver(Protocol):
    """A `PrecheckedSolver` that also solves such a problem and checks its own plan in one
    call, reading the problem once for both (the built-in solvers are ones)."""

    def solve_checked(self, problem: dict[str, Any]) -> tuple[SolverPlan, tuple[PlanCheck, ...]]:
        """`solve_valid`, then `check_valid` of the plan it gave."""
        ...
