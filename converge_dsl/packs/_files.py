"""Small file helpers of the pack machinery: atomic writes, JSON from untrusted bytes.

`write_atomic(path, data)` writes a uniquely named temporary file beside
`path`, flushes it to disk (fsync) and renames it into place, so a reader sees
the old content or the new, never half of it; two writers never share a
temporary name and a leftover file or folder with a `.tmp` name is no
obstacle. `parse_json(data, where)` reads JSON that a repository, a cache or a
lock file handed us: any failure (not UTF-8, not JSON, nested too deep) is a
`PackError` naming `where`, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from converge_dsl.errors import PackError

SHA256 = re.compile(r"[0-9a-f]{64}\Z")  # an archive digest as indexes and locks write it


def write_atomic(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace `path` with `data` atomically (temporary file + fsync + rename).

    Raises `PackError` naming the file when the folder cannot be written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
        )
    except OSError as exc:
        raise PackError(f"cannot write {path.name}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise PackError(f"cannot write {path.name}: {exc.strerror or exc}") from None
        raise


def parse_json(data: bytes | str, where: str) -> Any:
    """The JSON value in `data`; raises `PackError` ("WHERE: ...") when it is not usable."""
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackError(f"{where}: not JSON ({exc})") from None
    except RecursionError:
        raise PackError(f"{where}: JSON nested too deeply") from None
