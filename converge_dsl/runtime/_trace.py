"""The trace writer: engine events -> JSONL, one flushed line per event, as they happen.

`TraceWriter` is an `EventSink` (a callable). Each line is a `TraceLine`: the
event's fields (timing included: timestamps live only in the trace), `seq`,
and the source span of the suggestor the event names. Listeners (the live
progress display) see every event too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel

from converge_dsl.diagnostics import SourceSpan
from converge_dsl.errors import UsageError

from ._documents import SpanModel


class TraceWriter:
    """Fan-out sink: writes JSONL (if a path is given) and calls listeners."""

    def __init__(
        self,
        spans: Mapping[str, SourceSpan],
        path: Path | None = None,
        listeners: tuple[Callable[[BaseModel], None], ...] = (),
    ) -> None:
        self._spans = dict(spans)
        self._listeners = listeners
        self._seq = 0
        self._file: IO[str] | None = None
        if path is not None:
            try:
                self._file = path.open("a", encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot write trace file {path.name!r}: {exc.strerror}") from None

    @property
    def listening(self) -> bool:
        """True when events go somewhere (a file or a listener); else the engine builds none."""
        return self._file is not None or bool(self._listeners)

    def set_spans(self, spans: Mapping[str, SourceSpan]) -> None:
        """Source spans by suggestor name (known once the pipeline is compiled)."""
        self._spans = dict(spans)

    def line(self, event: BaseModel) -> dict[str, Any]:
        data = event.model_dump(mode="json")
        suggestor = data.get("suggestor")
        span = SpanModel.of(self._spans.get(suggestor)) if isinstance(suggestor, str) else None
        line = {
            "seq": self._seq,
            "type": data.pop("type", type(event).__name__),
            **data,
            "span": None if span is None else span.model_dump(),
        }
        self._seq += 1
        return line

    def __call__(self, event: BaseModel) -> None:
        if self._file is not None:
            line = self.line(event)
            self._file.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
            self._file.flush()
        for listener in self._listeners:
            listener(event)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
