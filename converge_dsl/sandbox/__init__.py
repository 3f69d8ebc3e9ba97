"""Everything that computes a user-controlled value, bounded (docs/architecture.md §3).

Templates, expressions, regexes and JSON Schema validation of data written by a
pipeline or a pack run here, and only here, under the one resource governor.

Public surface:
- templates and expressions: `compile_template`, `compile_expression`, `render`,
  `evaluate` in the one sandboxed environment (`environment`), raising
  `TemplateCompileError` and `TemplateRenderError` (`code_error` words a
  compiled expression's error, `NAMES_HINT` lists the names a template may use);
  `generated(source)` parses and code-generates once and `from_code` makes the
  template of such code (the compiler's source table and cache); `GLOBALS`, the
  sandbox's globals, and `register_record`, which lets a record type be read by
  templates; `as_json_data`, a rendered value as JSON data; `MAX_OUTPUT`, the
  longest text a render may produce; `literal_text` and `folding_failure`, what a
  template folds to at compile time, and `refusal`, a part that fails whenever it runs;
  `parse_source`, the one parse of a template or an expression (the compiler's and
  validate's);
- the names templates may use, importable without jinja2: `ALLOWED_FILTERS`,
  `CONTEXT_NAMES`, `FACT_FIELDS`;
- the governor: `governed(steps, work)` opens a budget, `spend` charges it,
  `Exhausted` and `DeadlinePassed` say a bound or the deadline was crossed;
  `run_deadline(clock, at)` sets a run's deadline and `deadline_passed()` tells
  whether a failure happened past it;
- JSON Schemas written by users: `check_safe` and `schema_problems` refuse what
  could not be validated in bounded time (`UnsafeSchema`, `PROBLEM_CODES`,
  `meta_error`, `regex_problem`; `meta_valid_texts` and `remember_meta_valid`
  hand the schemas one process found valid to another), `size_problems` and `MAX_MEMBERS` their size
  bounds; `fast_validator` and `python_validator` build a `GovernedValidator`
  (`SCHEMA_STEPS`, `SCHEMA_WORK` its budget); `compile_regex` and `search` run a
  regex in linear time; `DATA_KEYWORDS`, `SCHEMA_KEYWORDS`, `SCHEMA_LISTS`,
  `SCHEMA_MAPS`, `REF_KEYWORDS`, `keyword_role`, `schema_objects`, `anchors_of`
  and `embedded_resource` tell a schema's keywords from its names and data, and
  its references, anchors and embedded resources, as validate does;
  `draft_of` names the draft a schema is checked in (`Draft`: its name and
  the keywords it applies).

Names are imported on first use (PEP 562): the front end's fast path reads the
template names without importing jinja2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_exports

if TYPE_CHECKING:  # the table's modules, for type checkers
    from converge_dsl.sandbox._codegen import *  # noqa: F403
    from converge_dsl.sandbox._governor import *  # noqa: F403
    from converge_dsl.sandbox._names import *  # noqa: F403
    from converge_dsl.sandbox._safe_regex import *  # noqa: F403
    from converge_dsl.sandbox._safe_schema import *  # noqa: F403
    from converge_dsl.sandbox._schema_bounds import *  # noqa: F403
    from converge_dsl.sandbox._schema_meta import *  # noqa: F403
    from converge_dsl.sandbox._schema_refs import *  # noqa: F403
    from converge_dsl.sandbox._templating import *  # noqa: F403
else:
    __all__, __getattr__ = lazy_exports(
        __name__,
        {
            "converge_dsl.sandbox._codegen": (
                "folding_failure",
                "literal_text",
                "parse_source",
                "refusal",
            ),
            "converge_dsl.sandbox._governor": (
                "DeadlinePassed",
                "Exhausted",
                "deadline_passed",
                "governed",
                "run_deadline",
                "spend",
            ),
            "converge_dsl.sandbox._names": ("ALLOWED_FILTERS", "CONTEXT_NAMES", "FACT_FIELDS"),
            "converge_dsl.sandbox._safe_schema": (
                "GovernedValidator",
                "PROBLEM_CODES",
                "SCHEMA_STEPS",
                "SCHEMA_WORK",
                "check_safe",
                "fast_validator",
                "python_validator",
                "schema_problems",
            ),
            "converge_dsl.sandbox._safe_regex": (
                "UnsafeSchema",
                "compile_regex",
                "regex_problem",
                "search",
            ),
            "converge_dsl.sandbox._schema_bounds": ("MAX_MEMBERS", "size_problems"),
            "converge_dsl.sandbox._schema_meta": (
                "Draft",
                "draft_of",
                "meta_error",
                "meta_valid_texts",
                "remember_meta_valid",
            ),
            "converge_dsl.sandbox._schema_refs": (
                "DATA_KEYWORDS",
                "REF_KEYWORDS",
                "SCHEMA_KEYWORDS",
                "SCHEMA_LISTS",
                "SCHEMA_MAPS",
                "anchors_of",
                "embedded_resource",
                "keyword_role",
                "schema_objects",
            ),
            "converge_dsl.sandbox._templating": (
                "GLOBALS",
                "MAX_OUTPUT",
                "NAMES_HINT",
                "TemplateCompileError",
                "TemplateRenderError",
                "as_json_data",
                "code_error",
                "compile_expression",
                "compile_template",
                "environment",
                "evaluate",
                "from_code",
                "generated",
                "register_record",
                "render",
            ),
        },
    )
