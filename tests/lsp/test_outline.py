"""Document symbols and folding ranges over stdio."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from lsprotocol import types as lsp

if TYPE_CHECKING:
    from tests.lsp.conftest import Session

pytestmark = pytest.mark.asyncio


async def test_symbols_of_a_pipeline_and_its_model_script(session: Session) -> None:
    session.open("typed.yaml")
    found = await session.client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(session.uri("typed.yaml")))
    )
    assert found is not None
    outline = {
        s.name: [(c.name, c.detail) for c in s.children or ()]
        for s in found
        if isinstance(s, lsp.DocumentSymbol)
    }
    assert outline == {
        "keys": [("tickets", None)],
        "inputs": [("queue", None)],
        "models": [("default", "scripted")],
        "seeds": [("t1", None)],
        "suggestors": [("escalate", "rule"), ("summarise", "llm")],
        "invariants": [("has-strategy", None)],
    }
    suggestors = next(
        s for s in found if isinstance(s, lsp.DocumentSymbol) and s.name == "suggestors"
    )
    first = (suggestors.children or [])[0]
    assert (first.selection_range.start.line, first.selection_range.start.character) == (21, 10)
    session.open("typed.script.yaml")
    found = await session.client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(session.uri("typed.script.yaml")))
    )
    assert found is not None
    assert [
        c.name for s in found if isinstance(s, lsp.DocumentSymbol) for c in s.children or ()
    ] == ["suggestor=summarise"]


async def test_folding_ranges_cover_each_multi_line_block(session: Session) -> None:
    session.open("typed.yaml")
    found = await session.client.text_document_folding_range_async(
        lsp.FoldingRangeParams(lsp.TextDocumentIdentifier(session.uri("typed.yaml")))
    )
    assert found is not None
    ranges = {(r.start_line + 1, r.end_line + 1) for r in found}
    assert (8, 16) in ranges  # keys:
    assert (21, 47) in ranges  # suggestors:
    assert (22, 29) in ranges  # the first suggestor
    assert all(start < end for start, end in ranges)
