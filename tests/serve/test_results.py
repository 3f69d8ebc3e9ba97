"""A run's result as the service answers it: the run as its end stored it."""

from __future__ import annotations

import dataclasses

from converge_dsl.serve._results import ended_row
from converge_dsl.serve._store import RunRow


def test_the_ended_row_is_the_row_with_its_end_and_nothing_else_changed() -> None:
    """`ended_row` builds the row whole: every field but the end's is the row's own (a
    field added to `RunRow` is kept, as `dataclasses.replace` would keep it)."""
    row = RunRow(
        "a" * 32, "p", {"inputs": {"x": 1}}, "running", None, {"d": True}, 2, None, 1.0, 1.5
    )
    ended = ended_row(row, "done", "converged", {"n": 1}, '{"n": 1}', at=3.0)
    expected = dataclasses.replace(
        row,
        status="done",
        stop_reason="converged",
        decisions={},
        result={"n": 1},
        result_json='{"n": 1}',
        updated=3.0,
    )
    assert [getattr(ended, f.name) for f in dataclasses.fields(RunRow)] == [
        getattr(expected, f.name) for f in dataclasses.fields(RunRow)
    ]
