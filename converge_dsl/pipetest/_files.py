"""Which test files `converge-dsl test PATH...` runs: `test_files(paths)`.

A file is taken as given; a folder is searched (recursively) for
`*.test.yaml` and `*.test.yml`. No path at all means the working folder. A
path that does not exist, or folders holding no test file, are a `UsageError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from converge_dsl.errors import UsageError

from ._spec import TEST_SUFFIXES


def test_files(paths: Sequence[str]) -> list[Path]:
    """The test files `paths` name (folders expanded, sorted, de-duplicated)."""
    found: list[Path] = []
    for raw in paths or ["."]:
        path = Path(raw)
        if path.is_dir():
            inside = sorted(
                p
                for suffix in TEST_SUFFIXES
                for p in path.rglob(f"*{suffix}")
                if p.is_file() and not _hidden(p.relative_to(path))
            )
            if not inside:
                raise UsageError(
                    f"no test files found in {raw}",
                    hint="test files are named *.test.yaml (see `converge-dsl init`)",
                )
            found.extend(inside)
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"no such file or folder: {raw}", hint="give test files or folders")
    return list(dict.fromkeys(found))


def _hidden(relative: Path) -> bool:
    """A path under a hidden folder (`.git`, `.venv`) or a virtual environment."""
    return any(
        part.startswith(".") or part in {"node_modules", "__pycache__"}
        for part in relative.parts[:-1]
    )
