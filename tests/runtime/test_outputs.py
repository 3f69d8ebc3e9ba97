"""Every output (`--trace`, `--record`, `--checkpoint`, `models.X.record`) goes through one
opener: never through a link, never over a device, a hard link or a file we did not write."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest

from converge_dsl._files import open_output
from converge_dsl.cli import run
from converge_dsl.errors import UsageError

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"
FOREIGN = "export SECRET=1\n"


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def market(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    for name in ("market-entry.yaml", "market-entry.script.yaml"):
        shutil.copy(PIPELINES / name, folder / name)
    return folder / "market-entry.yaml"


@pytest.fixture
def foreign(tmp_path: Path) -> Path:
    """A file of the user's, outside the working folder."""
    path = tmp_path / "home" / ".profile"
    path.parent.mkdir()
    path.write_text(FOREIGN, encoding="utf-8")
    return path


@pytest.mark.parametrize("option", ["--trace", "--record"])
def test_an_output_through_a_link_is_refused(market: Path, foreign: Path, option: str) -> None:
    link = market.parent / "out.jsonl"
    link.symlink_to(foreign)
    code, out, err = cli("run", market, option, link)
    assert code == 3
    assert "it is a symbolic link; outputs are never written through links" in err
    assert foreign.read_text() == FOREIGN
    assert "cycle 1" not in err
    assert out == ""


@pytest.mark.parametrize("option", ["--trace", "--record"])
def test_an_output_onto_a_foreign_file_by_absolute_path_is_refused(
    market: Path, foreign: Path, option: str
) -> None:
    code, _, err = cli("run", market, option, foreign)
    assert code == 3
    assert "it exists and is not a" in err
    assert "written by converge-dsl" in err
    assert foreign.read_text() == FOREIGN


@pytest.mark.parametrize("option", ["--trace", "--record"])
def test_an_output_onto_a_hard_link_is_refused(market: Path, foreign: Path, option: str) -> None:
    foreign.write_text("")  # empty: only the second link makes it unusable
    os.link(foreign, market.parent / "out.jsonl")
    code, _, err = cli("run", market, option, market.parent / "out.jsonl")
    assert code == 3
    assert "it has 2 hard links" in err


def test_a_new_trace_anywhere_and_our_own_trace_again_are_written(
    market: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "elsewhere" / "t.jsonl"
    trace.parent.mkdir()
    assert cli("run", market, "--trace", trace)[0] == 0
    first = trace.read_text()
    assert first.startswith('{"seq":0,"type":')
    assert cli("run", market, "--trace", trace)[0] == 0  # a trace we wrote: replaced
    assert trace.read_text().count("\n") == first.count("\n")


def test_record_writes_an_empty_file_and_refuses_a_recording_unless_overwrite(
    market: Path,
) -> None:
    cassette = market.parent / "c.jsonl"
    cassette.write_text("")
    assert cli("run", market, "--record", cassette)[0] == 0
    first = cassette.read_text()
    assert first
    code, _, err = cli("run", market, "--record", cassette)
    assert code == 3, err  # refused before any work, like every unusable output
    assert "already holds a recording" in err
    assert "--overwrite" in err
    assert cassette.read_text() == first  # untouched
    assert cli("run", market, "--record", cassette, "--overwrite")[0] == 0
    assert cassette.read_text().count("\n") == first.count("\n")  # afresh, not appended
    code, _, err = cli("run", market, "--overwrite")
    assert code != 0
    assert "--overwrite only applies to --record" in err


def test_a_model_record_file_that_is_foreign_is_not_truncated(market: Path) -> None:
    text = market.read_text().replace(
        "script: market-entry.script.yaml}", "script: market-entry.script.yaml, record: notes.txt}"
    )
    market.write_text(text)
    (market.parent / "notes.txt").write_text(FOREIGN)
    code, _, err = cli("run", market)
    assert code == 3, err
    assert "cannot write cassette" in err
    assert (market.parent / "notes.txt").read_text() == FOREIGN


def test_a_checkpoint_folder_that_is_a_link_or_foreign_is_refused(
    market: Path, tmp_path: Path, foreign: Path
) -> None:
    link = market.parent / "ck"
    link.symlink_to(foreign.parent, target_is_directory=True)
    code, _, err = cli("run", market, "--checkpoint", link)
    assert code == 3
    assert "is a symbolic link" in err
    code, _, err = cli("run", market, "--checkpoint", foreign.parent)
    assert code == 3
    assert "is not a checkpoint folder" in err
    assert sorted(p.name for p in foreign.parent.iterdir()) == [".profile"]
    ours = tmp_path / "ours"
    assert cli("run", market, "--checkpoint", ours)[0] == 0
    assert cli("run", market, "--checkpoint", ours)[0] == 0  # our folder: used again


def test_open_output_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="it is a FIFO, not a regular file"):
        open_output(fifo, "--trace", "trace file", recognise=lambda _: True, append=False)


def test_open_output_truncates_only_what_it_recognises(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_text("mine\nrest\n")
    with open_output(path, "-o", "file", recognise=lambda b: b == b"mine", append=False) as f:
        f.write("new\n")
    assert path.read_text() == "new\n"
    with pytest.raises(UsageError, match="not a file written by converge-dsl"):
        open_output(path, "-o", "file", recognise=lambda b: b == b"mine", append=True)
    assert path.read_text() == "new\n"
