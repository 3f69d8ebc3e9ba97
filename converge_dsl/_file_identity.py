"""What tells that a file changed between two looks at it, without reading it.

`identity(path)` is the file's `FileIdentity` (device, inode, size, mtime_ns,
ctime_ns) from one `stat` (a symbolic link followed), or the `OSError` of that
stat. Two equal identities name the same file, unchanged, unless a write came
within the file system's timestamp tick of the look that took the first (git's
"racily clean" index entries): `settled(found, now_ns)` says whether `now_ns`
(the wall clock, ns) is `SETTLED_NS` or more from the file's last modification
and change times (the later of them: a writer may set the mtime back), so that
an identity taken then can be trusted. Used by the model scripts' cache, the
service's token file and its state database.
"""

from __future__ import annotations

import os
from pathlib import Path

from converge_dsl._record import Record

# The coarsest file timestamps in common use (FAT's 2 s): a file modified or changed
# this near a look at it may change again without its identity changing.
SETTLED_NS = 2_000_000_000


class FileIdentity(Record):
    """What one `stat` tells of a file: equal identities, once settled, mean the file
    was not written in between (a `Record`: `validate`'s path reads model scripts)."""

    _fields = ("device", "inode", "size", "mtime_ns", "ctime_ns")
    __slots__ = _fields

    def __init__(self, device: int, inode: int, size: int, mtime_ns: int, ctime_ns: int) -> None:
        self.device = device
        self.inode = inode
        self.size = size
        self.mtime_ns = mtime_ns
        self.ctime_ns = ctime_ns


def identity(path: Path) -> FileIdentity | OSError:
    """The identity of the file at `path`, or the `OSError` of its `stat`."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return exc
    return FileIdentity(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def settled(found: FileIdentity, now_ns: int) -> bool:
    """Whether `found`, taken at `now_ns`, can be trusted (see the module docstring)."""
    return abs(now_ns - max(found.mtime_ns, found.ctime_ns)) >= SETTLED_NS
