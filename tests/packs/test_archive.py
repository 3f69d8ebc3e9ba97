from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converge_dsl.errors import PackError
from converge_dsl.packs import build_archive, sha256_hex, unpack
from converge_dsl.packs._archive import MAX_MEMBER_BYTES, check_members

from .conftest import make_pack


def _tar_gz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def test_same_pack_gives_the_same_digest_whatever_the_mtimes(tmp_path: Path) -> None:
    folder = make_pack(tmp_path, "alpha", "1.0.0")
    first = sha256_hex(build_archive(folder))
    for path in folder.rglob("*"):
        os.utime(path, (time.time() + 1000, time.time() + 1000))
    copy = make_pack(tmp_path / "other", "alpha", "1.0.0")
    assert sha256_hex(build_archive(folder)) == first
    assert sha256_hex(build_archive(copy)) == first


def test_archive_entries_are_sorted_and_owned_by_nobody(tmp_path: Path) -> None:
    folder = make_pack(tmp_path, "alpha", "1.0.0")
    with tarfile.open(fileobj=io.BytesIO(build_archive(folder)), mode="r:gz") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert {(m.uid, m.gid, m.mtime, m.uname) for m in members} == {(0, 0, 0, "")}


@settings(max_examples=25, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.binary(max_size=64), max_size=6
    )
)
def test_round_trip_restores_every_file(files: dict[str, bytes]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as raw:
        root = Path(raw)
        source = root / "src"
        source.mkdir()
        for name, data in files.items():
            (source / f"{name}.txt").write_bytes(data)
        target = root / "out"
        unpack(build_archive(source), target)
        assert {p.name: p.read_bytes() for p in target.iterdir()} == {
            f"{n}.txt": d for n, d in files.items()
        }


def _symlink() -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo("evil")
    info.type = tarfile.SYMTYPE
    info.linkname = "/etc/passwd"
    return info, None


def _hardlink() -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo("evil")
    info.type = tarfile.LNKTYPE
    info.linkname = "pack.yaml"
    return info, None


def _oversize() -> tuple[tarfile.TarInfo, bytes]:
    return _file("big.bin", b"\0" * (MAX_MEMBER_BYTES + 1))


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (_file("../escape.txt"), "escapes the pack folder"),
        (_file("prompts/../../escape.txt"), "escapes the pack folder"),
        (_file("/etc/cron.d/evil"), "absolute path"),
        (_symlink(), "is a link"),
        (_hardlink(), "is a link"),
        (_oversize(), "over the"),
    ],
)
def test_unsafe_members_are_refused_and_nothing_is_unpacked(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes | None], reason: str
) -> None:
    archive = _tar_gz([_file("pack.yaml", b"kind: Pack\n"), member])
    target = tmp_path / "out"
    with pytest.raises(PackError, match=reason):
        unpack(archive, target)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_garbage_is_not_an_archive() -> None:
    with pytest.raises(PackError, match=r"not a pack archive|corrupt"):
        check_members(b"definitely not gzip")
