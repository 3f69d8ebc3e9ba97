"""PyYAML, imported with its regular expressions compiled when first used.

Every module of the package takes PyYAML from here (`from converge_dsl._pyyaml
import yaml`; ruff's banned-api rule refuses a direct import). The module is
PyYAML itself; what differs is only when the patterns of its pure-Python
reader, resolver and constructor are compiled. `import yaml` compiles about
twenty of them, among them a character class spanning all of Unicode, and that
costs more than the interpreter's own start-up; the C parser the front end
loads with uses none of them, and the resolver it asks about plain scalars
uses a few, chosen by the scalar's first character. So while PyYAML's modules
are executed, `re.compile` called from them returns a `LazyPattern`, which
compiles on its first use and then answers every attribute of the
`re.Pattern` it wraps. docs/architecture.md §5 gives the figures (instruction
counts, and `bench/peers.py`'s validate-small/python-startup); patterns compiled
by any other module are untouched.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any

__all__ = ["LazyPattern", "yaml"]


class LazyPattern:
    """A `re.Pattern` compiled on first use (see the module docstring)."""

    __slots__ = ("_arguments", "_pattern")

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self._arguments = (pattern, flags)
        self._pattern: re.Pattern[Any] | None = None

    def __getattr__(self, name: str) -> Any:
        pattern = self._pattern
        if pattern is None:
            pattern = self._pattern = _compile(*self._arguments)
        return getattr(pattern, name)

    def __repr__(self) -> str:
        return f"LazyPattern({self._arguments[0]!r})"


_compile = re.compile


def _compile_lazily_for_yaml(pattern: Any, flags: int = 0) -> Any:
    caller = sys._getframe(1).f_globals.get("__name__", "")
    if isinstance(pattern, (str, bytes)) and (caller == "yaml" or caller.startswith("yaml.")):
        return LazyPattern(pattern, flags)
    return _compile(pattern, flags)


def _import_yaml() -> Any:
    if "yaml" in sys.modules:  # imported before us (by a host program): nothing to defer
        return sys.modules["yaml"]
    re.compile = _compile_lazily_for_yaml
    try:
        import yaml as module
    finally:
        re.compile = _compile
    return module


if TYPE_CHECKING:
    import yaml
    import yaml._yaml
    import yaml.composer
    import yaml.events
    import yaml.nodes
    import yaml.reader
    import yaml.resolver
else:
    yaml = _import_yaml()
