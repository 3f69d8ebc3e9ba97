"""One cassette per case: `--record DIR` and `--replay DIR` of a batch (and of an evaluation).

Each case's models (and MCP tool servers) are recorded into, or answered from,
`DIR/<name>.jsonl`, its own cassette: `cassette_name` makes `<name>` from the
case's `id` (every character but ASCII letters, digits, `_`, `-`, `~` and a
`.` that is not first percent-encoded, `%` too, so no two ids share a name
and no id names a path outside `DIR`; a name over `NAME_LIMIT` characters is
cut and given a hash of the id), or from its index when it has no id
(`DIR/<index>.jsonl`, as `--trace DIR` names its traces). Cases never share
a cassette, so they run at any concurrency on any executor.

Before any case runs, `check_cassettes` refuses, listing every case at once
and locating each at its line of the cases file (or dataset): two cases whose
cassettes would be one file (CD814: the same id, an id equal to another case's
index, or names a case-insensitive file system takes for one), a case whose
cassette the replay folder lacks (CD813), and, when recording without
overwriting, a case whose cassette already holds a recording.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

from converge_dsl import codes
from converge_dsl._escapes import written
from converge_dsl.diagnostics import Diagnostic, Severity
from converge_dsl.errors import PipelineInvalid, UsageError

from ._cases import Case, CaseId

__all__ = ["cassette_name", "check_cassettes", "replaying", "safe_name"]

# The longest cassette name (without `.jsonl`) kept whole: file names stay far below 255 bytes.
NAME_LIMIT = 100
SUFFIX = ".jsonl"


def cassette_name(case_id: CaseId, index: int) -> str:
    """The file name of a case's cassette inside the folder (see the module docstring)."""
    if case_id is None:
        return f"{index}{SUFFIX}"
    return safe_name(str(case_id)) + SUFFIX


def safe_name(text: str) -> str:
    """`text` as one file name that no other text gives and that names no other folder
    (see the module docstring)."""
    safe = quote(text, safe="") or "%"  # an empty text: a name no other text is quoted to
    if safe.startswith("."):
        safe = "%2E" + safe[1:]
    if len(safe) > NAME_LIMIT:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        safe = f"{safe[: NAME_LIMIT - 20]}-{digest}"
    return safe


def cassette_of(folder: Path, case: Case) -> Path:
    """The cassette of `case` in `folder`."""
    return folder / cassette_name(case.id, case.index)


def replaying(cases: Iterable[Case], folder: Path) -> list[Case]:
    """`cases`, each answered from its cassette in `folder` (an absolute path: a worker
    process or Ray actor may run in another folder)."""
    root = folder.resolve()
    return [replace(case, replay=cassette_of(root, case)) for case in cases]


def check_cassettes(
    cases: Sequence[Case],
    folder: Path,
    *,
    option: str,
    replay: bool,
    overwrite: bool = True,
    what: str = "case",
) -> None:
    """Refuse, before any case runs, what would make the cassettes of `cases` in
    `folder` wrong (see the module docstring): `PipelineInvalid` with one located
    diagnostic per case, or `UsageError` for a recording already there."""
    if replay and not folder.is_dir():
        raise UsageError(
            f"{option}: '{written(str(folder))}' is not a folder of cassettes",
            hint=f"record one with {option.replace('--replay', '--record')} DIR",
            code=codes.PATH_NOT_FOUND,
        )
    problems: list[Diagnostic] = []
    seen: dict[str, Case] = {}
    for case in cases:
        name = cassette_name(case.id, case.index)
        first = seen.setdefault(name.casefold(), case)
        if first is not case:
            problems.append(
                _located(
                    codes.CASE_CASSETTE_CLASH,
                    f"{what} {case.label} and {what} {first.label} would share the "
                    f"cassette '{written(name)}' in {option} '{written(str(folder))}'",
                    case,
                    f"give each {what} its own `id` (a cassette is named by the id, "
                    "else by the index)",
                )
            )
            continue
        path = folder / name
        if replay and not path.is_file():
            problems.append(
                _located(
                    codes.CASE_CASSETTE_MISSING,
                    f"{what} {case.label} has no cassette: {option} holds no file "
                    f"'{written(str(path))}'",
                    case,
                    f"record the {what}s again with {option.replace('--replay', '--record')}"
                    " DIR, or remove this one",
                )
            )
    if problems:
        raise PipelineInvalid(problems)
    if replay or overwrite:
        return
    for case in cases:
        path = cassette_of(folder, case)
        if path.is_file() and path.stat().st_size > 0:
            raise UsageError(
                f"{option} '{written(str(folder))}' already holds the cassette of {what} "
                f"{case.label} ({path.name}); recording onto it would mix two runs",
                hint=f"add --overwrite to record afresh over it, or give {option} a new folder",
                code=codes.OUTPUT_REFUSED,
            )


def _located(code: str, message: str, case: Case, hint: str) -> Diagnostic:
    span = case.span
    if span is None:
        return Diagnostic(code, Severity.ERROR, message, "", 0, 0, 0, 0, (), hint, False)
    return Diagnostic.at(code, message, span, hint=hint)
