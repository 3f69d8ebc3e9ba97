"""Checkpoints: the engine state after every cycle, written atomically.

The file `DIR/checkpoint.json` is replaced by temp file + fsync + rename (+ fsync
of the folder), so a reader sees either the previous or the new checkpoint,
never half of one. Each checkpoint also carries the SHA-256 of its state and
of the pipeline text + inputs: a torn or altered file, or one from another
pipeline, is refused (never read into a run).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from converge_dsl.engine.state import EngineState
from converge_dsl.errors import ConvergeError, UsageError

CHECKPOINT_FILE = "checkpoint.json"
FORMAT = "converge-dsl/checkpoint/v1"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pipeline_digest(pipeline_text: str, inputs: Any) -> str:
    return _sha(pipeline_text + "\0" + json.dumps(inputs, sort_keys=True, default=str))


@dataclass(frozen=True, slots=True)
class CheckpointStore:
    folder: Path
    digest: str

    @property
    def file(self) -> Path:
        return self.folder / CHECKPOINT_FILE

    def save(self, state: EngineState) -> None:
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
        self.folder.mkdir(parents=True, exist_ok=True)
        temp = self.folder / f".{CHECKPOINT_FILE}.{os.getpid()}.tmp"
        with temp.open("w", encoding="utf-8") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, self.file)
        directory = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def load(self) -> EngineState:
        """The last complete checkpoint; raises `UsageError` if absent, torn or foreign."""
        try:
            raw = self.file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(
                f"no checkpoint in {self.folder.name!r}", hint="run with --checkpoint DIR first"
            ) from None
        except OSError as exc:
            raise UsageError(f"cannot read checkpoint: {exc.strerror}") from None
        try:
            data = json.loads(raw)
            text = data["state"]
            intact = data.get("format") == FORMAT and _sha(text) == data["state_sha256"]
        except (ValueError, KeyError, TypeError):
            intact = False
        if not intact:
            raise UsageError(
                f"checkpoint {CHECKPOINT_FILE!r} is torn or corrupt; it is not read",
                hint="start the run again without --resume",
            )
        if data["pipeline"] != self.digest:
            raise UsageError(
                "the checkpoint belongs to another pipeline or other inputs",
                hint="resume with the same pipeline file and inputs",
            )
        try:
            return EngineState.from_json(text)
        except ConvergeError as exc:
            raise UsageError(f"checkpoint is unreadable: {exc.message}") from None
