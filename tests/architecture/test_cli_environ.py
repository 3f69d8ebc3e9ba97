"""The command line reads the process's environment in one place only.

`converge_dsl.cli.run(argv, stdout, stderr, environ=None)` defaults `environ`
to the process's environment; every command reads the one `run` was handed
(`CommandIO.environ`), so no other code under `converge_dsl/cli` may read
`os.environ`, `os.environb` or `os.getenv`, by attribute or by import.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "converge_dsl" / "cli"
# (module, function) of the one read allowed: `run`'s default for `environ`.
ALLOWED = {("converge_dsl/cli/__init__.py", "run")}
_READERS = {"environ", "environb", "getenv", "getenvb"}


def environment_reads(tree: ast.AST) -> list[tuple[int, str | None]]:
    """(line, enclosing top-level function or None) of each read of the process's environment."""
    found: list[tuple[int, str | None]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inside = function
            if function is None and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inside = child.name
            if (
                isinstance(child, ast.Attribute)
                and child.attr in _READERS
                and isinstance(child.value, ast.Name)
                and child.value.id == "os"
            ):
                found.append((child.lineno, inside))
            if (
                isinstance(child, ast.ImportFrom)
                and child.module == "os"
                and any(alias.name in _READERS for alias in child.names)
            ):
                found.append((child.lineno, inside))
            visit(child, inside)

    visit(tree, None)
    return found


def test_no_cli_module_reads_the_process_environment_but_runs_default() -> None:
    offending: list[str] = []
    allowed_seen: set[tuple[str, str]] = set()
    for path in sorted(CLI.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        for line, function in environment_reads(ast.parse(path.read_text(encoding="utf-8"))):
            if (module, function) in ALLOWED:
                allowed_seen.add((module, function or ""))
            else:
                offending.append(f"{module}:{line} (in {function or 'the module'})")
    assert offending == [], "read CommandIO.environ instead of the process's environment"
    assert allowed_seen == ALLOWED  # the default is still where this test says it is


def test_the_check_sees_every_way_of_reading_it() -> None:
    source = (
        "import os\n"
        "from os import environ, getenv\n"
        "A = os.environ.get('X')\n"
        "def run():\n"
        "    return os.getenv('Y')\n"
        "def other():\n"
        "    def inner():\n"
        "        return os.environb\n"
        "    return dict(os.environ)\n"
    )
    assert environment_reads(ast.parse(source)) == [
        (2, None),
        (3, None),
        (5, "run"),
        (8, "other"),
        (9, "other"),
    ]
