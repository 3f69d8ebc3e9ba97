"""The validate stage: the front end's checks composed with the domain packages' checks.

`validate` and `run` call this module; it sits above `agents` and `packs`
and below `runtime`. `CHECKS` is the front end's own checks
(`converge_dsl.frontend.CHECKS`), then the model-file check
(`converge_dsl.models.check_model_scripts`), the model-configuration check
(`converge_dsl.models.check_model_config`) and the pack checks
(`converge_dsl.packs.check_packs`, of the `packs:` section and the lock). Each
domain check is imported on its first call, so `import converge_dsl.validation`
stays cheap, and each returns at once for a pipeline with nothing for it.
`KINDS` is every suggestor kind: the front end's seed, rule and llm plus
`agent` (`converge_dsl.agents`) and `pack` (`converge_dsl.packs`), each module
imported when a pipeline first names the kind; a kind's own checks run through
the front end's `kind_checks` (docs/architecture.md §16).

- `check_pipeline(path, display=..., roots=...)` -> `CheckedPipeline`: never raises for a
  user error; packs are read from the cache only (no network, no writes). Files the
  pipeline names must lie in its folder or one of `roots` (the `--allow-root` folders;
  default: those of the CONVERGE_DSL_ALLOW_ROOTS variable); `load_pipeline` and `check_paths`
  take `roots` too.
- `load_pipeline(path, display=..., fetch=False, on_fetch=...)` -> `LoadedDocument`, or
  raises `PipelineInvalid`: what `run` (with `fetch=True`: locked packs the cache
  lacks are fetched and verified first, and `on_fetch` hears one line per pack
  actually fetched) and `plan` call.
- `says_ours(path, kind)`: whether a file says it is converge-dsl's file of that kind
- `pipeline_files(paths)`: the pipeline files named by files and folders, and
  the packs among them (a `pack.yaml` saying `kind: Pack`): what `validate
  PATH...` checks; `check_paths(paths)` checks them all into `CheckedFiles`, each
  pack as `pack publish` would (`converge_dsl.packs.load_pack`).
- `check_model_scripts`, `check_model_config`, `check_packs`: the
  domain checks as they are composed (each imports its package only when the
  pipeline needs it).

`CHECKS` is a tuple composed once here: a check that `validate` and `run` both run
is added to it.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from converge_dsl import codes
from converge_dsl._reading import ReadRefused, read_bytes
from converge_dsl._record import Record
from converge_dsl.diagnostics import Diagnostic, Severity, best_first
from converge_dsl.errors import PipelineInvalid, UsageError
from converge_dsl.frontend import CHECKS as FRONTEND_CHECKS
from converge_dsl.frontend import KINDS as FRONTEND_KINDS
from converge_dsl.frontend import (
    Check,
    CheckedPipeline,
    KindRegistry,
    LoadedDocument,
    PipelineFacts,
    roster_accounts,
)
from converge_dsl.frontend import check_pipeline as _frontend_check

__all__ = [
    "CHECKS",
    "KINDS",
    "CheckedFiles",
    "check_model_config",
    "check_model_scripts",
    "check_packs",
    "check_paths",
    "check_pipeline",
    "load_pipeline",
    "pipeline_files",
    "says_ours",
]

# Files in a folder that say one of these kinds at the top are not pipelines.
OTHER_KINDS = frozenset({"ModelScript", "Pack", "PipelineTest"})


def check_model_scripts(
    facts: PipelineFacts, roots: Sequence[Path] | None = None
) -> Iterator[Diagnostic]:
    """`converge_dsl.models.check_model_scripts`, imported on first use.

    `roots`: the folders the user allows besides the pipeline's (default: those
    of `CONVERGE_DSL_ALLOW_ROOTS`).
    """
    from converge_dsl.models import check_model_scripts as check

    yield from check(facts, roots)


def check_model_config(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """`converge_dsl.models.check_model_config`, imported only for a pipeline with accounts."""
    if any(True for _ in roster_accounts(facts.manifest.models.values())):
        from converge_dsl.models import check_model_config as check

        yield from check(facts)


def _uses_packs(facts: PipelineFacts) -> bool:
    return bool(facts.packs) or any(spec.pack_references() for spec in facts.specs)


def check_packs(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """`converge_dsl.packs.check_packs` (cache only), imported only for a pipeline with packs."""
    if _uses_packs(facts):
        from converge_dsl.packs import check_packs as check

        yield from check(facts)


CHECKS: tuple[Check, ...] = (
    *FRONTEND_CHECKS,
    check_model_scripts,
    check_model_config,
    check_packs,
)

# Every suggestor kind: the front end's seed, rule and llm, then agent and pack,
# each imported the first time a pipeline names it (docs/architecture.md §16).
KINDS: KindRegistry = FRONTEND_KINDS.with_kinds(
    {"agent": "converge_dsl.agents._kind:AGENT", "pack": "converge_dsl.packs._kind:PACK"}
)


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")


def _checks(
    roots: Sequence[Path] | None, on_fetch: Callable[[str], object] | None = None
) -> tuple[Check, ...]:
    """`CHECKS` with the model-file check bound to `roots` and, given `on_fetch`, the
    cache-only pack check replaced by the one that fetches."""

    def check_and_fetch_packs(facts: PipelineFacts) -> Iterator[Diagnostic]:
        if _uses_packs(facts) and on_fetch is not None:
            from converge_dsl.packs import fetching_pack_check

            yield from fetching_pack_check(on_fetch)(facts)

    def check_model_files(facts: PipelineFacts) -> Iterator[Diagnostic]:
        yield from check_model_scripts(facts, roots)

    replaced: dict[Check, Check] = {check_model_scripts: check_model_files}
    if on_fetch is not None:
        replaced[check_packs] = check_and_fetch_packs
    return tuple(replaced.get(c, c) for c in CHECKS)


def check_pipeline(
    path: Path, *, display: str | None = None, roots: Sequence[Path] | None = None
) -> CheckedPipeline:
    """Validate the pipeline file at `path` with every check; `display` names it in diagnostics.

    Packs are read from the pack cache only: a locked pack it lacks is a
    `PACK_NOT_FETCHED` diagnostic, never a download. Files the pipeline names
    must lie inside its folder or one of `roots` (default: the folders of
    `CONVERGE_DSL_ALLOW_ROOTS`).
    """
    checks = CHECKS if roots is None else _checks(roots)
    return _frontend_check(path, display=display or _display(path), checks=checks, kinds=KINDS)


def load_pipeline(
    path: Path,
    *,
    display: str | None = None,
    fetch: bool = False,
    on_fetch: Callable[[str], object] | None = None,
    roots: Sequence[Path] | None = None,
    on_warning: Callable[[Diagnostic], object] | None = None,
) -> LoadedDocument:
    """The validated document at `path`; raises `PipelineInvalid` with every diagnostic.

    The diagnostics of `check_pipeline` (with `roots` as there). With `fetch`
    (what `run` asks), locked packs the cache lacks are fetched and verified
    instead of reported; `on_fetch` (default: a line on standard error) hears
    `fetched pack NAME VERSION from REPOSITORY` for each. `on_warning` hears
    each warning of a valid pipeline (best first), so a run reports what
    `validate` would.
    """
    checks = _checks(roots, on_fetch or _to_stderr) if fetch else _checks(roots)
    checked = _frontend_check(path, display=display or _display(path), checks=checks, kinds=KINDS)
    if not checked.ok or checked.document is None:
        raise PipelineInvalid(checked.diagnostics)
    if on_warning is not None:
        for diagnostic in checked.diagnostics:
            on_warning(diagnostic)
    return checked.document


def _top_kind(path: Path) -> object:
    """The `kind` at the top of the file (None when only `apiVersion` is there);
    `_UNREAD` when it does not load as a mapping, `_NOT_OURS` for a file that cannot
    name a kind or is a mapping with neither `apiVersion` nor `kind`."""
    import yaml

    try:
        text = read_bytes(path, "pipeline").decode("utf-8-sig")
        if not any(word in text for word in ("ModelScript", "Pack", "apiVersion", "kind")):
            return _NOT_OURS  # cannot name a kind or an API version
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, ValueError, RecursionError, yaml.YAMLError, ReadRefused):
        return _UNREAD
    if not isinstance(data, dict):
        return _UNREAD
    if "kind" not in data and "apiVersion" not in data:
        return _NOT_OURS
    return data.get("kind")


_UNREAD, _NOT_OURS = object(), object()


def _is_pack(path: Path) -> bool:
    """A pack's manifest: a `pack.yaml` that says `kind: Pack` at the top."""
    return path.name == "pack.yaml" and _top_kind(path) == "Pack"


def _is_pipeline(path: Path) -> bool:
    """False only for a file that loads and is another converge-dsl kind, or none at all.

    Another kind: `kind` is `ModelScript`, `Pack` or `PipelineTest` at the top. None at all: a
    mapping with neither `apiVersion` nor `kind` (a CI workflow, an old YAML
    cassette). Everything else, broken files included, is checked as a pipeline.
    """
    kind = _top_kind(path)
    return kind is not _NOT_OURS and kind not in OTHER_KINDS


# A line saying a file is converge-dsl's: `apiVersion: converge-dsl/...` or
# `kind: KIND`, in block or flow style, keys and values quoted or not.
_SAYS_OURS = (
    r"""(?:^|[{,])[ \t]*["']?(?:apiVersion["']?[ \t]*:[ \t]*["']?converge-dsl/"""
    r"""|kind["']?[ \t]*:[ \t]*["']?KIND\b)"""
)

# A top-level `apiVersion:` that names another API than converge-dsl's (one that
# does not even mention it: `converge-dls/v1` is a typo of ours, reported by validate).
_OTHER_API = re.compile(
    r"""^["']?apiVersion["']?[ \t]*:[ \t]*["']?(?![^\s"'#]*converge)[^\s"'#]""",
    re.M | re.I,
)


def says_ours(path: Path, kind: str) -> bool:
    """Whether the file at `path` says it is a converge-dsl file of `kind` (`Pipeline`,
    `PipelineTest`): a line `apiVersion: converge-dsl/...` or `kind: KIND`, and no
    top-level `apiVersion` of another tool (Tekton's `tekton.dev/v1` has a `kind:
    Pipeline` too). A file that cannot be read is kept, so its reader says why."""
    try:
        text = read_bytes(path, "file").decode("utf-8-sig", errors="replace")
    except (OSError, ReadRefused):
        return True
    if _OTHER_API.search(text) is not None:
        return False
    return re.search(_SAYS_OURS.replace("KIND", re.escape(kind)), text, re.M) is not None


def _says_pipeline(path: Path) -> bool:
    """For `only_pipelines`: the file names converge-dsl (`_SAYS_OURS`), names no other
    API at the top (`apiVersion: tekton.dev/v1` with `kind: Pipeline`) and is a pipeline.

    Another tool's YAML (a compose file, a Helm template that is not YAML at
    all) is skipped unread by the loader; a file that cannot be read is kept, so
    `validate` reports why.
    """
    return says_ours(path, "Pipeline") and _is_pipeline(path)


def pipeline_files(paths: Sequence[str], *, only_pipelines: bool = False) -> list[Path]:
    """The pipeline files named by `paths` (folders expanded, sorted, de-duplicated).

    In a folder, every `*.yaml`/`*.yml` file (recursively) is a pipeline, except
    the files that load and say `kind: ModelScript`, `Pack` or `PipelineTest` at the top,
    or that load as a mapping with neither `apiVersion` nor `kind`; a `pack.yaml`
    saying `kind: Pack` is kept as a pack. A folder with neither, or a path that
    does not exist, is a `UsageError`.
    With `only_pipelines`, a file named directly is kept only when it says it is
    a converge-dsl pipeline (`_says_pipeline`), as a pre-commit hook needs.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            inside = sorted(p for pattern in ("*.yaml", "*.yml") for p in path.rglob(pattern))
            chosen = [p for p in inside if p.is_file() and (_is_pipeline(p) or _is_pack(p))]
            if not chosen:
                raise UsageError(
                    f"no pipeline files found in {raw}",
                    hint="a folder is searched for *.yaml and *.yml pipeline files "
                    "and pack.yaml pack manifests",
                )
            found.extend(chosen)
        elif path.exists():  # a FIFO or device too: its reader refuses it (CD930)
            if not only_pipelines or _says_pipeline(path):
                found.append(path)
        else:
            raise UsageError(
                f"no such file or folder: {raw}", hint="give pipeline files or folders"
            )
    unique: dict[Path, None] = dict.fromkeys(found)
    return list(unique)


class CheckedFiles(Record):
    """Every pipeline file `validate PATH...` checked, their diagnostics and their texts."""

    _fields = ("files", "diagnostics", "sources")
    __slots__ = _fields

    def __init__(
        self, files: tuple[Path, ...], diagnostics: tuple[Diagnostic, ...], sources: dict[str, str]
    ) -> None:
        self.files = files
        self.diagnostics = diagnostics  # best first, over all files
        self.sources = sources  # display name -> text, for excerpts

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not any(d.is_error for d in self.diagnostics)


def _display(path: Path) -> str:
    """The path as the user reads it: relative to the working folder when inside it."""
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:  # outside the working folder: as given
        return str(path)


def check_paths(
    paths: Sequence[str],
    *,
    roots: Sequence[Path] | None = None,
    only_pipelines: bool = False,
) -> CheckedFiles:
    """`check_pipeline` (with `roots`) on every file of `pipeline_files(paths,
    only_pipelines=...)`; raises `UsageError` as it does."""
    files = pipeline_files(paths, only_pipelines=only_pipelines)
    diagnostics: list[Diagnostic] = []
    sources: dict[str, str] = {}
    for path in files:
        name = _display(path)
        if not only_pipelines and _is_pack(path):
            diagnostics.extend(_pack_diagnostics(path, name))
            with contextlib.suppress(OSError):
                sources[name] = path.read_bytes().decode("utf-8", errors="replace")
            continue
        checked = check_pipeline(path, display=name, roots=roots)
        diagnostics.extend(checked.diagnostics)
        if checked.document is not None:
            sources[name] = checked.document.text
        elif checked.diagnostics:
            with contextlib.suppress(OSError, ReadRefused):
                sources[name] = read_bytes(path, "pipeline").decode("utf-8", errors="replace")
    return CheckedFiles(tuple(files), tuple(best_first(diagnostics)), sources)


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
        code = getattr(exc, "code", codes.PACK_BAD_FILE)
        return [Diagnostic(code, Severity.ERROR, exc.message, name, 1, 1, 1, 1, hint=exc.hint)]
    return []
