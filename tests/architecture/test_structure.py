"""The structural rules of docs/architecture.md §2, checked on the source.

- No module imports another package's private module (a name starting with
  `_`), at module level, inside a function, or through `importlib`.
- No module over 600 lines and no function over 80 lines in `converge_dsl/` (a guard
  against monsters, not a target: modules are cut by concern),
  except the solver modules whose length is one algorithm (listed below).
- Comments and docstrings point at sections of `docs/architecture.md` that
  exist, and at no design document outside the repository.
- The repository's top level is the fixed set of `TOP_LEVEL` (a stray file
  there, like one a script wrote under an option's name, fails).

The layers themselves are checked by import-linter (`lint-imports`, run by
`.ci/run` with the contract in `pyproject.toml`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "converge_dsl"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# Modules whose length is one algorithm, kept whole so it reads in one place (none today).
ONE_ALGORITHM: set[str] = set()


TOP_LEVEL = {
    ".ci",
    ".gitignore",
    ".pre-commit-hooks.yaml",
    "README.md",
    "bench",
    "builtin_packs",
    "converge_dsl",
    "docs",
    "pipelines",
    "pyproject.toml",
    "schemas",
    "tests",
}


def test_the_top_level_of_the_repository_is_the_fixed_set() -> None:
    import shutil
    import subprocess

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout.decode()
    tracked = {name.split("/", 1)[0] for name in listed.split("\0") if name}
    assert tracked <= TOP_LEVEL, sorted(tracked - TOP_LEVEL)


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(path: Path) -> str:
    """The package a module belongs to: `converge_dsl.engine` for its modules."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:2]) if len(parts) > 2 else parts[0]


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every module a file imports (line, dotted name), wherever the import stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _name(path) if path.name == "__init__.py" else _name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield node.lineno, module
            yield from ((node.lineno, f"{module}.{alias.name}") for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def _private_part(module: str) -> str | None:
    """The first private component of `module` below its top package, if any."""
    parts = module.split(".")
    for index, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index])
    return None


def test_no_import_of_another_packages_private_module() -> None:
    found = []
    for path in _modules():
        own = _package_of(path)
        for line, module in _imports(path):
            if not module.startswith("converge_dsl."):
                continue
            owner = _private_part(module)
            # converge_dsl._x (a private module of the root) belongs to the shared base.
            if owner is None or owner in ("converge_dsl", own):
                continue
            found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert found == []


def test_the_private_import_check_can_fail() -> None:
    sample = PACKAGE / "cli" / "_render.py"  # imports frontend lazily, inside a function
    assert any(m == "converge_dsl.frontend" for _, m in _imports(sample))
    assert _private_part("converge_dsl.frontend._render.x") == "converge_dsl.frontend"
    assert _private_part("converge_dsl.frontend.document") is None


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_and_function_sizes(path: Path) -> None:
    relative = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8")
    if relative not in ONE_ALGORITHM:
        assert text.count("\n") <= MAX_MODULE_LINES, f"{relative} is over {MAX_MODULE_LINES} lines"
    long = [
        f"{node.name} (line {node.lineno}): {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


SECTION_REFERENCE = re.compile(r"docs/architecture\.md §(\d+)")
OUTSIDE_REFERENCE = re.compile(r"DESIGN\s*§|DESIGN order|language\.md")


def test_references_point_at_sections_that_exist() -> None:
    headings = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## (\d+)\. ", headings, flags=re.MULTILINE))
    broken, outside, seen = [], [], 0
    for path in [*_modules(), *sorted((ROOT / "bench").glob("*.py"))]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            where = f"{path.relative_to(ROOT)}:{number}"
            for section in SECTION_REFERENCE.findall(line):
                seen += 1
                if section not in sections:
                    broken.append(f"{where} points at §{section}")
            if OUTSIDE_REFERENCE.search(line):
                outside.append(f"{where}: {line.strip()}")
    assert broken == []
    assert outside == []
    assert seen > 0, "no reference to docs/architecture.md found: is the pattern still right?"
