"""Which name is at the cursor, and every place it is written across the pipeline's files.

`symbol_at` reads the cursor's JSON path in the file's own document (the
pipeline's analysis; a model script or test loaded by the same loader) and
names the symbol there: a key (a declaration, a key reference, a key named in
a template), a suggestor, a model, an input or an invariant. `occurrences`
gathers its places in the pipeline, its model scripts and its test files
(those beside it that name it). Definition and references answer from them;
rename edits them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from lsprotocol import types as lsp

from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.frontend import LoadedDocument, PipelineFacts
from converge_dsl.frontend.document import value_at
from converge_dsl.lsp import _index, _names, _packs
from converge_dsl.lsp._analysis import PIPELINE, SCRIPT, TEST
from converge_dsl.lsp._index import INPUT, INVARIANT, KEY, MODEL, SUGGESTOR, Place
from converge_dsl.lsp._lookup import Subject
from converge_dsl.lsp._positions import Hit, Point, path_at
from converge_dsl.lsp._related import beside, loaded, tested_pipeline

Symbol = tuple[str, str]  # (kind, name)


def symbol_at(subject: Subject, position: lsp.Position) -> Symbol | None:
    """The symbol under the cursor, if any."""
    document = subject.own_document
    facts = subject.facts
    if document is None or facts is None:
        return None
    point = subject.point(position)
    hit = path_at(document, point)
    value = value_at(document.data, hit.path)
    if subject.kind == SCRIPT:
        return (SUGGESTOR, value) if hit.path[-2:] == ("match", "suggestor") else None
    if subject.kind == TEST:
        return _in_test(hit, value)
    if subject.kind != PIPELINE:
        return None
    return _structural(facts, hit, value) or _in_template(document, facts, hit, point)


def _in_test(hit: Hit, value: object) -> Symbol | None:
    """A name in a test file: an invariant, an input, a model, a key, a matched suggestor."""
    path = hit.path
    if len(path) >= 2 and path[-2] == "invariants" and isinstance(value, str):
        return INVARIANT, value
    if hit.on_key and len(path) >= 2 and path[-2] in _TEST_KEYS:
        return _TEST_KEYS[str(path[-2])], str(path[-1])
    if len(path) >= 3 and path[-1] == "key" and path[-3] in ("facts", "absent"):
        return (KEY, value) if isinstance(value, str) else None
    if path[-2:] == ("match", "suggestor") and isinstance(value, str):
        return SUGGESTOR, value
    return None


# The mappings of a test file whose keys are names of the pipeline.
_TEST_KEYS = {"inputs": INPUT, "models": MODEL, "counts": KEY, "snapshot": KEY}


def _structural(facts: PipelineFacts, hit: Hit, value: object) -> Symbol | None:
    path = hit.path
    if hit.on_key and len(path) == 2 and path[0] in ("models", "inputs"):
        return (MODEL if path[0] == "models" else INPUT), str(path[1])
    if not isinstance(value, str):
        return None
    if any(where == path for where, _ in facts.key_references):
        return KEY, value
    if len(path) == 3 and path[0] == "keys" and path[2] == "name":
        return KEY, value
    if len(path) == 3 and path[2] == "name" and path[0] in ("suggestors", "invariants"):
        return (SUGGESTOR if path[0] == "suggestors" else INVARIANT), value
    for spec in facts.specs:
        if any(where == path for where, _ in spec.model_references()):
            return MODEL, value
    return None


def _in_template(
    document: LoadedDocument, facts: PipelineFacts, hit: Hit, point: Point
) -> Symbol | None:
    """A key or input named in a template or expression, at the cursor: a name of the
    template's value placed in the file by `offset_span` (a name written with escapes,
    `facts.t\\x69ckets`, covers its escaped text), else one written on the cursor's line."""
    sites = [site for site in facts.templates if site.path == hit.path]
    for site in sites:
        for kind in (KEY, INPUT):
            for match in _NAMED[kind].finditer(site.text):
                start, end, name = _first_group(match)
                span = document.offset_span(site.path, site.text, start, end)
                if span and span.line == point[0] and span.column <= point[1] <= span.end_column:
                    return kind, name
    text = document.line(point[0]) if sites else ""
    for kind in (KEY, INPUT):
        for match in _NAMED[kind].finditer(text):
            start, end, name = _first_group(match)
            if start + 1 <= point[1] <= end + 1:
                return kind, name
    return None


_NAMED = {
    KEY: re.compile(
        r"\b(?:facts|proposals)\.(\w+)|\b(?:" + "|".join(_names.KEY_FUNCTIONS) + r")\(\s*['\"](\w+)"
    ),
    INPUT: re.compile(r"\binputs\.(\w+)"),
}


def _first_group(match: re.Match[str]) -> tuple[int, int, str]:
    for group in (1, 2):
        if match.group(group) is not None:
            return match.start(group), match.end(group), match.group(group)
    return match.start(), match.end(), match.group(0)


def pipeline_of(subject: Subject) -> tuple[Path, LoadedDocument, PipelineFacts] | None:
    """The pipeline the subject's names belong to: (its path, document, facts)."""
    analysis = subject.analysis
    if analysis is None or analysis.facts is None or analysis.document is None:
        return None
    return analysis.path, analysis.document, analysis.facts


def occurrences(subject: Subject, symbol: Symbol) -> list[Place]:
    """Every place `symbol` is written: the pipeline, its model scripts and test files."""
    found = pipeline_of(subject)
    if found is None:
        return []
    path, document, facts = found
    kind, name = symbol
    places = _index.places(path, document, facts, kind, name)
    for other, other_document, other_kind in _neighbours(subject, path, facts):
        if other_kind == SCRIPT and kind == SUGGESTOR:
            paths: Iterator[tuple[JsonPath, bool]] = (
                (p, False) for p in _index.script_matches(other_document, name)
            )
        elif other_kind == TEST:
            paths = _index.test_references(other_document, kind, name)
        else:
            continue
        places.extend(
            Place(other, _index.name_span(other_document, p, on_key=on_key)) for p, on_key in paths
        )
    return _distinct(places)


def _distinct(places: list[Place]) -> list[Place]:
    """`places` less repeats: a path through an alias (`*name`) is its anchor's node, written
    once (the first of a place, a definition, is kept)."""
    seen: dict[tuple[Path, int, int, int, int], Place] = {}
    for place in places:
        span = place.span
        seen.setdefault((place.path, span.line, span.column, span.end_line, span.end_column), place)
    return list(seen.values())


def _neighbours(
    subject: Subject, pipeline: Path, facts: PipelineFacts
) -> Iterator[tuple[Path, LoadedDocument, str | None]]:
    """The pipeline's model scripts, and the test files beside it that test it: each file,
    its document and its kind (an open document's as the server keeps it)."""
    state = subject.server.state
    named = (
        beside(pipeline, name) for m in facts.manifest.models.values() for name in m.files.values()
    )
    scripts = {path for path in named if path is not None}
    tests = []
    for candidate in sorted(pipeline.parent.glob("*.y*ml")):
        resolved = candidate.resolve()
        text = state.text(resolved)
        if (
            text
            and state.kind(resolved, text) == TEST
            and tested_pipeline(candidate, text, subject.server.environ) == pipeline
        ):
            tests.append(resolved)
    for other in [*sorted(scripts), *tests]:
        text = state.text(other)
        document = loaded(other, text, subject.server.environ) if text is not None else None
        if text is not None and document is not None:
            yield other, document, state.kind(other, text)


def definitions(subject: Subject, position: lsp.Position) -> list[tuple[Path, Place]]:
    """Where the name at the cursor is defined: a key's declaration and the seeds and
    suggestors that write it; a model's or input's entry; a suggestor's name. From a test's
    `pipeline:` or a model's `script:`, the file; from a pipeline's `name:`, back to the
    `pipeline:` of each test file beside it that tests it; from a pack suggestor's `use:`,
    its definition in the cached `pack.yaml`."""
    file = _file_named(subject, position)
    if file is not None:
        return [(file, Place(file, SourceSpan(str(file), 1, 1, 1, 1), True))]
    tests = _tests_of_name(subject, position)
    if tests:
        return [(place.path, place) for place in tests]
    source = _pack_source(subject, position)
    if source is not None:
        pack_file = Path(source.file)
        return [(pack_file, Place(pack_file, source, True))]
    symbol = symbol_at(subject, position)
    if symbol is None:
        return []
    kind, name = symbol
    found = [p for p in occurrences(subject, symbol) if p.defines]
    if kind == KEY:
        pipeline = pipeline_of(subject)
        if pipeline is not None:
            path, document, facts = pipeline
            for _, where in _index.writers(facts, name):
                found.append(Place(path, _index.name_span(document, where)))
    return [(p.path, p) for p in found]


def _tests_of_name(subject: Subject, position: lsp.Position) -> list[Place]:
    """From a pipeline's `name:`, the `pipeline:` of each test file that tests it."""
    found = pipeline_of(subject)
    document = subject.own_document
    if subject.kind != PIPELINE or found is None or document is None:
        return []
    if path_at(document, subject.point(position)).path != ("name",):
        return []
    path, _, facts = found
    return [
        Place(other, _index.name_span(other_document, ("pipeline",)), True)
        for other, other_document, kind in _neighbours(subject, path, facts)
        if kind == TEST
    ]


def _pack_source(subject: Subject, position: lsp.Position) -> SourceSpan | None:
    """From a pack suggestor's `use:`, its definition in the cached pack (`_packs`)."""
    document, facts = subject.own_document, subject.facts
    if subject.kind != PIPELINE or document is None or facts is None:
        return None
    hit = path_at(document, subject.point(position))
    value = value_at(document.data, hit.path)
    if hit.on_key or hit.path[:1] != ("suggestors",) or hit.path[2:] != ("use",):
        return None
    if not isinstance(value, str):
        return None
    return _packs.suggestor_source(facts, subject.path, value, subject.server.environ)


def _file_named(subject: Subject, position: lsp.Position) -> Path | None:
    """The file a test's `pipeline:` or a model's `script:`/`cassette:` names, at the cursor."""
    document = subject.own_document
    if document is None:
        return None
    hit = path_at(document, subject.point(position))
    value = value_at(document.data, hit.path)
    if not isinstance(value, str) or hit.on_key or not hit.path:
        return None
    last = hit.path[-1]
    test_pipeline = subject.kind == TEST and last == "pipeline"
    model_file = (
        subject.kind == PIPELINE
        and hit.path[:1] == ("models",)
        and last
        in (
            "script",
            "cassette",
        )
    )
    return beside(subject.path, value) if test_pipeline or model_file else None
