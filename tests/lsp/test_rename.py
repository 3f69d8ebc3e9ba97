"""Rename over stdio: a key, a suggestor, an input and an invariant across the pipeline, its
expressions, its model script and its test file; the files still validate and test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

from tests.lsp.conftest import apply

if TYPE_CHECKING:
    from tests.lsp.conftest import Session

pytestmark = pytest.mark.asyncio
FILES = ("typed.yaml", "typed.script.yaml", "typed.test.yaml")


async def _rename(session: Session, name: str, needle: str, offset: int, new: str) -> set[str]:
    """Rename at `needle` and apply the edits to the files on disk; the files edited."""
    position = session.position(name, needle, offset)
    identifier = lsp.TextDocumentIdentifier(session.uri(name))
    prepared = await session.client.text_document_prepare_rename_async(
        lsp.PrepareRenameParams(identifier, position)
    )
    assert prepared is not None
    edit = await session.client.text_document_rename_async(
        lsp.RenameParams(text_document=identifier, position=position, new_name=new)
    )
    assert edit is not None
    assert edit.changes is not None
    edited = set()
    for uri, edits in edit.changes.items():
        path = Path(uri.removeprefix("file://"))
        text = apply(path.read_text(encoding="utf-8"), list(edits))
        path.write_text(text, encoding="utf-8")
        edited.add(path.name)
        if path.name in session.versions_by_name():
            session.replace(path.name, text)
    return edited


async def test_renames_across_files_keep_everything_else(session: Session, project: Path) -> None:
    for name in FILES:
        session.open(name)
    before = (project / "typed.yaml").read_text(encoding="utf-8")
    assert await _rename(session, "typed.yaml", "[tickets]", 1, "requests") == {"typed.yaml"}
    assert await _rename(session, "typed.yaml", "name: summarise", 7, "summarize") == {
        "typed.yaml",
        "typed.script.yaml",
    }
    assert await _rename(session, "typed.yaml", "  queue:", 3, "inbox") == {"typed.yaml"}
    assert await _rename(session, "typed.yaml", "name: has-strategy", 7, "any-strategy") == {
        "typed.yaml",
        "typed.test.yaml",
    }
    after = (project / "typed.yaml").read_text(encoding="utf-8")
    expected = (
        before.replace("name: tickets", "name: requests")
        .replace("key: tickets", "key: requests")
        .replace("[tickets]", "[requests]")
        .replace("count('tickets')", "count('requests')")
        .replace("facts.tickets", "facts.requests")
        .replace("summarise", "summarize")
        .replace("  queue:", "  inbox:")
        .replace("inputs.queue", "inputs.inbox")
        .replace("has-strategy", "any-strategy")
    )
    assert after == expected  # comments, descriptions ("Incoming tickets") untouched
    assert "suggestor: summarize" in (project / "typed.script.yaml").read_text(encoding="utf-8")
    assert "[any-strategy]" in (project / "typed.test.yaml").read_text(encoding="utf-8")
    validate = [sys.executable, "-m", "converge_dsl", "validate", "typed.yaml"]
    assert subprocess.run(validate, cwd=project, check=False).returncode == 0
    test = [sys.executable, "-m", "converge_dsl", "test", "typed.test.yaml"]
    assert subprocess.run(test, cwd=project, check=False, capture_output=True).returncode == 0


async def test_a_built_in_key_and_a_bad_name_are_refused(session: Session) -> None:
    session.open("typed.yaml")
    identifier = lsp.TextDocumentIdentifier(session.uri("typed.yaml"))
    position = session.position("typed.yaml", "[strategies]", 1)
    prepared = await session.client.text_document_prepare_rename_async(
        lsp.PrepareRenameParams(identifier, position)
    )
    assert prepared is None
    position = session.position("typed.yaml", "[tickets]", 1)
    with pytest.raises(JsonRpcException, match="not a valid key name"):
        await session.client.text_document_rename_async(
            lsp.RenameParams(text_document=identifier, position=position, new_name="Bad Key")
        )
