"""Loading an edited text again (`load_text`'s `previous`, `_reload`) gives what a whole load
gives: the same data, every location, the same diagnostics, after any sequence of edits."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.diagnostics import Diagnostic, JsonPath
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import LoadedDocument, check_document, load_text
from converge_dsl.frontend._reload import reload
from converge_dsl.validation import CHECKS, KINDS

ROOT = Path(__file__).resolve().parent.parent.parent
FILE = "p.yaml"
SHIPPED = sorted(
    path
    for path in (ROOT / "pipelines").glob("*.yaml")
    if not path.name.endswith((".script.yaml", ".test.yaml"))
)
SEEDS = [*SHIPPED, ROOT / "tests" / "data" / "valid" / "full.yaml"]

PIPELINE = """\
# a pipeline
apiVersion: converge-dsl/v1
kind: Pipeline
name: demo
description: A demo
keys:
  - {name: notes, description: Notes}
  - name: risks
    description: >
      folded
      text
models:
  default: {adapter: scripted, script: s.yaml}
  fast:
    adapter: openai
    timeout_s: 30

suggestors:
- name: first
  kind: seed
  facts: [{key: notes, id: a, content: "A"}]
- name: second
  kind: rule
  # a comment inside
  dependencies: [notes]
  when: "count('notes') > 0"
  emit:
    - key: risks
      id: b
      content: |
        two
        lines

# a comment between entries
budget: {max_cycles: 5}
"""


def _paths(data: Any, prefix: JsonPath = ()) -> Iterator[JsonPath]:
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, (*prefix, index))


def assert_same(got: LoadedDocument, whole: LoadedDocument) -> None:
    """Two documents of one text are the same: data (with key order), every path's
    location, the number of located paths and the inexact floats."""
    assert got.text == whole.text
    assert got.data == whole.data
    assert [list(d) for d in _mappings(got.data)] == [list(d) for d in _mappings(whole.data)]
    assert len(got.source_map) == len(whole.source_map)
    for path in _paths(whole.data):
        assert got.source_map.get(path) == whole.source_map.get(path), path
    missing = ("suggestors", 10_000, "name")
    assert got.source_map.locate(missing) == whole.source_map.locate(missing)
    assert got.inexact == whole.inexact


def _mappings(data: Any) -> Iterator[dict[str, Any]]:
    if isinstance(data, dict):
        yield data
        for value in data.values():
            yield from _mappings(value)
    elif isinstance(data, list):
        for value in data:
            yield from _mappings(value)


def _load(text: str, previous: LoadedDocument | None = None) -> LoadedDocument | list[Diagnostic]:
    try:
        return load_text(text, FILE, previous=previous)
    except PipelineInvalid as exc:
        return list(exc.diagnostics)


# -- a sequence of random edits ----------------------------------------------------------

PIECES = ["x", "e", "0", " ", "\n", "\n  ", "\n- ", ": ", "- ", "#", "'", '"', "{", "}", "["]
PIECES += ["]", ",", "yes", "1.10", "\t", "|\n", "name: x", "kind: rule", "{{ facts.x }}"]


def _edit(text: str, rng: random.Random) -> str:
    """A keystroke-sized edit: a piece typed, a few characters deleted, a line copied
    or removed, mostly inside a line as typing goes."""
    at = rng.randrange(len(text) + 1)
    roll = rng.random()
    if roll < 0.5:
        return text[:at] + rng.choice(PIECES) + text[at:]
    if roll < 0.8:
        return text[:at] + text[at + rng.randrange(1, 4) :]
    lines = text.split("\n")
    line = rng.randrange(len(lines))
    if roll < 0.9:
        lines.insert(rng.randrange(len(lines) + 1), lines[line])
    else:
        del lines[line]
    return "\n".join(lines)


def _walk(text: str, steps: int, seed: int, *, crlf: bool = False) -> tuple[int, int]:
    """`steps` random edits from `text`, each loaded with the last document that loaded
    and compared with a whole load; (edits re-read in part, edits that loaded). With
    `crlf`, every line of the edited text ends in `\r\n`, as an editor keeps them."""
    rng = random.Random(seed)
    good = load_text(text, FILE)
    reused = loaded = 0
    for _ in range(steps):
        new = _edit(text, rng)
        if crlf:
            new = new.replace("\r", "").replace("\n", "\r\n")
        whole = _load(new)
        got = _load(new, good)
        if isinstance(whole, list):
            assert got == whole  # the same diagnostics: the whole load's
            text = good.text if rng.random() < 0.5 else new  # type on in the broken text too
            continue
        assert isinstance(got, LoadedDocument)
        assert_same(got, whole)
        loaded += 1
        reused += reload(good, new) is not None
        good, text = got, new
    return reused, loaded


@pytest.mark.parametrize("seed_file", SEEDS, ids=lambda p: p.name)
def test_random_edits_load_as_the_whole_text_loads(seed_file: Path) -> None:
    text = seed_file.read_text(encoding="utf-8")
    reused = loaded = 0
    for seed in range(3):
        done = _walk(text, 120, seed)
        reused, loaded = reused + done[0], loaded + done[1]
    assert loaded > 50
    assert reused > loaded // 3  # the edits are re-read in part, not only loaded whole


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(lambda t: t, id="plain"),
        pytest.param(lambda t: t.rstrip("\n"), id="no-final-newline"),
        pytest.param(
            lambda t: "".join("  " + line if line.strip() else line for line in t.splitlines(True)),
            id="indented-root",
        ),
        pytest.param(lambda t: t.split("\n# a comment between")[0] + "\n", id="list-last"),
    ],
)
def test_random_edits_of_every_layout(variant: Any) -> None:
    reused, loaded = _walk(variant(PIPELINE), 250, 7)
    assert loaded > 80
    assert reused > loaded // 4


def test_random_edits_of_a_text_with_crlf_line_ends() -> None:
    reused, loaded = _walk(PIPELINE.replace("\n", "\r\n"), 250, 7, crlf=True)
    assert loaded > 80
    assert reused > loaded // 4


def test_random_edits_keep_validates_diagnostics() -> None:
    """The checks of a re-read document, with the specs of the earlier facts, find what the
    checks of a whole load find."""
    rng = random.Random(11)
    text = (ROOT / "tests" / "data" / "valid" / "full.yaml").read_text(encoding="utf-8")
    good = load_text(text, FILE)
    facts = check_document(good, ROOT, checks=CHECKS, kinds=KINDS).facts
    compared = 0
    for _ in range(150):
        new = _edit(text, rng)
        whole = _load(new)
        if isinstance(whole, list):
            continue
        got = load_text(new, FILE, previous=good)
        checked = check_document(got, ROOT, checks=CHECKS, kinds=KINDS, previous=facts)
        expected = check_document(whole, ROOT, checks=CHECKS, kinds=KINDS)
        assert checked.diagnostics == expected.diagnostics
        compared += 1
        good, text = got, new
        facts = checked.facts or facts
    assert compared > 50


# -- what is re-read, what is not ----------------------------------------------------------


def test_an_edit_in_a_suggestor_rereads_it_and_keeps_the_others() -> None:
    before = load_text(PIPELINE, FILE)
    text = PIPELINE.replace("name: second", "name: second-rule")
    after = reload(before, text)
    assert after is not None
    assert after.data["suggestors"][0] is before.data["suggestors"][0]
    assert after.data["suggestors"][1]["name"] == "second-rule"
    assert after.data["keys"] is before.data["keys"]
    assert_same(after, load_text(text, FILE))


def test_lines_typed_above_entries_move_them_and_their_keys() -> None:
    text = PIPELINE
    document = load_text(text, FILE)
    for needle in ("  fast:", "- name: second", "description: A", "budget:", "  # a comment"):
        at = text.index(needle)
        text = text[:at] + "\n" * 2 + text[at:]  # two lines, typed before the entry's line
        got = reload(document, text)
        assert got is not None, needle
        assert_same(got, load_text(text, FILE))
        document = got
    moved = document.source_map.get(("budget", "max_cycles"))
    assert moved is not None
    assert moved.key_span is not None
    assert moved.key_span.line == PIPELINE.count("\n", 0, PIPELINE.index("max_cycles")) + 11


def test_a_renamed_key_keeps_its_place_in_the_mapping() -> None:
    before = load_text(PIPELINE, FILE)
    text = PIPELINE.replace("description: A demo", "summary: A demo")
    got = reload(before, text)
    assert got is not None
    assert list(got.data) == list(load_text(text, FILE).data)
    assert_same(got, load_text(text, FILE))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("description: A demo", "name: A demo"),  # a key the mapping has: CD duplicate key
        ("  fast:\n", "  default:\n"),  # the same, one level down
        ("kind: seed", "kind: yes"),  # a YAML 1.1 boolean: the loader's own diagnostic
        ("[notes]", "[notes"),  # a flow list left open takes the text after it
        ("- name: first", "- name: first\n- name: third"),  # one item becomes two
        ("  kind: seed\n", "kind: seed\n"),  # an item's line leaves the list
        ("description: A demo", "description: &a A demo"),  # an anchor
    ],
)
def test_what_an_entry_alone_cannot_tell_is_loaded_whole(old: str, new: str) -> None:
    before = load_text(PIPELINE, FILE)
    text = PIPELINE.replace(old, new, 1)
    assert reload(before, text) is None
    _assert_loads_alike(_load(text, before), _load(text))


def _assert_loads_alike(
    got: LoadedDocument | list[Diagnostic], whole: LoadedDocument | list[Diagnostic]
) -> None:
    if isinstance(got, LoadedDocument) and isinstance(whole, LoadedDocument):
        assert_same(got, whole)
    else:
        assert got == whole


def test_a_document_with_an_anchor_alias_or_tag_is_loaded_whole() -> None:
    for extra in ("one: &a 1\ntwo: *a\n", "one: !!str 1\n"):
        before = load_text(PIPELINE + extra, FILE)
        text = PIPELINE.replace("A demo", "A demo!") + extra
        assert reload(before, text) is None
        assert_same(load_text(text, FILE, previous=before), load_text(text, FILE))


def test_the_same_text_is_the_same_document() -> None:
    before = load_text(PIPELINE, FILE)
    assert load_text(PIPELINE, FILE, previous=before) is before
    assert load_text(PIPELINE, "other.yaml", previous=before).file == "other.yaml"


def test_the_checks_take_the_specs_of_the_suggestors_the_edit_did_not_touch() -> None:
    text = (ROOT / "tests" / "data" / "valid" / "full.yaml").read_text(encoding="utf-8")
    document = load_text(text, FILE)
    facts = check_document(document, ROOT, checks=CHECKS, kinds=KINDS).facts
    assert facts is not None
    first = facts.data["suggestors"][0]["name"]
    edited = text.replace(f"name: {first}", f"name: {first}x", 1)
    again = load_text(edited, FILE, previous=document)
    checked = check_document(again, ROOT, checks=CHECKS, kinds=KINDS, previous=facts)
    assert checked.facts is not None
    specs, earlier = checked.facts.specs, facts.specs
    assert specs[0] is not earlier[0]
    assert specs[0].name == f"{first}x"
    assert all(new is old for new, old in zip(specs[1:], earlier[1:], strict=True))
    sites = [made for _, made in checked.facts.owned_templates]
    before = [made for _, made in facts.owned_templates]
    assert sites[1] is before[1]
    whole = check_document(load_text(edited, FILE), ROOT, checks=CHECKS, kinds=KINDS)
    assert checked.diagnostics == whole.diagnostics
