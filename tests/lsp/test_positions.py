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


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"])
def test_lines_end_as_the_protocol_ends_them(end: str) -> None:
    lines = Lines(f"a: 1{end}b: 2\r\nc: 3\rd: 4")
    assert [lines.line(n) for n in range(1, 5)] == ["a: 1", "b: 2", "c: 3", "d: 4"]
    assert lines.position(4, 3) == lsp.Position(3, 2)
    assert lines.point(lsp.Position(2, 1)) == (3, 2)


def test_yamls_other_line_breaks_are_inside_the_editors_line() -> None:
    """YAML (the loader's lines) also breaks lines on U+0085, U+2028 and U+2029; the protocol
    does not, so the loader's line 3 is the editor's line 1, after the break."""
    lines = Lines('a: "x\u2028y\u0085z"\nb: 2 # c\u2029d\ne: 3')
    assert [lines.line(n) for n in range(1, 7)] == ['a: "x', "y", 'z"', "b: 2 # c", "d", "e: 3"]
    assert lines.position(3, 2) == lsp.Position(0, 9)
    assert lines.position(6, 1) == lsp.Position(2, 0)
    assert lines.point(lsp.Position(0, 9)) == (3, 2)
    assert lines.point(lsp.Position(0, 5)) == (1, 6)  # before the break: its line's end
    assert lines.point(lsp.Position(1, 9)) == (5, 1)
    assert lines.point(lsp.Position(2, 4)) == (6, 5)
    assert lines.editor_line(1) == "b: 2 # c\u2029d"


@pytest.mark.asyncio
@pytest.mark.parametrize("end", ["\r", "\r\n", "\n\r"])
async def test_diagnostics_and_hover_agree_with_the_editors_lines(
    session: Session, project: Path, end: str
) -> None:
    """A file whose lines end in CR (or mixed), holding YAML's other line breaks in a comment
    and a string: its diagnostics and hovers are where they are in the plain file, a line
    below (the comment's line; YAML's other breaks are no editor line). Before, a CR-only
    file was not read as a pipeline (no diagnostics, no hover), and each U+2028 moved what
    followed a line down."""
    plain = (project / "broken.yaml").read_text(encoding="utf-8")
    string = "Nordic B2B SaaS for logistics"
    odd = "# one\u2028# two\u0085# three\n" + plain.replace(string, "Nordic\u2029B2B SaaS")
    if end == "\n\r":  # CR and CRLF in turn
        odd = "".join(
            line + ("\r" if number % 2 else "\r\n") for number, line in enumerate(odd.split("\n"))
        )
    else:
        odd = odd.replace("\n", end)

    def moved(position: lsp.Position) -> tuple[int, int]:
        return position.line + 1, position.character

    session.open("broken.yaml", plain)
    expected = await session.diagnostics("broken.yaml", 1)
    session.open("odd.yaml", odd)
    found = await session.diagnostics("odd.yaml", 1)
    assert [(d.code, d.range.start, d.range.end) for d in found] == [
        (d.code, lsp.Position(*moved(d.range.start)), lsp.Position(*moved(d.range.end)))
        for d in expected
    ]
    position = session.position("broken.yaml", "budget:", 1)
    for name, at in (("broken.yaml", position), ("odd.yaml", lsp.Position(*moved(position)))):
        hover = await session.client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(session.uri(name)), at)
        )
        assert hover is not None


@pytest.mark.parametrize("breaks", ["\n", "\u2028"], ids=["lf", "u2028"])
def test_a_byte_order_mark_is_a_column_of_the_editors_first_line_only(breaks: str) -> None:
    """The loader drops a byte order mark: its first line starts after it, the editor's at it."""
    lines = Lines(f"\ufeffa: 1{breaks}b: 2\nc: 3")
    assert [lines.line(n) for n in (1, 2, 3)] == ["a: 1", "b: 2", "c: 3"]
    assert lines.position(1, 1) == lsp.Position(0, 1)
    assert lines.point(lsp.Position(0, 1)) == (1, 1)
    assert lines.point(lsp.Position(0, 0)) == (1, 1)  # before the mark: the line's start
    assert lines.point(lsp.Position(0, 4)) == (1, 4)
    assert lines.position(3, 2) == lsp.Position(2 if breaks == "\n" else 1, 1)


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["typed.yaml", "typed.test.yaml"])
async def test_the_first_line_of_a_file_with_a_byte_order_mark_is_where_the_editor_has_it(
    session: Session, project: Path, name: str
) -> None:
    """A pipeline or a test file saved with a byte order mark had the columns of its first
    line one to the left (the loader's, without the mark): an unknown key there was
    underlined from the mark to the key's last character but one."""
    text = "\ufeffbogus: 1\n" + (project / name).read_text(encoding="utf-8").split("\n", 1)[1]
    session.open(name, text)
    found = [d for d in await session.diagnostics(name, 1) if d.code == "CD100"]
    assert [(d.range.start, d.range.end) for d in found] == [
        (lsp.Position(0, 1), lsp.Position(0, 6))
    ]


@pytest.mark.asyncio
async def test_a_closed_file_with_a_byte_order_mark_has_the_editors_columns(
    session: Session, project: Path
) -> None:
    """A model script saved with a byte order mark and not open: its diagnostics were one
    column right of the editor's (which holds the file without the mark)."""
    script = project / "typed.script.yaml"
    script.write_text("\ufeffbogus: 1\n" + script.read_text(encoding="utf-8"), encoding="utf-8")
    session.open("typed.yaml")
    found = [d for d in await session.diagnostics("typed.script.yaml") if d.code == "CD100"]
    assert [(d.range.start, d.range.end) for d in found] == [
        (lsp.Position(0, 0), lsp.Position(0, 5))
    ]


@pytest.mark.asyncio
async def test_a_rename_into_a_closed_file_with_a_byte_order_mark_edits_the_name(
    session: Session, project: Path
) -> None:
    """An input renamed from the pipeline, named on the first line of a test file saved with a
    byte order mark and not open: the edit there was one column right (`{qlane support}`)."""
    test = project / "typed.test.yaml"
    marked = "\ufeffinputs: {queue: support}\n" + test.read_text(encoding="utf-8")
    test.write_text(marked.replace("inputs: {queue: support}  #", "#"), encoding="utf-8")
    session.open("typed.yaml")
    await session.diagnostics("typed.yaml")
    edit = await session.client.text_document_rename_async(
        lsp.RenameParams(
            text_document=lsp.TextDocumentIdentifier(session.uri("typed.yaml")),
            position=session.position("typed.yaml", "queue: {description", 1),
            new_name="qlane",
        )
    )
    assert edit is not None
    assert edit.changes is not None
    edits = edit.changes[session.uri("typed.test.yaml")]
    first = [e for e in edits if e.range.start.line == 0]
    assert [(e.range.start.character, e.range.end.character, e.new_text) for e in first] == [
        (9, 14, "qlane")
    ]
