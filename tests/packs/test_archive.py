from __future__ import annotations

import gzip
import io
import os
import re
import tarfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converge_dsl import codes
from converge_dsl.errors import PackError
from converge_dsl.packs import _archive, build_archive, sha256_hex, unpack
from converge_dsl.packs._archive import MAX_MEMBER_BYTES, check_members, expanded_cap
from converge_dsl.packs._files import PackRefused

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
        files = {"pack.yaml": b"kind: Pack\n"} | {f"{n}.txt": d for n, d in files.items()}
        for name, data in files.items():
            (source / name).write_bytes(data)
        target = root / "out"
        unpack(build_archive(source), target)
        assert {p.name: p.read_bytes() for p in target.iterdir()} == files


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
        (_file("pack.yaml/inside.md"), "is inside 'pack.yaml', which is a file"),
        (_file("a/" * 2000 + "f"), "2001 folders deep, over 32"),
        (_file("a/" * 31 + "f" * 1000), "a name over 1024 bytes"),
        (_file("f" * 256), "a name part over 255 bytes"),
        # A file named '' or '.' (the folder itself) was CD361 "cannot use '...': File exists".
        (_file(""), "member '' has no name, yet is no folder"),
        (_file("."), "member '.' has no name, yet is no folder"),
    ],
)
def test_unsafe_members_are_refused_and_nothing_is_unpacked(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes | None], reason: str
) -> None:
    archive = _tar_gz([_file("pack.yaml", b"kind: Pack\n"), member])
    target = tmp_path / "out"
    with pytest.raises(PackRefused, match=reason) as refused:
        unpack(archive, target, "archive of demo 1.0.0 from path:repo")
    assert refused.value.code in (codes.PACK_ARCHIVE_REFUSED, codes.PACK_ARCHIVE_TOO_LARGE)
    assert refused.value.message.startswith("archive of demo 1.0.0 from path:repo: ")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("names", "reason"),
    [
        (["a/b.md", "a"], "member 'a' is a file, but other members are inside it"),
        (["a/b/c.md", "a/b"], "member 'a/b' is a file, but other members are inside it"),
        (["./a", "a/b.md"], "member 'a/b.md' is inside 'a', which is a file"),
    ],
)
def test_a_path_both_file_and_folder_is_refused_by_name(
    tmp_path: Path, names: list[str], reason: str
) -> None:
    archive = _tar_gz([_file(name) for name in names])
    with pytest.raises(PackError, match=re.escape(reason)):
        unpack(archive, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_an_archive_without_pack_yaml_at_its_top_is_refused_naming_the_archive(
    tmp_path: Path,
) -> None:
    archive = _tar_gz([_file("inner/pack.yaml", b"kind: Pack\n"), _file("notes.md")])
    with pytest.raises(PackRefused, match=r"holds no pack\.yaml at its top") as refused:
        unpack(archive, tmp_path / "out", "archive of demo 1.0.0 from path:repo")
    assert refused.value.code == codes.PACK_ARCHIVE_REFUSED
    assert refused.value.message.startswith("archive of demo 1.0.0 from path:repo: ")
    assert list(tmp_path.iterdir()) == []


def test_garbage_is_not_an_archive() -> None:
    with pytest.raises(PackRefused, match=r"pack archive: it is not gzip-compressed") as refused:
        check_members(b"definitely not gzip")
    assert refused.value.code == codes.PACK_ARCHIVE_REFUSED


# --- sizes are counted from the decompressed stream, never taken from headers ---------

_BOMB_SCRIPT = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GiB: the bomb expands to 3 GiB
from converge_dsl.errors import PackError
from converge_dsl.packs._archive import unpack
from pathlib import Path
archive = Path(sys.argv[1]).read_bytes()
started = time.process_time()  # CPU time: what reading the zeros would cost, on any load
try:
    unpack(archive, Path(sys.argv[2]))
except PackError as exc:
    print(getattr(exc, "code", ""), round(time.process_time() - started, 3), exc.message)
"""


def _gzip_members(parts: list[bytes]) -> bytes:
    return b"".join(gzip.compress(part, compresslevel=9, mtime=0) for part in parts)


def pax_bomb(zero_mib: int) -> bytes:
    """A .tar.gz whose first (pax) header declares `zero_mib` MiB of zeros, then pack.yaml.

    Built from repeated gzip members (valid gzip), so even 3 GiB costs about 3 MB and
    a few milliseconds to make.
    """
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type = tarfile.XHDTYPE
    pax.size = zero_mib << 20
    one_mib = gzip.compress(bytes(1 << 20), compresslevel=9, mtime=0)
    info = tarfile.TarInfo("pack.yaml")
    info.size = 3
    tail = info.tobuf(format=tarfile.USTAR_FORMAT) + b"abc" + bytes(509) + bytes(1024)
    head = pax.tobuf(format=tarfile.USTAR_FORMAT)
    return _gzip_members([head]) + one_mib * zero_mib + _gzip_members([tail])


def test_a_3_gib_pax_header_of_zeros_is_refused_quickly_within_1_gib(tmp_path: Path) -> None:
    import subprocess
    import sys

    bomb = tmp_path / "bomb.tar.gz"
    bomb.write_bytes(pax_bomb(3 * 1024))
    assert len(bomb.read_bytes()) < 4 * 1024 * 1024
    target = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", _BOMB_SCRIPT, str(bomb), str(target)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    code, seconds, message = done.stdout.split(" ", 2)
    assert code == "CD560"
    assert float(seconds) < 3
    assert message.startswith(f"pack archive: it expands past {expanded_cap()} bytes")
    assert not target.exists()


def test_the_expanded_cap_counts_real_bytes_not_declared_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_archive, "MAX_TOTAL_BYTES", 4096)
    monkeypatch.setattr(_archive, "MAX_MEMBERS", 4)
    cap = expanded_cap()
    assert cap == 4096 + 4 * _archive.HEADER_ALLOWANCE + 2 * tarfile.RECORDSIZE
    with pytest.raises(PackRefused, match=f"expands past {cap} bytes") as caught:
        check_members(pax_bomb(1), where="demo 1.0.0 from path:repo")
    assert caught.value.code == codes.PACK_ARCHIVE_TOO_LARGE
    assert caught.value.message.startswith("demo 1.0.0 from path:repo: ")
    assert "nothing was unpacked or cached" in caught.value.message


def test_member_total_and_count_caps_use_the_real_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_archive, "MAX_MEMBER_BYTES", 100)
    monkeypatch.setattr(_archive, "MAX_TOTAL_BYTES", 250)
    monkeypatch.setattr(_archive, "MAX_MEMBERS", 3)
    fits = [_file(f"f{i}", b"x" * 80) for i in range(3)]
    assert check_members(_tar_gz(fits)) == ["f0", "f1", "f2"]
    with pytest.raises(PackRefused, match="over the 100-byte member cap"):
        check_members(_tar_gz([_file("big", b"x" * 101)]))
    with pytest.raises(PackRefused, match="its files hold over 250 bytes"):
        check_members(_tar_gz([_file(f"f{i}", b"x" * 90) for i in range(3)]))
    with pytest.raises(PackRefused, match="over 3 members"):
        check_members(_tar_gz([_file(f"f{i}") for i in range(4)]))


def test_a_member_shorter_than_its_header_is_corrupt() -> None:
    info, data = _file("pack.yaml", b"x" * 600)
    raw = io.BytesIO()
    raw.write(info.tobuf(format=tarfile.USTAR_FORMAT) + data[:512])  # cut mid-member
    with pytest.raises(PackRefused, match=r"shorter than its header|not a valid tar") as refused:
        check_members(gzip.compress(raw.getvalue()))
    assert refused.value.code == codes.PACK_ARCHIVE_REFUSED


def test_concatenated_gzip_members_and_nul_padding_are_read_like_gzip(tmp_path: Path) -> None:
    folder = make_pack(tmp_path, "alpha", "1.0.0")
    plain = gzip.decompress(build_archive(folder))
    split = _gzip_members([plain[:700], plain[700:]]) + bytes(64)
    assert check_members(split) == check_members(build_archive(folder))


def test_truncated_gzip_is_corrupt(tmp_path: Path) -> None:
    archive = build_archive(make_pack(tmp_path, "alpha", "1.0.0"))
    with pytest.raises(PackRefused, match="the compressed data ends early") as refused:
        check_members(archive[: len(archive) // 2], "archive of alpha 1.0.0 from path:repo")
    assert refused.value.code == codes.PACK_ARCHIVE_REFUSED
    assert "archive of alpha 1.0.0 from path:repo" in refused.value.message


def test_build_archive_refuses_a_name_unpack_would_refuse(tmp_path: Path) -> None:
    folder = make_pack(tmp_path, "alpha", "1.0.0")
    deep = folder.joinpath(*["d"] * 33)
    deep.mkdir(parents=True)
    (deep / "f.md").write_text("x")
    with pytest.raises(PackError, match="folders deep, over 32: no pack could be installed"):
        build_archive(folder)


def test_build_archive_refuses_fifos(tmp_path: Path) -> None:
    folder = make_pack(tmp_path, "alpha", "1.0.0")
    os.mkfifo(folder / "pipe")
    with pytest.raises(PackError, match="pipe: packs hold regular files and folders only"):
        build_archive(folder)
