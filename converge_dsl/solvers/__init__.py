"""Native solvers shipped with converge-dsl (registered under `converge_dsl.solvers`).

Public surface: the `Solver` protocol, its `SolverPlan` and `PlanCheck`
results, `SolverError`, `PrecheckedSolver` (a solver that also takes a
problem its caller has just checked against its schema, without checking it
again), `SelfCheckingSolver` (one that also solves such a problem and checks its
plan in one call), and `ENTRY_POINT_GROUP`, the entry-point group under which installed
packages register solvers. The solver modules (`assignment`,
`flow`, `scheduling`, `routing`, `portfolio`, `work`) are loaded through it.
"""

from __future__ import annotations

from converge_dsl.solvers._protocol import (
    ENTRY_POINT_GROUP,
    PlanCheck,
    PrecheckedSolver,
    SelfCheckingSolver,
    Solver,
    SolverError,
    SolverPlan,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "PlanCheck",
    "PrecheckedSolver",
    "SelfCheckingSolver",
    "Solver",
    "SolverError",
    "SolverPlan",
]
