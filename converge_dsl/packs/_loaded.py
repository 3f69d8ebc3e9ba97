"""The locked packs of a loaded pipeline document, read once for every use of it.

A pipeline loaded once is validated (its locked packs read, fetched when the
cache lacks them) and then compiled, once or many times (a batch), in this
process or in another (a batch worker is handed the packs with the
document). `keep_packs(document, lock, packs)` keeps the packs read for
`document` with the bytes its lock file had before they were read;
`kept_packs(document, pipeline)` gives them back while that lock file still holds
those bytes (an edited lock is read again), `handed_packs(document)` gives what to
hand to another process with the document. At most `KEEP` documents are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl.packs._lockfile import lock_path

__all__ = ["handed_packs", "keep_packs", "kept_packs", "lock_bytes"]

if TYPE_CHECKING:
    from converge_dsl.packs._manifest import Pack

KEEP = 8
# Per document kept: (the document, its lock file's bytes then, the packs).
_KEPT: list[tuple[object, bytes | None, Mapping[str, Pack]]] = []


def lock_bytes(pipeline: Path) -> bytes | None:
    """The bytes of `pipeline`'s lock file now (None: there is none)."""
    try:
        return lock_path(pipeline).read_bytes()
    except OSError:
        return None


def keep_packs(document: object, lock: bytes | None, packs: Mapping[str, Pack]) -> None:
    """Keep `packs`, read for `document` while its lock file held `lock`."""
    _KEPT[:] = [entry for entry in _KEPT if entry[0] is not document][-(KEEP - 1) :]
    _KEPT.append((document, lock, packs))


def handed_packs(document: object) -> tuple[bytes | None, Mapping[str, Pack]] | None:
    """The lock bytes and packs kept for `document` (None: none are)."""
    for kept_document, lock, packs in _KEPT:
        if kept_document is document:
            return lock, packs
    return None


def kept_packs(document: object, pipeline: Path) -> Mapping[str, Pack] | None:
    """The packs kept for `document` while `pipeline`'s lock file is unchanged (None:
    none are, or the lock file changed since)."""
    entry = handed_packs(document)
    if entry is None or entry[0] != lock_bytes(pipeline):
        return None
    return entry[1]
