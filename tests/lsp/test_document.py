"""An open document's changes: the text a client means, read as the protocol's reference text
document reads positions (past the end, inverted ranges, UTF-16 columns, its three line
breaks), checked against that reading over the whole text on random edits."""

from __future__ import annotations

import random
import re

import pytest
from lsprotocol import types as lsp

from converge_dsl.lsp._analysis import PIPELINE, file_kind
from converge_dsl.lsp._document import Document

Partial = lsp.TextDocumentContentChangePartial


def change(start: tuple[int, int], end: tuple[int, int], text: str) -> Partial:
    return Partial(range=lsp.Range(lsp.Position(*start), lsp.Position(*end)), text=text)


def edited(text: str, *changes: lsp.TextDocumentContentChangeEvent) -> str:
    document = Document(text)
    for one in changes:
        document.apply(one)
    return document.text


def reference(text: str, one: Partial) -> str:
    """The change read over the whole text: line starts by `\\n`, `\\r\\n` and `\\r`; a line
    past the last is the text's end, a column past a line's end its end, a column inside a
    surrogate pair after it, and a range's ends in order."""
    starts = [0] + [m.end() for m in re.finditer("\r\n|\r|\n", text)]
    ends = [m.start() for m in re.finditer("\r\n|\r|\n", text)] + [len(text)]

    def offset(position: lsp.Position) -> int:
        if position.line >= len(starts):
            return len(text)
        at, units = starts[position.line], 0
        while at < ends[position.line] and units < position.character:
            units += 2 if ord(text[at]) > 0xFFFF else 1
            at += 1
        return at

    start, end = sorted((offset(one.range.start), offset(one.range.end)))
    return text[:start] + one.text + text[end:]


@pytest.mark.parametrize(
    ("text", "one", "expected"),
    [
        # A column past the last line's end is its end (not before its last character).
        ("name: typed", change((0, 500), (0, 500), "x"), "name: typedx"),
        ("a\nb\n", change((0, 9), (0, 9), "x"), "ax\nb\n"),
        ("a\r\nb", change((0, 9), (1, 0), ""), "ab"),
        # A line past the last is the text's end.
        ("a\nb", change((7, 3), (9, 0), "\nc"), "a\nb\nc"),
        ("a\nb", change((1, 0), (9, 0), ""), "a\n"),
        # An inverted range is the same range, its ends swapped.
        ("abcdef", change((0, 4), (0, 1), ""), "aef"),
        ("one\ntwo\nthree", change((2, 2), (0, 1), "-"), "o-ree"),
        # UTF-16 columns: the emoji is two units; a column inside it is after it.
        ("\U0001f600x\U0001f600y", change((0, 2), (0, 5), ""), "\U0001f600y"),
        ("\U0001f600x", change((0, 1), (0, 1), "-"), "\U0001f600-x"),
        # `\r` alone ends a line; U+2028 and a form feed do not.
        ("a\rb\rc", change((2, 0), (2, 1), "C"), "a\rb\rC"),
        ("a\u2028b\nc", change((1, 0), (1, 1), "C"), "a\u2028b\nC"),
        ("a\x0cb\nc", change((0, 3), (1, 0), ""), "a\x0cbc"),
        # A `\n` put after a line ending with `\r` makes one line break with it.
        ("a\rb", change((1, 0), (1, 0), "\n"), "a\r\nb"),
        ("a\rx\nb", change((1, 0), (1, 1), ""), "a\r\nb"),
    ],
)
def test_a_change_edits_what_the_reference_reading_edits(
    text: str, one: Partial, expected: str
) -> None:
    assert reference(text, one) == expected
    assert edited(text, one) == expected


def test_the_lines_after_a_change_are_the_protocols() -> None:
    document = Document("a\rb")
    document.apply(change((1, 0), (1, 0), "\n"))  # now "a\r\nb": two lines
    document.apply(change((1, 1), (1, 1), "!"))
    assert document.text == "a\r\nb!"


def test_random_changes_give_the_reference_text() -> None:
    rng = random.Random(7)
    pieces = ["a", "bc", "\n", "\r\n", "\r", "\U0001f600", "é", "kind: x", "\u2028", ""]
    text = "".join(rng.choice(pieces) for _ in range(60))
    document = Document(text)
    for _ in range(2000):
        lines = len(re.findall("\r\n|\r|\n", text)) + 1
        positions = [lsp.Position(rng.randrange(lines + 2), rng.randrange(12)) for _ in range(2)]
        new = "".join(rng.choice(pieces) for _ in range(rng.randrange(4)))
        one = Partial(range=lsp.Range(*positions), text=new)
        text = reference(text, one)
        document.apply(one)
        assert document.text == text


def test_a_whole_text_change_replaces_the_text() -> None:
    document = Document("old\n", 1)
    document.apply(lsp.TextDocumentContentChangeWholeDocument(text="new\r\nlines"))
    document.apply(change((1, 0), (1, 0), "two "))
    assert document.text == "new\r\ntwo lines"


def test_a_lone_surrogate_is_read_as_a_replacement_character_in_place() -> None:
    document = Document("a\ud83db\n")
    document.apply(change((0, 2), (0, 2), "\udc00c"))
    assert document.text == "a\ufffd\ufffdcb\n"


@pytest.mark.parametrize(
    ("one", "kept"),
    [
        (change((3, 0), (3, 0), "x"), True),  # a line naming neither word
        (change((1, 0), (1, 4), "kindx"), False),  # the kind line itself
        (change((2, 0), (2, 0), "apiVersion: converge-dsl/v1\n"), False),
        (change((0, 0), (1, 0), ""), False),  # the kind line joined to the one before
    ],
)
def test_the_kind_is_read_again_only_after_a_change_to_a_line_it_reads(
    one: Partial, kept: bool
) -> None:
    text = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: x\ndescription: y\n"
    document = Document(text)
    document.kind = file_kind(document.text)
    document.apply(one)
    assert (document.kind == PIPELINE) is kept
