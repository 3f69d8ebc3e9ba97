"""The pipeline front end: strict loading, JSON Schema, generic semantic checks, diagnostics.

The front end depends only on the shared base (diagnostics, codes, errors,
keys, templating, template names); checks that belong to a domain (model
scripts, agents, packs) live in their packages and are composed with the
front end's own by `converge_dsl.validation`.

Public surface:
- `load_file(path)`, `load_text(text, file)` -> `LoadedDocument`
  (strict YAML; raises `PipelineInvalid`; the size cap `max_bytes(env)`); `NodeLocation`,
  `SourceMap`
- `schema_diagnostics(doc, "pipeline.v1.json")` -> list of located schema `Diagnostic`s;
  `bundled_schema("pack.v1.json")`, a shipped schema with the definitions it takes from
  another copied in (what `converge-dsl schema` prints)
- `check_pipeline(path, checks=...)` -> `CheckedPipeline`;
  `load_pipeline(path, checks=...)` -> `LoadedDocument` or raises;
  `check_document(doc, base_dir, checks=...)` -> `CheckedPipeline` for a loaded document
  (`checks` default: the front end's own `CHECKS`)
- the check protocol: `Check` (`PipelineFacts -> Iterator[Diagnostic]`), `PipelineFacts`,
  the front end's `CHECKS` (a tuple); `tool_servers(facts, roots)`, the one of them that
  reads the allowed roots (`converge_dsl.validation` binds the user's)
- suggestor kinds (docs/architecture.md §16): `SuggestorKind` (everything about one kind),
  `SuggestorSpec` (a suggestor, typed; `SpecHead`, the fields every kind's spec shares;
  `required(...)`, how a parser reads a field the schema requires; the front end's kinds'
  `SeedSpec`, `RuleSpec`, `LlmSpec` with its `LlmPrompt` and `LlmOutput`, `ToolCallSpec`; a
  seed's or rule's typed entries `ProposalSpec`), `GraphStyle`, `DataSite`,
  `KindRegistry` and the front end's own `KINDS` (seed, rule, llm, tool); `installed_kinds()`,
  the kinds of the installed distributions' entry points (`ENTRY_POINT_GROUP`);
  `pipeline_schema(kinds)`, the pipeline schema composed from kinds
- the manifest: `build_manifest(doc)` -> `PipelineManifest`, the typed records of a
  schema-checked pipeline's declarations (`KeySpec`, `InputSpec`, `ModelSpec` with
  `ScriptedModelSpec`, `ReplayModelSpec`, `HttpModelSpec` and `AccountSpec`, `BudgetSpec`,
  `PromotionSpec`, `PackRequirement`, `RepositorySpec`, `InvariantSpec`); `model_spec`
  converts one `models.<name>` mapping, `roster_accounts(models)` yields their accounts;
  `HTTP_NUMBERS`, the numeric settings of an HTTP model; the tool servers (`tools:`):
  `ToolServerSpec` with `StdioServerSpec` and `HttpServerSpec`, `tool_server_spec` converts
  one `tools.<name>` mapping, `tool_reference(name)` reads an agent's `mcp:SERVER/TOOL`
  (`MCP_PREFIX`, `EVERY_TOOL`; `pack_server` splits a pack's `PACK/SERVER`);
  `undeclared_host(server, source_map, hint)`, CD262 of an HTTP server, a pipeline's or a pack's
- templates: `TemplateSite` (a suggestor's come from its spec's `templates()`),
  `template_problems(...)`, `expression_error(text)`; the data flow of a pack's template
  (`_checks_dataflow`): `unknown_reads(doc, site, keys)`, the keys it reads that the
  pipeline lacks, and `bound_template_reads(facts, path, spec, use)`, its reads against
  the pipeline suggestor that binds it
- run configurations (`run --config FILE`, kind `RunConfig`): `read_run_config(path)` ->
  `RunConfig`, its `cache:` a `CacheConfig` (located diagnostics in `PipelineInvalid`)
- renderers: `render_human`, `render_json`, `render_github`, `render_sarif`, `summary_line`,
  `terminal_safe`; `SourceTexts`, the file texts `render_human` reads excerpts from;
  `cap(diagnostics)` -> the first `MAX_PER_CODE` of each code and `Omitted` counts of the rest

Heavy modules (jsonschema-rs, jinja2, rich) are imported only when used; the
template checker (`template_problems`, `expression_error`) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_exports

if TYPE_CHECKING:  # the table's modules, for type checkers
    from converge_dsl.frontend._cap import *  # noqa: F403
    from converge_dsl.frontend._check import *  # noqa: F403
    from converge_dsl.frontend._checks_dataflow import *  # noqa: F403
    from converge_dsl.frontend._checks_tools import *  # noqa: F403
    from converge_dsl.frontend._facts import *  # noqa: F403
    from converge_dsl.frontend._kind_llm import *  # noqa: F403
    from converge_dsl.frontend._kind_rule import *  # noqa: F403
    from converge_dsl.frontend._kind_seed import *  # noqa: F403
    from converge_dsl.frontend._kind_tool import *  # noqa: F403
    from converge_dsl.frontend._kinds import *  # noqa: F403
    from converge_dsl.frontend._loader import *  # noqa: F403
    from converge_dsl.frontend._manifest import *  # noqa: F403
    from converge_dsl.frontend._model_specs import *  # noqa: F403
    from converge_dsl.frontend._registry import *  # noqa: F403
    from converge_dsl.frontend._render import *  # noqa: F403
    from converge_dsl.frontend._run_config import *  # noqa: F403
    from converge_dsl.frontend._sarif import *  # noqa: F403
    from converge_dsl.frontend._schema import *  # noqa: F403
    from converge_dsl.frontend._semantic import *  # noqa: F403
    from converge_dsl.frontend._templates import *  # noqa: F403
    from converge_dsl.frontend._tool_specs import *  # noqa: F403
    from converge_dsl.frontend.document import *  # noqa: F403
else:
    __all__, __getattr__ = lazy_exports(
        __name__,
        {
            "converge_dsl.frontend._cap": ("MAX_PER_CODE", "Omitted", "cap"),
            "converge_dsl.frontend._check": (
                "CheckedPipeline",
                "check_document",
                "check_pipeline",
                "load_pipeline",
            ),
            "converge_dsl.frontend._checks_dataflow": ("bound_template_reads", "unknown_reads"),
            "converge_dsl.frontend._facts": ("Check", "PipelineFacts"),
            "converge_dsl.frontend._kind_llm": ("LlmOutput", "LlmPrompt", "LlmSpec"),
            "converge_dsl.frontend._kind_rule": ("RuleSpec",),
            "converge_dsl.frontend._kind_seed": ("SeedSpec",),
            "converge_dsl.frontend._kind_tool": ("ToolCallSpec",),
            "converge_dsl.frontend._kinds": (
                "DataSite",
                "ENTRY_POINT_GROUP",
                "GraphStyle",
                "KindRegistry",
                "ProposalSpec",
                "SpecHead",
                "SuggestorKind",
                "SuggestorSpec",
                "TemplateSite",
                "installed_kinds",
                "required",
            ),
            "converge_dsl.frontend._loader": ("load_file", "load_text", "max_bytes"),
            "converge_dsl.frontend._manifest": (
                "BudgetSpec",
                "InputSpec",
                "InvariantSpec",
                "KeySpec",
                "PackRequirement",
                "PipelineManifest",
                "PromotionSpec",
                "RepositorySpec",
                "build_manifest",
            ),
            "converge_dsl.frontend._model_specs": (
                "AccountSpec",
                "HTTP_NUMBERS",
                "HttpModelSpec",
                "ModelSpec",
                "ReplayModelSpec",
                "ScriptedModelSpec",
                "model_spec",
                "roster_accounts",
            ),
            "converge_dsl.frontend._registry": ("KINDS",),
            "converge_dsl.frontend._render": (
                "SourceTexts",
                "render_github",
                "render_human",
                "render_json",
                "summary_line",
                "terminal_safe",
            ),
            "converge_dsl.frontend._run_config": ("CacheConfig", "RunConfig", "read_run_config"),
            "converge_dsl.frontend._sarif": ("render_sarif",),
            "converge_dsl.frontend._schema": (
                "bundled_schema",
                "pipeline_schema",
                "schema_diagnostics",
            ),
            "converge_dsl.frontend._semantic": ("CHECKS",),
            "converge_dsl.frontend._templates": ("expression_error", "template_problems"),
            "converge_dsl.frontend._checks_tools": ("tool_servers", "undeclared_host"),
            "converge_dsl.frontend._tool_specs": (
                "EVERY_TOOL",
                "HttpServerSpec",
                "MCP_PREFIX",
                "StdioServerSpec",
                "ToolServerSpec",
                "pack_server",
                "tool_reference",
                "tool_server_spec",
            ),
            "converge_dsl.frontend.document": ("LoadedDocument", "NodeLocation", "SourceMap"),
        },
    )
