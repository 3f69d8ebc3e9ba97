"""Code actions over stdio: validate's hints as quick fixes, applied and checked again."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from converge_dsl.lsp import build_server
from converge_dsl.lsp._actions import actions
from converge_dsl.lsp._lookup import Subject
from tests.lsp.conftest import apply

if TYPE_CHECKING:
    from tests.lsp.conftest import Session

pytestmark = pytest.mark.asyncio


async def _actions(
    session: Session, name: str, diagnostics: list[lsp.Diagnostic]
) -> dict[str, lsp.CodeAction]:
    found = await session.client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(session.uri(name)),
            range=diagnostics[0].range,
            context=lsp.CodeActionContext(diagnostics=diagnostics),
        )
    )
    assert found is not None
    return {a.title: a for a in found if isinstance(a, lsp.CodeAction)}


def _edits(session: Session, action: lsp.CodeAction, name: str) -> list[lsp.TextEdit]:
    assert action.edit is not None
    assert action.edit.changes is not None
    return list(action.edit.changes[session.uri(name)])


async def test_did_you_mean_and_declare_key(session: Session, project: Path) -> None:
    text = (project / "broken.yaml").read_text(encoding="utf-8")
    session.open("broken.yaml", text)
    unknown = [d for d in await session.diagnostics("broken.yaml", 1) if d.code == "CD203"]
    found = await _actions(session, "broken.yaml", unknown)
    assert sorted(found) == ["Declare key 'strategy'", "Replace 'strategy' with 'strategies'"]
    fixed = apply(
        text, _edits(session, found["Replace 'strategy' with 'strategies'"], "broken.yaml")
    )
    assert "dependencies: [strategies]" in fixed
    version = session.replace("broken.yaml", fixed)
    assert await session.diagnostics("broken.yaml", version) == []

    session.replace("broken.yaml", text)
    declared = apply(text, _edits(session, found["Declare key 'strategy'"], "broken.yaml"))
    assert "\nkeys:\n  - name: strategy\nmodels:\n" in declared
    version = session.replace("broken.yaml", declared)
    assert "CD203" not in {d.code for d in await session.diagnostics("broken.yaml", version)}


async def test_declare_key_in_a_keys_list_and_add_a_dependency(
    session: Session, project: Path
) -> None:
    text = (project / "typed.yaml").read_text(encoding="utf-8")
    text = text.replace("target: evaluations", "target: verdicts")
    session.open("typed.yaml", text)
    unknown = [d for d in await session.diagnostics("typed.yaml", 1) if d.code == "CD203"]
    found = await _actions(session, "typed.yaml", unknown)
    declared = apply(text, _edits(session, found["Declare key 'verdicts'"], "typed.yaml"))
    assert "        priority: {type: integer}\n  - {name: verdicts}\nmodels:" in declared
    version = session.replace("typed.yaml", declared)
    assert await session.diagnostics("typed.yaml", version) == []

    # validate's finding that a suggestor reads a key it is not re-run on (CD252).
    reading = declared.replace(
        "for {{ inputs.queue }}", "for {{ inputs.queue }} of {{ facts.tickets }}"
    )
    version = session.replace("typed.yaml", reading)
    reads = [d for d in await session.diagnostics("typed.yaml", version) if d.code == "CD252"]
    assert len(reads) == 1
    found = await _actions(session, "typed.yaml", reads)
    assert list(found) == ["Add 'tickets' to dependencies"]
    added = apply(reading, _edits(session, found["Add 'tickets' to dependencies"], "typed.yaml"))
    assert "    dependencies: [strategies, tickets]\n" in added
    version = session.replace("typed.yaml", added)
    assert await session.diagnostics("typed.yaml", version) == []


@pytest.mark.parametrize("path", [5, "suggestors", {"0": 1}])
async def test_a_diagnostic_whose_data_the_editor_changed_still_gets_its_other_fixes(
    session: Session, project: Path, path: object
) -> None:
    session.open("broken.yaml")
    unknown = [d for d in await session.diagnostics("broken.yaml", 1) if d.code == "CD203"]
    assert isinstance(unknown[0].data, dict)
    unknown[0].data["path"] = path
    found = await _actions(session, "broken.yaml", unknown)
    assert sorted(found) == ["Declare key 'strategy'", "Replace 'strategy' with 'strategies'"]


@pytest.mark.parametrize("name", ["missing/packed.yaml", "never-saved.yaml"])
async def test_the_lock_command_on_a_file_not_on_disk_says_to_save_it(
    session: Session, name: str
) -> None:
    uri = session.uri(name)
    with pytest.raises(JsonRpcInvalidParams) as refused:
        await session.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("converge-dsl.lock", [uri])
        )
    assert refused.value.message == (
        f"{uri} is not a file on disk: save the pipeline, then run converge-dsl lock"
    )


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ([5], "converge-dsl.lock takes one argument, the pipeline's URI, not [5]"),
        (
            [{"uri": "x"}],
            'converge-dsl.lock takes one argument, the pipeline\'s URI, not [{"uri": "x"}]',
        ),
        ([], "converge-dsl.lock takes one argument, the pipeline's URI, not []"),
        (
            ["untitled:Untitled-1"],
            "untitled:Untitled-1 is not a file on disk: "
            "save the pipeline, then run converge-dsl lock",
        ),
    ],
)
async def test_the_lock_command_on_what_is_no_file_uri_says_what_it_takes(
    session: Session, arguments: list[object], said: str
) -> None:
    with pytest.raises(JsonRpcInvalidParams) as refused:
        await session.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("converge-dsl.lock", arguments)
        )
    assert refused.value.message == said


async def test_the_lock_command_gives_its_process_no_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server's own standard input carries the editor's messages: a `lock` reading its
    # input would take them.
    import subprocess

    from converge_dsl.lsp._actions import run_lock

    seen: dict[str, object] = {}

    def fake_run(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.update(kwargs)
        return subprocess.CompletedProcess(args, 0, "locked\n", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert run_lock(str(tmp_path / "p.yaml"), str(tmp_path)) == "locked"
    assert seen["stdin"] is subprocess.DEVNULL


def _apply_on_protocol_lines(text: str, edits: list[lsp.TextEdit]) -> str:
    """`text` with `edits` applied, its lines ending as the protocol ends them (ASCII)."""
    starts = [0] + [m.end() for m in re.finditer("\r\n|\r|\n", text)]

    def offset(position: lsp.Position) -> int:
        return starts[position.line] + position.character

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


@pytest.mark.parametrize("brk", ["\r", "\r\n"], ids=["cr", "crlf"])
async def test_a_fix_that_adds_lines_ends_them_as_the_file_does(
    session: Session, project: Path, brk: str
) -> None:
    """A quick fix adding lines to a file whose lines end in CR wrote `\\n`: the file then
    mixed its line breaks (a CR-only editor showed the new lines joined to the next)."""
    text = (project / "broken.yaml").read_text(encoding="utf-8")
    text = text.replace("\n", brk)
    session.open("broken.yaml", text)
    unknown = [d for d in await session.diagnostics("broken.yaml", 1) if d.code == "CD203"]
    found = await _actions(session, "broken.yaml", unknown)
    edits = [e for title in found for e in _edits(session, found[title], "broken.yaml")]
    assert any(brk in e.new_text for e in edits)
    for edit in edits:
        assert not re.search("[\r\n]", edit.new_text.replace(brk, "")), edit.new_text
    fixed = _apply_on_protocol_lines(
        text, _edits(session, found["Declare key 'strategy'"], "broken.yaml")
    )
    assert set(re.findall("\r\n|\r|\n", fixed)) == {brk}
    version = session.replace("broken.yaml", fixed)
    assert "CD203" not in {d.code for d in await session.diagnostics("broken.yaml", version)}


async def test_a_guess_that_is_not_a_plain_name_is_not_offered(tmp_path: Path) -> None:
    """A did-you-mean guess is quoted with its unusual characters written as escapes (a
    quote as `\\x27`): such a guess was offered, and inserted as its escape text."""
    text = "dependencies: [strategy]\n"
    subject = Subject(build_server(debounce=0), tmp_path / "p.yaml", text, None)

    def titles(guess: str) -> list[str]:
        where = lsp.Range(lsp.Position(0, 15), lsp.Position(0, 23))
        hint = {"hint": f"did you mean '{guess}'?"}
        return [a.title for a in actions(subject, [lsp.Diagnostic(where, "x", data=hint)])]

    assert titles("strategies") == ["Replace 'strategy' with 'strategies'"]
    assert titles("strateg\\x27y") == []
    assert titles("strategy\\x0a") == []
