"""The model-file check: scripts and cassettes exist inside the allowed roots; scripts load.

`check_model_scripts` is a `converge_dsl.frontend.Check`, composed by
`converge_dsl.validation` (which binds the roots the user allows). Every file
a model entry names (`script`, `cassette`, `record`) must resolve inside the
pipeline's folder or an allowed root (`converge_dsl._files.referenced_path`:
CD220 outside, CD221 a FIFO, device or hard link), checked before anything is
read, and located at the pipeline's field. A scripted model's script then goes
through `load_script`, exactly as `run` loads it: strict YAML,
`model-script.v1.json`, regexes that compile and cannot backtrack for hours.
A script that does not load as a YAML mapping is reported without quoting it
(CD222, or the loader's own code with no excerpt): only YAML documents of ours
are ever quoted. Nothing here imports the HTTP adapters, the engine, asyncio
or pydantic.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl._file_identity import FileIdentity, identity, settled
from converge_dsl._files import ReferenceRefused, referenced_path
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.errors import ConvergeError

if TYPE_CHECKING:
    from converge_dsl.frontend import PipelineFacts
    from converge_dsl.models._script import Script

# The fields of a model entry that name a file: read (must exist) or written.
FILE_FIELDS: Mapping[str, bool] = {"script": True, "cassette": True, "record": False}


def check_model_scripts(
    facts: PipelineFacts,
    roots: Sequence[Path] | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[Diagnostic]:
    """CD220/CD221 for a model file outside the allowed roots or not a regular file,
    `MISSING_FILE` for a script or cassette that is not a file, then a script's own problems.

    `roots` are the folders the user allows besides the pipeline's (default:
    those of `CONVERGE_DSL_ALLOW_ROOTS`, see `converge_dsl._files.user_roots`);
    `env` is the environment whose file-size cap a script is read under (default:
    the process's).
    """
    if facts.base_dir is None:
        return
    if roots is None:
        from converge_dsl._files import user_roots

        roots = user_roots()
    for model in facts.manifest.models.values():
        named = model.named_files
        for field, read in FILE_FIELDS.items():
            if field not in named:
                continue
            where = (*model.path, field)
            try:
                path = referenced_path(
                    named[field], facts.base_dir, roots, field=f"{field} file", read=read
                )
            except ReferenceRefused as exc:
                yield facts.error(exc.code, exc.message, where, hint=exc.hint)
                continue
            if not read:
                continue
            if not path.is_file():
                what = "is a folder, not a file" if path.is_dir() else "not found"
                yield facts.error(
                    codes.MISSING_FILE,
                    f"{field} file {named[field]!r} {what}",
                    where,
                    hint="paths are relative to the pipeline file",
                )
            elif field == "script" and model.adapter == "scripted":
                display = (Path(facts.document.file).parent / named[field]).as_posix()
                yield from _script_problems(path, display, env)


def _script_problems(
    path: Path, display: str, env: Mapping[str, str] | None
) -> Iterator[Diagnostic]:
    from converge_dsl.errors import PipelineInvalid

    try:
        load_script(path, display=display, env=env)
    except PipelineInvalid as exc:
        yield from exc.diagnostics


# The scripts loaded so far: (path, display, size cap) -> (the file's signature when it
# was read, its bytes, its script).
_LOADED: dict[tuple[str, str, int], tuple[FileIdentity | None, bytes, Script]] = {}
_KEEP_LOADED = 64


def load_script(path: Path, *, display: str, env: Mapping[str, str] | None = None) -> Script:
    """The script at `path` (named `display` in messages), as `validate` and `run` load it,
    under the file-size cap of the environment `env` (default: the process's).

    Raises `PipelineInvalid`. A file that does not load as YAML (not UTF-8,
    not well-formed, too large) keeps its located diagnostics without an
    excerpt; one that loads as something other than a mapping is one CD222
    diagnostic that names what it holds, never its text.

    A script is parsed and checked again only when the file changed since the
    last load of that path: while its identity (`_file_identity`: device, inode,
    size, mtime and ctime) is that of the last load, the script of that load is
    returned without reading the file; otherwise the file is read and parsed again
    unless its bytes are those of the last load (a batch builds its scripted model
    once per case; a script edited between two runs is the new one in the second).
    A file modified or changed less than `SETTLED_NS` before it was read is
    compared by its bytes until it has settled: an edit within the file system's
    clock tick keeps its identity (the wall clock is read only for this).
    """
    from converge_dsl.frontend import max_bytes

    key = (str(path), display, max_bytes(env))
    kept = _LOADED.get(key)
    found = identity(path)
    signature = None if isinstance(found, OSError) else found
    if kept is not None and signature is not None and kept[0] == signature:
        return kept[2]
    raw = _bytes(path)
    if signature is not None and not settled(signature, time.time_ns()):
        signature = None  # too fresh to tell an edit in the same clock tick by its time
    if kept is not None and raw is not None and kept[1] == raw:
        _LOADED[key] = (signature, raw, kept[2])
        return kept[2]
    script, text = _load_script(path, display, env)
    if raw is not None and _text_of(raw) == text:  # parsed from the bytes read above
        if len(_LOADED) >= _KEEP_LOADED:
            del _LOADED[next(iter(_LOADED))]
        _LOADED[key] = (signature, raw, script)
    return script


def _bytes(path: Path) -> bytes | None:
    """The bytes of `path`, or None when it cannot be read (the loader then says why)."""
    from converge_dsl._reading import read_bytes

    try:
        return read_bytes(path, "model script")
    except (OSError, ConvergeError):
        return None


def _text_of(raw: bytes) -> str | None:
    """The text the loader reads from `raw` (UTF-8, less a byte-order mark), or None."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return None


def _load_script(path: Path, display: str, env: Mapping[str, str] | None) -> tuple[Script, str]:
    """The script at `path` and the text it was compiled from (see `load_script`)."""
    from converge_dsl.errors import PipelineInvalid
    from converge_dsl.frontend import load_file
    from converge_dsl.models._script import compile_script

    try:
        doc = load_file(path, display=display, env=env)
    except PipelineInvalid as exc:
        raise PipelineInvalid([unquoted(d) for d in exc.diagnostics]) from None
    if not isinstance(doc.data, Mapping):
        kind = "a list" if isinstance(doc.data, list) else "a single value"
        raise PipelineInvalid(
            [
                unquoted(
                    Diagnostic.at(
                        codes.REFERENCE_NOT_YAML,
                        f"model script {display!r} is not a YAML mapping (it holds {kind})",
                        doc.source_map.span(())._replace(end_line=1, end_column=1),
                        hint="a model script is a YAML mapping with `rules:` and `default:`; "
                        "is this the right file?",
                    )
                )
            ]
        )
    return compile_script(doc), doc.text


def unquoted(diagnostic: Diagnostic) -> Diagnostic:
    """`diagnostic` shown without a source excerpt (its file may not be quoted)."""
    return diagnostic._replace(excerpt=False)
