"""The validate stage: the front end's checks composed with the domain packages' checks.

`validate` and `run` call this module; it sits above `agents` and `packs`
and below `runtime`. `CHECKS` is the front end's own checks
(`converge_dsl.frontend.CHECKS`), then the model-file check
(`converge_dsl.models.check_model_scripts`), the model-configuration check
(`converge_dsl.models.check_model_config`) and the pack checks
(`converge_dsl.packs.check_packs`, of the `packs:` section and the lock) and
the tool-server lock check (`converge_dsl.packs.check_tool_lock`). Each
domain check is imported on its first call, so `import converge_dsl.validation`
stays cheap, and each returns at once for a pipeline with nothing for it.
`KINDS` is every suggestor kind: the front end's seed, rule, llm and tool plus
`agent` (`converge_dsl.agents`) and `pack` (`converge_dsl.packs`), each module
imported when a pipeline first names the kind; a kind's own checks run through
the front end's `kind_checks` (docs/architecture.md §16).

- `check_pipeline(path, display=..., roots=..., env=...)` -> `CheckedPipeline`: never
  raises for a user error; packs are read from the cache only (no network, no writes).
  Files the pipeline names must lie in its folder or one of `roots` (the `--allow-root`
  folders; default: those of the CONVERGE_DSL_ALLOW_ROOTS variable of `env`);
  `load_pipeline` takes `roots` and `env` too. `env` is the environment every check
  reads (the file-size cap, the pack cache's folder, the API key variables allowed,
  the allowed roots); default: the process's.
- `load_pipeline(path, display=..., fetch=False, on_fetch=...)` -> `LoadedDocument`, or
  raises `PipelineInvalid`: what `run` (with `fetch=True`: locked packs the cache
  lacks are fetched and verified first, and `on_fetch` hears one line per pack
  actually fetched) and `plan` call.
- `checks_in(env)`: `CHECKS` bound to the environment `env` (what an editor's analysis
  runs).
- `check_model_scripts`, `check_model_config`, `check_packs`, `check_tool_lock`: the
  domain checks as they are composed (each imports its package only when the
  pipeline needs it).

`CHECKS` is a tuple composed once here: a check that `validate` and `run` both run
is added to it. Which files a command reads is the CLI's business
(`converge_dsl.cli`), never this module's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from converge_dsl._file_kinds import PIPELINE, refuse_other_kind
from converge_dsl._files import display_name, user_roots
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import CHECKS as FRONTEND_CHECKS
from converge_dsl.frontend import KINDS as FRONTEND_KINDS
from converge_dsl.frontend import (
    Check,
    CheckedPipeline,
    KindRegistry,
    LoadedDocument,
    PipelineFacts,
    roster_accounts,
    tool_servers,
)
from converge_dsl.frontend import check_pipeline as _frontend_check

__all__ = [
    "CHECKS",
    "KINDS",
    "check_model_config",
    "check_model_scripts",
    "check_packs",
    "check_pipeline",
    "check_tool_lock",
    "checks_in",
    "load_pipeline",
]


def check_model_scripts(
    facts: PipelineFacts,
    roots: Sequence[Path] | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[Diagnostic]:
    """`converge_dsl.models.check_model_scripts`, imported on first use.

    `roots`: the folders the user allows besides the pipeline's (default: those
    of `CONVERGE_DSL_ALLOW_ROOTS`); `env`: the environment whose file-size cap a
    script is read under (default: the process's).
    """
    from converge_dsl.models import check_model_scripts as check

    yield from check(facts, roots, env)


def check_model_config(
    facts: PipelineFacts, env: Mapping[str, str] | None = None
) -> Iterator[Diagnostic]:
    """`converge_dsl.models.check_model_config` (in `env`, default: the process's
    environment), imported only for a pipeline with accounts."""
    if any(True for _ in roster_accounts(facts.manifest.models.values())):
        from converge_dsl.models import check_model_config as check

        yield from check(facts, env)


def check_tool_lock(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """`converge_dsl.packs.check_tool_lock` (the lock only, no server started), imported
    only for a pipeline with tool servers."""
    if facts.manifest.tools:
        from converge_dsl.packs import check_tool_lock as check

        yield from check(facts)


def _uses_packs(facts: PipelineFacts) -> bool:
    return bool(facts.packs) or any(spec.pack_references() for spec in facts.specs)


def check_packs(facts: PipelineFacts, env: Mapping[str, str] | None = None) -> Iterator[Diagnostic]:
    """`converge_dsl.packs.check_packs` (from the pack cache of `env`, default: the
    process's environment, only), imported only for a pipeline with packs."""
    if _uses_packs(facts):
        from converge_dsl.packs import PackCache
        from converge_dsl.packs import check_packs as check

        yield from check(facts, PackCache(environ=env))


CHECKS: tuple[Check, ...] = (
    *FRONTEND_CHECKS,
    check_model_scripts,
    check_model_config,
    check_packs,
    check_tool_lock,
)

# Every suggestor kind: the front end's seed, rule, llm and tool, then agent and pack,
# each imported the first time a pipeline names it (docs/architecture.md §16).
KINDS: KindRegistry = FRONTEND_KINDS.with_kinds(
    {"agent": "converge_dsl.agents._kind:AGENT", "pack": "converge_dsl.packs._kind:PACK"}
)


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")


def _checks(
    roots: Sequence[Path] | None,
    on_fetch: Callable[[str], object] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Check, ...]:
    """`CHECKS` with the model-file check bound to `roots` (default: those of `env`), the
    checks that read the environment bound to `env` and, given `on_fetch`, the
    cache-only pack check replaced by the one that fetches."""
    if env is None:
        if roots is None and on_fetch is None:
            return CHECKS
    elif roots is None:
        roots = user_roots((), env)

    def check_and_fetch_packs(facts: PipelineFacts) -> Iterator[Diagnostic]:
        if _uses_packs(facts) and on_fetch is not None:
            from converge_dsl.packs import PackCache, fetching_pack_check

            yield from fetching_pack_check(on_fetch, PackCache(environ=env))(facts)

    def check_model_files(facts: PipelineFacts) -> Iterator[Diagnostic]:
        yield from check_model_scripts(facts, roots, env)

    def check_tool_servers(facts: PipelineFacts) -> Iterator[Diagnostic]:
        yield from tool_servers(facts, roots)

    def check_config_in_env(facts: PipelineFacts) -> Iterator[Diagnostic]:
        yield from check_model_config(facts, env)

    def check_packs_in_env(facts: PipelineFacts) -> Iterator[Diagnostic]:
        yield from check_packs(facts, env)

    replaced: dict[Check, Check] = {
        check_model_scripts: check_model_files,
        tool_servers: check_tool_servers,
        check_model_config: check_config_in_env,
        check_packs: check_and_fetch_packs if on_fetch is not None else check_packs_in_env,
    }
    return tuple(replaced.get(c, c) for c in CHECKS)


def checks_in(env: Mapping[str, str] | None) -> tuple[Check, ...]:
    """`CHECKS` as they run in the environment `env` (its allowed roots, pack cache and
    API key variables; None: the process's, which is `CHECKS` itself)."""
    return _checks(None, env=env)


def check_pipeline(
    path: Path,
    *,
    display: str | None = None,
    roots: Sequence[Path] | None = None,
    env: Mapping[str, str] | None = None,
) -> CheckedPipeline:
    """Validate the pipeline file at `path` with every check; `display` names it in diagnostics.

    Packs are read from the pack cache only: a locked pack it lacks is a
    `PACK_NOT_FETCHED` diagnostic, never a download. Files the pipeline names
    must lie inside its folder or one of `roots` (default: the folders of
    `CONVERGE_DSL_ALLOW_ROOTS`). `env` is the environment the checks read
    (default: the process's; see the module docstring).
    """
    return _frontend_check(
        path,
        display=display or display_name(path),
        checks=_checks(roots, env=env),
        kinds=KINDS,
        env=env,
    )


def load_pipeline(
    path: Path,
    *,
    display: str | None = None,
    fetch: bool = False,
    on_fetch: Callable[[str], object] | None = None,
    roots: Sequence[Path] | None = None,
    on_warning: Callable[[Diagnostic], object] | None = None,
    text: str | None = None,
    env: Mapping[str, str] | None = None,
) -> LoadedDocument:
    """The validated document at `path`; raises `PipelineInvalid` with every diagnostic.
    With `text`, that is the file's text (an editor's, not yet saved).

    The diagnostics of `check_pipeline` (with `roots` as there). With `fetch`
    (what `run` asks), locked packs the cache lacks are fetched and verified
    instead of reported; `on_fetch` (default: a line on standard error) hears
    `fetched pack NAME VERSION from REPOSITORY` for each. `on_warning` hears
    each warning of a valid pipeline (best first), so a run reports what
    `validate` would; notes (where an analysis stops short) are `validate`'s alone.
    `env` is the environment the checks read (default: the process's).
    """
    checks = _checks(roots, on_fetch or _to_stderr if fetch else None, env)
    checked = _frontend_check(
        path, display=display or display_name(path), checks=checks, kinds=KINDS, text=text, env=env
    )
    if not checked.ok or checked.document is None:
        if checked.document is not None:  # another kind of ours: one usage error, not ten
            refuse_other_kind(checked.document, PIPELINE)
        raise PipelineInvalid(checked.diagnostics)
    if on_warning is not None:
        for diagnostic in checked.diagnostics:
            if not diagnostic.is_note:
                on_warning(diagnostic)
    return checked.document
