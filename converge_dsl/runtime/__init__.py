"""The runtime: run orchestration, trace writer, checkpoints, result documents.

Public surface:
- `run_pipeline(RunOptions) -> RunOutcome` (async): load, build models, compile, run;
  `RunOptions(resume=DIR, decisions={id: approve})` continues a run paused for a human.
- `build_engine(compiled, sink, clock)`, `build_models(document, options)`, `load_document(path)`.
- `TraceWriter` (JSONL event sink, flushed per event), `CheckpointStore` (atomic checkpoints).
- `RunResultDocument` (with `pending: [PendingModel]` when paused), `TraceLine`
  (pydantic; `exported_schemas()` gives `schemas/*.v1.json`).
- `EXIT_BY_STOP`: stop reason -> exit code.
"""

from __future__ import annotations

from ._checkpoint import CHECKPOINT_FILE, CheckpointStore, pipeline_digest
from ._documents import (
    DiagnosticModel,
    FactModel,
    PendingModel,
    RunResultDocument,
    TraceLine,
    UsageModel,
    exported_schemas,
    schema_text,
)
from ._orchestrate import (
    EXIT_BY_STOP,
    RunOptions,
    RunOutcome,
    build_engine,
    build_models,
    load_document,
    outcome,
    run_error_diagnostic,
    run_pipeline,
)
from ._trace import TraceWriter

__all__ = [
    "CHECKPOINT_FILE",
    "EXIT_BY_STOP",
    "CheckpointStore",
    "DiagnosticModel",
    "FactModel",
    "PendingModel",
    "RunOptions",
    "RunOutcome",
    "RunResultDocument",
    "TraceLine",
    "TraceWriter",
    "UsageModel",
    "build_engine",
    "build_models",
    "exported_schemas",
    "load_document",
    "outcome",
    "pipeline_digest",
    "run_error_diagnostic",
    "run_pipeline",
    "schema_text",
]
