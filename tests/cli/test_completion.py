"""`converge-dsl completion`: scripts for bash, zsh and fish that the shells accept and use."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from converge_dsl.cli import COMMANDS, run

ROOT = Path(__file__).resolve().parent.parent.parent

# Completes one command line in bash, as the shell does on Tab, and prints the candidates.
DRIVER = r"""
source "$1"
line="$2"
COMP_LINE="$line"; COMP_POINT=${#line}
read -ra COMP_WORDS <<< "$line"
[[ "$line" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMPREPLY=()
_shtab_converge_dsl converge-dsl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""


def _script(shell: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert run(["completion", shell], out, err, {}) == 0, err.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "converge-dsl.bash"
    path.write_text(_script("bash"), encoding="utf-8")
    return path


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_a_script_names_every_command(shell: str) -> None:
    script = _script(shell)
    assert "converge-dsl" in script
    for name in COMMANDS:
        assert name in script, (shell, name)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_shell_accepts_the_script(shell: str, tmp_path: Path) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    path = tmp_path / f"script.{shell}"
    path.write_text(_script(shell), encoding="utf-8")
    done = subprocess.run(
        [shell, "-n", str(path)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr


def _complete(script: Path, line: str, cwd: Path = ROOT) -> list[str]:
    done = subprocess.run(
        ["bash", "-c", DRIVER, "driver", str(script), line],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [word for word in done.stdout.splitlines() if word]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("converge-dsl va", ["validate"]),
        ("converge-dsl ex", ["explain"]),
        ("converge-dsl pack ve", ["verify"]),
        ("converge-dsl validate --fo", ["--format"]),
        ("converge-dsl validate --format ", ["human", "json", "github", "sarif"]),
        ("converge-dsl run --qu", ["--quiet"]),
        ("converge-dsl schema mo", ["model-script"]),
        ("converge-dsl explain CD20", [f"CD20{n}" for n in range(10)]),
        ("converge-dsl completion ", ["bash", "zsh", "fish"]),
    ],
)
def test_bash_completes_commands_options_and_values(
    bash_script: Path, line: str, expected: list[str]
) -> None:
    assert _complete(bash_script, line) == expected


def test_bash_completes_file_names_for_a_pipeline(bash_script: Path, tmp_path: Path) -> None:
    (tmp_path / "triage.yaml").write_text("", encoding="utf-8")
    (tmp_path / "other.yaml").write_text("", encoding="utf-8")
    assert _complete(bash_script, "converge-dsl run tri", cwd=tmp_path) == ["triage.yaml"]
    assert _complete(bash_script, "converge-dsl validate tri", cwd=tmp_path) == ["triage.yaml"]


def test_an_unknown_shell_is_a_usage_error() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run(["completion", "tcsh"], out, err, {}) == 3
    assert "invalid choice: 'tcsh' (choose from 'bash', 'zsh', 'fish')" in err.getvalue()


def test_validate_imports_neither_completion_nor_explain() -> None:
    code = (
        "import sys, io; from converge_dsl.cli import run; "
        "run(['validate', sys.argv[1]], io.StringIO(), io.StringIO(), {}); "
        "print(sorted(m for m in sys.modules if m.startswith(('shtab', 'converge_dsl.cli._'))))"
    )
    minimal = ROOT / "tests" / "data" / "valid" / "minimal.yaml"
    done = subprocess.run(
        [sys.executable, "-c", code, str(minimal)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == str(
        [
            "converge_dsl.cli._discovery",
            "converge_dsl.cli._render",
            "converge_dsl.cli._terminal",
            "converge_dsl.cli._validate",
        ]
    )


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_commands_and_codes(tmp_path: Path) -> None:
    path = tmp_path / "converge-dsl.fish"
    path.write_text(_script("fish"), encoding="utf-8")

    def complete(line: str) -> list[str]:
        done = subprocess.run(
            ["fish", "--no-config", "-c", f"source {path}; complete -C '{line}'"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return [row.split("\t")[0] for row in done.stdout.splitlines()]

    assert complete("converge-dsl va") == ["validate"]
    assert complete("converge-dsl pack ve") == ["verify"]
    assert "CD203" in complete("converge-dsl explain CD20")
