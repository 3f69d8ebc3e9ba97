"""The pipeline front end: strict loading, JSON Schema, semantic checks, diagnostics.

Public surface:
- `load_file(path)`, `load_text(text, file)` -> `LoadedDocument`
  (strict YAML; raises `PipelineInvalid`)
- `schema_diagnostics(doc, "pipeline.v1.json")` -> list of located schema `Diagnostic`s
- `check_pipeline(path)` -> `CheckedPipeline`; `load_pipeline(path)` -> `LoadedDocument` or raises
- `check_document(doc, base_dir)` -> `CheckedPipeline` for an already loaded document
- renderers: `render_human`, `render_json`, `render_github`, `render_sarif`, `summary_line`;
  `SourceTexts`, the file texts `render_human` reads excerpts from
- semantic check registry: `CHECKS`, `Check`, `check`, `PipelineFacts` (see `_semantic`)

Heavy modules (jsonschema-rs, jinja2, rich) are imported only when used.
"""

from __future__ import annotations

from converge_dsl.frontend._check import (
    CheckedPipeline,
    check_document,
    check_pipeline,
    load_pipeline,
)
from converge_dsl.frontend._loader import load_file, load_text
from converge_dsl.frontend._render import (
    SourceTexts,
    render_github,
    render_human,
    render_json,
    render_sarif,
    summary_line,
)
from converge_dsl.frontend._schema import schema_diagnostics
from converge_dsl.frontend._semantic import CHECKS, Check, PipelineFacts, check
from converge_dsl.frontend.document import LoadedDocument, NodeLocation, SourceMap

__all__ = [
    "CHECKS",
    "Check",
    "CheckedPipeline",
    "LoadedDocument",
    "NodeLocation",
    "PipelineFacts",
    "SourceMap",
    "SourceTexts",
    "check",
    "check_document",
    "check_pipeline",
    "load_file",
    "load_pipeline",
    "load_text",
    "render_github",
    "render_human",
    "render_json",
    "render_sarif",
    "schema_diagnostics",
    "summary_line",
]
