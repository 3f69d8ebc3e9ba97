"""converge-dsl: describe convergence pipelines in YAML, validate them, run them.

The public surface is small; stages live in subpackages:
`converge_dsl.engine` (the kernel), `converge_dsl.frontend` (load and
validate), `converge_dsl.compiler`, `converge_dsl.runtime`,
`converge_dsl.models` (the model port), `converge_dsl.agents` and
`converge_dsl.packs`.
"""

from __future__ import annotations

__version__ = "0.1.0"
