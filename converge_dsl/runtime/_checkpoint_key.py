"""The per-user key that seals checkpoint journals (docs/architecture.md §12).

The key is 32 random bytes, kept hex-encoded in `checkpoint.key` in the user's
config folder: `$CONVERGE_DSL_CONFIG_DIR` when set (tests, CI), else
`$XDG_CONFIG_HOME/converge-dsl`, else `~/.config/converge-dsl`. It is created
on first use (folder mode 0700, file mode 0600, never through a link) and is
refused when it is not a regular file, not private to its owner (mode bits for
group or others) or not 64 hex digits. Every failure is a `CheckpointRefused`
(exit 3) with code CD954 naming the file.

`key_id(key)` is a short public fingerprint of a key, stored in each journal so
a checkpoint sealed with another user's key is named as such (CD953) instead
of looking edited.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from converge_dsl import codes
from converge_dsl.errors import UsageError

CONFIG_DIR_ENV = "CONVERGE_DSL_CONFIG_DIR"
KEY_FILE = "checkpoint.key"
KEY_BYTES = 32


class CheckpointRefused(UsageError):
    """A checkpoint (or its key) cannot be used; `code` is its stable CD95x code."""

    code: str

    def __init__(self, code: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"checkpoint refused: {message}", hint=hint, code=code)


def config_dir(env: Mapping[str, str]) -> Path:
    """The folder holding the key, from `env` (see the module docstring)."""
    explicit = env.get(CONFIG_DIR_ENV)
    if explicit:
        return Path(explicit)
    xdg = env.get("XDG_CONFIG_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "converge-dsl"
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".config" / "converge-dsl"


@functools.lru_cache(maxsize=16)
def key_id(key: bytes) -> str:
    """A 16-hex-digit public fingerprint of `key` (not usable to forge a MAC)."""
    return hmac.new(key, b"converge-dsl checkpoint key id", hashlib.sha256).hexdigest()[:16]


def _refuse(path: Path, reason: str) -> CheckpointRefused:
    return CheckpointRefused(
        codes.CHECKPOINT_KEY_UNUSABLE,
        f"the checkpoint key {str(path)!r} {reason}",
        hint=f"fix or delete it (a new one is made on first use), or set {CONFIG_DIR_ENV} "
        "to another folder; checkpoints sealed with the old key then cannot be resumed",
    )


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(path, "is not a regular file")
        if info.st_mode & 0o077:
            raise _refuse(path, f"is readable by others (mode {stat.S_IMODE(info.st_mode):04o})")
        text = os.read(fd, 256).strip()
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise _refuse(path, f"does not hold {KEY_BYTES * 2} hex digits")
    return key


def _create(path: Path, random_bytes: Callable[[int], bytes]) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, random_bytes(KEY_BYTES).hex().encode("ascii") + b"\n")
        os.fsync(fd)
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    os.close(fd)


def checkpoint_key(
    env: Mapping[str, str], random_bytes: Callable[[int], bytes] = os.urandom
) -> bytes:
    """This user's checkpoint key, created on first use; `CheckpointRefused` (CD954) if unusable."""
    path = config_dir(env) / KEY_FILE
    try:
        try:
            return _read(path)
        except FileNotFoundError:
            pass
        with contextlib.suppress(FileExistsError):  # another run made it meanwhile: read it
            _create(path, random_bytes)
        return _read(path)
    except CheckpointRefused:
        raise
    except OSError as exc:
        raise _refuse(path, f"cannot be read or created: {exc.strerror or exc}") from None
