"""Output checks: every output of a run is refused before any work, over its list of sinks.

Every output file is opened by the one opener (`_trace.open_output`, over
`converge_dsl._files.open_output`): never through a link, never over a file
that is not ours. Command-line outputs may lie anywhere the user names them
(the user's own word); files the pipeline names lie inside its folder or an
allowed root (`converge_dsl._files.referenced_path`).

`check_outputs(sinks, reads)` is the one same-file check (docs/architecture.md
§12): no output may be a file the run reads (the pipeline, a model script or
cassette named by the typed model declarations, a `--model`/`--replay`
cassette, the checkpoint, a batch's cases), nor another output; then each
sink checks its own path (`RunSink.check`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from converge_dsl import codes
from converge_dsl._files import same_file
from converge_dsl.compiler import ModelDeclaration
from converge_dsl.errors import UsageError

from ._checkpoint import CHECKPOINT_FILE, LOCK_FILE, check_folder
from ._options import RunOptions
from ._sinks import Output, RunSink


def _check_checkpoint_folder(folder: Path, option: str) -> None:
    """A checkpoint folder is not a link, and an existing, non-empty one holds our files."""
    if folder.is_symlink():
        raise UsageError(
            f"{option} {str(folder)!r} is a symbolic link; checkpoints are never written "
            "through links",
            hint=f"give {option} the folder itself",
            code=codes.OUTPUT_REFUSED,
        )
    if not folder.is_dir():
        return  # missing (created) or a file (refused by `check_folder`)
    with contextlib.suppress(OSError):
        names = {entry.name for entry in os.scandir(folder)}
        if names and not names & {CHECKPOINT_FILE, LOCK_FILE}:
            raise UsageError(
                f"{option} {str(folder)!r} holds files and is not a checkpoint folder; "
                "nothing is written into it",
                hint=f"give {option} a new or empty folder, or one a run checkpointed into",
                code=codes.OUTPUT_REFUSED,
            )


class CheckpointSink(RunSink):
    """`--checkpoint DIR` (or `--resume DIR`): the run's journal folder.

    The run also reads from it (`--resume`), so the assembly drives its store
    (`_assembly`); as an output it is checked like any other.
    """

    def __init__(self, folder: Path, resuming: bool) -> None:
        self.folder = folder
        self._option = "--resume" if resuming else "--checkpoint"
        self._resuming = resuming

    def outputs(self) -> tuple[Output, ...]:
        return (Output(self.folder, self._option, "checkpoint folder"),)

    def check(self) -> None:
        """The folder is not a link, and an existing, non-empty one holds our files."""
        _check_checkpoint_folder(self.folder, self._option)
        check_folder(self.folder, self._option, create=not self._resuming)


def read_files(
    models: Mapping[str, ModelDeclaration], options: RunOptions
) -> list[tuple[Path, str]]:
    """The files a run reads (never to be overwritten by an output): path and what it is."""
    found = [(options.pipeline, "the pipeline")]
    for name, declaration in models.items():
        found.extend(
            (path, f"the {field_name} of model {name!r}")
            for field_name, path in declaration.files.items()
        )
    found.extend(
        (Path(cassette), f"the cassette of --model {name}")
        for name, cassette in options.model_overrides.items()
    )
    if options.replay is not None:
        found.append((options.replay, "the --replay cassette"))
    if options.checkpoint is not None:
        found.append((options.checkpoint / CHECKPOINT_FILE, "the checkpoint file"))
    return found


def check_outputs(sinks: Sequence[RunSink], reads: Sequence[tuple[Path, str]]) -> None:
    """Refuse unusable outputs before any work (`UsageError`; see the module docstring).

    `reads` are the files the run reads, each with what it is (`read_files`).
    """
    seen: list[Output] = []
    for sink in sinks:
        for output in sink.outputs():
            for other in seen:
                if same_file(output.path, other.path):
                    raise UsageError(
                        f"{other.option} and {output.option} name the same file "
                        f"{str(output.path)!r}",
                        hint="give each its own file",
                        code=codes.OUTPUT_REFUSED,
                    )
            for read, what in reads:
                if same_file(output.path, read):
                    raise UsageError(
                        f"{output.option} {str(output.path)!r} is {what}; it would be overwritten",
                        hint=f"give {output.option} a {output.what} of its own",
                        code=codes.OUTPUT_REFUSED,
                    )
            seen.append(output)
    for sink in sinks:
        sink.check()
