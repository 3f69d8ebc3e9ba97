"""Editor positions to the loader's points: UTF-16 columns, and positions past the text."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp

from converge_dsl.lsp._positions import Lines
from tests.lsp.conftest import Session

TEXT = 'name: "\U0001f600e\u0301x"\nkind: Pipeline'


def test_a_column_counts_utf16_units_past_emoji_and_combining_marks() -> None:
    lines = Lines(TEXT)
    # `"` is unit 6; the emoji takes units 7-8, `e` 9, the combining mark 10, `x` 11.
    assert lines.point(lsp.Position(0, 11)) == (1, 11)
    assert lines.position(1, 11) == lsp.Position(0, 11)


@pytest.mark.parametrize(
    ("position", "point"),
    [
        (lsp.Position(1, 1000), (2, 15)),  # past the line's end: the line's end
        (lsp.Position(2, 0), (2, 15)),  # the line after the last: the text's end
        (lsp.Position(500, 3), (2, 15)),
    ],
)
def test_a_position_past_the_text_is_its_end(
    position: lsp.Position, point: tuple[int, int]
) -> None:
    assert Lines(TEXT).point(position) == point


@pytest.mark.asyncio
async def test_completion_past_the_last_line_answers(session: Session, project: Path) -> None:
    text = (project / "typed.yaml").read_text(encoding="utf-8")
    uri = session.open("typed.yaml", text)
    past = text.count("\n") + 5
    result = await session.client.text_document_completion_async(
        lsp.CompletionParams(lsp.TextDocumentIdentifier(uri), lsp.Position(past, 0))
    )
    assert isinstance(result, lsp.CompletionList)
