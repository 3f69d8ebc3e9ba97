"""Reproducible pack archives and their safe unpacking.

`build_archive(folder)` makes a gzip-compressed tar of a pack folder in a
normal form: entries sorted by path, regular files and folders only, mtime 0,
owner 0/0 with empty names, modes 0644/0755, no gzip filename or timestamp.
The same pack content therefore always gives the same bytes and the same
sha256 digest. Links, FIFOs and devices in the folder are refused.

`unpack(archive, destination)` reads and checks *every* member before writing
anything: it refuses (`PackRefused`, CD320, naming the archive) data that is
not a gzip-compressed tar or ends early, absolute paths, `..` components,
links, devices, a file with no name (`''`, `.`: the folder itself), duplicate
names and names deeper or longer than a file system makes (`MAX_DEPTH`,
`MAX_NAME_BYTES`, `MAX_PART_BYTES`). Sizes are counted from the decompressed
stream, never taken from headers (docs/architecture.md §10): the gzip stream is
inflated in bounded chunks and refused (`PackRefused`, CD560) as soon as the
real bytes pass `expanded_cap()` (the member data cap `MAX_TOTAL_BYTES` plus
`HEADER_ALLOWANCE` per allowed member, which bounds tar and pax headers too,
and two tar records of end padding), a member's real data passes
`MAX_MEMBER_BYTES`, or the archive holds more than `MAX_MEMBERS` members. A 3
GiB pax header of zeros is therefore refused after about `expanded_cap()` bytes
of work. Callers verify the digest first. The caps are module constants read at
call time (tests shrink them).

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from converge_dsl._files import create_new
from converge_dsl._reading import read_bytes
from converge_dsl.codes import PACK_ARCHIVE_REFUSED, PACK_ARCHIVE_TOO_LARGE
from converge_dsl.packs._files import PackRefused

MAX_MEMBER_BYTES = 8 * 1024 * 1024  # the real data of one member
MAX_TOTAL_BYTES = 64 * 1024 * 1024  # the real data of all members together
MAX_MEMBERS = 5_000
# A member's name: no deeper, nor longer (in UTF-8 bytes, in all and per component, as the
# file systems count), than any pack needs and every file system can make.
MAX_DEPTH = 32
MAX_NAME_BYTES = 1_024
MAX_PART_BYTES = 255
HEADER_ALLOWANCE = 1_536  # tar header + pax header + one pax record block, per member
_IN_CHUNK = 16 * 1024  # compressed bytes handed to zlib at once
_OUT_CHUNK = 64 * 1024  # most decompressed bytes zlib may produce at once
_GZIP = 16 + zlib.MAX_WBITS
_SKIPPED = {"__pycache__", ".git", ".DS_Store"}
_MANIFEST = "pack.yaml"  # `_manifest.MANIFEST`, which imports the front end


def expanded_cap() -> int:
    """The most decompressed bytes (headers included) an archive may expand to."""
    return MAX_TOTAL_BYTES + HEADER_ALLOWANCE * MAX_MEMBERS + 2 * tarfile.RECORDSIZE


def _too_large(where: str, what: str) -> PackRefused:
    return PackRefused(
        PACK_ARCHIVE_TOO_LARGE,
        f"{where}: {what}; refused, nothing was unpacked or cached",
        hint="packs are small data folders; ask the repository owner to publish a smaller "
        "archive (the caps are documented in the README, section Packs)",
    )


def _refused(where: str, what: str) -> PackRefused:
    """An archive that cannot be unpacked safely (CD320), named by `where`."""
    return PackRefused(
        PACK_ARCHIVE_REFUSED,
        f"{where}: {what}; refused, nothing was unpacked or cached",
        hint="the archive is damaged or was not made by 'converge-dsl pack publish'; "
        "ask the repository owner to publish it again",
    )


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _pack_files(folder: Path) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if any(part in _SKIPPED for part in relative.parts):
            continue
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            raise PackRefused(
                PACK_ARCHIVE_REFUSED, f"{relative.as_posix()}: packs may not contain links"
            )
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise PackRefused(
                PACK_ARCHIVE_REFUSED,
                f"{relative.as_posix()}: packs hold regular files and folders only",
            )
        problem = _name_size_problem(relative.as_posix(), PurePosixPath(relative.as_posix()))
        if problem is not None:
            raise PackRefused(
                PACK_ARCHIVE_REFUSED, f"{problem}: no pack could be installed with it"
            )
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
                data = read_bytes(path, "pack file")
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


@dataclass(frozen=True, slots=True)
class Member:
    """One checked archive member: its safe relative name and, for a file, its real data."""

    name: str
    data: bytes | None  # None for a folder


def _inflate(archive: bytes, where: str) -> Iterator[bytes]:
    """The decompressed bytes of gzip `archive` (members in a row), at most `_OUT_CHUNK` at once.

    Raises `PackRefused` (CD320) for data that is not gzip or ends early; trailing NUL
    padding (as `gzip` accepts) ends the stream.
    """
    view = memoryview(archive)
    position = 0
    inflater = zlib.decompressobj(_GZIP)
    pending: bytes | memoryview = b""
    try:
        while True:
            if not pending:
                if position >= len(view):
                    break
                pending = view[position : position + _IN_CHUNK]
                position += len(pending)
            out = inflater.decompress(pending, _OUT_CHUNK)
            pending = inflater.unconsumed_tail
            if out:
                yield out
            if inflater.eof:
                rest = inflater.unused_data + bytes(view[position:])
                if not rest.strip(b"\0"):
                    return
                view, position, pending = memoryview(rest), 0, b""
                inflater = zlib.decompressobj(_GZIP)
    except zlib.error:
        raise _refused(where, "it is not gzip-compressed data (a .tar.gz)") from None
    if not inflater.eof:
        raise _refused(where, "the compressed data ends early (a truncated archive)")


class _Expanded(io.RawIOBase):
    """A readable stream of the decompressed archive that refuses to grow past `cap`."""

    def __init__(self, archive: bytes, cap: int, where: str) -> None:
        super().__init__()
        self._chunks = _inflate(archive, where)
        self._cap = cap
        self._where = where
        self._size = 0
        self._buffer = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._buffer:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._size += len(chunk)
            if self._size > self._cap:
                raise _too_large(self._where, f"it expands past {self._cap} bytes")
            self._buffer = memoryview(chunk)
        count = min(len(buffer), len(self._buffer))
        buffer[:count] = self._buffer[:count]
        self._buffer = self._buffer[count:]
        return count


def _check_member(member: tarfile.TarInfo, seen: set[str], where: str) -> str:
    """The member's safe relative name; raises `PackRefused` naming what is wrong."""
    name = member.name
    pure = PurePosixPath(name)
    if name.startswith(("/", "\\")) or pure.is_absolute() or (len(name) > 1 and name[1] == ":"):
        raise _refused(where, f"member {name!r} has an absolute path")
    if ".." in pure.parts or "\\" in name:
        raise _refused(where, f"member {name!r} escapes the pack folder ('..')")
    if member.issym() or member.islnk():
        raise _refused(where, f"member {name!r} is a link; links are refused")
    if not pure.parts and not member.isdir():  # '' or '.': the pack folder itself
        raise _refused(where, f"member {name!r} has no name, yet is no folder")
    _check_name_size(name, pure, where)
    if not (member.isfile() or member.isdir()):
        raise _refused(where, f"member {name!r} is not a regular file or folder")
    if member.size > MAX_MEMBER_BYTES:  # the header is only a first filter: see _member_data
        raise _too_large(where, f"member {name!r} is over the {MAX_MEMBER_BYTES}-byte member cap")
    normal = pure.as_posix()
    if normal in seen:
        raise _refused(where, f"member {name!r} appears twice")
    seen.add(normal)
    return normal


def _check_name_size(name: str, pure: PurePosixPath, where: str) -> None:
    """Refuse a member's name no pack needs and not every file system can make."""
    problem = _name_size_problem(name, pure)
    if problem is not None:
        raise _refused(where, f"member {problem}")


def _name_size_problem(name: str, pure: PurePosixPath) -> str | None:
    """What is wrong with the size of a pack file's name (see `MAX_DEPTH`), or None.

    One rule for both ends: `unpack` refuses such a member, `build_archive` such a file.
    """
    shown = name if len(name) <= 80 else f"{name[:60]}...{name[-16:]}"
    if len(pure.parts) > MAX_DEPTH:
        return f"{shown!r} is {len(pure.parts)} folders deep, over {MAX_DEPTH}"
    if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        return f"{shown!r} has a name over {MAX_NAME_BYTES} bytes"
    if any(len(part.encode("utf-8", "surrogateescape")) > MAX_PART_BYTES for part in pure.parts):
        return f"{shown!r} has a name part over {MAX_PART_BYTES} bytes"
    return None


def _check_tree(name: str, is_file: bool, files: set[str], folders: set[str], where: str) -> None:
    """Refuse a member that makes a file of a folder's name or a folder of a file's name.

    Such an archive cannot be unpacked (one path would be both), so it is refused
    here, by name, before anything is written.
    """
    parents = [parent.as_posix() for parent in PurePosixPath(name).parents][:-1]
    clash = next((parent for parent in parents if parent in files), None)
    if clash is not None:
        raise _refused(where, f"member {name!r} is inside {clash!r}, which is a file")
    if is_file and name in folders:
        raise _refused(where, f"member {name!r} is a file, but other members are inside it")
    folders.update(parents)
    (files if is_file else folders).add(name)


def _member_data(tar: tarfile.TarFile, member: tarfile.TarInfo, name: str, where: str) -> bytes:
    """The member's real data, read within the member cap and checked against its header."""
    source = tar.extractfile(member)
    data = b"" if source is None else source.read(MAX_MEMBER_BYTES + 1)
    if len(data) > MAX_MEMBER_BYTES:
        raise _too_large(where, f"member {name!r} is over the {MAX_MEMBER_BYTES}-byte member cap")
    if len(data) != member.size:
        raise _refused(where, f"member {name!r} is shorter than its header says")
    return data


def read_members(archive: bytes, where: str = "pack archive") -> list[Member]:
    """Every member, checked and read in one bounded pass; `PackRefused` at the first bad one.

    `where` names the archive in messages (e.g. "demo 1.0.0 from path:repo").
    """
    seen: set[str] = set()
    files: set[str] = set()
    folders: set[str] = set()
    total = 0
    members: list[Member] = []
    stream = io.BufferedReader(_Expanded(archive, expanded_cap(), where), _OUT_CHUNK)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if len(members) >= MAX_MEMBERS:
                    raise _too_large(where, f"it has over {MAX_MEMBERS} members")
                name = _check_member(member, seen, where)
                _check_tree(name, not member.isdir(), files, folders, where)
                data = None if member.isdir() else _member_data(tar, member, name, where)
                total += len(data or b"")
                if total > MAX_TOTAL_BYTES:
                    raise _too_large(where, f"its files hold over {MAX_TOTAL_BYTES} bytes")
                members.append(Member(name, data))
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise _refused(where, f"it is not a valid tar archive ({exc})") from None
    return members


def check_members(archive: bytes, where: str = "pack archive") -> list[str]:
    """The names of every member, checked as `read_members` checks them."""
    return [member.name for member in read_members(archive, where)]


def unpack(archive: bytes, destination: Path, where: str = "pack archive") -> None:
    """Unpack into `destination` (must not exist) atomically; nothing is written on refusal.

    Refused besides (CD320): an archive without a `pack.yaml` at its top.

    When another process unpacked the same archive into `destination` first,
    its folder is kept.
    """
    members = read_members(archive, where)
    if not any(member.name == _MANIFEST and member.data is not None for member in members):
        raise _refused(where, f"it holds no {_MANIFEST} at its top, as every pack archive does")
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}."))
    try:
        for member in members:
            target = staging.joinpath(*PurePosixPath(member.name).parts)
            if member.data is None:
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            descriptor = create_new(target, 0o644)  # never through a member planted before
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(member.data)
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
    members = read_members(archive)
    folders = {PurePosixPath(m.name).parent.as_posix() for m in members} - {"."}
    folders |= {m.name for m in members if m.data is None}
    files = {m.name: m.data for m in members if m.data is not None}
    seen: set[str] = set()
    for where, subfolders, names in os.walk(folder):
        relative = Path(where).relative_to(folder)
        for entry in (*subfolders, *names):
            path = Path(where, entry)
            name = (relative / entry).as_posix()
            status = path.lstat()
            if stat.S_ISDIR(status.st_mode):
                if name not in folders:
                    return False
            elif (
                not stat.S_ISREG(status.st_mode)
                or name not in files
                or status.st_size != len(files[name] or b"")
            ):
                return False
            else:
                seen.add(name)
    if seen != set(files):
        return False
    return all(read_bytes(folder / name, "pack file") == data for name, data in files.items())
