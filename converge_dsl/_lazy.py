"""Names a package imports on first use (PEP 562), so importing it stays cheap.

A package lists where each public name lives and hands the table over::

    __getattr__ = lazy_names(__name__, {"Thing": "converge_dsl.pkg._thing"})

(with the same names imported under `TYPE_CHECKING` for type checkers). The
first access imports the module and caches the value in the package, so later
accesses are plain attribute reads. Modules are imported with `__import__`, the
path of an `import` statement, so `python -X importtime` lists them
(`importlib.import_module` takes a path it does not see).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports each name from `where[name]`."""

    def load(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        __import__(module)
        value = getattr(sys.modules[module], name)
        setattr(sys.modules[package], name, value)
        return value

    return load
