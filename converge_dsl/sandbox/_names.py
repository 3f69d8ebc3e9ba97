"""The names templates may use, without importing jinja2.

The front end checks templates against these lists on its fast path (which
must not pay for importing jinja2); the sandboxed environment in
`converge_dsl.sandbox._templating` enforces `ALLOWED_FILTERS`, and the compiler's
render scopes and the pack template checks start from `CONTEXT_NAMES`, and
`FACT_FIELDS` names what a template may read of a fact. One definition serves
them all.
"""

from __future__ import annotations

ALLOWED_FILTERS: frozenset[str] = frozenset(
    {
        "abs",
        "capitalize",
        "count",
        "default",
        "d",
        "first",
        "float",
        "fromjson",
        "int",
        "join",
        "last",
        "length",
        "list",
        "lower",
        "map",
        "max",
        "min",
        "reject",
        "rejectattr",
        "replace",
        "round",
        "select",
        "selectattr",
        "sort",
        "string",
        "sum",
        "title",
        "tojson",
        "trim",
        "truncate",
        "unique",
        "upper",
        "wordcount",
        "batch",
        "slice",
        "dictsort",
        "items",
        "indent",
    }
)

# Names every template and expression may use (the context API of docs/architecture.md §3).
CONTEXT_NAMES: frozenset[str] = frozenset(
    {"facts", "proposals", "count", "has", "fact", "data_of", "cycle", "inputs"}
)

# The fields of a fact (or proposal) templates and expressions read, in the
# order messages list them: `fact.data` is what rules read, `fact.content` the
# text for people and prompts.
FACT_FIELDS: tuple[str, ...] = ("id", "key", "content", "data", "confidence", "provenance")
