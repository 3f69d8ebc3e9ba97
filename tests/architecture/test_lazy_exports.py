"""A lazy package names each export once: its `lazy_exports` table (`converge_dsl._lazy`).

The type checkers' view (the star imports under `TYPE_CHECKING`) covers
exactly the table's modules, and each name is defined where the table says.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "converge_dsl"
LAZY = sorted(
    path
    for path in [ROOT / "__init__.py", *ROOT.glob("*/__init__.py")]
    if "lazy_exports(" in path.read_text(encoding="utf-8")
)


def _table(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if getattr(call.func, "id", None) == "lazy_exports":
                value = ast.literal_eval(call.args[1])
                assert isinstance(value, dict)
                return value
    raise AssertionError("no lazy_exports(...) table")


def _star_imports(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for item in node.body:
                assert isinstance(item, ast.ImportFrom), "TYPE_CHECKING holds star imports only"
                assert [alias.name for alias in item.names] == ["*"]
                assert item.module is not None
                found.add(item.module)
    return found


def test_there_are_lazy_packages() -> None:
    assert len(LAZY) >= 5


@pytest.mark.parametrize("path", LAZY, ids=lambda p: p.parent.name)
def test_type_checkers_see_the_tables_modules(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    table = _table(tree)
    assert _star_imports(tree) == set(table)
    for module, names in table.items():
        assert list(names) == sorted(names), module
        loaded = importlib.import_module(module)
        for name in names:
            assert hasattr(loaded, name), f"{module} has no {name}"


def test_a_table_that_misses_a_module_fails() -> None:
    tree = ast.parse(
        "if TYPE_CHECKING:\n    from m.a import *\nelse:\n"
        "    __all__, __getattr__ = lazy_exports(__name__, {'m.a': ('x',), 'm.b': ('y',)})\n"
    )
    assert _star_imports(tree) != set(_table(tree))
