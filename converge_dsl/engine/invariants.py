"""Invariants: checks over the context that a run must keep.

Three classes, checked at three moments: `structural` after each merge,
`semantic` at the end of each cycle, `acceptance` when convergence is claimed.
A `check` returns None when the invariant holds and the violation message
otherwise. A critical violation stops the run (`invariant_violated`); an
advisory one becomes a `diagnostic` fact `invariant:{name}` and the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from converge_dsl.engine.types import ContextView

InvariantClass = Literal["structural", "semantic", "acceptance"]
INVARIANT_CLASSES: tuple[InvariantClass, ...] = ("structural", "semantic", "acceptance")


@dataclass(frozen=True, slots=True)
class Invariant:
    """A named check. `check(ctx)` returns None (holds) or the violation message."""

    name: str
    invariant_class: InvariantClass
    critical: bool
    check: Callable[[ContextView], str | None]

    def __post_init__(self) -> None:
        if self.invariant_class not in INVARIANT_CLASSES:
            raise ValueError(
                f"invariant {self.name!r}: class must be one of {', '.join(INVARIANT_CLASSES)}"
            )
