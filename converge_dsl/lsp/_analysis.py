"""One analysis of a pipeline text: `validate`'s own checks, run on what the editor holds.

`analyse(path, text, display)` loads the text with the front end's strict loader
and checks it with `converge_dsl.validation`'s composition (`CHECKS`, every
suggestor kind in `KINDS`) through `check_document`: exactly what
`validation.check_pipeline` runs on a file, with the editor's text in place of
the file's bytes. A check added to `validation.CHECKS` appears here unchanged.
No check is implemented in this package.

The analysis keeps what the other features read: the loaded document (data
and source map, for positions) and the pipeline's facts (specs, declared keys,
models, templates), built when the document loads and its specs can be read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl._collector import quiet_collector
from converge_dsl._file_kinds import OTHER_KINDS
from converge_dsl._record import Record
from converge_dsl.diagnostics import Diagnostic, best_first
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import LoadedDocument, PipelineFacts
from converge_dsl.frontend.document import OTHER_BREAKS
from converge_dsl.lsp._positions import YAML_ONLY

if TYPE_CHECKING:
    from converge_dsl.frontend import Check

PIPELINE, SCRIPT, TEST, PACK, OTHER = "Pipeline", "ModelScript", "PipelineTest", "Pack", "other"

# The top-level `kind:` of a converge-dsl file, as `validate` tells its files apart.
# `^` starts a line after `\n` only: a text holding a `\r` (a lone one breaks a line
# too) or one of YAML's other breaks is read with each as `\n` (a lookbehind for `\r` is
# 4x slower on any text).
_KIND = re.compile(r"""^["']?kind["']?[ \t]*:[ \t]*["']?([A-Za-z]+)""", re.M)
_API = re.compile(r"""^["']?apiVersion["']?[ \t]*:[ \t]*["']?converge-dsl/""", re.M)


def file_kind(text: str) -> str:
    """`Pipeline`, `ModelScript`, `PipelineTest`, `Pack` or `other`, from the file's top lines.

    A file that names converge-dsl's API (or a pipeline's kind) and no other
    kind of ours is a pipeline, broken ones included, as `validate` reads a folder;
    another kind of ours the server does not read (`_file_kinds.OTHER_KINDS`: an
    evaluation, a run configuration) is `other`.
    """
    if "\r" in text:
        text = text.replace("\r", "\n")
    if any(mark in text for mark in OTHER_BREAKS):  # YAML's other breaks (`_positions`)
        text = YAML_ONLY.sub("\n", text)
    text = text.removeprefix("\ufeff")  # a byte order mark, which the loader drops
    found = _KIND.search(text)
    kind = found.group(1) if found else None
    if kind in (SCRIPT, TEST, PACK):
        return kind
    if kind in OTHER_KINDS:
        return OTHER
    if kind == PIPELINE or _API.search(text) is not None:
        return PIPELINE
    return OTHER


class Analysis(Record):
    """A pipeline text as `validate` sees it.

    `document` is None when the text does not load (then `diagnostics` are the
    loader's); `facts` is None when its suggestors cannot be read (a text that
    does not pass the schema may still give them). `checked` holds, until
    `with_facts`, the facts the checks read, so the editor model is built from
    what the checks already computed.
    """

    _fields = ("path", "text", "document", "facts", "diagnostics", "checked")
    __slots__ = _fields

    def __init__(  # noqa: PLR0917 (positional, as the fields are ordered)
        self,
        path: Path,
        text: str,
        document: LoadedDocument | None,
        facts: PipelineFacts | None,
        diagnostics: tuple[Diagnostic, ...],
        checked: PipelineFacts | None = None,
    ) -> None:
        self.path = path
        self.text = text
        self.document = document
        self.facts = facts
        self.diagnostics = diagnostics
        self.checked = checked

    def related_files(self) -> tuple[Path, ...]:
        """The files whose change can change this analysis: model scripts and
        cassettes its models read, and the lock file beside it."""
        from converge_dsl.lsp._related import beside

        names = ["converge.lock"]
        if self.facts is not None:
            for model in self.facts.manifest.models.values():
                names.extend(model.files.values())
        found = (beside(self.path, name) for name in names)
        return tuple(dict.fromkeys(path for path in found if path is not None))


def analyse(
    path: Path,
    text: str,
    display: str,
    *,
    facts: bool = True,
    previous: Analysis | None = None,
    env: Mapping[str, str] | None = None,
    checks: Sequence[Check] | None = None,
    stop_point: Callable[[], None] | None = None,
) -> Analysis:
    """Check `text` (the pipeline at `path`, named `display` in diagnostics) as `validate`
    checks the file, in the environment `env` (default: the process's); without `facts`,
    the editor model is left for `with_facts`. `checks` are `validate`'s checks in `env`
    (`validation.checks_in(env)`) when the caller keeps them (a server makes them once
    for its environment: `PipelineServer.checks`); default: made here.

    `previous`, an earlier analysis of the same file whose text loaded, lets the load
    re-read only the entry an edit lies in (`load_text`'s `previous`) and the checks
    re-use the specs of the suggestors it did not touch (`check_document`'s
    `previous`); the document, and so every diagnostic, is the one a check of the
    whole text gives.

    `stop_point()` is called between its stages (before the load, before the checks, and
    between two checks); an exception it raises ends the analysis (the server's: its text
    has been replaced, `_scheduler.Superseded`). No stage is cut short.

    The objects alive before it (the server, the analyses it keeps) sit in the
    collector's permanent generation meanwhile (`_collector.quiet_collector`):
    they hold no garbage, and a full collection walking them cost 60-100 ms in
    every second or third analysis of a 1,000-suggestor pipeline
    (`bench/lsp.py`).
    """
    from converge_dsl.frontend import check_document, load_text
    from converge_dsl.validation import KINDS, checks_in

    with quiet_collector():
        if stop_point is not None:
            stop_point()
        try:
            earlier = None if previous is None else previous.document
            document = load_text(text.removeprefix("\ufeff"), display, previous=earlier, env=env)
        except PipelineInvalid as exc:
            return Analysis(path, text, None, None, tuple(best_first(exc.diagnostics)))
        made = None if previous is None else previous.facts or previous.checked
        checks = checks_in(env) if checks is None else checks
        if stop_point is not None:
            stop_point()
            checks = [_after(stop_point, check) for check in checks]
        checked = check_document(document, path.parent, checks=checks, kinds=KINDS, previous=made)
        analysis = Analysis(path, text, document, None, checked.diagnostics, checked.facts)
        return with_facts(analysis) if facts else analysis


def _after(stop_point: Callable[[], None], check: Check) -> Check:
    """`check`, with `stop_point()` called before it."""

    def checked(facts: PipelineFacts) -> Iterator[Diagnostic]:
        stop_point()
        return check(facts)

    return checked


def check_test(
    path: Path,
    text: str,
    display: str,
    open_texts: Mapping[Path, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Diagnostic, ...]:
    """A test file's own findings (named `display`), as `converge-dsl test` reads the file
    before it runs it (`pipetest.read_test_file`: its schema, the files it names, the
    keys, inputs, models and invariants it names that its pipeline lacks). A pipeline's
    findings are its own analysis's. The pipeline is read from the editor's text when it
    is among `open_texts` (resolved path -> text), else from disk, as the command does;
    in the environment `env` (default: the process's).
    """
    from converge_dsl.errors import ConvergeError
    from converge_dsl.pipetest import read_test_file

    try:
        read_test_file(path, env=env, text=text, display=display, pipelines=open_texts)
    except PipelineInvalid as exc:
        return tuple(d for d in exc.diagnostics if d.file == display)
    except ConvergeError:  # not a file any more: nothing to show in it
        return ()
    return ()


def names_for_tests(analysis: Analysis) -> object:
    """What a test file's findings read of this pipeline: whether it is valid, and the
    keys, inputs, models and invariants it declares (a change re-checks its open tests)."""
    facts = analysis.facts or analysis.checked
    if facts is None or any(d.is_error for d in analysis.diagnostics):
        return None
    invariants = frozenset(i.name for i in facts.manifest.invariants)
    return facts.declared_keys, facts.inputs, facts.models, invariants


def with_facts(analysis: Analysis) -> Analysis:
    """`analysis` with the pipeline's facts (None when its suggestors cannot be read)."""
    from converge_dsl.validation import KINDS

    if analysis.document is None:
        return analysis
    with quiet_collector():
        facts = analysis.checked or PipelineFacts(analysis.document, analysis.path.parent, KINDS)
        return analysis._replace(facts=_readable(facts), checked=None)


def _readable(facts: PipelineFacts) -> PipelineFacts | None:
    """`facts` when its manifest and specs can be read, else None.

    The kinds' parsers and the manifest trust the schema's shapes; a text that
    fails the schema may break them. What breaks is then only this editor
    model (the last good one stays in use), never the diagnostics, which
    `check_document` has already made.
    """
    try:
        _touch(
            facts.specs,
            facts.manifest.models.values(),
            facts.declared_keys,
            facts.templates,
            facts.key_references,
        )
    except Exception:  # any shape the schema would have refused
        return None
    return facts


def _touch(*parts: Iterable[object]) -> None:
    for part in parts:
        for _ in part:
            pass
