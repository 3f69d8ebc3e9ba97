"""Reproducible pack archives and their safe unpacking.

`build_archive(folder)` makes a gzip-compressed tar of a pack folder in a
normal form: entries sorted by path, regular files and folders only, mtime 0,
owner 0/0 with empty names, modes 0644/0755, no gzip filename or timestamp.
The same pack content therefore always gives the same bytes and the same
sha256 digest.

`unpack(archive, destination)` checks *every* member before writing anything:
it refuses absolute paths, `..` components, links, devices, duplicate names,
members over `MAX_MEMBER_BYTES`, archives over `MAX_TOTAL_BYTES` or
`MAX_MEMBERS`. Callers verify the digest before they call it.

`matches(archive, folder)` proves that an unpacked folder still holds exactly
the archive's files and folders, byte for byte (no file added, removed,
changed or replaced by a link): the cache's check that its unpacked packs
were not altered after they were verified.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from pathlib import Path, PurePosixPath

from converge_dsl.errors import PackError

MAX_MEMBER_BYTES = 8 * 1024 * 1024
MAX_TOTAL_BYTES = 64 * 1024 * 1024
MAX_MEMBERS = 5_000
_SKIPPED = {"__pycache__", ".git", ".DS_Store"}


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _pack_files(folder: Path) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if any(part in _SKIPPED for part in relative.parts):
            continue
        if path.is_symlink():
            raise PackError(f"{relative.as_posix()}: packs may not contain links")
        found.append((relative.as_posix(), path))
    return sorted(found)


def build_archive(folder: Path) -> bytes:
    """The normalised `.tar.gz` bytes of the pack in `folder`."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in _pack_files(folder):
            info = tarfile.TarInfo(name)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if path.is_dir():
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                data = path.read_bytes()
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def _check_member(member: tarfile.TarInfo, seen: set[str]) -> str:
    """The member's safe relative name; raises `PackError` naming what is wrong."""
    name = member.name
    pure = PurePosixPath(name)
    if name.startswith(("/", "\\")) or pure.is_absolute() or (len(name) > 1 and name[1] == ":"):
        raise PackError(f"archive member {name!r} has an absolute path")
    if ".." in pure.parts or "\\" in name:
        raise PackError(f"archive member {name!r} escapes the pack folder ('..')")
    if member.issym() or member.islnk():
        raise PackError(f"archive member {name!r} is a link; links are refused")
    if not (member.isfile() or member.isdir()):
        raise PackError(f"archive member {name!r} is not a regular file or folder")
    if member.size > MAX_MEMBER_BYTES:
        raise PackError(
            f"archive member {name!r} is {member.size} bytes, over the {MAX_MEMBER_BYTES} limit"
        )
    normal = pure.as_posix()
    if normal in seen:
        raise PackError(f"archive member {name!r} appears twice")
    seen.add(normal)
    return normal


def _open(archive: bytes) -> tarfile.TarFile:
    try:
        return tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise PackError(f"not a pack archive: {exc}") from None


def check_members(archive: bytes) -> list[tuple[str, tarfile.TarInfo]]:
    """Every member, checked; raises `PackError` at the first unsafe one."""
    seen: set[str] = set()
    total = 0
    members: list[tuple[str, tarfile.TarInfo]] = []
    try:
        with _open(archive) as tar:
            for member in tar:
                members.append((_check_member(member, seen), member))
                total += member.size
                if total > MAX_TOTAL_BYTES or len(members) > MAX_MEMBERS:
                    raise PackError(
                        f"archive is too large (over {MAX_TOTAL_BYTES} bytes "
                        f"or {MAX_MEMBERS} members)"
                    )
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise PackError(f"corrupt pack archive: {exc}") from None
    return members


def unpack(archive: bytes, destination: Path) -> None:
    """Unpack into `destination` (must not exist) atomically; nothing is written on refusal.

    When another process unpacked the same archive into `destination` first,
    its folder is kept.
    """
    members = check_members(archive)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}."))
    try:
        with _open(archive) as tar:
            by_name = {m.name: m for m in tar.getmembers()}
            for name, member in members:
                target = staging.joinpath(*PurePosixPath(name).parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(by_name[member.name])
                if source is None:  # pragma: no cover - regular files always have data
                    raise PackError(f"archive member {name!r} has no data")
                target.write_bytes(source.read(MAX_MEMBER_BYTES + 1)[:MAX_MEMBER_BYTES])
        os.chmod(staging, 0o755)  # mkdtemp makes it 0700
        try:
            staging.rename(destination)
        except OSError:
            if not destination.is_dir():
                raise
            shutil.rmtree(staging, ignore_errors=True)  # a concurrent unpack won the race
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def matches(archive: bytes, folder: Path) -> bool:
    """True when `folder` holds exactly the members of `archive`, byte for byte."""
    members = check_members(archive)
    folders = {PurePosixPath(name).parent.as_posix() for name, _ in members} - {"."}
    folders |= {name for name, member in members if member.isdir()}
    files = {name: member for name, member in members if member.isfile()}
    seen: set[str] = set()
    for where, subfolders, names in os.walk(folder):
        relative = Path(where).relative_to(folder)
        for entry in (*subfolders, *names):
            path = Path(where, entry)
            name = (relative / entry).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode):
                if name not in folders:
                    return False
            elif (
                not stat.S_ISREG(mode)
                or name not in files
                or path.stat().st_size != files[name].size
            ):
                return False
            else:
                seen.add(name)
    if seen != set(files):
        return False
    with _open(archive) as tar:
        by_name = {m.name: m for m in tar.getmembers()}
        for name, member in files.items():  # in archive order: no backward seeks
            source = tar.extractfile(by_name[member.name])
            if source is None or source.read() != (folder / name).read_bytes():
                return False
    return True
