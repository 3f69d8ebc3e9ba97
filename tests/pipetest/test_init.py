"""`converge-dsl init`: a working project in one command, never overwriting.

The end-to-end test runs the real console script and pytest (with the
plugin) in the new folder, as a user would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import cli

FILES = {
    "demo.yaml",
    "demo.script.yaml",
    "demo.test.yaml",
    ".pre-commit-config.yaml",
    "README.md",
    ".converge-dsl",
    ".vscode",
    ".helix",
}


def _console(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`converge-dsl ARGV...` (or `pytest`) as a user runs it in `folder`."""
    exe = Path(sys.executable).parent / "converge-dsl"
    command = [str(exe), *argv] if argv[0] != "pytest" else [sys.executable, "-m", *argv]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    return subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_init_then_validate_run_test_and_pytest_all_pass(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    init = _console(tmp_path, "init", "demo")
    assert init.returncode == 0, init.stderr
    assert {p.name for p in folder.iterdir()} == FILES
    for argv in (
        ("validate", "."),
        ("run", "demo.yaml"),
        ("test",),
        ("pytest", "-q", "-p", "no:cacheprovider"),
    ):
        done = _console(folder, *argv)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
    assert "3 passed" in done.stdout


def test_a_broken_expectation_fails_with_a_diff_naming_the_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    assert _console(tmp_path, "init", "demo").returncode == 0
    test_file = folder / "demo.test.yaml"
    text = test_file.read_text()
    assert "counts: {summaries: 1, signals: 1}" in text
    test_file.write_text(
        text.replace("counts: {summaries: 1, signals: 1}", "counts: {summaries: 2, signals: 1}")
    )
    line = next(
        n for n, text in enumerate(test_file.read_text().splitlines(), 1) if "summaries: 2" in text
    )
    done = _console(folder, "test")
    assert done.returncode == 1
    assert f"--> demo.test.yaml:{line}:" in done.stdout
    assert "expected: 2" in done.stdout
    assert "actual:   1" in done.stdout
    py = _console(folder, "pytest", "-q", "-p", "no:cacheprovider")
    assert py.returncode == 1
    assert f"--> demo.test.yaml:{line}:" in py.stdout
    assert "FAILED demo.test.yaml::an outage is flagged as urgent" in py.stdout


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("mine\n")
    code, out, err = cli("init", tmp_path, "--name", "demo")
    assert (code, out) == (1, "")
    assert "error[CD962]: " in err
    assert "README.md is already there" in err
    assert "nothing was written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]
    assert (tmp_path / "README.md").read_text() == "mine\n"


def test_init_names_the_project_after_its_folder(tmp_path: Path) -> None:
    code, out, _ = cli("init", tmp_path / "My Project")
    assert code == 0
    assert (tmp_path / "My Project" / "my-project.yaml").is_file()
    assert "my-project.test.yaml" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [(("--name", "Bad Name"), "is not a valid pipeline name"), ((), "is not a folder")],
)
def test_init_usage_errors_exit_3(tmp_path: Path, argv: tuple[str, ...], message: str) -> None:
    target = tmp_path / "file"
    target.write_text("")
    where = tmp_path / "new" if argv else target
    code, _, err = cli("init", where, *argv)
    assert code == 3
    assert message in err


def test_the_files_carry_schema_headers_and_the_hooks(tmp_path: Path) -> None:
    assert cli("init", tmp_path, "--name", "demo")[0] == 0
    for name in ("demo.yaml", "demo.script.yaml", "demo.test.yaml"):
        first = (tmp_path / name).read_text().splitlines()[0]
        assert first.startswith("# yaml-language-server: $schema=.converge-dsl/schemas/"), name
        schema = first.split("$schema=", 1)[1]
        assert (tmp_path / schema).is_file(), name  # offline: the schema is in the project
    hooks = (tmp_path / ".pre-commit-config.yaml").read_text()
    assert "id: converge-dsl-validate" in hooks
    assert "id: converge-dsl-test" in hooks


def test_init_into_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("init", "--name", "here")
    assert code == 0
    assert "created 10 files in .:" in out


@pytest.mark.parametrize("name", ["9", "2024", "1e3", "true", "null", "on"])
def test_a_name_yaml_reads_as_no_text_makes_a_valid_project(tmp_path: Path, name: str) -> None:
    assert cli("init", tmp_path, "--name", name)[0] == 0
    code, out, err = cli("validate", tmp_path)
    assert code == 0, err
    code, out, err = cli("test", tmp_path)
    assert code == 0, out + err


@pytest.mark.parametrize(
    "name",
    [
        "a\x1b[31mb",
        "it's \\ here",
        "tab\there",
        "new\nline",
        "caf\u00e9 \u202eevil",
        "c1\x85",
        "plain name",
        os.fsdecode(b"latin\xe9"),  # a name that is not UTF-8
    ],
)
def test_init_names_its_folder_as_a_shell_reads_it_back_and_escaped(
    tmp_path: Path, name: str
) -> None:
    # The folder's name was quoted, then its control characters escaped: `a\x1b[31mb`
    # inside single quotes, which a shell reads as a folder of another name. Then a
    # bidi or C1 character was `\uNNNN`, which bash reads back only in a UTF-8 locale.
    import re
    import shutil

    folder = tmp_path / name
    code, out, _ = cli("init", folder, "--name", "demo")
    assert code == 0
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", out)
    assert not re.search("[\udc80-\udcff]", out)
    (line,) = (line for line in out.splitlines() if line.startswith("next: cd "))
    word = line.removeprefix("next: cd ").split(" && converge-dsl validate")[0]
    bash = shutil.which("bash")
    assert bash is not None
    pasted = subprocess.run(
        [bash, "-c", f"cd {word} && pwd"],
        capture_output=True,
        env={**os.environ, "LC_ALL": "C"},  # `\uNNNN` read back only in a UTF-8 locale
        timeout=30,
        check=False,
    )
    assert pasted.returncode == 0, pasted.stderr
    assert pasted.stdout == os.fsencode(folder) + b"\n"


def test_the_local_hooks_run_what_the_published_hooks_run(tmp_path: Path) -> None:
    """`init`'s local hooks and `.pre-commit-hooks.yaml` run the same commands on the same files."""
    import yaml

    root = Path(__file__).resolve().parents[2]
    published = {h["id"]: h for h in yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text())}
    assert cli("init", tmp_path, "--name", "demo")[0] == 0
    config = yaml.safe_load((tmp_path / ".pre-commit-config.yaml").read_text())
    (repo,) = config["repos"]
    assert repo["repo"] == "local"
    local = {h["id"]: h for h in repo["hooks"]}
    assert local.keys() == published.keys()
    for name, hook in local.items():
        assert hook["language"] == "system"
        same = ("entry", "types_or", "pass_filenames", "require_serial")
        assert {k: hook.get(k) for k in same} == {k: published[name].get(k) for k in same}


@pytest.mark.parametrize("kind", ["dangling link", "link", "folder"])
def test_init_refuses_any_name_already_taken_and_writes_nothing(tmp_path: Path, kind: str) -> None:
    project = tmp_path / "p"
    project.mkdir()
    taken = project / "demo.test.yaml"  # not the first file written: a partial write shows
    if kind == "dangling link":
        taken.symlink_to(tmp_path / "nowhere")
    elif kind == "link":
        (tmp_path / "mine.txt").write_text("mine\n")
        taken.symlink_to(tmp_path / "mine.txt")
    else:
        taken.mkdir()
    code, _, err = cli("init", project, "--name", "demo")
    assert code == 1
    assert "demo.test.yaml is already there" in err
    assert sorted(p.name for p in project.iterdir()) == ["demo.test.yaml"]
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in any folder")
def test_init_in_a_folder_it_cannot_write_writes_nothing(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    project.chmod(0o555)
    try:
        code, _, err = cli("init", project / "sub", "--name", "demo")
    finally:
        project.chmod(0o755)
    assert code == 3
    assert "nothing was written" in err
    assert list(project.iterdir()) == []


def test_a_write_that_fails_midway_removes_what_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge_dsl import _files

    made: list[Path] = []
    real = _files.create_new

    def full_on_the_third(path: Path, mode: int = 0o666) -> int:
        made.append(path)
        if len(made) == 3:
            raise OSError(28, "No space left on device")
        return real(path, mode)

    monkeypatch.setattr(_files, "create_new", full_on_the_third)
    code, _, err = cli("init", tmp_path, "--name", "demo")
    assert code == 3
    assert "No space left on device" in err
    assert "nothing was written" in err
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_says_it_cannot_be_written_is_refused_before_any_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "access", lambda path, mode, **kwargs: False)
    code, _, err = cli("init", tmp_path, "--name", "demo")
    assert code == 3
    assert "is not a folder you can write to; nothing was written" in err
    assert list(tmp_path.iterdir()) == []
