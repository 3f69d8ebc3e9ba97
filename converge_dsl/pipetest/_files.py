"""Which test files `converge-dsl test PATH...` runs: `test_files(paths)`.

A file must be named `*.test.yaml` (or `*.test.yml`); a folder is searched
(recursively) for them. No path at all means the working folder. A
path that does not exist, or folders holding no test file, are a `UsageError`.

In a folder (and in pytest's collection), a file of that name is a test
file only when it says so (`says_test_file`: a `kind: PipelineTest` or
`apiVersion: converge-dsl/...` line, and no other tool's `apiVersion`):
other tools' files share the name (`docker-compose.test.yaml`). A file named
directly is always read, so a broken one is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from converge_dsl import codes
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
                if p.is_file() and not _hidden(p.relative_to(path)) and says_test_file(p)
            )
            if not inside:
                raise UsageError(
                    f"no test files found in {raw}",
                    hint="test files are named *.test.yaml (see `converge-dsl init`)",
                    code=codes.PATH_NOT_FOUND,
                )
            found.extend(inside)
        elif path.is_file():
            if not path.name.endswith(TEST_SUFFIXES):
                raise UsageError(
                    f"{raw} is not a test file", hint=_hint_for(path), code=codes.PATH_NOT_FOUND
                )
            found.append(path)
        elif path.exists():  # a FIFO, a socket, a device: nothing to read a test from
            raise UsageError(
                f"{raw} is not a regular file or a folder",
                hint="give test files or folders",
                code=codes.PATH_NOT_FOUND,
            )
        else:
            raise UsageError(
                f"no such file or folder: {raw}",
                hint="give test files or folders",
                code=codes.PATH_NOT_FOUND,
            )
    return list(dict.fromkeys(found))


def _hint_for(path: Path) -> str:
    """Where the tests of the pipeline `path` would be, or how test files are named."""
    stem = path.name.rsplit(".", 1)[0]
    beside = path.with_name(f"{stem}.test.yaml")
    if beside.is_file():
        return f"its tests are in {beside.name}: converge-dsl test {beside.as_posix()}"
    return "test files are named *.test.yaml (kind: PipelineTest)"


def _hidden(relative: Path) -> bool:
    """A path under a hidden folder (`.git`, `.venv`) or a virtual environment."""
    return any(
        part.startswith(".") or part in {"node_modules", "__pycache__"}
        for part in relative.parts[:-1]
    )


def says_test_file(path: Path) -> bool:
    """Whether the `*.test.yaml` file at `path` says it is converge-dsl's (see the
    module docstring); a file that cannot be read is kept, so its reader says why."""
    from converge_dsl._file_kinds import says_ours

    return says_ours(path, "PipelineTest")
