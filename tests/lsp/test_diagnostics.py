"""Diagnostics over stdio are `validate`'s: the same codes, ranges, messages and hints, in
every file a pipeline's check reports on; edits are debounced; a broken text keeps the server."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lsprotocol import types as lsp

from converge_dsl.diagnostics import Diagnostic, Severity
from converge_dsl.lsp._diagnostics import by_file
from converge_dsl.lsp._positions import Lines
from converge_dsl.validation import check_pipeline

if TYPE_CHECKING:
    from tests.lsp.conftest import Session

pytestmark = pytest.mark.asyncio


def _validate(project: Path, name: str) -> dict[str, list[tuple[object, ...]]]:
    """`validate`'s findings for `name` (run from the project folder), by file, as tuples."""
    path = project / name
    checked = check_pipeline(path, display=name)
    found: dict[str, list[tuple[object, ...]]] = {}
    for d in checked.diagnostics:
        found.setdefault(d.file, []).append(_expected(d))
    return found


def _expected(d: Diagnostic) -> tuple[object, ...]:
    message = d.message + (f"\nhint: {d.hint}" if d.hint else "")
    severity = 1 if d.is_error else 2
    return (d.code, severity, d.line - 1, d.column - 1, d.end_line - 1, d.end_column - 1, message)


def _got(items: list[lsp.Diagnostic]) -> list[tuple[object, ...]]:
    return [
        (
            d.code,
            int(d.severity or 0),
            d.range.start.line,
            d.range.start.character,
            d.range.end.line,
            d.range.end.character,
            d.message,
        )
        for d in items
    ]


async def test_diagnostics_are_validates_in_every_file(session: Session, project: Path) -> None:
    session.open("broken.yaml")
    expected = _validate(project, "broken.yaml")
    assert set(expected) == {"broken.yaml", "broken.script.yaml"}
    assert _got(await session.diagnostics("broken.yaml", 1)) == expected["broken.yaml"]
    script = await session.diagnostics("broken.script.yaml")
    assert _got(script) == expected["broken.script.yaml"]
    codes = {d.code for d in script} | {d.code for d in await session.diagnostics("broken.yaml", 1)}
    assert codes == {"CD100", "CD203", "CD300"}


async def test_an_edit_publishes_the_latest_text_only(session: Session, project: Path) -> None:
    text = (project / "broken.yaml").read_text(encoding="utf-8")
    session.open("broken.yaml", text)
    await session.diagnostics("broken.yaml", 1)
    fixed = text.replace("dependencies: [strategy]", "dependencies: [strategies]")
    for step in range(5):  # five quick edits: only the last text is analysed and published
        version = session.replace("broken.yaml", fixed if step == 4 else text + "#" * step)
    published = await session.diagnostics("broken.yaml", version)
    assert published == []
    assert version == 6


async def test_an_edit_of_a_file_whose_name_is_escaped_in_its_uri_is_taken(
    session: Session, project: Path
) -> None:
    """A name with a space is `%20` in the URI the editor sends (as VS Code sends `c%3A`
    for a Windows drive): its edits are the open document's, not an unopened one's."""
    text = (project / "broken.yaml").read_text(encoding="utf-8")
    (project / "my broken.yaml").write_text(text, encoding="utf-8")
    assert "%20" in session.open("my broken.yaml", text)
    assert await session.diagnostics("my broken.yaml", 1)
    fixed = text.replace("dependencies: [strategy]", "dependencies: [strategies]")
    version = session.replace("my broken.yaml", fixed)
    assert await session.diagnostics("my broken.yaml", version) == []


async def test_two_uris_of_one_file_are_two_buffers_the_file_the_last_edited(
    session: Session, project: Path
) -> None:
    """A link and its file, each open in its own buffer: the file's text is the buffer
    edited last (its diagnostics published under that buffer's URI), and closing one
    leaves the other's. One shared document took both
    buffers' edits (a text in neither) and, once the link closed, refused the file's."""
    text = (project / "broken.yaml").read_text(encoding="utf-8")
    fixed = text.replace("dependencies: [strategy]", "dependencies: [strategies]")
    (project / "link.yaml").symlink_to(project / "broken.yaml")
    session.open("broken.yaml", text)
    session.open("link.yaml", text)
    assert await session.diagnostics("broken.yaml", 1)
    assert await session.diagnostics("link.yaml", session.replace("link.yaml", fixed)) == []
    session.client.text_document_did_close(
        lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(session.uri("link.yaml")))
    )
    assert await session.diagnostics("broken.yaml", 1)  # the file's own buffer, broken
    version = session.replace("broken.yaml", fixed)
    assert await session.diagnostics("broken.yaml", version, timeout=10) == []


async def test_edits_past_the_end_or_with_their_ends_swapped_edit_what_the_editor_meant(
    session: Session, project: Path
) -> None:
    """A column past the last line's end is its end; a range whose end comes before its
    start is that range: the diagnostics are validate's on the text so edited."""
    text = (project / "broken.yaml").read_text(encoding="utf-8").removesuffix("\n")
    uri = session.open("broken.yaml", text)
    await session.diagnostics("broken.yaml", 1)
    last = text.count("\n")
    added = "\n  - {name: more, class: acceptance, check: \"count('strategy') > 0\"}"
    line = text[: text.index("[strategy]")].count("\n")
    column = text.index("[strategy]") - text.rindex("\n", 0, text.index("[strategy]")) - 1
    edits = [
        (lsp.Range(lsp.Position(last, 999), lsp.Position(last, 999)), added, text + added),
        (
            lsp.Range(lsp.Position(line, column + 9), lsp.Position(line, column + 1)),
            "strategies",
            text.replace("[strategy]", "[strategies]", 1) + added,
        ),
    ]
    for version, (where, new, expected) in enumerate(edits, start=2):
        session.versions[uri] = version
        session.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [lsp.TextDocumentContentChangePartial(range=where, text=new)],
            )
        )
        published = await session.diagnostics("broken.yaml", version)
        (project / "broken.yaml").write_text(expected, encoding="utf-8")
        assert _got(published) == _validate(project, "broken.yaml").get("broken.yaml", [])


async def test_a_malformed_text_mid_edit_is_reported_and_the_server_lives(
    session: Session, project: Path
) -> None:
    text = (project / "broken.yaml").read_text(encoding="utf-8")
    session.open("broken.yaml", text)
    await session.diagnostics("broken.yaml", 1)
    version = session.replace("broken.yaml", text.replace("  - name: niche", "  - name: [niche"))
    published = await session.diagnostics("broken.yaml", version)
    assert [d.code for d in published] == ["CD001"]
    version = session.replace("broken.yaml", text)
    assert {d.code for d in await session.diagnostics("broken.yaml", version)} == {
        "CD203",
        "CD300",
    }


async def test_a_model_script_change_rechecks_its_pipeline(session: Session, project: Path) -> None:
    session.open("broken.yaml")
    assert await session.diagnostics("broken.script.yaml")
    script = (project / "broken.script.yaml").read_text(encoding="utf-8")
    fixed = script.replace("    colour: red\n", "")
    (project / "broken.script.yaml").write_text(fixed, encoding="utf-8")
    session.open("broken.script.yaml", fixed)
    session.client.text_document_did_save(
        lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(session.uri("broken.script.yaml")))
    )
    assert await session.diagnostics("broken.script.yaml", 1) == []


async def test_a_test_file_shows_its_own_findings_and_follows_its_pipeline(
    session: Session, project: Path
) -> None:
    from converge_dsl.errors import PipelineInvalid
    from converge_dsl.pipetest import read_test_file

    test = (project / "typed.test.yaml").read_text(encoding="utf-8")
    typo = test.replace("[has-strategy]", "[has-strategies]")
    (project / "typed.test.yaml").write_text(typo, encoding="utf-8")
    with pytest.raises(PipelineInvalid) as raised:  # what `converge-dsl test` reports
        read_test_file(project / "typed.test.yaml", display="typed.test.yaml")
    expected = [_expected(d) for d in raised.value.diagnostics]
    assert [e[0] for e in expected] == ["CD231"]
    session.open("typed.test.yaml", typo)
    found = await session.diagnostics("typed.test.yaml", 1)
    assert _got(found) == expected
    assert "did you mean 'has-strategy'?" in found[0].message

    # The pipeline's invariant is renamed to the name the test gives: the test is checked again.
    pipeline = (project / "typed.yaml").read_text(encoding="utf-8")
    renamed = pipeline.replace("name: has-strategy", "name: has-strategies")
    (project / "typed.yaml").write_text(renamed, encoding="utf-8")
    session.client.diagnostics.pop(session.uri("typed.test.yaml"))
    session.open("typed.yaml", renamed)
    # A check of the test file scheduled before the rename may publish first: the last
    # publication is the one that counts.
    published = await session.diagnostics("typed.test.yaml", 1)
    for _ in range(3):
        if not published:
            break
        session.client.diagnostics.pop(session.uri("typed.test.yaml"))
        published = await session.diagnostics("typed.test.yaml", 1)
    assert published == []


@pytest.mark.parametrize(
    ("head", "marked"),
    [
        ("kind: PipelineTest\napiVersion: converge-dsl/v1\n", "\ufeff"),  # its first line
        ("apiVersion: converge-dsl/v1\u2028kind: PipelineTest\n", ""),  # a YAML-only break
    ],
    ids=["byte-order-mark", "u2028"],
)
async def test_a_test_file_is_a_test_file_whatever_starts_its_kinds_line(
    session: Session, project: Path, head: str, marked: str
) -> None:
    """A test file saved with a byte order mark, its `kind:` on the first line, or whose
    `kind:` line followed a U+2028 (a line break to YAML), was read as a pipeline (its
    `apiVersion`): it showed a pipeline's schema errors."""
    from converge_dsl.errors import PipelineInvalid
    from converge_dsl.pipetest import read_test_file

    test = (project / "typed.test.yaml").read_text(encoding="utf-8").split("\n", 1)[1]
    test = test.replace("apiVersion: converge-dsl/v1\nkind: PipelineTest\n", marked + head)
    test = test.replace("[has-strategy]", "[has-strategies]")
    (project / "typed.test.yaml").write_text(test, encoding="utf-8")
    with pytest.raises(PipelineInvalid) as raised:  # what `converge-dsl test` reports
        read_test_file(project / "typed.test.yaml", display="typed.test.yaml")
    expected = [_expected(d) for d in raised.value.diagnostics]
    assert [e[0] for e in expected] == ["CD231"]
    session.open("typed.test.yaml", test)
    found = _got(await session.diagnostics("typed.test.yaml", 1))
    assert [d[0] for d in found] == ["CD231"]


def _keystroke(text: str, rng: random.Random) -> tuple[int, int, str]:
    """A keystroke-sized edit of `text` as (start, end, new text) offsets: a character typed
    or deleted, Enter at a line's end, a line copied below itself."""
    at = rng.randrange(len(text) + 1)
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at) + 1 or len(text)
    roll = rng.random()
    if roll < 0.4:
        return at, at, rng.choice(["x", "s", "0", " ", ":", "-", "'", "[", "#", "\n"])
    if roll < 0.7:
        return at, min(len(text), at + 1), ""
    if roll < 0.9:
        return end - 1, end - 1, "\n" + " " * rng.randrange(0, 5)
    return start, start, text[start:end]


async def test_random_edits_publish_what_validate_finds_in_the_same_text(
    session: Session, project: Path
) -> None:
    """Each of a seeded sequence of incremental edits publishes exactly what `validate` finds
    in that text on disk (the analysis re-reads only the entry an edit lies in). An edit
    after which the text does not load is undone by the next, as a user would."""
    rng = random.Random(28)
    text = (project / "broken.yaml").read_text(encoding="utf-8")
    uri = session.open("broken.yaml", text)
    await session.diagnostics("broken.yaml", 1)
    undo: tuple[int, int, str] | None = None
    for version in range(2, 62):
        start, end, new = undo or _keystroke(text, rng)
        begin, stop = at_offset(text, start), at_offset(text, end)
        removed, text = text[start:end], text[:start] + new + text[end:]
        session.versions[uri] = version
        session.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [lsp.TextDocumentContentChangePartial(range=lsp.Range(begin, stop), text=new)],
            )
        )
        published = await session.diagnostics("broken.yaml", version)
        (project / "broken.yaml").write_text(text, encoding="utf-8")
        expected = _validate(project, "broken.yaml").get("broken.yaml", [])
        assert _got(published) == expected
        loads = not any(str(code).startswith("CD0") for code, *_ in expected)
        undo = None if loads or undo else (start, start + len(new), removed)


def at_offset(text: str, offset: int) -> lsp.Position:
    line = text.count("\n", 0, offset)
    return lsp.Position(line, offset - (text.rfind("\n", 0, offset) + 1))


async def _published_codes(session: Session, name: str, want: list[str]) -> list[str]:
    """The codes published for `name` once they are `want`, or the last of a few
    publications (a check scheduled before the latest edit may publish first)."""
    codes: list[str] = []
    for _ in range(4):
        codes = [str(d.code) for d in await session.diagnostics(name, 1)]
        if codes == want:
            break
        session.client.diagnostics.pop(session.uri(name))
    return codes


async def test_a_test_file_reads_its_open_pipelines_unsaved_text(
    session: Session, project: Path
) -> None:
    """A name added to the open pipeline, not saved, clears the test's finding; taking it
    out brings the finding back, and the file on disk is never read for it."""
    test = (project / "typed.test.yaml").read_text(encoding="utf-8")
    typo = test.replace("[has-strategy]", "[has-strategies]")
    (project / "typed.test.yaml").write_text(typo, encoding="utf-8")
    pipeline = (project / "typed.yaml").read_text(encoding="utf-8")
    session.open("typed.yaml", pipeline)
    session.open("typed.test.yaml", typo)
    assert await _published_codes(session, "typed.test.yaml", ["CD231"]) == ["CD231"]

    renamed = pipeline.replace("name: has-strategy", "name: has-strategies")
    session.replace("typed.yaml", renamed)
    assert await _published_codes(session, "typed.test.yaml", []) == []
    assert (project / "typed.yaml").read_text(encoding="utf-8") == pipeline  # not saved

    session.replace("typed.yaml", pipeline)
    assert await _published_codes(session, "typed.test.yaml", ["CD231"]) == ["CD231"]


@pytest.mark.parametrize("replaced", ["", "# notes\nitems: [1, 2]\n"])
async def test_a_pipeline_edited_into_another_file_takes_its_findings_back(
    session: Session, replaced: str
) -> None:
    session.open("broken.yaml")
    assert await session.diagnostics("broken.yaml", 1)
    assert await session.diagnostics("broken.script.yaml")
    version = session.replace("broken.yaml", replaced)
    assert await session.diagnostics("broken.yaml", version) == []
    assert await session.diagnostics("broken.script.yaml", None) == []


EVALUATION = Path(__file__).parents[2] / "pipelines" / "support-triage" / "triage.eval.yaml"
RUN_CONFIG = "apiVersion: converge-dsl/v1\nkind: RunConfig\ncache:\n  mode: read-write\n"


async def test_an_evaluation_or_a_run_configuration_is_not_checked_as_a_pipeline(
    session: Session,
) -> None:
    """The shipped evaluation file and a run configuration (kinds `validate` does not take
    for pipelines) showed a pipeline's errors: CD101, CD103, CD100 on every field."""
    session.open("triage.eval.yaml", EVALUATION.read_text(encoding="utf-8"))
    session.open("dev.run.yaml", RUN_CONFIG)
    session.open("broken.yaml")  # checked after them (one worker): its findings come last
    assert await session.diagnostics("broken.yaml", 1)
    assert session.client.diagnostics.get(session.uri("triage.eval.yaml"), []) == []
    assert session.client.diagnostics.get(session.uri("dev.run.yaml"), []) == []


async def test_a_model_script_not_utf8_shows_the_bad_byte_where_it_is(
    session: Session, project: Path
) -> None:
    with (project / "typed.script.yaml").open("ab") as script:
        script.write(b"# caf\xe9\n")
    line = (project / "typed.script.yaml").read_bytes().count(b"\n") - 1
    session.open("typed.yaml")
    (found,) = await session.diagnostics("typed.script.yaml")
    assert found.code == "CD006"
    assert found.range == lsp.Range(lsp.Position(line, 5), lsp.Position(line, 6))


async def test_a_lone_surrogate_from_the_editor_keeps_the_checks_and_their_places(
    session: Session,
) -> None:
    text = (
        'apiVersion: converge-dsl/v1\nkind: Pipeline\nname: "\ud800x"\n'
        'suggestors:\n  - {name: "\ud800y\x00", kind: rule}\n'
    )
    uri = session.open("lone.yaml", text)
    (found,) = [d for d in await session.diagnostics("lone.yaml", 1) if d.code == "CD017"]
    assert found.range == lsp.Range(lsp.Position(4, 14), lsp.Position(4, 15))
    hover = await session.client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(4, 6))
    )
    assert hover is None or hover.contents


async def test_each_files_lines_are_read_once_for_all_its_diagnostics() -> None:
    """Reading a file's lines splits its whole text: one read a file, not one a diagnostic
    (40 findings in a 2 MB pipeline were 40 splits on the server's event loop)."""
    found = [
        Diagnostic(f"CD{200 + i % 3}", Severity.ERROR, "m", name, 1, 1, 1, 2)
        for i in range(30)
        for name in ("a.yaml", "b.yaml")
    ]
    read: list[str] = []

    def lines_of(file: str) -> Lines:
        read.append(file)
        return Lines("x: 1\n")

    grouped = by_file(found, lines_of)
    assert sorted(read) == ["a.yaml", "b.yaml"]
    assert [len(items) for items in grouped.values()] == [30, 30]


@pytest.mark.parametrize(
    "spelt",
    [
        lambda root: f"{root.as_uri()}/sub/../broken.yaml",  # a dot-dot segment
        lambda root: f"{root.as_uri()}/%62roken.yaml",  # a letter escaped
        lambda root: f"{root.as_uri()}/folder-link/broken.yaml",  # through a linked folder
    ],
)
async def test_diagnostics_are_published_under_the_uri_the_client_opened(
    session: Session, project: Path, spelt: Callable[[Path], str]
) -> None:
    """The client's URI string names its buffer: publishing under the resolved file's URI
    (another string) showed nothing in it."""
    (project / "sub").mkdir()
    (project / "folder-link").symlink_to(project)
    uri = spelt(project)
    text = (project / "broken.yaml").read_text(encoding="utf-8")
    session.versions[uri] = 1
    session.client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "yaml", 1, text))
    )
    found = await session.diagnostics_at(uri)
    assert "CD203" in {d.code for d in found}
    assert session.uri("broken.yaml") not in session.client.diagnostics
