"""A file's identity and whether it has settled (`converge_dsl._file_identity`)."""

from __future__ import annotations

import os
from pathlib import Path

from converge_dsl._file_identity import SETTLED_NS, identity, settled


def test_an_identity_changes_with_the_file_and_is_the_error_of_a_missing_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f"
    path.write_text("a")
    first = identity(path)
    assert not isinstance(first, OSError)
    assert identity(path) == first
    path.write_text("bb")
    assert identity(path) != first
    path.unlink()
    assert isinstance(identity(path), FileNotFoundError)


def test_a_file_settles_from_the_later_of_its_mtime_and_ctime(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("a")
    os.utime(path, ns=(10**18, 10**18))  # the mtime set back: the ctime stays recent
    found = identity(path)
    assert not isinstance(found, OSError)
    assert not settled(found, found.ctime_ns + SETTLED_NS - 1)
    assert settled(found, found.ctime_ns + SETTLED_NS)
