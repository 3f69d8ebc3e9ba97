"""A command's `-o PATH` (`cli._output.command_output`): a path that is one of the
command's own streams is written through that stream, whatever names it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = str(ROOT / "pipelines" / "incident-triage.yaml")


def _result(folder: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", "run", PIPELINE, "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    (folder / "a.json").write_text(done.stdout, encoding="utf-8")
    return folder / "a.json"


def _command(name: str, folder: Path) -> list[str]:
    if name == "diff":
        a = str(_result(folder))
        return ["diff", a, a, "--format", "json"]
    return ["graph", PIPELINE, "--format", "json"]


@pytest.mark.parametrize("command", ["diff", "graph"])
@pytest.mark.parametrize("name", ["/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"])
def test_an_output_naming_standard_error_redirected_to_a_file_is_written_there(
    tmp_path: Path, command: str, name: str
) -> None:
    # `-o /dev/stderr 2> FILE` was refused ("it is a symbolic link"): only the names of
    # standard output were known, and standard error's name is a link to the file.
    with (tmp_path / "err.txt").open("w") as err, (tmp_path / "out.txt").open("w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "converge_dsl", *_command(command, tmp_path), "-o", name],
            stdout=out,
            stderr=err,
            check=False,
        )
    assert done.returncode == 0, (tmp_path / "err.txt").read_text()
    assert (tmp_path / "out.txt").read_text() == ""
    assert isinstance(json.loads((tmp_path / "err.txt").read_text()), dict)


@pytest.mark.parametrize("command", ["diff", "graph"])
def test_an_output_that_is_the_file_standard_output_writes_is_written_through_it(
    tmp_path: Path, command: str
) -> None:
    argv = _command(command, tmp_path)
    target = tmp_path / "out.txt"
    with target.open("w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "converge_dsl", *argv, "-o", str(target)],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    assert (done.returncode, done.stderr) == (0, "")
    assert isinstance(json.loads(target.read_text()), dict)


def test_graph_writes_dev_stdout_into_a_pipe(tmp_path: Path) -> None:
    # graph opened `-o /dev/stdout` as a file and refused it as a link, even on a pipe.
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", *_command("graph", tmp_path), "-o", "/dev/stdout"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert isinstance(json.loads(done.stdout), dict)


def test_dev_stdout_appending_to_the_pipeline_read_is_refused(tmp_path: Path) -> None:
    """`graph P -o /dev/stdout >> P` appended the graph to the pipeline it read; a file
    named so is refused (CD336), as `-o P` and `-o /dev/fd/3 3>>P` are."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(Path(PIPELINE).read_text(encoding="utf-8"), encoding="utf-8")
    kept = pipeline.read_bytes()
    with pipeline.open("a") as out:
        done = subprocess.run(
            [sys.executable, "-m", "converge_dsl", "graph", str(pipeline), "-o", "/dev/stdout"],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    assert done.returncode == 3
    assert done.stderr.startswith("error[CD336]: --output '/dev/stdout' is the pipeline")
    assert pipeline.read_bytes() == kept
