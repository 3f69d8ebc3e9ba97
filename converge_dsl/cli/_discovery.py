"""Which files `validate PATH...` checks, and checking them all.

- `pipeline_files(paths)`: the pipeline files named by files and folders, and
  the packs, evaluation files and run configurations among them (`_file_kinds.file_kind`);
- `served_pipelines(paths)`: only the pipelines among them, for `serve`;
- `check_paths(paths)` checks them all into `CheckedFiles`: each pipeline with
  every check of `converge_dsl.validation`, each pack as `pack publish` would
  (`converge_dsl.packs.load_pack`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from converge_dsl import codes
from converge_dsl._file_kinds import (
    EVALUATION,
    PACK,
    PIPELINE,
    kind_named,
    kind_taken,
    refuse_other_kind,
    says_ours,
    walked_kind,
)
from converge_dsl._files import display_name
from converge_dsl._reading import ReadRefused, read_bytes
from converge_dsl._record import Record
from converge_dsl.diagnostics import Diagnostic, Severity, best_first
from converge_dsl.errors import PipelineInvalid, UsageError
from converge_dsl.validation import check_pipeline


def pipeline_files(paths: Sequence[str], *, only_pipelines: bool = False) -> list[Path]:
    """The files `validate` checks among `paths` (folders expanded, sorted, de-duplicated).

    In a folder, every `*.yaml`/`*.yml` file (recursively) whose `file_kind` is not None:
    pipelines, and the pack manifests, evaluation files and run configurations that
    `validate` checks as their commands read them; the files that load and say `kind:
    ModelScript` or `PipelineTest` at the top, or that load as a mapping with neither
    `apiVersion` nor `kind`, are skipped (`_walk` says which folders are entered). A
    folder with none of them (the hint naming what it skipped), or a path that does not
    exist, is a `UsageError`. An evaluation file of any name named directly is one.
    With `only_pipelines`, a file named directly is kept only when it says it is
    a converge-dsl pipeline (`says_pipeline`) or an evaluation file, as a pre-commit
    hook needs.
    """
    return [path for path, _ in _files_and_kinds(paths, only_pipelines=only_pipelines)]


def served_pipelines(paths: Sequence[str]) -> list[Path]:
    """The pipelines among `paths` (`serve`): those `validate` checks as pipelines.

    A folder's pack manifests, evaluation files and run configurations are left out, and
    a folder holding none but those is a `UsageError`; so is one of them named directly.
    """
    found: list[Path] = []
    for raw in paths:
        files = _files_and_kinds([raw])
        if Path(raw).is_dir():
            found.extend(path for path, kind in files if kind == PIPELINE)
            if not any(kind == PIPELINE for _, kind in files):
                raise UsageError(
                    f"no pipeline files found in {raw}",
                    hint="it holds only pack manifests, evaluation files or run configurations",
                    code=codes.PATH_NOT_FOUND,
                )
            continue
        [(path, kind)] = files
        if kind != PIPELINE:
            raise UsageError(
                f"{raw} is {kind_named(kind)}, not a pipeline",
                hint="give pipeline files or folders holding them",
                code=codes.PATH_NOT_FOUND,
            )
        found.append(path)
    return list(dict.fromkeys(found))


def _files_and_kinds(
    paths: Sequence[str],
    *,
    only_pipelines: bool = False,
    skipped: list[tuple[Path, str]] | None = None,
) -> list[tuple[Path, str]]:
    """`pipeline_files(paths)`, each with its kind: `file_kind`, and `PIPELINE` for a file
    named directly that is of no kind of ours. A folder's files of another kind of ours
    that are left out go to `skipped`, each with the kind it says (`walked_kind`)."""
    found: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            kinds = [(p, walked_kind(p)) for p in _walk(path)]
            chosen = [(p, kind) for p, (kind, _) in kinds if kind is not None]
            left_out = [(p, said) for p, (_, said) in kinds if said is not None]
            if skipped is not None:
                skipped.extend(left_out)
            if not chosen:
                raise UsageError(
                    f"no pipeline files found in {raw}",
                    hint=_none_found_hint(left_out),
                    code=codes.PATH_NOT_FOUND,
                )
            found.extend(chosen)
        elif path.exists():  # a FIFO or device too: its reader refuses it (CD930)
            kind, said = walked_kind(path) if path.is_file() else (PIPELINE, None)
            kind = EVALUATION if said == EVALUATION else kind  # of any name, named directly
            # the last test is `says_pipeline(path)`, the kind read once (its YAML loaded)
            if (
                not only_pipelines
                or kind == EVALUATION
                or (kind == PIPELINE and says_ours(path, "Pipeline"))
            ):
                found.append((path, kind or PIPELINE))
        else:
            raise UsageError(
                f"no such file or folder: {raw}",
                hint="give pipeline files or folders",
                code=codes.PATH_NOT_FOUND,
            )
    return _once(found)


# Folders a walk never enters, as linters and test runners skip them (a hidden folder,
# `.git`, `.venv`, is never entered either, nor a virtual environment of any name: one
# holding `pyvenv.cfg`): other projects' files, not the user's.
_NOT_ENTERED = frozenset({"node_modules", "__pycache__"})


def _walk(folder: Path) -> list[Path]:
    """The `*.yaml`/`*.yml` files under `folder` (sorted), each file once: no hidden
    folder, virtual environment or `_NOT_ENTERED` folder below `folder` is entered, no
    link to a folder followed, and a file reached twice (through a link) is counted once
    (`_once`)."""
    import os

    files: list[Path] = []
    for top, folders, names in os.walk(folder):
        here = Path(top)
        folders[:] = [
            name
            for name in folders
            if not name.startswith(".")
            and name not in _NOT_ENTERED
            and not (here / name / "pyvenv.cfg").exists()
        ]
        files.extend(here / name for name in names if name.endswith((".yaml", ".yml")))
    return [path for path, _ in _once([(p, "") for p in sorted(files) if p.is_file()])]


def _once(found: Sequence[tuple[Path, str]]) -> list[tuple[Path, str]]:
    """`found` with each file once, by the file it resolves to: of a file and a link to
    it, the file is kept (a link when only links to it were given), where first reached."""
    kept: dict[Path, tuple[Path, str]] = {}
    for path, kind in found:
        try:
            key = path.resolve()
        except (OSError, RuntimeError):  # a loop of links: its reader says so
            key = path.absolute()
        if key not in kept or (kept[key][0].is_symlink() and not path.is_symlink()):
            kept[key] = (path, kind)
    return list(kept.values())


def _none_found_hint(left_out: Sequence[tuple[Path, str]]) -> str:
    """What a folder with no file `validate` checks held: its files of other kinds of
    ours, what each is and what takes it (`skipped_note`), or where it looked."""
    if not left_out:
        return (
            "a folder is searched for *.yaml and *.yml pipeline files and pack.yaml pack manifests"
        )
    named = ", ".join(kind_taken(display_name(path), kind) for path, kind in left_out[:3])
    more = f", and {len(left_out) - 3} more (--verbose names each)" if len(left_out) > 3 else ""
    return f"it holds only files of other kinds, skipped: {named}{more}"


class CheckedFiles(Record):
    """Every pipeline file `validate PATH...` checked, their diagnostics and their texts,
    and the files of other kinds of ours its folders hold that it left out (`skipped`:
    each with the kind it says)."""

    _fields = ("files", "diagnostics", "sources", "skipped")
    __slots__ = _fields

    def __init__(
        self,
        files: tuple[Path, ...],
        diagnostics: tuple[Diagnostic, ...],
        sources: dict[str, str],
        skipped: tuple[tuple[Path, str], ...] = (),
    ) -> None:
        self.files = files
        self.diagnostics = diagnostics  # best first, over all files
        self.sources = sources  # display name -> text, for excerpts
        self.skipped = skipped

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not any(d.is_error for d in self.diagnostics)


def check_paths(
    paths: Sequence[str],
    *,
    roots: Sequence[Path] | None = None,
    only_pipelines: bool = False,
    env: Mapping[str, str] | None = None,
) -> CheckedFiles:
    """`check_pipeline` (with `roots`, in the environment `env`) on every file of
    `pipeline_files(paths, only_pipelines=...)`, the files of other kinds of ours it
    leaves out in `skipped`; raises `UsageError` as it does."""
    skipped: list[tuple[Path, str]] = []
    files = _files_and_kinds(paths, only_pipelines=only_pipelines, skipped=skipped)
    diagnostics: list[Diagnostic] = []
    sources: dict[str, str] = {}
    named = {Path(raw) for raw in paths if not Path(raw).is_dir()}
    for path, kind in files:
        name = display_name(path)
        if kind != PIPELINE:
            if kind == PACK:
                diagnostics.extend(_pack_diagnostics(path, name))
            elif kind == EVALUATION:
                diagnostics.extend(_evaluation_diagnostics(path, roots, env))
            else:
                diagnostics.extend(_run_config_diagnostics(path, env))
            with contextlib.suppress(OSError):
                sources[name] = path.read_bytes().decode("utf-8", errors="replace")
            continue
        checked = check_pipeline(path, display=name, roots=roots, env=env)
        if not checked.ok and checked.document is not None and path in named:
            refuse_other_kind(checked.document, PIPELINE)  # as `run` does: CD818, exit 3
        diagnostics.extend(checked.diagnostics)
        if checked.document is not None:
            sources[name] = checked.document.text
        elif checked.diagnostics:
            with contextlib.suppress(OSError, ReadRefused):
                sources[name] = read_bytes(path, "pipeline").decode("utf-8", errors="replace")
    walked = tuple(p for p, _ in files)
    return CheckedFiles(walked, tuple(best_first(diagnostics)), sources, tuple(_once(skipped)))


def _evaluation_diagnostics(
    path: Path, roots: Sequence[Path] | None, env: Mapping[str, str] | None
) -> list[Diagnostic]:
    """An evaluation file checked as `eval` reads it (schema, dataset, metrics, pipeline)."""
    from converge_dsl.pipetest import read_eval_file

    try:
        read_eval_file(path, env=env, allow_roots=list(roots or ()))
    except PipelineInvalid as exc:
        return list(exc.diagnostics)
    return []


def _run_config_diagnostics(path: Path, env: Mapping[str, str] | None) -> list[Diagnostic]:
    """A run configuration checked as `run --config` reads it (schema, cache mode, folder)."""
    from converge_dsl.runtime import read_run_config

    try:
        read_run_config(path, env)
    except PipelineInvalid as exc:
        return list(exc.diagnostics)
    return []


def _pack_diagnostics(path: Path, name: str) -> list[Diagnostic]:
    """A pack manifest checked as `pack publish` checks it (schema, files, templates)."""
    from converge_dsl.errors import PackError
    from converge_dsl.packs import load_pack

    folder = name.rpartition("/")[0] or "."
    try:
        load_pack(path.parent, display=folder)
    except PipelineInvalid as exc:
        return list(exc.diagnostics)
    except PackError as exc:
        code = exc.code or codes.PACK_BAD_FILE
        return [Diagnostic(code, Severity.ERROR, exc.message, name, 1, 1, 1, 1, hint=exc.hint)]
    return []
