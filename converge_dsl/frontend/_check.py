"""The front end's check stage: load, then JSON Schema, then a sequence of semantic checks.

`check_pipeline(path, checks=...)` never raises for a user error: it returns
every diagnostic, best first. `load_pipeline(path, checks=...)` returns the
document or raises `PipelineInvalid`. `checks` defaults to the front end's own
`CHECKS`; `converge_dsl.validation` passes the composed tuple (front end,
model scripts, agents, packs) that `validate` and `run` use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl._collector import quiet_collector
from converge_dsl._escapes import quoted
from converge_dsl._record import Record
from converge_dsl.diagnostics import Diagnostic, best_first
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend._loader import load_file
from converge_dsl.frontend.document import LoadedDocument

if TYPE_CHECKING:
    from converge_dsl.frontend._facts import Check, PipelineFacts
    from converge_dsl.frontend._kinds import KindRegistry, SuggestorKind

PIPELINE_SCHEMA = "pipeline.v1.json"  # (the composed one is `_schema.pipeline_schema`)


class CheckedPipeline(Record):
    """The outcome of validating one file: the document (None if it did not load) and findings.

    `facts` are what the semantic checks read (None when they did not run: the
    document did not load or failed the schema), for a caller that reads the
    pipeline further (the language server) without reading it again.
    """

    _fields = ("document", "diagnostics", "facts")
    __slots__ = _fields

    def __init__(
        self,
        document: LoadedDocument | None,
        diagnostics: tuple[Diagnostic, ...],
        facts: PipelineFacts | None = None,
    ) -> None:
        self.document = document
        self.diagnostics = diagnostics
        self.facts = facts

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not any(d.is_error for d in self.diagnostics)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if not d.is_error)


def check_document(
    document: LoadedDocument,
    base_dir: Path | None = None,
    *,
    checks: Sequence[Check] | None = None,
    kinds: KindRegistry | None = None,
    previous: PipelineFacts | None = None,
) -> CheckedPipeline:
    """Schema and semantic checks of an already loaded pipeline document.

    Semantic checks (`checks`, default: the front end's `CHECKS`) run only when
    the schema passes, so each may trust the shapes. `kinds` are the suggestor
    kinds (default: the front end's seed, rule, llm and tool). `previous`, the
    facts of an earlier text of the same file, lends the specs of the entries
    the load re-used (`PipelineFacts`); the findings are the same without it.
    """
    from converge_dsl.frontend._registry import KINDS
    from converge_dsl.frontend._schema import schema_diagnostics

    kinds = KINDS if kinds is None else kinds
    composed = _schema_kinds(document, kinds)
    found = schema_diagnostics(document, PIPELINE_SCHEMA, composed)
    if composed is not None:
        found = _not_loaded(document, kinds, found)
    if found:
        return CheckedPipeline(document, tuple(best_first(found)))
    from converge_dsl.frontend._facts import PipelineFacts
    from converge_dsl.frontend._semantic import CHECKS, semantic_diagnostics

    facts = PipelineFacts(document, base_dir, kinds, previous=previous)
    found = semantic_diagnostics(facts, CHECKS if checks is None else checks)
    return CheckedPipeline(document, tuple(best_first(found)), facts)


def _not_loaded(
    document: LoadedDocument, kinds: KindRegistry, found: list[Diagnostic]
) -> list[Diagnostic]:
    """`found`, with a kind an installed distribution fails to give reported as such
    (`KIND_NOT_LOADED`) in place of the schema's "not allowed"."""
    from converge_dsl import codes
    from converge_dsl.frontend._kinds import broken_kinds

    broken = broken_kinds()
    if not broken:
        return found
    reported: list[Diagnostic] = []
    for index, raw in enumerate(document.data.get("suggestors") or ()):
        name = raw.get("kind") if isinstance(raw, dict) else None
        if isinstance(name, str) and name in broken and kinds.get(name) is None:
            reported.append(
                document.source_map.diagnostic(
                    codes.KIND_NOT_LOADED,
                    f"suggestor kind {quoted(name)} could not be loaded: {broken[name]}",
                    ("suggestors", index, "kind"),
                    hint="fix or reinstall the distribution that provides it",
                )
            )
    paths = {d.path for d in reported}
    return reported + [d for d in found if d.path not in paths]


def _schema_kinds(
    document: LoadedDocument, kinds: KindRegistry
) -> tuple[SuggestorKind, ...] | None:
    """The kinds to compose the schema from; None for the shipped schema.

    The shipped schema serves when every kind the document names is built in
    and registered; otherwise the schema is composed from every kind there is
    (the registry's and the installed distributions'), so a kind from elsewhere
    is checked by its own branch and an unknown one is a located error naming
    the kinds that exist.
    """
    from converge_dsl.frontend._schema import builtin_kind_names

    suggestors = document.data.get("suggestors") if isinstance(document.data, dict) else None
    named = {s.get("kind") for s in suggestors or () if isinstance(s, dict)}
    builtin = builtin_kind_names()
    if all(name in builtin and kinds.get(name) is not None for name in named):
        return None
    return kinds.all()


def check_pipeline(
    path: Path,
    *,
    display: str | None = None,
    checks: Sequence[Check] | None = None,
    kinds: KindRegistry | None = None,
    text: str | None = None,
    env: Mapping[str, str] | None = None,
) -> CheckedPipeline:
    """Check the pipeline file at `path`; `display` names it in diagnostics. With `text`,
    that is the file's text (an editor's, not yet saved). `env` is the environment
    whose size cap it is loaded under (`_loader.max_bytes`; default: the process's).

    While it is checked, the loaded document (and every object older) sits in the
    collector's permanent generation (`_collector.quiet_collector`): the checks
    allocate a few objects per template, and a full collection among them would
    otherwise walk the whole document again (a quarter of the checks' time for a
    thousand rules). Nothing is collected less: what the checks make is collected
    as before. Already frozen objects, or a disabled collector, leave it alone.
    """
    from converge_dsl.frontend._loader import load_text

    try:
        if text is None:
            document = load_file(path, display=display, env=env)
        else:
            document = load_text(text.removeprefix("\ufeff"), display or str(path), env=env)
    except PipelineInvalid as exc:
        return CheckedPipeline(None, tuple(best_first(exc.diagnostics)))
    with quiet_collector():
        return check_document(document, path.parent, checks=checks, kinds=kinds)


def load_pipeline(
    path: Path,
    *,
    display: str | None = None,
    checks: Sequence[Check] | None = None,
    kinds: KindRegistry | None = None,
) -> LoadedDocument:
    """The checked document at `path`; raises `PipelineInvalid` on any error."""
    checked = check_pipeline(path, display=display, checks=checks, kinds=kinds)
    if not checked.ok or checked.document is None:
        raise PipelineInvalid(checked.diagnostics)
    return checked.document
