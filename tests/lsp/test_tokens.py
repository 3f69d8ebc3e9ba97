"""Semantic tokens over stdio: the Jinja inside strings, block scalars included."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from lsprotocol import types as lsp

from converge_dsl.lsp._positions import Lines
from converge_dsl.lsp._tokens import TYPES, Token, _line_tokens, encode

if TYPE_CHECKING:
    from tests.lsp.conftest import Session

pytestmark = pytest.mark.asyncio


async def _tokens(session: Session, name: str) -> list[tuple[int, str, str]]:
    """(line, text, type) of each token, decoded from the relative encoding."""
    types = TYPES  # the legend the server announces
    session.open(name)
    result = await session.client.text_document_semantic_tokens_full_async(
        lsp.SemanticTokensParams(lsp.TextDocumentIdentifier(session.uri(name)))
    )
    assert result is not None
    assert isinstance(result, lsp.SemanticTokens)
    lines = (session.root / name).read_text(encoding="utf-8").split("\n")
    found, line, start = [], 0, 0
    data = result.data
    for index in range(0, len(data), 5):
        delta_line, delta_start, length, kind, _ = data[index : index + 5]
        line += delta_line
        start = start + delta_start if delta_line == 0 else delta_start
        found.append((line + 1, lines[line][start : start + length], types[kind]))
    return found


async def test_tokens_of_expressions_and_templates(session: Session) -> None:
    found = await _tokens(session, "typed.yaml")
    assert found[:4] == [
        (25, "count", "function"),
        (25, "'tickets'", "string"),
        (25, ">", "operator"),
        (25, "0", "number"),
    ]
    line = [(text, kind) for number, text, kind in found if number == 29]
    assert line[:5] == [
        ("{{", "keyword"),
        ("facts", "variable"),
        ("tickets", "property"),
        ("|", "operator"),
        ("selectattr", "function"),
    ]
    assert not any(text == "Escalate" for _, text, _ in found)  # the text outside `{{ }}`


async def test_tokens_in_a_block_scalar(session: Session) -> None:
    found = await _tokens(session, "broken.yaml")
    assert (65, "{%", "keyword") in found
    assert (65, "for", "keyword") in found
    assert (65, "strategies", "property") in found
    assert (66, "endfor", "keyword") in found


async def test_a_token_after_yamls_other_line_break_is_on_the_editors_line() -> None:
    """The loader's line 2 starts after a U+2028 inside the editor's line 0: its token is
    there, at its UTF-16 column, not on the editor's line 1."""
    found = [(1, 1, 1, 0), (2, 1, 1, 1), (3, 1, 1, 2)]
    assert encode(found, Lines('a: "x\u2028y"\nb: 1')) == [
        0,
        0,
        1,
        0,
        0,
        0,
        6,
        1,
        1,
        0,
        1,
        0,
        1,
        2,
        0,
    ]


class _Counted(Lines):
    """Lines that count the positions converted."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.converted: list[int] = []

    def editor_point(self, line: int, column: int) -> tuple[int, int]:
        self.converted.append(line)
        return super().editor_point(line, column)

    def position(self, line: int, column: int) -> lsp.Position:
        self.converted.append(line)
        return super().position(line, column)


async def test_ascii_lines_are_encoded_without_converting_each_position() -> None:
    """Two conversions to the protocol's position a token (each making an `lsp.Position`)
    were a third of the semantic tokens of a 5 MB pipeline: an ASCII line's columns are
    the protocol's as they are."""
    lines = _Counted('a: "{{ x }}"\nb: "\u00e9{{ y }}"\n')
    found = [(1, 5, 2, 0), (1, 8, 1, 1), (2, 6, 1, 1)]
    assert encode(found, lines) == [0, 4, 2, 0, 0, 0, 3, 1, 1, 0, 1, 5, 1, 1, 0]
    assert lines.converted == [2, 2]  # the line with an é only


# A string holding a closing delimiter, an empty comment, an unclosed one, statements.
_TRICKY = "{{ '}}' }}{##}{# a #}{% if x %}y{% endif %}{{ a.b(c) | d }}{# open"


async def test_the_tokens_of_one_line_in_every_state() -> None:
    found: list[Token] = []
    assert _line_tokens(_TRICKY, 1, 0, len(_TRICKY), inside=None, found=found) == "#}"
    shown = [(_TRICKY[c - 1 : c - 1 + n], TYPES[k]) for _, c, n, k in found]
    assert shown == [
        ("{{", "keyword"),
        ("'}}'", "string"),
        ("}}", "keyword"),
        ("{#", "comment"),
        ("#}", "comment"),
        ("{#", "comment"),
        (" a ", "comment"),
        ("#}", "comment"),
        ("{%", "keyword"),
        ("if", "keyword"),
        ("x", "variable"),
        ("%}", "keyword"),
        ("{%", "keyword"),
        ("endif", "keyword"),
        ("%}", "keyword"),
        ("{{", "keyword"),
        ("a", "variable"),
        ("b", "property"),
        ("c", "variable"),
        ("|", "operator"),
        ("d", "function"),
        ("}}", "keyword"),
        ("{#", "comment"),
        (" open", "comment"),
    ]
