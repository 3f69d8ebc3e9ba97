"""Native solvers shipped with converge-dsl (registered under `converge_dsl.solvers`)."""

from __future__ import annotations

from converge_dsl.solvers._protocol import (
    ENTRY_POINT_GROUP,
    PlanCheck,
    Solver,
    SolverError,
    SolverPlan,
)

__all__ = ["ENTRY_POINT_GROUP", "PlanCheck", "Solver", "SolverError", "SolverPlan"]
