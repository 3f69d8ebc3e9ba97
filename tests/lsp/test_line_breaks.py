"""Positions in texts whose lines break otherwise than on `\\n`, over stdio: `\\r` and `\\r\\n`,
which the protocol and YAML both count, and U+2028, a line break of YAML's only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lsprotocol import types as lsp

if TYPE_CHECKING:
    from tests.lsp.conftest import Session

pytestmark = pytest.mark.asyncio

# A template in a block scalar, whose second line names the key.
_BLOCK = ('content: "Escalate {{', "content: |\n          Escalate\n          {{")


def _written(text: str, where: lsp.Range) -> str:
    """The text at `where`, on the protocol's lines (`\\n`, `\\r\\n`, `\\r`; ASCII columns)."""
    lines = re.split("\r\n|\r|\n", text)
    assert where.start.line == where.end.line
    return lines[where.start.line][where.start.character : where.end.character]


# keys[0].name of typed.yaml: tickets
_TICKETS = lsp.Position(8, 11)


async def _references_of_tickets(session: Session) -> list[lsp.Location]:
    """The references of the key `tickets`, its declaration included."""
    found = await session.client.text_document_references_async(
        lsp.ReferenceParams(
            context=lsp.ReferenceContext(include_declaration=True),
            text_document=lsp.TextDocumentIdentifier(session.uri("typed.yaml")),
            position=_TICKETS,
        )
    )
    assert found is not None
    return found


@pytest.mark.parametrize("brk", ["\r", "\r\n", "\u2028"], ids=["cr", "crlf", "u2028"])
async def test_references_and_renames_land_on_the_name_whatever_breaks_the_lines(
    session: Session, project: Path, brk: str
) -> None:
    """A name in a block template after a U+2028 was placed on the line before, where the
    protocol's line holds both of YAML's: references and renames edited other text."""
    pipeline = (project / "typed.yaml").read_text(encoding="utf-8").replace(*_BLOCK)
    pipeline = pipeline.replace('| length }} tickets"', "| length }} tickets")
    if brk == "\u2028":
        pipeline = pipeline.replace("Escalate\n", "Escalate\u2028", 1)
    else:
        pipeline = pipeline.replace("\n", brk)
        test = (project / "typed.test.yaml").read_text(encoding="utf-8")
        (project / "typed.test.yaml").write_bytes(test.replace("\n", brk).encode())
    texts = {
        "typed.yaml": pipeline,
        "typed.test.yaml": (project / "typed.test.yaml").read_bytes().decode(),
    }
    session.open("typed.yaml", pipeline)
    assert await session.diagnostics("typed.yaml", 1) == []
    found = await _references_of_tickets(session)
    where = [(Path(loc.uri).name, _written(texts[Path(loc.uri).name], loc.range)) for loc in found]
    assert sorted(where) == [("typed.test.yaml", "tickets")] * 3 + [("typed.yaml", "tickets")] * 5
    edit = await session.client.text_document_rename_async(
        lsp.RenameParams(
            text_document=lsp.TextDocumentIdentifier(session.uri("typed.yaml")),
            position=_TICKETS,
            new_name="requests",
        )
    )
    assert edit is not None
    assert edit.changes is not None
    edits = edit.changes[session.uri("typed.yaml")]
    assert [_written(pipeline, e.range) for e in edits] == ["tickets"] * 5


async def test_a_name_written_with_an_escape_is_not_given_a_guessed_place(
    session: Session, project: Path
) -> None:
    """A key written `facts.t\\x69ckets` in a quoted template, after a U+2028, was given a
    reference (and a rename's edit) on `ate\u2028 {{`, a column guessed on the wrong line;
    it is the escaped text of the name, on its own line."""
    pipeline = (project / "typed.yaml").read_text(encoding="utf-8")
    template = "\"Escalate {{ facts.tickets | selectattr('data.category', 'eq', 'billing') "
    template += '| list | length }} tickets"'
    escaped = '"Escalate\u2028 {{ facts.t\\x69ckets | length }} {{ facts.tickets }}"'
    pipeline = pipeline.replace(template, escaped)
    session.open("typed.yaml", pipeline)
    assert await session.diagnostics("typed.yaml", 1) == []
    found = await _references_of_tickets(session)
    mine = [loc.range for loc in found if loc.uri == session.uri("typed.yaml")]
    # The declaration, the seed, the dependency, `count('tickets')` and the template's
    # two, each on the name as written.
    written = [_written(pipeline, where) for where in mine]
    assert sorted(written) == ["t\\x69ckets"] + ["tickets"] * 5
