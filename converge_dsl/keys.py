"""The built-in context keys in their order (docs/architecture.md §3), without the engine.

The front end checks key names on its fast path (which must not pay for the
engine package's pydantic import); the engine sorts and admits facts by
them. One definition serves both.
"""

from __future__ import annotations

BUILTIN_KEYS: tuple[str, ...] = (
    "seeds",
    "hypotheses",
    "strategies",
    "constraints",
    "signals",
    "competitors",
    "evaluations",
    "proposals",
    "diagnostic",
    "votes",
    "disagreements",
    "consensus_outcomes",
)
