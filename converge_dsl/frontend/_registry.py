"""The front end's own suggestor kinds: `KINDS` holds seed, rule, llm and tool (§16).

Layers above add theirs (`converge_dsl.validation.KINDS` adds agent and pack)
with `KindRegistry.with_kinds`; the registry is handed down, never looked up.
"""

from __future__ import annotations

from converge_dsl.frontend._kind_llm import LLM
from converge_dsl.frontend._kind_rule import RULE
from converge_dsl.frontend._kind_seed import SEED
from converge_dsl.frontend._kind_tool import TOOL
from converge_dsl.frontend._kinds import KindRegistry

KINDS: KindRegistry = KindRegistry({"seed": SEED, "rule": RULE, "llm": LLM, "tool": TOOL})
