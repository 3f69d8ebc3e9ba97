"""Hover, go to definition and references over stdio, across the pipeline, its model script
and its test file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lsprotocol import types as lsp

if TYPE_CHECKING:
    from tests.lsp.conftest import Session

pytestmark = pytest.mark.asyncio


@pytest.fixture
def typed(session: Session, project: Path) -> str:
    text = (project / "typed.yaml").read_text(encoding="utf-8")
    session.open("typed.yaml", text)
    return text


async def _hover(session: Session, name: str, needle: str, offset: int = 0) -> str:
    result = await session.client.text_document_hover_async(
        lsp.HoverParams(
            lsp.TextDocumentIdentifier(session.uri(name)), session.position(name, needle, offset)
        )
    )
    assert result is not None
    assert isinstance(result.contents, lsp.MarkupContent)
    return result.contents.value


def _where(session: Session, locations: object) -> list[tuple[str, int, int, int]]:
    assert isinstance(locations, list | tuple)
    found = []
    for location in locations:
        assert isinstance(location, lsp.Location)
        name = Path(location.uri.removeprefix("file://")).relative_to(session.root).as_posix()
        r = location.range
        assert r.start.line == r.end.line
        found.append((name, r.start.line + 1, r.start.character + 1, r.end.character + 1))
    return sorted(found)


async def test_hover_on_a_key_shows_its_schema_and_who_writes_and_reads_it(
    session: Session, typed: str
) -> None:
    text = await _hover(session, "typed.yaml", "dependencies: [tickets]", 16)
    assert text.startswith("**context key `tickets`**")
    assert "Incoming tickets" in text
    assert '"category"' in text
    assert "written by: seed 't1'" in text
    assert "read by: escalate" in text


async def test_hover_on_a_suggestor_a_schema_key_and_a_model(session: Session, typed: str) -> None:
    text = await _hover(session, "typed.yaml", "name: summarise", 7)
    assert "**suggestor `summarise`** (llm)" in text
    assert "reads: strategies" in text
    assert "writes: evaluations" in text
    assert "models: default" in text
    text = await _hover(session, "typed.yaml", "    when:", 5)
    assert text.startswith("**when**\n\nAccept only when this expression is true.")
    text = await _hover(session, "typed.yaml", "    model: default", 12)
    assert text.startswith("**model `default`** (scripted adapter)")


async def test_hover_on_a_diagnostic_explains_its_code(session: Session) -> None:
    session.open("broken.yaml")
    await session.diagnostics("broken.yaml", 1)
    text = await _hover(session, "broken.yaml", "[strategy]", 3)
    assert "**CD203**" in text
    assert "**context key" not in text  # an unknown key is no key


async def test_definition_of_a_key_a_model_and_a_suggestor(session: Session, typed: str) -> None:
    async def definition(name: str, needle: str, offset: int) -> list[tuple[str, int, int, int]]:
        found = await session.client.text_document_definition_async(
            lsp.DefinitionParams(
                lsp.TextDocumentIdentifier(session.uri(name)),
                session.position(name, needle, offset),
            )
        )
        return _where(session, found)

    # `tickets` in a template: its declaration and the seed that writes it.
    assert await definition("typed.yaml", "facts.tickets", 8) == [
        ("typed.yaml", 9, 11, 18),
        ("typed.yaml", 20, 11, 18),
    ]
    assert await definition("typed.yaml", "    model: default", 12) == [("typed.yaml", 18, 3, 10)]
    script = (session.root / "typed.script.yaml").read_text(encoding="utf-8")
    session.open("typed.script.yaml", script)
    assert await definition("typed.script.yaml", "suggestor: summarise", 12) == [
        ("typed.yaml", 30, 11, 20)
    ]
    session.open("typed.test.yaml")
    assert await definition("typed.test.yaml", "pipeline: typed", 11) == [("typed.yaml", 1, 1, 1)]
    # And back: from the pipeline's name to the test files that test it.
    assert await definition("typed.yaml", "name: typed", 7) == [("typed.test.yaml", 4, 11, 21)]


async def test_references_of_a_key_and_a_suggestor_across_files(
    session: Session, typed: str
) -> None:
    async def references(name: str, needle: str, offset: int) -> list[tuple[str, int, int, int]]:
        found = await session.client.text_document_references_async(
            lsp.ReferenceParams(
                text_document=lsp.TextDocumentIdentifier(session.uri(name)),
                position=session.position(name, needle, offset),
                context=lsp.ReferenceContext(include_declaration=True),
            )
        )
        return _where(session, found)

    assert await references("typed.yaml", "[tickets]", 1) == [
        ("typed.test.yaml", 12, 17, 24),  # expect.facts[0].key
        ("typed.test.yaml", 13, 24, 31),  # expect.counts (the alias in case 2 is this node)
        ("typed.test.yaml", 22, 22, 29),  # expect.absent[0].key
        ("typed.yaml", 9, 11, 18),  # keys[0].name
        ("typed.yaml", 20, 11, 18),  # seeds[0].key
        ("typed.yaml", 24, 20, 27),  # dependencies
        ("typed.yaml", 25, 19, 26),  # count('tickets')
        ("typed.yaml", 29, 37, 44),  # facts.tickets
    ]
    assert await references("typed.yaml", "name: summarise", 7) == [
        ("typed.script.yaml", 5, 24, 33),
        ("typed.test.yaml", 19, 32, 41),  # an inline rule's match
        ("typed.yaml", 30, 11, 20),
    ]


async def test_a_test_file_edited_into_another_kind_leaves_the_references(
    session: Session, typed: str
) -> None:
    """References read each open file's kind as the server keeps it across edits: an edit of
    the `kind:` line changes it, an edit elsewhere does not."""
    uri = session.open("typed.test.yaml")
    kind_line = session.position("typed.test.yaml", "PipelineTest")

    def edit(version: int, line: int, start: int, end: int, text: str) -> None:
        where = lsp.Range(lsp.Position(line, start), lsp.Position(line, end))
        session.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [lsp.TextDocumentContentChangePartial(range=where, text=text)],
            )
        )

    async def files() -> list[str]:
        found = await session.client.text_document_references_async(
            lsp.ReferenceParams(
                context=lsp.ReferenceContext(include_declaration=True),
                text_document=lsp.TextDocumentIdentifier(session.uri("typed.yaml")),
                position=session.position("typed.yaml", "[tickets]", 1),
            )
        )
        return sorted(name for name, *_ in _where(session, found))

    with_tests = ["typed.test.yaml"] * 3 + ["typed.yaml"] * 5
    assert await files() == with_tests
    line, column = kind_line.line, kind_line.character
    edit(2, line, column, column + len("PipelineTest"), "Evaluation")
    assert await files() == ["typed.yaml"] * 5
    edit(3, 0, 0, 0, "# a comment\n")  # the kind's line moves down, untouched
    assert await files() == ["typed.yaml"] * 5
    edit(4, line + 1, column, column + len("Evaluation"), "PipelineTest")
    assert await files() == with_tests
    edit(5, 0, 0, len("# a comment"), "# kind: Evaluation")  # a comment naming a kind
    assert await files() == with_tests
