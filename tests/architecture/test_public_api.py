"""Every public package exports exactly what its docstring lists, and the lists are pinned.

- Each name in a package's `__all__` resolves, and its docstring names it in
  backticks.
- A docstring does not advertise what the package does not export: a name in
  backticks that the package has but does not export, or a class or constant
  name that no public namespace of converge-dsl defines, is a failure.
- The `__all__` lists themselves are pinned in `expected/public_api.json`: a
  change of the public surface is deliberate (`UPDATE_EXPECTED=1` rewrites the
  file; read its diff).
"""

from __future__ import annotations

import builtins
import importlib
import json
import os
import re
from pathlib import Path
from types import ModuleType

import pytest

PACKAGES = (
    "converge_dsl",
    "converge_dsl.batch",
    "converge_dsl.agents",
    "converge_dsl.compiler",
    "converge_dsl.engine",
    "converge_dsl.frontend",
    "converge_dsl.graph",
    "converge_dsl.models",
    "converge_dsl.packs",
    "converge_dsl.pipetest",
    "converge_dsl.runtime",
    "converge_dsl.sandbox",
    "converge_dsl.serve",
    "converge_dsl.solvers",
    "converge_dsl.tools",
    "converge_dsl.validation",
)
PINNED = Path(__file__).parent / "expected" / "public_api.json"
NAME_IN_BACKTICKS = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)")


def _exports(module: ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    assert isinstance(names, list | tuple), f"{module.__name__} has no __all__"
    return list(names)


def _defined_anywhere(name: str) -> bool:
    """True when some public namespace of converge-dsl (or Python) defines `name`."""
    if hasattr(builtins, name):
        return True
    modules = (*PACKAGES, "converge_dsl.errors", "converge_dsl.diagnostics", "converge_dsl.codes")
    return any(hasattr(importlib.import_module(m), name) for m in modules)


def _looks_like_a_type_or_constant(name: str) -> bool:
    return name[:1].isupper()


def _defined_in(module: ModuleType, name: str) -> bool:
    """True when `module` has `name` and defines it itself (not an import from elsewhere)."""
    if not hasattr(module, name):
        return False
    value = getattr(module, name)
    if isinstance(value, ModuleType):
        return False
    owner = getattr(value, "__module__", None)
    return owner is None or owner == module.__name__ or owner.startswith(module.__name__ + ".")


def _problems(module: ModuleType) -> dict[str, list[str]]:
    """What breaks the rule in `module`: unresolved, undocumented and advertised names."""
    doc = module.__doc__ or ""
    mentioned = set(NAME_IN_BACKTICKS.findall(doc))
    exported = _exports(module)
    advertised = sorted(
        name
        for name in mentioned - set(exported)
        if not name.startswith("converge_dsl")
        and (
            _defined_in(module, name)
            or (_looks_like_a_type_or_constant(name) and not _defined_anywhere(name))
        )
    )
    return {
        "unresolved": [name for name in exported if not hasattr(module, name)],
        "undocumented": [name for name in exported if name not in mentioned],
        "advertised": advertised,
    }


@pytest.mark.parametrize("package", PACKAGES)
def test_exports_resolve_and_are_documented(package: str) -> None:
    problems = _problems(importlib.import_module(package))
    assert problems == {"unresolved": [], "undocumented": [], "advertised": []}


def test_the_rule_can_fail() -> None:
    module = ModuleType("converge_dsl.sample", "Exports `shown` and `NOT_EXPORTED`.")
    module.shown = 1  # type: ignore[attr-defined]
    module.hidden = 2  # type: ignore[attr-defined]
    module.__all__ = ["shown", "hidden", "missing"]  # type: ignore[attr-defined]
    assert _problems(module) == {
        "unresolved": ["missing"],
        "undocumented": ["hidden", "missing"],
        "advertised": ["NOT_EXPORTED"],
    }


def test_the_public_surface_is_pinned() -> None:
    actual = {p: sorted(_exports(importlib.import_module(p))) for p in PACKAGES}
    if os.environ.get("UPDATE_EXPECTED") == "1":
        PINNED.write_text(json.dumps(actual, indent=2) + "\n", encoding="utf-8")
    assert actual == json.loads(PINNED.read_text(encoding="utf-8"))
