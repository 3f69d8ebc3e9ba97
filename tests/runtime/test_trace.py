"""TraceWriter: one JSONL line per event, flushed as it happens, with type, seq and span."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from converge_dsl.diagnostics import SourceSpan
from converge_dsl.engine import CycleStarted, SuggestorStarted
from converge_dsl.runtime import TraceWriter


def test_each_event_is_on_disk_before_the_next(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    seen: list[BaseModel] = []
    writer = TraceWriter({"r": SourceSpan("p.yaml", 4, 5, 4, 9)}, path, (seen.append,))
    assert writer.listening
    writer(CycleStarted(cycle=1, dirty_keys=("seeds",), candidates=("r",)))
    # read by another handle while the writer is still open: already flushed
    first = json.loads(path.read_text().splitlines()[0])
    assert (first["seq"], first["type"], first["span"]) == (0, "cycle_started", None)
    writer(SuggestorStarted(cycle=1, suggestor="r"))
    second = json.loads(path.read_text().splitlines()[1])
    assert (second["seq"], second["type"], second["suggestor"]) == (1, "suggestor_started", "r")
    assert second["span"] == {
        "file": "p.yaml",
        "line": 4,
        "column": 5,
        "end_line": 4,
        "end_column": 9,
    }
    writer.close()
    assert len(seen) == 2


def test_a_writer_without_file_or_listener_is_not_listening() -> None:
    assert not TraceWriter({}).listening
