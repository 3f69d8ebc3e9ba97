"""The pipeline front end: strict loading, JSON Schema, generic semantic checks, diagnostics.

The front end depends only on the shared base (diagnostics, codes, errors,
keys, templating, template names); checks that belong to a domain (model
scripts, agents, packs) live in their packages and are composed with the
front end's own by `converge_dsl.validation`.

Public surface:
- `load_file(path)`, `load_text(text, file)` -> `LoadedDocument`
  (strict YAML; raises `PipelineInvalid`); `NodeLocation`, `SourceMap`
- `schema_diagnostics(doc, "pipeline.v1.json")` -> list of located schema `Diagnostic`s
- `check_pipeline(path, checks=...)` -> `CheckedPipeline`;
  `load_pipeline(path, checks=...)` -> `LoadedDocument` or raises;
  `check_document(doc, base_dir, checks=...)` -> `CheckedPipeline` for a loaded document
  (`checks` default: the front end's own `CHECKS`)
- the check protocol: `Check` (`PipelineFacts -> Iterator[Diagnostic]`), `PipelineFacts`,
  the front end's `CHECKS` and `check` (registers into them)
- suggestor kinds (docs/architecture.md §16): `SuggestorKind` (everything about one kind),
  `SuggestorSpec` (a suggestor, typed; the front end's kinds' `SeedSpec`, `RuleSpec`,
  `LlmSpec`; a seed's or rule's typed entries `ProposalSpec`), `GraphStyle`, `DataSite`,
  `KindRegistry` and the front end's own `KINDS` (seed, rule, llm); `installed_kinds()`,
  the kinds of the installed distributions' entry points (`ENTRY_POINT_GROUP`);
  `pipeline_schema(kinds)`, the pipeline schema composed from kinds
- templates: `TemplateSite`, `template_problems(...)`, `expression_error(text)`
- renderers: `render_human`, `render_json`, `render_github`, `render_sarif`, `summary_line`,
  `terminal_safe`; `SourceTexts`, the file texts `render_human` reads excerpts from;
  `cap(diagnostics)` -> the first `MAX_PER_CODE` of each code and `Omitted` counts of the rest

Heavy modules (jsonschema-rs, jinja2, rich) are imported only when used; the
template checker (`template_problems`, `expression_error`) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_names
from converge_dsl.frontend._cap import MAX_PER_CODE, Omitted, cap
from converge_dsl.frontend._check import (
    CheckedPipeline,
    check_document,
    check_pipeline,
    load_pipeline,
)
from converge_dsl.frontend._facts import Check, PipelineFacts
from converge_dsl.frontend._kind_llm import LlmSpec
from converge_dsl.frontend._kind_rule import RuleSpec
from converge_dsl.frontend._kind_seed import SeedSpec
from converge_dsl.frontend._kinds import (
    ENTRY_POINT_GROUP,
    DataSite,
    GraphStyle,
    KindRegistry,
    ProposalSpec,
    SuggestorKind,
    SuggestorSpec,
    TemplateSite,
    installed_kinds,
)
from converge_dsl.frontend._loader import load_file, load_text
from converge_dsl.frontend._registry import KINDS
from converge_dsl.frontend._render import (
    SourceTexts,
    render_github,
    render_human,
    render_json,
    summary_line,
    terminal_safe,
)
from converge_dsl.frontend._sarif import render_sarif
from converge_dsl.frontend._schema import pipeline_schema, schema_diagnostics
from converge_dsl.frontend._semantic import CHECKS, check
from converge_dsl.frontend.document import LoadedDocument, NodeLocation, SourceMap

if TYPE_CHECKING:
    from converge_dsl.frontend._templates import expression_error, template_problems

__all__ = [
    "CHECKS",
    "ENTRY_POINT_GROUP",
    "KINDS",
    "MAX_PER_CODE",
    "Check",
    "CheckedPipeline",
    "DataSite",
    "GraphStyle",
    "KindRegistry",
    "LlmSpec",
    "LoadedDocument",
    "NodeLocation",
    "Omitted",
    "PipelineFacts",
    "ProposalSpec",
    "RuleSpec",
    "SeedSpec",
    "SourceMap",
    "SourceTexts",
    "SuggestorKind",
    "SuggestorSpec",
    "TemplateSite",
    "cap",
    "check",
    "check_document",
    "check_pipeline",
    "expression_error",
    "installed_kinds",
    "load_file",
    "load_pipeline",
    "load_text",
    "pipeline_schema",
    "render_github",
    "render_human",
    "render_json",
    "render_sarif",
    "schema_diagnostics",
    "summary_line",
    "template_problems",
    "terminal_safe",
]

__getattr__ = lazy_names(
    __name__,
    {
        "expression_error": "converge_dsl.frontend._templates",
        "template_problems": "converge_dsl.frontend._templates",
    },
)
