"""The engine's modules import one way: no import circle inside `converge_dsl.engine`.

Every import counts, also those inside functions and under `TYPE_CHECKING`
(as the layer contracts count them). `from converge_dsl.engine import x`
points at the submodule `x` when there is one, else at the package itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import converge_dsl.engine

PACKAGE = "converge_dsl.engine"
ROOT = Path(converge_dsl.engine.__file__).parent


def _module_name(path: Path) -> str:
    return PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(path): path for path in ROOT.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    targets.add(submodule if submodule in modules else node.module)
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_engine_modules_import_without_a_circle() -> None:
    assert _cycle(_graph()) is None


def test_the_run_reaches_the_engine_only_through_what_it_is_given() -> None:
    graph = _graph()
    for module in ("_run", "_admission", "_runstate", "context"):
        assert f"{PACKAGE}.engine" not in graph[f"{PACKAGE}.{module}"], module
        assert PACKAGE not in graph[f"{PACKAGE}.{module}"], module
