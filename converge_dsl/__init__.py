"""converge-dsl: describe convergence pipelines in YAML, validate them, run them.

The root exports `__version__` and the Python API: `load(path) -> Pipeline`
loads, validates and checks a pipeline once; `Pipeline.run(inputs)`,
`await Pipeline.arun(inputs)` and `Pipeline.run_many(cases, concurrency=N)`
run it (see `converge_dsl.batch`; imported on first use, so `import
converge_dsl` stays cheap). The stages live in subpackages, layered as
docs/architecture.md §2 draws them: `converge_dsl.frontend` (load),
`converge_dsl.validation` (validate), `converge_dsl.compiler`,
`converge_dsl.engine` (the kernel), `converge_dsl.runtime` (run),
`converge_dsl.batch` (the API and batch runs), `converge_dsl.models` (the
model port), `converge_dsl.agents` and `converge_dsl.packs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_exports
from converge_dsl._version import __version__ as __version__

if TYPE_CHECKING:  # the table's modules, for type checkers
    from converge_dsl.batch import *  # noqa: F403
else:
    __all__, __getattr__ = lazy_exports(
        __name__,
        {
            "converge_dsl.batch": ("Pipeline", "load"),
        },
    )
    __all__ += ["__version__"]
