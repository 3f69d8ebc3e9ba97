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


def _late_failure(monkeypatch: pytest.MonkeyPatch, at: str) -> None:
    """The disk fails late: at the file's fsync (EIO), or at a write past its first
    bytes (ENOSPC), as a full or failing disk does after the file was opened."""
    import errno
    import os

    if at == "fsync":

        def fsync(fd: int) -> None:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        monkeypatch.setattr(os, "fsync", fsync)
        return
    real = os.write

    def write(fd: int, data: bytes) -> int:
        if len(data) > 4:
            real(fd, bytes(data)[:4])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


def _whole_or_nothing_command(name: str, folder: Path) -> tuple[list[str], str]:
    """A command line writing `out` (-o appended by the caller), and a first line of a
    previous output of that command it may replace."""
    if name == "report":
        trace = folder / "t.jsonl"
        subprocess.run(
            [sys.executable, "-m", "converge_dsl", "run", PIPELINE, "--trace", str(trace)],
            capture_output=True,
            check=True,
        )
        return ["report", str(trace)], "<!DOCTYPE html><!-- converge-dsl run report -->\nold\n"
    if name == "diff":
        a = str(_result(folder))
        return ["diff", a, a], "old diff\n"
    return ["graph", PIPELINE], "%% converge-dsl graph: old\n"


@pytest.mark.parametrize("at", ["fsync", "write"])
@pytest.mark.parametrize("existed", [True, False])
@pytest.mark.parametrize("command", ["graph", "diff", "report"])
def test_an_output_whose_write_fails_late_is_written_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, existed: bool, at: str
) -> None:
    """A write that failed at its end (a full disk at a late write, at fsync or close) left
    a partial file or an emptied previous one, and its error did not name the file."""
    import io

    from converge_dsl.cli import run

    argv, previous = _whole_or_nothing_command(command, tmp_path)
    output = tmp_path / "out" / "output.txt"
    output.parent.mkdir()
    if existed:
        output.write_text(previous)
    _late_failure(monkeypatch, at)
    out, err = io.StringIO(), io.StringIO()
    code = run([*argv, "-o", str(output)], out, err, {})
    assert code == 1, err.getvalue()
    assert err.getvalue().startswith("error[CD361]: cannot write ")
    assert repr(str(output)) in err.getvalue().splitlines()[0]
    assert "the file is as it was" in err.getvalue()
    kept = [output.name] if existed else []
    assert sorted(p.name for p in output.parent.iterdir()) == kept  # no temporary file left
    if existed:
        assert output.read_text() == previous


def test_a_key_whose_write_fails_late_is_not_left_cut_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pack keygen`'s key file: a failing disk left an empty or partial key, and the error
    ('cannot use: Input/output error') did not name it."""
    import io

    from converge_dsl.cli import run

    _late_failure(monkeypatch, "fsync")
    key = tmp_path / "signing.key"
    err = io.StringIO()
    assert run(["pack", "keygen", str(key)], io.StringIO(), err, {}) == 1
    assert err.getvalue().startswith(f"error[CD361]: cannot write key file {str(key)!r}: ")
    assert not key.exists()


def _trace(folder: Path) -> str:
    trace = folder / "t.jsonl"
    subprocess.run(
        [sys.executable, "-m", "converge_dsl", "run", PIPELINE, "--trace", str(trace)],
        capture_output=True,
        check=True,
    )
    return str(trace)


# (a command line whose last word is the output's path; what its output starts with)
STREAMED = {
    "report -o": (["report", "TRACE", "-o"], "<!DOCTYPE html><!-- converge-dsl run report -->"),
    "run --trace": (["run", PIPELINE, "-q", "--trace"], '{"seq":0,"type":"run_started"'),
    "run --report": (["run", PIPELINE, "-q", "--report"], "<!DOCTYPE html><!-- converge-dsl"),
}


@pytest.mark.parametrize("output", list(STREAMED))
@pytest.mark.parametrize("name", ["/dev/stderr", "/proc/self/fd/2"])
def test_every_output_naming_standard_error_redirected_to_a_file_is_written_there(
    tmp_path: Path, output: str, name: str
) -> None:
    """`run --trace /dev/stderr 2> FILE` and `report -o /dev/stderr 2> FILE` were refused
    ("it is a symbolic link") while `graph -o /dev/stderr 2> FILE` was written: one rule
    (`cli._output.output_stream`) now serves every output."""
    argv, start = STREAMED[output]
    argv = [_trace(tmp_path) if word == "TRACE" else word for word in argv]
    with (tmp_path / "err.txt").open("w") as err:
        done = subprocess.run(
            [sys.executable, "-m", "converge_dsl", *argv, name],
            stdout=subprocess.PIPE,
            stderr=err,
            check=False,
        )
    written = (tmp_path / "err.txt").read_text()
    assert done.returncode == 0, written
    assert written.startswith(start)


@pytest.mark.parametrize("output", list(STREAMED))
def test_every_output_writes_into_a_pipe_or_a_device(tmp_path: Path, output: str) -> None:
    argv, start = STREAMED[output]
    argv = [_trace(tmp_path) if word == "TRACE" else word for word in argv]
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", *argv, "/dev/stderr"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(start)
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", *argv, "/dev/null"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")


FORMAT_JSON = ("--format", "json")
TRACE_STDOUT = ("--trace", "/dev/stdout")


def test_run_refuses_an_output_on_standard_output_under_format_json(tmp_path: Path) -> None:
    """Standard output holds the run-result document: a trace there would break it."""
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", "run", PIPELINE, *FORMAT_JSON, *TRACE_STDOUT],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3
    assert done.stderr.startswith("error[CD336]: --trace '/dev/stdout' is standard output")
    assert json.loads(done.stdout)["stop_reason"] == "usage_error"


def test_outputs_naming_a_file_with_an_undecodable_byte_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipeline named with a byte that is not UTF-8 (Python reads it as a lone surrogate)
    could not be graphed, traced or reported to a file: 'surrogates not allowed', exit 1,
    though standard output took it. The byte is now written as its escape, which in JSON
    is the character's own JSON escape: a trace and a graph's JSON read back the name."""
    import io

    from converge_dsl.cli import run

    monkeypatch.chdir(tmp_path)
    source = Path(PIPELINE)
    name = "p\udcff.yaml"
    Path(name).write_bytes(source.read_bytes())
    script = source.with_name("incident-triage.script.yaml")
    Path(script.name).write_bytes(script.read_bytes())

    def ok(*argv: str) -> None:
        err = io.StringIO()
        assert run(list(argv), io.StringIO(), err, {}) == 0, err.getvalue()

    ok("graph", name, "--format", "json", "-o", "g.json")
    assert json.loads(Path("g.json").read_bytes())["file"].endswith(name)
    ok("graph", name, "-o", "g.mmd")
    assert "p\\udcff.yaml" in Path("g.mmd").read_text(encoding="utf-8")
    ok("run", name, "-q", "--trace", "t\udcff.jsonl", "--report", "r.html")
    lines = Path("t\udcff.jsonl").read_bytes().splitlines()
    assert [json.loads(line)["type"] for line in lines][-1] == "run_finished"
    ok("report", "t\udcff.jsonl", "-o", "r\udcff.html")
    Path("r\udcff.html").read_text(encoding="utf-8")  # UTF-8 throughout


def test_a_line_naming_a_written_file_cannot_be_split_or_drive_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report` ('wrote FILE') and `run --report` ('report written to FILE') printed the
    name raw: a line break split the line, an escape sequence coloured the terminal; then
    quoted it by a rule of its own, not as a diagnostic's location names a file."""
    import io

    from converge_dsl.cli import run

    monkeypatch.chdir(tmp_path)
    trace = "t\x1b[31m\n.jsonl"
    Path(trace).write_text(Path(_trace(tmp_path)).read_text())
    out = io.StringIO()
    assert run(["report", trace], out, io.StringIO(), {}) == 0
    assert out.getvalue().startswith("wrote t\\x1b[31m\\n.html (")
    err = io.StringIO()
    assert run(["run", PIPELINE, "-q", "--report", "r\x1b[0m.html"], io.StringIO(), err, {}) == 0
    assert err.getvalue() == "report written to r\\x1b[0m.html\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("output", [*STREAMED, "graph -o"])
def test_a_device_that_refuses_the_output_is_named(tmp_path: Path, output: str) -> None:
    """`-o /dev/full` (a device whose every write fails: a full disk) said only 'cannot
    use: No space left on device', without the output's name."""
    argv, _ = STREAMED.get(output, (["graph", PIPELINE, "--output"], ""))
    argv = [_trace(tmp_path) if word == "TRACE" else word for word in argv]
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", *argv, "/dev/full"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    first = done.stderr.splitlines()[0]
    assert first.startswith(f"error[CD361]: cannot write {argv[-1]} '/dev/full': "), first


_AS_USER = (
    "setpriv",
    "--bounding-set=-dac_override,-dac_read_search,-fowner,-chown",
    "--inh-caps=-dac_override,-dac_read_search,-fowner,-chown",
)


def _as_user(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`argv` run as a user without the powers to bypass file permissions (root less its
    capabilities, under setpriv, or the user the tests run as)."""
    import os
    import shutil

    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: permissions cannot be checked")
    prefix = list(_AS_USER) if os.geteuid() == 0 else []
    command = [*prefix, sys.executable, "-m", "converge_dsl", *argv]
    return subprocess.run(command, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("folder", ["read-only", "sticky"])
def test_a_writable_output_in_a_folder_that_refuses_new_files_is_written_in_place(
    tmp_path: Path, folder: str
) -> None:
    """A writable output in a read-only folder (or another's file in a sticky shared
    folder) failed at the end, 'cannot write graph ...: Permission denied' (exit 1), with
    the hint 'free space': its temporary file could not be made or renamed there."""
    import os

    shared = tmp_path / "shared"
    shared.mkdir()
    output = shared / "g.json"
    output.write_text("")
    output.chmod(0o666)
    if folder == "read-only":
        shared.chmod(0o555)
    else:
        if os.geteuid() != 0:
            pytest.skip("another user's file needs root to make")
        os.chown(output, 1000, 1000)
        os.chown(shared, 1001, 1001)
        shared.chmod(0o1777)
    try:
        done = _as_user(["graph", PIPELINE, "--format", "json", "-o", str(output)])
    finally:
        shared.chmod(0o755)
    assert (done.returncode, done.stderr) == (0, "")
    assert isinstance(json.loads(output.read_text()), dict)
    assert sorted(p.name for p in shared.iterdir()) == ["g.json"]


def test_an_output_with_a_long_name_is_replaced(tmp_path: Path) -> None:
    """A 250-byte name failed at the end ('File name too long'): the temporary file's name
    added 26 characters to it."""
    output = tmp_path / ("g" * 245 + ".json")
    output.write_text("")
    argv = ["graph", PIPELINE, "--format", "json", "-o", str(output)]
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert isinstance(json.loads(output.read_text()), dict)
    assert [p.name for p in tmp_path.iterdir()] == [output.name]


def test_run_writes_its_trace_to_standard_error_on_the_terminal_standard_output_shares() -> None:
    """In a terminal, `run --format json --trace /dev/stderr` was refused (CD336, 'is
    standard output'): standard output and standard error are one terminal, and the trace
    was matched to standard output first."""
    import shlex
    import shutil

    if shutil.which("script") is None:
        pytest.skip("no script(1) to give the command a terminal")
    argv = [sys.executable, "-m", "converge_dsl", "run", PIPELINE, *FORMAT_JSON]
    command = shlex.join([*argv, "--trace", "/dev/stderr"])
    done = subprocess.run(
        ["script", "-qec", command, "/dev/null"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout
    assert "CD336" not in done.stdout
    assert '"stop_reason": "converged"' in done.stdout


def test_run_writes_its_trace_to_dev_null_when_standard_output_is_dev_null(
    tmp_path: Path,
) -> None:
    """`run --format json --trace /dev/null > /dev/null` was refused (CD336): the device
    both name was taken for standard output."""
    report = tmp_path / "r.html"
    argv = [*FORMAT_JSON, "--trace", "/dev/null", "--report", str(report)]
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", "run", PIPELINE, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "CD336" not in done.stderr
    assert report.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("can_chown", [True, False])
def test_a_replaced_output_keeps_its_owner_and_group(tmp_path: Path, can_chown: bool) -> None:
    """A 1000:1000 output replaced by root became root:root (only its mode was kept); one
    whose owner cannot be given back is written in place."""
    import os

    if os.geteuid() != 0:
        pytest.skip("another user's file needs root to make")
    output = tmp_path / "g.json"
    output.write_text("")
    os.chown(output, 1000, 1000)
    output.chmod(0o666 if not can_chown else 0o640)
    argv = ["graph", PIPELINE, "--format", "json", "-o", str(output)]
    if can_chown:
        done = subprocess.run(
            [sys.executable, "-m", "converge_dsl", *argv],
            capture_output=True,
            text=True,
            check=False,
        )
    else:
        done = _as_user(argv)
    assert (done.returncode, done.stderr) == (0, "")
    info = output.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (
        1000,
        1000,
        0o640 if can_chown else 0o666,
    )
    assert isinstance(json.loads(output.read_text()), dict)
    assert [p.name for p in tmp_path.iterdir()] == ["g.json"]


@pytest.mark.parametrize("option", ["--trace", "--report"])
def test_human_run_refuses_an_output_on_standard_output(option: str) -> None:
    """`run --trace /dev/stdout` (or --report) without --format json was accepted, and
    standard output mixed the human result with the trace's JSON or the report's HTML."""
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", "run", PIPELINE, option, "/dev/stdout"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3
    assert done.stderr.startswith(f"error[CD336]: {option} '/dev/stdout' is standard output")
    assert done.stdout == ""
