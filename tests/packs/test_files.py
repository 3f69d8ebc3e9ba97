"""Folder repositories read regular files only, within a byte cap and a deadline."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.cli import run
from converge_dsl.packs import FolderRepository, publish
from converge_dsl.packs._files import PackRefused, read_regular
from converge_dsl.packs._index import index_path

from .conftest import make_pack, write_pipeline


def _read(path: Path, cap: int = 1000, deadline_s: float = 5.0) -> bytes | None:
    return read_regular(path, cap=cap, deadline_s=deadline_s, where="index/x.json in repo")


def test_a_regular_file_is_read_and_a_missing_one_is_none(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    assert _read(tmp_path / "f") == b"abc"
    assert _read(tmp_path / "absent") is None


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: os.symlink("/dev/zero", p), "a link"),
        (lambda p: os.symlink(p.parent / "real", p), "a link"),
        (os.mkfifo, "a FIFO"),
        (lambda p: p.mkdir(), "a folder"),
    ],
)
def test_links_fifos_and_folders_are_refused_without_reading(
    tmp_path: Path, make: object, kind: str
) -> None:
    (tmp_path / "real").write_bytes(b"{}")
    target = tmp_path / "f"
    make(target)  # type: ignore[operator]
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            _read(target)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)  # a FIFO open could block
    worker.start()
    worker.join(timeout=5)
    assert not worker.is_alive(), "the read blocked"
    assert isinstance(outcome[0], PackRefused)
    assert outcome[0].code == codes.REPOSITORY_NOT_REGULAR
    assert outcome[0].message == (
        f"index/x.json in repo is {kind}; a folder repository holds regular files only"
    )


def test_a_device_is_refused() -> None:
    with pytest.raises(PackRefused, match="is a device") as caught:
        _read(Path("/dev/zero"))
    assert caught.value.code == codes.REPOSITORY_NOT_REGULAR


def test_a_file_over_the_cap_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 1001)
    with pytest.raises(PackRefused, match=r"index/x\.json in repo is over 1000 bytes") as caught:
        _read(tmp_path / "f")
    assert caught.value.code == codes.REPOSITORY_TOO_LARGE


def test_a_read_past_its_deadline_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 200_000)  # several chunks
    ticks = iter(range(0, 1000, 10))
    with pytest.raises(PackRefused, match="not read within 15 s") as caught:
        read_regular(
            tmp_path / "f",
            cap=1 << 20,
            deadline_s=15,
            where="f",
            monotonic=lambda: float(next(ticks)),
        )
    assert caught.value.code == codes.REPOSITORY_TOO_SLOW


def test_an_index_linked_to_dev_zero_fails_lock_cleanly(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    publish(make_pack(tmp_path, "alpha", "1.0.0"), repo)
    index = repo / index_path("alpha")
    index.unlink()
    os.symlink("/dev/zero", index)
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    out, err = io.StringIO(), io.StringIO()
    code = run(["lock", str(pipeline), "--cache", str(tmp_path / "cache")], out, err)
    assert code == 1
    assert err.getvalue().startswith(
        "error[CD561]: index/alpha.json in repository path:repo is a link; "
        "a folder repository holds regular files only\n  hint: "
    )
    assert not (tmp_path / "converge.lock").exists()


def test_folder_repository_caps_are_configurable(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    publish(make_pack(tmp_path, "alpha", "1.0.0"), repo)
    small = FolderRepository(repo, max_index_bytes=10)
    with pytest.raises(PackRefused, match="over 10 bytes"):
        small.fetch_index("alpha")
    assert FolderRepository(repo, max_archive_bytes=10).fetch_index("alpha") is not None
    with pytest.raises(PackRefused, match="over 10 bytes"):
        FolderRepository(repo, max_archive_bytes=10).fetch_archive("alpha", "1.0.0")
