"""Packages whose public names are imported on first use (PEP 562).

A package names each export once, under the submodule that defines it, and
takes its `__all__` and `__getattr__` from that table; type checkers read the
same modules' names through star imports instead::

    if TYPE_CHECKING:
        from converge_dsl.pkg._thing import *
    else:
        __all__, __getattr__ = lazy_exports(__name__, {"converge_dsl.pkg._thing": ("Thing",)})

(A type checker that saw `__getattr__` would read a name it has not resolved
yet, in an import cycle, as `Any`.) The first access imports the module and
caches the value in the package, so later accesses are plain attribute reads
and importing the package stays cheap (docs/architecture.md §3).
`tests/architecture/test_lazy_exports.py` holds the star imports to the
table's modules. Modules are imported with `__import__`, the path of an
`import` statement, so `python -X importtime` lists them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, tuple[str, ...]]
) -> tuple[list[str], Callable[[str], Any]]:
    """(`__all__`, `__getattr__`) for `package`, whose `exports` map a submodule to its names."""
    where = {name: module for module, names in exports.items() for name in names}

    def load(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        __import__(module)
        value = getattr(sys.modules[module], name)
        setattr(sys.modules[package], name, value)
        return value

    return sorted(where), load
