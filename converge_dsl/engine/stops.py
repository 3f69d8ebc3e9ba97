"""Why a run stopped, as data: the `StopNote`s of a `RunResult` (docs/architecture.md §7).

Every stop but `converged` leaves at least one note: a stable code (`CD901`...
in `converge_dsl.codes`), a message that says what happened in words (a
budget stop names the suggestors that spent the budget, with their counts),
the suggestor concerned, the invariant or budget setting concerned, the cycle,
the source span of a located error, and a hint. The runtime turns each note
into a located diagnostic of the run result.
"""

from __future__ import annotations

from dataclasses import dataclass

from converge_dsl.diagnostics import Severity, SourceSpan


@dataclass(frozen=True, slots=True)
class StopNote:
    """One finding about why a run stopped.

    `suggestor` is the registered suggestor concerned (the one that spent most
    of a budget, failed, broke a rule, was cancelled in flight or waits for a
    human), `invariant` the invariant that was violated or failed, `setting`
    the budget setting that was reached (`max_model_calls`, ...), `span` the
    source span of an error that carries its own location (a template).
    """

    code: str
    message: str
    severity: Severity = Severity.ERROR
    suggestor: str | None = None
    invariant: str | None = None
    setting: str | None = None
    cycle: int | None = None
    span: SourceSpan | None = None
    hint: str | None = None
