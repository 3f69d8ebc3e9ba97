"""Every error the pack machinery raises carries its stable code (`PackRefused`).

The source is read for each raise: no bare `PackError` is made in converge_dsl/packs,
and each `PackRefused` names a code of `converge_dsl.codes` (or a parameter holding
one); then the refusals that had no code before are each brought about once, their
code checked as the command line prints it (`error[CODE]: ...`).
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from converge_dsl import codes
from converge_dsl.cli import run
from converge_dsl.errors import PackError
from converge_dsl.packs import publish
from converge_dsl.packs._files import PackRefused

from .conftest import make_pack

PACKS = Path(codes.__file__).parent / "packs"
DEFINED = {name for name, value in vars(codes).items() if name.isupper() and isinstance(value, str)}
# A code passed on by a parameter (its callers give a constant) or taken from a list of
# (code, message) pairs whose codes are constants.
PASSED_ON = {"code", "problems[0][0]"}


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == name)
            or (isinstance(node.func, ast.Attribute) and node.func.attr == name)
        )
    ]


@pytest.mark.parametrize("module", sorted(PACKS.glob("*.py")), ids=lambda p: p.name)
def test_every_pack_error_is_made_with_a_code(module: Path) -> None:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    bare = [call.lineno for call in [*_calls(tree, "PackError"), *_calls(tree, "ConvergeError")]]
    assert bare == [], f"{module.name}: an error without a code at line(s) {bare}"
    for call in _calls(tree, "PackRefused"):
        first = call.args[0] if call.args else None
        assert first is not None, f"{module.name}:{call.lineno}: PackRefused without a code"
        text = ast.unparse(first)
        named = text.removeprefix("codes.")
        assert named in DEFINED or text in PASSED_ON, f"{module.name}:{call.lineno}: {text}"


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    return run(list(argv), io.StringIO(), err, {}), err.getvalue()


def test_the_pack_commands_print_the_codes_of_their_refusals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = make_pack(tmp_path, "alpha", "1.0.0")
    assert _cli("pack", "publish", str(folder), "--repo", "repo")[0] == 0
    (folder / "prompts" / "readme.md").write_text("changed\n")
    assert _cli("pack", "publish", str(folder), "--repo", "repo") == (
        1,
        "error[CD331]: alpha 1.0.0 is already published with a different digest\n"
        "  hint: published versions are immutable: bump the version in pack.yaml\n",
    )
    (tmp_path / "empty").mkdir()
    assert _cli("pack", "publish", "empty", "--repo", "repo") == (
        1,
        "error[CD332]: pack.yaml not found in empty\n",
    )
    (tmp_path / "key.txt").write_text("ed25519:zzz\n")
    code, err = _cli("pack", "publish", str(folder), "--repo", "other", "--sign-key", "key.txt")
    assert (code, err) == (1, "error[CD330]: signing key is not valid base64\n")
    (tmp_path / "repo" / "index" / "alpha.json").write_text("{")
    code, err = _cli("pack", "info", "alpha", "--repo", "repo")
    assert (code, err.startswith("error[CD324]: path:repo index/alpha.json: not JSON")) == (1, True)


def test_a_lock_file_held_past_the_wait_is_refused_with_its_code(tmp_path: Path) -> None:
    from converge_dsl.packs._lockfile import exclusive

    lock = tmp_path / "converge.lock"
    with exclusive(lock), pytest.raises(PackRefused) as caught, exclusive(lock, wait_s=0):
        pass
    assert caught.value.code == codes.LOCK_FILE_BUSY


def test_a_file_that_cannot_be_written_is_refused_with_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import converge_dsl._files
    from converge_dsl.packs import _files

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(converge_dsl._files, "replace_file", refuse)
    with pytest.raises(PackRefused) as caught:
        _files.write_atomic(tmp_path / "converge.lock", b"{}")
    assert (caught.value.code, caught.value.message) == (
        codes.PACK_FILE_NOT_WRITTEN,
        "cannot write converge.lock: Permission denied",
    )


def test_a_solver_that_fails_to_load_is_refused_with_its_code() -> None:
    from converge_dsl.packs._registry import SolverRegistry

    def broken() -> object:
        raise ImportError("No module named 'ortools'")

    registry = SolverRegistry({"routes": broken, "odd": object})  # type: ignore[dict-item]
    for name in ("routes", "odd"):
        with pytest.raises(PackRefused) as caught:
            registry.get(name)
        assert caught.value.code == codes.SOLVER_NOT_LOADED
    with pytest.raises(PackRefused) as caught:
        registry.get("route")
    assert caught.value.code == codes.SOLVER_NOT_INSTALLED


def test_a_resolution_past_its_step_limit_is_refused_with_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge_dsl.packs import _resolve
    from converge_dsl.packs._repository import FolderRepository

    publish(make_pack(tmp_path, "alpha", "1.0.0"), tmp_path / "repo")
    monkeypatch.setattr(_resolve, "MAX_STEPS", 0)
    roots = {"alpha": SpecifierSet(">=1")}
    with pytest.raises(PackError) as caught:
        _resolve.resolve(roots, [FolderRepository(tmp_path / "repo")], requester="pipeline")
    assert getattr(caught.value, "code", None) == codes.PACK_RESOLUTION_GAVE_UP
