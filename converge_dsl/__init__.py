"""converge-dsl: describe convergence pipelines in YAML, validate them, run them.

The root exports only `__version__`; the stages live in subpackages, layered
as docs/architecture.md §2 draws them: `converge_dsl.frontend` (load),
`converge_dsl.validation` (validate), `converge_dsl.compiler`,
`converge_dsl.engine` (the kernel), `converge_dsl.runtime` (run),
`converge_dsl.models` (the model port), `converge_dsl.agents` and
`converge_dsl.packs`.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
