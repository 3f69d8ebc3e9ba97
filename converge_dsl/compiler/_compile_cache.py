"""The on-disk compile cache: a pipeline's compiled template code, so a second run skips it.

`converge-dsl run` compiles a pipeline inside `CompileCache.session()`. One
file per pipeline, `<root>/<key>.bin`, holds the Python code objects Jinja
generated for the pipeline's templates and expressions, with the names each
reads (what Jinja's own `BytecodeCache` stores per template, one file for the
whole pipeline). On the next run the session offers them to the process's
source table (`_sources.SOURCES.preload`): a template found there is made from
its code object, with no parse and no code generation. Literal templates need
no entry.

- Root: `$CONVERGE_DSL_CACHE/compiled` (the pack cache's root, see
  `converge_dsl.packs`), else the user cache folder's `converge-dsl/compiled`.
- Key (`cache_key`): SHA-256 of the pipeline text, its resolved inputs, the
  lock file (which pins every pack by digest), the package, Python and Jinja
  versions and the sandbox settings (`_sources.sandbox_settings`). The key
  only picks the file: each entry is found by its exact source text, so a
  stale file can cost misses, never wrong code. A run with misses rewrites it.
- Trust: code objects are executed, so a file is used only when its
  HMAC-SHA256 (a key derived from the per-user checkpoint key,
  docs/architecture.md §12) verifies, its magic, key and structure match.
  Anything else (corrupt, truncated, foreign, another version) is ignored and
  rebuilt; the reason is kept in `rejected`. `marshal` never sees an
  unverified byte.
- Writes are atomic (a temporary file in the folder, then a rename); a file
  over `MAX_FILE_BYTES` is not written; after a write, the oldest files go
  until the folder holds at most `max_bytes` (`DEFAULT_MAX_BYTES`).
- Off with `run --no-cache` or `CONVERGE_DSL_NO_CACHE=1` (`enabled`). Any I/O
  failure of the cache leaves the run as if there were no cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import marshal
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import CodeType
from typing import Any

from converge_dsl._files import replace_file
from converge_dsl._json_types import JsonObject
from converge_dsl._reading import ReadRefused, open_regular, read_bytes
from converge_dsl._version import __version__
from converge_dsl.errors import ConvergeError

from ._sources import SOURCES, SourceKey, sandbox_settings

CACHE_ENV = "CONVERGE_DSL_CACHE"
NO_CACHE_ENV = "CONVERGE_DSL_NO_CACHE"
# The name of a pipeline folder's lock file (`converge_dsl.packs.LOCK_FILE`, named
# here so that a rules-only run does not import the packs).
LOCK_FILE = "converge.lock"
MAGIC = b"converge-dsl compiled v1\n"
MAX_FILE_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
_MAC_BYTES = 32

Entries = dict[SourceKey, tuple[CodeType, frozenset[str]]]


def enabled(env: Mapping[str, str]) -> bool:
    """False when `CONVERGE_DSL_NO_CACHE` is set to anything but empty, 0, false or no."""
    return env.get(NO_CACHE_ENV, "").strip().lower() in ("", "0", "false", "no")


def cache_root(env: Mapping[str, str]) -> Path:
    """The folder of compiled pipelines (see the module docstring)."""
    override = env.get(CACHE_ENV)
    if override:
        return Path(override) / "compiled"
    import platformdirs

    return platformdirs.user_cache_path("converge-dsl") / "compiled"


def cache_key(pipeline_text: str, inputs: JsonObject, lock: bytes | None) -> str:
    """The hex SHA-256 naming a pipeline's cache file (see the module docstring)."""
    digest = hashlib.sha256(MAGIC)
    parts = (
        __version__,
        sys.version,
        sys.implementation.cache_tag or "",
        sandbox_settings(),
        pipeline_text,
        json.dumps(dict(inputs), sort_keys=True, default=repr),
    )
    for part in parts:
        encoded = part.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
    digest.update(b"-" if lock is None else b"+" + hashlib.sha256(lock).digest())
    return digest.hexdigest()


def _entries(value: Any, key: str) -> Entries | None:
    """The entries of a verified body, or None when its shape is not ours."""
    if not (isinstance(value, tuple) and len(value) == 2 and value[0] == key):
        return None
    entries: Entries = {}
    for item in value[1] if isinstance(value[1], list) else ():
        if not (isinstance(item, tuple) and len(item) == 4):
            return None
        expression, text, code, names = item
        if not (
            isinstance(expression, bool)
            and isinstance(text, str)
            and isinstance(code, CodeType)
            and isinstance(names, tuple)
            and all(isinstance(name, str) for name in names)
        ):
            return None
        entries[(expression, text)] = (code, frozenset(names))
    return entries if isinstance(value[1], list) else None


class CompileCache:
    """One pipeline's cache file (see the module docstring)."""

    def __init__(
        self, root: Path, secret: bytes, key: str, *, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.root = root
        self.key = key
        self.path = root / f"{key}.bin"
        self.max_bytes = max_bytes
        self._mac_key = hmac.new(secret, b"converge-dsl compile cache", hashlib.sha256).digest()
        self.hit = False  # the file was read, verified and used
        self.rejected: str | None = None  # why a present file was not used
        self.stored = False  # the session wrote the file

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._mac_key, body, hashlib.sha256).digest()

    def load(self) -> Entries:
        """The verified entries of the file; empty when absent or refused (`rejected`)."""
        try:
            with open_regular(self.path, "compile cache file") as file:
                data = file.read(MAX_FILE_BYTES + 1)
        except ReadRefused as exc:
            self.rejected = exc.reason
            return {}
        except OSError:
            return {}
        head = len(MAGIC) + _MAC_BYTES
        if len(data) > MAX_FILE_BYTES:
            self.rejected = f"larger than {MAX_FILE_BYTES} bytes"
            return {}
        if len(data) < head or not data.startswith(MAGIC):
            self.rejected = "not a compile cache file of this version"
            return {}
        mac, body = data[len(MAGIC) : head], data[head:]
        if not hmac.compare_digest(mac, self._mac(body)):
            self.rejected = "its MAC does not verify (corrupt, or written with another key)"
            return {}
        try:
            entries = _entries(marshal.loads(body), self.key)
        except (EOFError, ValueError, TypeError):
            entries = None
        if entries is None:
            self.rejected = "its content is not a compiled pipeline"
            return {}
        self.hit = True
        with contextlib.suppress(OSError):
            os.utime(self.path)  # recently used: pruned last
        return entries

    def save(self, used: Mapping[SourceKey, Any]) -> None:
        """Write the code of the sources `used` (from `SOURCES.recording`), atomically."""
        items = [
            (expression, text, source.code, tuple(sorted(source.names)))
            for (expression, text), source in used.items()
            if source.code is not None
        ]
        body = marshal.dumps((self.key, items))
        if len(MAGIC) + _MAC_BYTES + len(body) > MAX_FILE_BYTES:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            replace_file(self.path, MAGIC + self._mac(body) + body, mode=0o600)
            self.stored = True
            self.prune()
        except OSError:
            return

    def prune(self) -> None:
        """Delete the least recently used files until the folder holds at most `max_bytes`.

        The file of this pipeline stays, whatever its size.
        """
        files: list[tuple[float, int, Path]] = []
        for path in self.root.glob("*.bin"):
            if path == self.path:
                continue
            with contextlib.suppress(OSError):
                info = path.stat()
                files.append((info.st_mtime, info.st_size, path))
        total = sum(size for _, size, _ in files) + self.path.stat().st_size
        for _, size, path in sorted(files, key=lambda item: item[0]):
            if total <= self.max_bytes:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Compile inside: cached code is offered first; new code is stored if all went well."""
        entries = self.load()
        SOURCES.preload(entries)
        with SOURCES.recording() as used:
            yield
        if not self.hit or any(
            source.code is not None and key not in entries for key, source in used.items()
        ):
            self.save(used)


def open_cache(
    env: Mapping[str, str],
    pipeline_text: str,
    inputs: JsonObject,
    lock_file: Path,
    secret: Callable[[], bytes],
) -> CompileCache | None:
    """The cache of a pipeline, or None when it is off or has no usable key.

    `lock_file` is the pipeline's lock (read when present); `secret()` gives
    the per-user key (a `ConvergeError` or `OSError` from it turns the cache off).
    """
    if not enabled(env):
        return None
    try:
        key_bytes = secret()
    except (ConvergeError, OSError):
        return None
    try:
        lock: bytes | None = read_bytes(lock_file, "lock file")
    except (OSError, ReadRefused):
        lock = None
    return CompileCache(cache_root(env), key_bytes, cache_key(pipeline_text, inputs, lock))
