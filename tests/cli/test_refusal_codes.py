"""Every refusal of the command line and the Python API has a stable code (CD333 to
CD339, CD360): printed as `error[CODE]:` and kept as the code of a run's JSON result,
where those refusals printed a bare `error:` (and a run's JSON said CD920)."""

from __future__ import annotations

import ast
import asyncio
import fcntl
import io
import json
import sys
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.cli import run
from converge_dsl.errors import ConvergeError

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "converge_dsl"
MARKET = ROOT / "pipelines" / "market-entry.yaml"
# Errors whose code lives elsewhere: a PipelineInvalid's in its diagnostics; a template's
# and a solver's errors are turned into located diagnostics and rejections that carry one.
CARRIERS = {"PipelineInvalid", "TemplateCompileError", "TemplateRenderError", "SolverError"}
EXEMPT = {("lsp/__init__.py", "the editor ended the language server's session")}


def _uncoded(trees: list[ast.Module]) -> set[str]:
    """The error classes with no code of their own: `ConvergeError` and, by name, each class
    derived from one that neither sets `code` in its body nor passes `code=` up."""
    bases: dict[str, set[str]] = {}
    coded: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                named = {
                    b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
                }
                bases.setdefault(node.name, set()).update(named)
                passes = any(isinstance(k, ast.keyword) and k.arg == "code" for k in ast.walk(node))
                sets = any(
                    isinstance(line, ast.Assign)
                    and any(
                        getattr(t, "id", "") in ("code", "diagnostic_code") for t in line.targets
                    )
                    for line in node.body
                )
                if passes or sets:
                    coded.add(node.name)
    uncoded = {"ConvergeError"}
    grown = True
    while grown:
        found = {n for n, b in bases.items() if n not in coded and b & uncoded} - uncoded
        uncoded |= found
        grown = bool(found)
    return uncoded - CARRIERS


def _errors_without_a_code(root: Path) -> list[str]:
    """`FILE:LINE: CLASS(message)` of each error of a class without a code of its own
    (`_uncoded`) built without `code=`."""
    found = []
    files = sorted(root.rglob("*.py"))
    trees = [ast.parse(path.read_text(encoding="utf-8")) for path in files]
    uncoded = _uncoded(trees)
    for path, tree in zip(files, trees, strict=True):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            called = node.func
            name = called.id if isinstance(called, ast.Name) else getattr(called, "attr", "")
            if name not in uncoded or any(k.arg in ("code", None) for k in node.keywords):
                continue
            text = ast.unparse(node.args[0]) if node.args else ""
            where = str(path.relative_to(root))
            if not any(where == file and part in text for file, part in EXEMPT):
                found.append(f"{where}:{node.lineno}: {name}({text[:80]})")
    return found


def test_every_error_without_a_code_of_its_own_is_built_with_one() -> None:
    assert _errors_without_a_code(PACKAGE) == []


def test_the_scan_finds_a_raise_without_a_code(tmp_path: Path) -> None:
    (tmp_path / "sites.py").write_text(
        "class UsageError(ConvergeError): ...\n"
        "raise UsageError('no code')\n"
        "raise UsageError('coded', code=codes.X)\n"
        "raise errors.ConvergeError(f'{x}', hint='h')\n"
        "raise RunError('a run error: its stop reason names it')\n"
        "error = UsageError('built, raised later')\n",
        encoding="utf-8",
    )
    assert [line.split(": ", 1)[0] for line in _errors_without_a_code(tmp_path)] == [
        "sites.py:2",
        "sites.py:4",
        "sites.py:6",
    ]


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), out, err, {})
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    copy = tmp_path / "market-entry.yaml"
    copy.write_text(MARKET.read_text(encoding="utf-8"), encoding="utf-8")
    script = MARKET.with_name("market-entry.script.yaml")
    (tmp_path / script.name).write_text(script.read_text(encoding="utf-8"), encoding="utf-8")
    return copy


def test_each_refusal_of_the_command_line_prints_its_code(pipeline: Path) -> None:
    folder = pipeline.parent
    (folder / "trace.jsonl").write_text('{"type": "run_st\n', encoding="utf-8")
    cases = [
        (("run", str(pipeline), "--record", "a", "--replay", "b"), "CD333"),
        (("schema", "pipline"), "CD333"),
        (("run", str(folder / "nothere.yaml")), "CD334"),
        (("run", str(pipeline), "--inputs", str(folder / "nothere.json")), "CD334"),
        (("run", str(pipeline), "--decisions", str(folder)), "CD334"),
        (("diff", str(folder / "nothere.json"), str(folder / "nothere.json")), "CD334"),
        (("report", str(folder / "nothere.jsonl")), "CD334"),
        (("report", str(folder)), "CD334"),
        (("report", str(folder / "trace.jsonl")), "CD335"),
        (("trace", "expand", str(folder / "trace.jsonl"), "r1"), "CD335"),
        (("run", str(pipeline), "--trace", str(pipeline)), "CD336"),
        (("run", str(pipeline), "--input", "nope=1"), "CD338"),
    ]
    for argv, code in cases:
        status, _, err = _run(*argv)
        assert (status, err.split(":", 1)[0]) == (3, f"error[{code}]"), (argv, err)


def test_a_checkpoint_folder_held_by_another_run_is_cd337(pipeline: Path) -> None:
    folder = pipeline.parent / "ck"
    first = _run("run", str(pipeline), "--checkpoint", str(folder))
    assert first[0] == 0
    lock = next(path for path in folder.iterdir() if path.name.endswith(".lock"))
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        status, _, err = _run("run", str(pipeline), "--checkpoint", str(folder))
    assert status == 3
    assert err.startswith("error[CD337]: --checkpoint folder ")


def test_a_runs_json_result_keeps_the_code_of_its_refusal(pipeline: Path) -> None:
    """It said CD920 (the command line is wrong) for each."""
    status, out, _ = _run("run", str(pipeline), "--input", "nope=1", "--format", "json")
    assert status == 3
    document = json.loads(out)
    assert document["stop_reason"] == "usage_error"
    assert [d["code"] for d in document["diagnostics"]] == ["CD338"]


def test_the_python_api_called_against_its_contract_is_cd339() -> None:
    import converge_dsl

    pipeline = converge_dsl.load(MARKET)

    async def inside_a_loop() -> None:
        pipeline.run({"market": "M"})

    with pytest.raises(ConvergeError) as caught:
        asyncio.run(inside_a_loop())
    assert caught.value.code == codes.API_MISUSE


def test_a_missing_extra_is_cd360(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "converge_dsl.lsp", None)  # as if pygls were missing
    status, _, err = _run("lsp")
    assert status == 3
    assert err.startswith("error[CD360]: the language server needs the lsp extra (")


def test_an_error_of_the_system_is_cd361() -> None:
    from converge_dsl.cli import environment_error

    error = environment_error(PermissionError(13, "Permission denied", "out/results"))
    assert error.printed() == "error[CD361]: cannot use 'out/results': Permission denied"
