"""No write lands outside what the user named (`converge_dsl._files`, docs/architecture.md §12).

Temporary files, lock files and the outputs a command replaces are made new
with `O_EXCL | O_NOFOLLOW`, their mode set on the descriptor: a symbolic or
hard link planted at a fixed temporary name (Git can ship one) is never
written through, and the file it points at keeps its content and its mode.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from converge_dsl._files import create_new, jsonl_lines, open_lock, replace_file
from converge_dsl.cli import run
from converge_dsl.engine import PendingProposal, ProposedFact
from converge_dsl.errors import UsageError
from converge_dsl.runtime import CheckpointStore, pipeline_digest
from converge_dsl.runtime._checkpoint_folder import folder_lock

OUTSIDE_TEXT = "the user's own file\n"


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A private file outside every folder a command writes in."""
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text(OUTSIDE_TEXT)
    path.chmod(0o600)
    return path


def _untouched(path: Path) -> None:
    assert path.read_text() == OUTSIDE_TEXT
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.stat().st_nlink in (1, 2)


def _plant(at: Path, target: Path, how: str) -> None:
    if how == "symlink":
        at.symlink_to(target)
    else:
        os.link(target, at)


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_update_never_writes_through_a_planted_update_file(
    tmp_path: Path, outside: Path, how: str
) -> None:
    project = tmp_path / "p"
    assert cli("init", project, "--name", "app")[0] == 0
    test_file = project / "app.test.yaml"
    text = test_file.read_text()
    test_file.write_text(text.replace("stop_reason: converged", "stop_reason: cancelled"))
    _plant(project / ".app.test.yaml.update", outside, how)
    code, _, err = cli("test", "--update", test_file)
    assert code == 0, err
    _untouched(outside)
    assert not test_file.is_symlink()
    assert test_file.stat().st_nlink == 1
    assert "stop_reason: converged" in test_file.read_text()


@pytest.mark.parametrize("name", [".checkpoint.jsonl", ".decisions.json"])
@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_checkpoint_temporary_files_are_never_written_through(
    tmp_path: Path, outside: Path, name: str, how: str
) -> None:
    folder = tmp_path / "ck"
    folder.mkdir()
    _plant(folder / f"{name}.{os.getpid()}.tmp", outside, how)
    store = CheckpointStore(folder, bytes(32))
    text = "apiVersion: converge-dsl/v1\n"
    store.start(pipeline_text=text, digest=pipeline_digest(text, {}), inputs={})
    pending = [PendingProposal(ProposedFact("strategies", "a", "go"), "s", 1, "gated")]
    store.save_decisions("run-1", {"a": (True, "cli")}, pending)
    store.close()
    _untouched(outside)
    assert store.load_decisions("run-1", pending) == {"a": (True, "cli")}
    assert not (folder / "checkpoint.jsonl").is_symlink()


def test_a_planted_lock_link_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    folder = tmp_path / "ck"
    folder.mkdir()
    elsewhere = tmp_path / "created-elsewhere"
    (folder / ".lock").symlink_to(elsewhere)
    with pytest.raises(UsageError, match="symbolic link"), folder_lock(folder, "--checkpoint"):
        pass
    assert not elsewhere.exists()


def test_a_lock_file_with_two_names_or_of_another_kind_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.write_text("")
    os.link(other, tmp_path / "lock")
    with pytest.raises(OSError, match="2 hard links"):
        open_lock(tmp_path / "lock")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="FIFO"):
        open_lock(tmp_path / "fifo")
    os.close(open_lock(tmp_path / "new"))
    assert (tmp_path / "new").is_file()


def test_replace_sets_the_mode_on_the_descriptor_never_through_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge_dsl.packs._files import write_atomic

    def no_chmod(*args: object, **kwargs: object) -> None:
        raise AssertionError("chmod by path follows links")

    monkeypatch.setattr(os, "chmod", no_chmod)
    target = tmp_path / "index.json"
    write_atomic(target, b"{}\n", mode=0o640)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert target.read_bytes() == b"{}\n"
    replace_file(target, b"[]\n", mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.json"]


def test_replace_replaces_a_link_at_the_target_instead_of_following_it(
    tmp_path: Path, outside: Path
) -> None:
    target = tmp_path / "out.json"
    target.symlink_to(outside)
    replace_file(target, b"new\n")
    _untouched(outside)
    assert not target.is_symlink()
    assert target.read_bytes() == b"new\n"


def test_a_failed_replacement_leaves_the_target_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "t"
    target.write_text("old")

    class Boom(Exception):
        pass

    def fail(fd: int) -> None:
        raise Boom

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", fail)
        with pytest.raises(Boom):
            replace_file(target, b"new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t"]


def test_create_new_refuses_a_dangling_link(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError):
        create_new(tmp_path / "a")
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\r"])
def test_jsonl_lines_split_on_newline_only(separator: str) -> None:
    text = f'{{"a": "x{separator}y"}}\r\n{{"b": 1}}\n'
    assert jsonl_lines(text) == [f'{{"a": "x{separator}y"}}', '{"b": 1}']
    assert jsonl_lines("") == []
    assert jsonl_lines("a\n\nb") == ["a", "", "b"]


def test_a_resumed_journal_with_a_second_hard_link_is_never_appended_to(tmp_path: Path) -> None:
    from converge_dsl.errors import RunError
    from converge_dsl.runtime import CHECKPOINT_FILE

    folder = tmp_path / "ck"
    store = CheckpointStore(folder, bytes(32))
    text = "apiVersion: converge-dsl/v1\n"
    store.start(pipeline_text=text, digest=pipeline_digest(text, {}), inputs={})
    store.close()
    elsewhere = tmp_path / "elsewhere.jsonl"
    os.link(folder / CHECKPOINT_FILE, elsewhere)
    before = elsewhere.read_bytes()
    checkpoint = CheckpointStore(folder, bytes(32)).read()
    with pytest.raises(RunError, match="single link"):
        CheckpointStore(folder, bytes(32)).resume(checkpoint)
    assert elsewhere.read_bytes() == before


def test_an_output_the_rename_cannot_replace_is_written_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file bind-mounted into a container (`-v $PWD/g.json:/out/g.json`) is a mount point:
    renaming over it fails with EBUSY, and every whole output to it failed (CD361, 'check
    the disk'); it is written in place, as in a folder that refuses new files."""
    import errno

    from converge_dsl._files import open_output, replace_output

    target = tmp_path / "g.json"
    target.write_text("")

    def busy(source: object, destination: object) -> None:
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(os, "replace", busy)
    stream = open_output(target, "-o", "graph", recognise=lambda line: False, append=True)
    try:
        replace_output(stream, target, "{}\n", "graph 'g.json'")
    finally:
        stream.close()
    assert target.read_text() == "{}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["g.json"]
