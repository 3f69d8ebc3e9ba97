"""What kind of converge-dsl file a path holds, read from the text without loading it.

- `says_ours(path, kind)`: the file says it is converge-dsl's file of `kind`
  (`Pipeline`, `PipelineTest`): `validate --only-pipelines` and `test` pick
  files with it.
- `file_kind(path)`: how `validate`, `serve` and a folder walk sort YAML files into
  pipelines, pack manifests, evaluation files, run configurations and other tools' files
  (`is_evaluation(path)`, `says_pipeline(path)` read it).
- `refuse_other_kind(document, wanted)`: a command given another kind of ours than the
  one it takes (`run` an evaluation, `eval` a pipeline...) refuses the file it loaded with
  `OtherKind` (CD818 / CD341, at its `kind`, exit 3), naming what takes it.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._reading import ReadRefused, read_bytes
from converge_dsl.errors import PipelineInvalid

if TYPE_CHECKING:
    from converge_dsl.diagnostics import Diagnostic
    from converge_dsl.frontend import LoadedDocument

# Files in a folder that say one of these kinds at the top are not pipelines.
OTHER_KINDS = frozenset({"Evaluation", "ModelScript", "Pack", "PipelineTest", "RunConfig"})


def _top(path: Path) -> object:
    """The top-level mapping of the file (its scalar values as text, `_top_entries`);
    `_UNREAD` when it does not load as a mapping, `_NOT_OURS` for a file that cannot
    name a kind or is a mapping with neither `apiVersion` nor `kind`."""
    from converge_dsl._pyyaml import yaml

    try:
        text = read_bytes(path, "pipeline").decode("utf-8-sig")
        if not any(word in text for word in ("ModelScript", "Pack", "apiVersion", "kind")):
            return _NOT_OURS  # cannot name a kind or an API version
        try:
            data = _top_entries(text)
        except _Unsure:
            data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, ValueError, RecursionError, yaml.YAMLError, ReadRefused):
        return _UNREAD
    if not isinstance(data, dict):
        return _UNREAD
    if "kind" not in data and "apiVersion" not in data:
        return _NOT_OURS
    return data


class _Unsure(Exception):
    """The events alone do not tell what the top-level entries load as (a tag, a merge
    key, a key that is a collection or an alias): the text is loaded whole instead."""


def _top_entries(text: str) -> dict[str, object] | None:
    """The top-level entries of `text` whose keys are scalars, each scalar value as its
    text (None when the document is not one mapping), read from the parser's events.

    What a whole load (`yaml.load`) would say of the top-level `kind` and `apiVersion`,
    without building the document: a load of a 16,000-suggestor pipeline took four
    times as long as reading its events, and more per suggestor the larger the file, as
    the collector walked the growing document (`bench/validate.py --scaling`). The
    events are read to the end, and what makes a load fail is found on the way (a text
    that does not parse, an undefined or repeated anchor, a plain scalar the safe loader
    cannot make: a `=` value, an integer or a date out of range); a plain scalar is kept as its
    text, which is a kind's name exactly when the loaded value is (no name of ours reads
    as another type). Raises `_Unsure` where only a load can tell: a tag, a merge key, a
    key that is a collection or an alias."""
    from converge_dsl._pyyaml import yaml

    events = yaml.events
    entries: dict[str, object] = {}
    anchors: set[str] = set()
    documents, root_is_mapping = 0, False
    # Each open collection: a mapping whose next node is a key (True) or a value (False),
    # or a sequence (None).
    open_at_key: list[bool | None] = []
    key = ""
    for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if isinstance(event, events.DocumentStartEvent):
            documents += 1
        if isinstance(event, events.CollectionEndEvent):
            open_at_key.pop()
            _took_node(open_at_key)
        if not isinstance(event, events.NodeEvent):
            continue
        if getattr(event, "tag", None) not in (None, "!"):
            raise _Unsure
        if isinstance(event, events.AliasEvent) and event.anchor not in anchors:
            return None  # a load says "found undefined alias": the caller's _UNREAD
        if event.anchor is not None and not isinstance(event, events.AliasEvent):
            if event.anchor in anchors:
                return None  # a load says "found duplicate anchor"
            anchors.add(event.anchor)
        scalar = event if isinstance(event, events.ScalarEvent) else None
        is_key = bool(open_at_key) and open_at_key[-1] is True
        if scalar is not None and scalar.implicit[0] and not (is_key and scalar.value == "="):
            _made_as_loaded(scalar.value)  # a `=` key loads as a string
        if is_key and (scalar is None or scalar.value == "<<"):
            raise _Unsure  # a key a load cannot hash, an alias, or a merge
        if len(open_at_key) == 1 and isinstance(event, events.AliasEvent):
            raise _Unsure  # a top-level value that is another node's
        if not open_at_key:
            root_is_mapping = isinstance(event, events.MappingStartEvent)
        elif len(open_at_key) == 1 and scalar is not None and is_key:
            key = scalar.value
        elif len(open_at_key) == 1:
            entries[key] = event if scalar is None else scalar.value  # a collection: no name
        if isinstance(event, events.CollectionStartEvent):
            open_at_key.append(True if isinstance(event, events.MappingStartEvent) else None)
        else:
            _took_node(open_at_key)
    return entries if documents == 1 and root_is_mapping else None


def _took_node(open_at_key: list[bool | None]) -> None:
    """A node of the innermost open collection has ended: a mapping's key or value in turn."""
    if open_at_key and open_at_key[-1] is not None:
        open_at_key[-1] = not open_at_key[-1]


def _made_as_loaded(plain: str) -> None:
    """Raise as the safe loader does on a plain scalar it cannot make: a `=` value (YAML's
    value key, which it has no type for), an integer past Python's digits limit, a date out
    of range. Other plain scalars (words, floats, null, booleans) never fail."""
    if plain[:1] not in ("=", "+", "-", *"0123456789"):
        return
    from converge_dsl._pyyaml import yaml

    resolver, constructor = _scalar_reader()
    tag = resolver.resolve(yaml.ScalarNode, plain, (True, False))
    if tag.endswith((":int", ":timestamp", ":value")):
        try:
            constructor.construct_document(yaml.ScalarNode(tag, plain))
        finally:
            constructor.recursive_objects.clear()  # a scalar that failed is left there


def _scalar_reader() -> tuple[Any, Any]:
    """A resolver and a safe constructor for every plain scalar `_made_as_loaded` makes,
    each forgotten once made: one pair a thread, as a constructor keeps the nodes it is
    making (the language server reads kinds on several threads)."""
    pair: tuple[Any, Any] | None = getattr(_READERS, "pair", None)
    if pair is None:
        from converge_dsl._pyyaml import yaml

        pair = _READERS.pair = yaml.resolver.Resolver(), yaml.constructor.SafeConstructor()
    return pair


_READERS = threading.local()


_UNREAD, _NOT_OURS = object(), object()


PIPELINE, PACK, EVALUATION, RUN_CONFIG = "Pipeline", "Pack", "Evaluation", "RunConfig"


def file_kind(path: Path) -> str | None:
    """What `validate` checks the YAML file at `path` as: `PACK` (a `pack.yaml` that says
    `kind: Pack`), `EVALUATION` (a `*.eval.yaml`/`.yml` that says `kind: Evaluation`),
    `RUN_CONFIG` (a `*.yaml`/`.yml` that says `kind: RunConfig`), `PIPELINE`, or None.

    None only for a file that loads and is another converge-dsl kind (`kind` is one of
    `OTHER_KINDS` at the top and no key of a pipeline's that kind lacks: the rule
    `refuse_other_kind` applies, `other_kind_said`), or none at all: a mapping with
    neither `apiVersion` nor `kind` (a CI workflow, an old YAML cassette). Everything
    else, broken files included, is a pipeline. A folder's file of kind None is skipped.
    """
    return walked_kind(path)[0]


def walked_kind(path: Path) -> tuple[str | None, str | None]:
    """`file_kind(path)`, and for a file it leaves out that says it is another kind of
    ours at its top (`PipelineTest`, `ModelScript`, an `Evaluation` or `Pack` of another
    name) that kind, for a folder walk's note of what it skipped (`skipped_note`); the
    file is read once."""
    top = _top(path)
    kind = top.get("kind") if isinstance(top, dict) else None
    if kind == PACK and path.name == "pack.yaml":
        return PACK, None
    if kind == EVALUATION and path.name.endswith((".eval.yaml", ".eval.yml")):
        return EVALUATION, None
    if kind == RUN_CONFIG and path.suffix in {".yaml", ".yml"}:
        return RUN_CONFIG, None
    said = other_kind_said(top, PIPELINE) if isinstance(top, dict) else None
    if said is not None:
        return None, said
    return (None if top is _NOT_OURS else PIPELINE), None


def skipped_note(shown: str, kind: str) -> str:
    """Why a folder walk did not check the file `shown`, of `kind`: what it is and what
    takes it (as `refuse_other_kind` says)."""
    from converge_dsl._escapes import shell_word

    what, how, _ = _KINDS[kind]
    return f"skipped {shown}: {what} (kind: {kind}); {how.replace('FILE', shell_word(shown))}"


def kind_taken(shown: str, kind: str) -> str:
    """The file `shown`, what it is by its `kind` and what takes it, in a few words
    (`h.test.yaml (a pipeline test file; run it with `converge-dsl test h.test.yaml`)`)."""
    from converge_dsl._escapes import shell_word

    what, how, _ = _KINDS[kind]
    return f"{shown} ({what}; {how.replace('FILE', shell_word(shown))})"


def is_evaluation(path: Path) -> bool:
    """An evaluation file: a `*.eval.yaml` (or `.yml`) that says `kind: Evaluation` at the top."""
    return file_kind(path) == EVALUATION


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


def says_pipeline(path: Path) -> bool:
    """For `only_pipelines`: the file names converge-dsl (`_SAYS_OURS`), names no other
    API at the top (`apiVersion: tekton.dev/v1` with `kind: Pipeline`) and is a pipeline.

    Another tool's YAML (a compose file, a Helm template that is not YAML at
    all) is skipped unread by the loader; a file that cannot be read is kept, so
    `validate` reports why.
    """
    return says_ours(path, "Pipeline") and file_kind(path) == PIPELINE


# What each kind of ours is, how it is used (FILE: the file given), and its schema: what
# a command given another kind than the one it takes says (`refuse_other_kind`,
# `kind_named`). A document with a top-level key of the wanted kind's schema that the kind
# it says has not is the wanted kind with a wrong `kind` (a pipeline saying `kind:
# Evaluation`), and the loader says all its errors rather than one refusal.
_KINDS = {
    PIPELINE: ("a pipeline", "run it with `converge-dsl run FILE`", "pipeline.v1.json"),
    EVALUATION: ("an evaluation file", "run it with `converge-dsl eval FILE`", "eval.v1.json"),
    "PipelineTest": (
        "a pipeline test file",
        "run it with `converge-dsl test FILE`",
        "pipeline-test.v1.json",
    ),
    RUN_CONFIG: (
        "a run configuration",
        "give it to a run of a pipeline: `converge-dsl run PIPELINE --config FILE`",
        "run-config.v1.json",
    ),
    PACK: ("a pack manifest", "a pipeline uses its pack under `packs:`", "pack.v1.json"),
    "ModelScript": (
        "a model script",
        "a pipeline's model answers from it: `adapter: scripted, script: FILE`",
        "model-script.v1.json",
    ),
}


@functools.cache
def _top_keys(kind: str) -> frozenset[str]:
    import json

    from converge_dsl._resources import read_schema_text

    schema = json.loads(read_schema_text(_KINDS[kind][2]))
    return frozenset(schema.get("properties", {}))


def kind_named(kind: str) -> str:
    """What a file of `kind` is, in words (`an evaluation file`)."""
    return _KINDS[kind][0]


class OtherKind(PipelineInvalid):
    """A command was given a file that says it is another kind of ours than the one it
    takes (CD818 where a pipeline was wanted, CD341 an evaluation; located at its
    `kind`): a usage error (exit 3, stop reason `usage_error`). Its code is its
    diagnostic's."""

    exit_code = 3
    code = codes.NOT_A_PIPELINE

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__([diagnostic])
        self.code = diagnostic.code


def other_kind_said(data: Mapping[Any, object], wanted: str) -> str | None:
    """The kind of ours other than `wanted` (`PIPELINE`, `EVALUATION`) that the top-level
    mapping `data` says at its `kind` (`_KINDS`), or None: no kind, `wanted` itself, no
    kind of ours, or a document with a top-level key of `wanted`'s schema that the kind
    it says has not (`_top_keys`), which is `wanted` with a wrong `kind` (a pipeline
    saying `kind: PipelineTest`), checked as `wanted` so all its errors are said. What a
    command refuses (`refuse_other_kind`) and what a folder walk skips (`walked_kind`)."""
    kind = data.get("kind")
    if not isinstance(kind, str) or kind == wanted or kind not in _KINDS:
        return None
    if not (_top_keys(wanted) - _top_keys(kind)).isdisjoint(data):
        return None
    return kind


def refuse_other_kind(document: LoadedDocument, wanted: str) -> None:
    """Raise `OtherKind` when the loaded `document`, given where a file of kind `wanted`
    (`PIPELINE`, `EVALUATION`) goes, says at its top it is another kind of ours
    (`other_kind_said`), naming what takes it. A kind merged in, or a top-level
    `apiVersion` of another tool (Tekton's `kind: PipelineTest`), is left to the
    loader's checks."""
    data = document.data
    if not isinstance(data, dict):
        return
    kind = other_kind_said(data, wanted)
    if kind is None:
        return
    api = data.get("apiVersion")
    if isinstance(api, str) and _OTHER_API.search(f"apiVersion: {api}") is not None:
        return
    if document.source_map.get(("kind",)) is None:
        return
    from converge_dsl._escapes import shell_word

    what, how, _ = _KINDS[kind]
    code = codes.NOT_A_PIPELINE if wanted == PIPELINE else codes.EVAL_NOT_EVALUATION
    raise OtherKind(
        document.source_map.diagnostic(
            code,
            f"this is {what} (kind: {kind}), not {kind_named(wanted)}",
            ("kind",),
            hint=how.replace("FILE", shell_word(document.file)),
        )
    )
