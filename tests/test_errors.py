"""An error's code lives in its `code` field, and the command line prints every error one way.

The scan below fails when a string of the package writes a code into text the way raise
sites used to (`serve [CD401]: ...`, `[{codes.X}]: ...`, `{codes.X}: ...`): the code goes
in `code=`, and `str(exc)` / `exc.printed()` put it where every error has it. A code
right after a word (`error[CODE]`, `warning[CODE]`, `{level}[CODE]`) is a printed
heading, which may name it.
"""

from __future__ import annotations

import ast
import io
import os
import re
from pathlib import Path

from converge_dsl.errors import ConvergeError, PackError, RunError, UsageError

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "converge_dsl"

# `[CD123]` or `[{...code...}]` not right after a word or a `}`; or `{codes.X}: `
_CODE_IN_TEXT = re.compile(r"(?<![\w}])\[(?:CD\d{3}|\{[^{}]*code[^{}]*\})\]|\{codes\.[A-Z_]+\}: ")


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def codes_written_into_text(root: Path) -> list[str]:
    """`FILE:LINE: string` of every string under `root` that writes a code into its text
    (errors.py, which renders the field, excepted)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "errors.py" and path.parent == root:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            text = isinstance(node, ast.JoinedStr) or (
                isinstance(node, ast.Constant) and isinstance(node.value, str)
            )
            if text and id(node) not in docs and _CODE_IN_TEXT.search(ast.unparse(node)):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_string_of_the_package_writes_a_code_into_an_error_text() -> None:
    assert codes_written_into_text(PACKAGE) == []


def test_the_scan_finds_the_shapes_raise_sites_used(tmp_path: Path) -> None:
    (tmp_path / "sites.py").write_text(
        "from converge_dsl import codes\n"
        "def a(code):\n"
        "    raise E(f'serve [{code}]: no')\n"
        "def b():\n"
        "    raise E(f'[{codes.CACHE_NO_ENTRY}]: answer cache: no')\n"
        "def c():\n"
        "    raise E(f'{codes.EXECUTOR_UNUSABLE}: no')\n"
        "def d():\n"
        "    raise E('checkpoint refused [CD950]: no')\n"
        "def fine(code):\n"
        "    '''A docstring may show `serve [CD401]: ...`.'''\n"
        "    return f'error[{code}]: no', f'warning[{codes.X}]: no'\n",
        encoding="utf-8",
    )
    assert [line.split(":")[1] for line in codes_written_into_text(tmp_path)] == [
        "3",
        "5",
        "7",
        "9",
    ]


def test_str_is_the_code_then_the_text_then_the_hint() -> None:
    assert str(ConvergeError("no", code="CD401", hint="do")) == "[CD401] no\n  hint: do"
    assert str(ConvergeError("no", hint="do")) == "no\n  hint: do"
    assert str(UsageError("no", code="CD930")) == "[CD930] no"
    located = RunError("no", code="CD911", suggestor="s", cycle=2, hint="do")
    assert str(located) == "[CD911] no (suggestor 's', cycle 2)\n  hint: do"
    assert located.message == "no"


def test_printed_is_the_heading_the_text_its_place_and_the_hint() -> None:
    error = PackError("alpha is gone\nsecond line", code="CD574", hint="do")
    error.where = "p.yaml:3:5"
    assert error.printed() == (
        "error[CD574]: alpha is gone\n --> p.yaml:3:5\nsecond line\n  hint: do"
    )
    assert ConvergeError("no").printed() == "error: no"


def _cli(args: list[str], environ: dict[str, str] | None = None) -> tuple[int, str]:
    from converge_dsl.cli import run

    out, err = io.StringIO(), io.StringIO()
    code = run(args, out, err, {} if environ is None else environ)
    return code, err.getvalue()


def _heading(err: str) -> tuple[str, str]:
    """The code of the first line `error[CODE]: text`, and its text."""
    found = re.match(r"error\[([A-Z0-9_]+)\]: (.*)", err)
    assert found is not None, err
    return found.group(1), found.group(2)


def test_a_pack_a_serve_a_model_error_and_a_read_refusal_read_alike(tmp_path: Path) -> None:
    empty = tmp_path / "repo"
    empty.mkdir()
    fifo = tmp_path / "inputs.json"
    os.mkfifo(fifo)
    pipeline = str(ROOT / "pipelines" / "support-triage.yaml")
    echo = str(ROOT / "tests" / "serve" / "data" / "echo.yaml")
    no_key = str(ROOT / "tests" / "e2e" / "data" / "stops" / "no-key.yaml")
    seen = [
        _cli(["pack", "info", "alpha", "--repo", str(empty)]),
        _cli(["serve", echo, "--port", "0", "--state", str(tmp_path / "s"), "--processes", "2"]),
        _cli(["run", no_key]),
        _cli(["run", pipeline, "--inputs", str(fifo)]),
    ]
    headings = [(code, *_heading(err)) for code, err in seen]
    assert [(exit, code) for exit, code, _ in headings] == [
        (1, "CD574"),
        (3, "CD433"),
        (1, "E_CONFIG"),
        (3, "CD930"),
    ]
    for (_, err), (_, code, text) in zip(seen, headings, strict=True):
        assert err.count(code) == 1, err  # in the heading only, never again in the text
        assert text.startswith(("path:", "serve: ", "model ", "cannot read --inputs file")), text


def test_the_json_error_object_takes_its_code_from_the_field(tmp_path: Path) -> None:
    import json

    from converge_dsl.cli import run

    out, err = io.StringIO(), io.StringIO()
    args = ["pack", "info", "alpha", "--repo", str(tmp_path), "--format", "json"]
    assert run(args, out, err, {}) == 1
    error = json.loads(out.getvalue())["error"]
    assert error["code"] == "CD574"
    assert "CD574" not in error["message"]
    assert err.getvalue().startswith(f"error[CD574]: {error['message']}\n")
