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


def test_a_suggestor_is_named_as_every_message_names_it() -> None:
    """Python's repr wrote `"it's\\t"`; a name is quoted as every message quotes it."""
    located = RunError("no", code="CD911", suggestor="it's\t\u200b", cycle=1)
    assert str(located) == "[CD911] no (suggestor 'it\\x27s\\x09\\u200b', cycle 1)"


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


def test_cited_is_the_code_then_the_message_without_the_hint() -> None:
    coded = UsageError("cannot read 'x': it is a FIFO", hint="give a file", code="CD930")
    assert coded.cited == "[CD930] cannot read 'x': it is a FIFO"
    assert UsageError("plain", hint="h").cited == "plain"


def wrapped_without_their_code(root: Path) -> list[str]:
    """`FILE:LINE: raise` of every raise in an `except ... as exc` handler that puts
    `exc.message` in the error it raises without taking over `code=exc.code`: the inner
    code is dropped (`exc.cited` quotes it with its code)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for handler in ast.walk(tree):
            if not isinstance(handler, ast.ExceptHandler) or not handler.name:
                continue
            name = handler.name
            for node in ast.walk(handler):
                if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
                    continue
                keeps = [k for k in node.exc.keywords if k.arg == "code"]
                if any(ast.unparse(k.value) == f"{name}.code" for k in keeps):
                    continue
                if any(
                    isinstance(sub, ast.Attribute)
                    and sub.attr == "message"
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == name
                    for sub in ast.walk(node.exc)
                ):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


# Sites that quote `exc.message` on purpose: the sandbox's are Jinja's own exceptions and
# its code-less internal values; the executor's inner error has the wrapper's code (CD999).
_QUOTE_THE_MESSAGE = ("sandbox/", "serve/_executors.py")


def test_an_error_wrapping_another_keeps_the_inner_code_in_its_text() -> None:
    found = wrapped_without_their_code(PACKAGE)
    assert [site for site in found if not site.startswith(_QUOTE_THE_MESSAGE)] == []


def test_a_cassette_refused_for_a_run_keeps_its_model_error_code(tmp_path: Path) -> None:
    # `--replay` wraps the cassette's ModelError as a usage error: its E_CONFIG was dropped.
    import json

    from converge_dsl.cli import run

    cassette = tmp_path / "bad.jsonl"
    cassette.write_text('{"bad": 1}\n', encoding="utf-8")
    pipeline = ROOT / "pipelines" / "market-entry.yaml"
    argv = ["run", str(pipeline), "--replay", str(cassette)]
    out, err = io.StringIO(), io.StringIO()
    assert run(argv, out, err, {}) == 3
    said = f"--replay {cassette}: [E_CONFIG] cassette bad.jsonl line 1 is not a recording"
    assert err.getvalue().startswith(f"error[CD335]: {said}")
    out, err = io.StringIO(), io.StringIO()
    assert run([*argv, "--format", "json"], out, err, {}) == 3
    assert json.loads(out.getvalue())["diagnostics"][0]["message"].startswith(said)
