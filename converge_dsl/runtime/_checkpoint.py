"""Checkpoints: the engine state after every cycle, written atomically.

The file `DIR/checkpoint.json` is replaced by temp file + fsync + rename (+ fsync
of the folder), so a reader sees either the previous or the new checkpoint,
never half of one. Each checkpoint also carries the SHA-256 of its state and
of the pipeline text + inputs: a torn or altered file, or one from another
pipeline, is refused (never read into a run).

A run paused for a human also checkpoints its pending proposals; decisions
given so far for it (`--approve`/`--reject` that did not decide every pending
id yet) are kept in `DIR/decisions.json`, written the same way.

One run at a time: a run with `--checkpoint DIR` or `--resume DIR` holds an
exclusive lock (`flock` on `DIR/.lock`) for its whole length; a second run on
the same folder is refused at once with a `UsageError` (exit 3), so two resumes
of one pause cannot both go on with different decisions.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from converge_dsl.engine.state import EngineState
from converge_dsl.errors import ConvergeError, RunError, UsageError

CHECKPOINT_FILE = "checkpoint.json"
LOCK_FILE = ".lock"
DECISIONS_FILE = "decisions.json"
FORMAT = "converge-dsl/checkpoint/v1"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pipeline_digest(pipeline_text: str, inputs: Any) -> str:
    return _sha(pipeline_text + "\0" + json.dumps(inputs, sort_keys=True, default=str))


def _atomic_write(folder: Path, name: str, text: str) -> None:
    """Replace `folder/name` by temp file + fsync + rename + fsync of the folder.

    A failure (full disk, folder gone) raises `RunError` and leaves the previous
    `folder/name` as it was; the temp file is removed.
    """
    temp = folder / f".{name}.{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with temp.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, folder / name)
        directory = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink(missing_ok=True)
        raise RunError(
            f"cannot write {name} in checkpoint folder {str(folder)!r}: {exc.strerror or exc}; "
            "the run stopped",
            hint="free space or fix the folder; the checkpoint of the last completed cycle "
            "is kept (continue with --resume DIR)",
        ) from None


def check_folder(folder: Path, option: str, *, create: bool) -> None:
    """Before a run: `folder` must be a folder (made when `create`); else `UsageError`."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(
            f"{option} {str(folder)!r} is a file, not a folder",
            hint=f"give {option} a folder path (it is created when missing)",
        )
    if create:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"cannot create {option} folder {str(folder)!r}: {exc.strerror or exc}",
                hint=f"give {option} a folder path you can write to",
            ) from None
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(
            f"{option} folder {str(folder)!r} is not writable",
            hint=f"give {option} a folder you can write to",
        )


@contextlib.contextmanager
def folder_lock(folder: Path | None, option: str) -> Iterator[None]:
    """Hold an exclusive, non-blocking lock on checkpoint `folder` (nothing when `None`).

    Another run holding it is a `UsageError` naming `option`; the lock goes
    with the process (also on a crash), the lock file stays.
    """
    if folder is None:
        yield
        return
    import fcntl

    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise UsageError(
            f"cannot lock {option} folder {str(folder)!r}: {exc.strerror or exc}",
            hint=f"give {option} a folder you can write to",
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UsageError(
                f"{option} folder {str(folder)!r} is in use by another run",
                hint="wait for that run to finish, then try again",
            ) from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@dataclass(frozen=True, slots=True)
class CheckpointStore:
    folder: Path
    digest: str

    @property
    def file(self) -> Path:
        return self.folder / CHECKPOINT_FILE

    def save(self, state: EngineState) -> None:
        """Write `state` as the checkpoint (atomically: the old one or the new one, never half)."""
        text = state.to_json()
        payload = json.dumps(
            {
                "format": FORMAT,
                "pipeline": self.digest,
                "state_sha256": _sha(text),
                "cycle": state.cycle,
                "state": text,
            }
        )
        _atomic_write(self.folder, CHECKPOINT_FILE, payload)

    def save_decisions(self, decisions: Mapping[str, bool]) -> None:
        """Remember human decisions given so far for a paused run (id -> approve)."""
        _atomic_write(self.folder, DECISIONS_FILE, json.dumps(dict(sorted(decisions.items()))))

    def load_decisions(self) -> dict[str, bool]:
        """Decisions saved by `save_decisions` (empty if none); a corrupt file is refused."""
        try:
            data = json.loads((self.folder / DECISIONS_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError):
            data = None
        if not isinstance(data, dict) or not all(isinstance(v, bool) for v in data.values()):
            raise UsageError(
                f"{DECISIONS_FILE!r} in the checkpoint folder is corrupt; it is not read",
                hint="delete it and give every decision again with --approve/--reject",
            )
        return {str(k): v for k, v in data.items()}

    def clear_decisions(self) -> None:
        (self.folder / DECISIONS_FILE).unlink(missing_ok=True)

    def load(self) -> EngineState:
        """The last complete checkpoint; raises `UsageError` if absent, torn or foreign."""
        try:
            raw = self.file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(
                f"no checkpoint in {str(self.folder)!r}", hint="run with --checkpoint DIR first"
            ) from None
        except UnicodeDecodeError:
            raw = ""  # not text: torn or corrupt, refused below
        except OSError as exc:
            raise UsageError(
                f"cannot read checkpoint in {str(self.folder)!r}: {exc.strerror or exc}"
            ) from None
        try:
            data = json.loads(raw)
            text = data["state"]
            intact = data.get("format") == FORMAT and _sha(text) == data["state_sha256"]
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            intact = False
        if not intact:
            raise UsageError(
                f"checkpoint {str(self.file)!r} is torn or corrupt; it is not read",
                hint="start the run again without --resume",
            )
        if data["pipeline"] != self.digest:
            raise UsageError(
                "the checkpoint belongs to another pipeline or other inputs",
                hint="resume with the same pipeline file and inputs",
            )
        try:
            return EngineState.from_json(text)
        except RecursionError:
            raise UsageError(f"checkpoint {str(self.file)!r} nests too deeply to read") from None
        except ConvergeError as exc:
            raise UsageError(f"checkpoint is unreadable: {exc.message}") from None
