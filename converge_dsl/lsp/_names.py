"""The names templates and expressions may use, from the sandbox's own lists.

The one place this package reads them (the allowed filters, the context API,
the sandbox's globals, a fact's fields), so where the sandbox keeps them can
change in one import.
"""

from __future__ import annotations

from converge_dsl.sandbox import ALLOWED_FILTERS, CONTEXT_NAMES, FACT_FIELDS

__all__ = ["ALLOWED_FILTERS", "CONTEXT_NAMES", "FACT_FIELDS", "KEY_FUNCTIONS", "globals_names"]

# The context functions whose first argument is a context key (docs/architecture.md §3).
KEY_FUNCTIONS = ("count", "has", "fact", "data_of")


def globals_names() -> frozenset[str]:
    """The sandbox's globals (`range`); imports the sandbox (and jinja2) on first use."""
    from converge_dsl.sandbox import GLOBALS

    return frozenset(GLOBALS)
