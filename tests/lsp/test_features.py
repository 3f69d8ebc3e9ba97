"""The editor features' answers, in process: each file's lines are read once an answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from converge_dsl.lsp import build_server
from converge_dsl.lsp._workspace import Workspace

DATA = Path(__file__).parent / "data"


@pytest.mark.asyncio
async def test_references_and_rename_read_each_files_lines_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each place's file was split into lines again (the whole text, 5 MB for a large
    pipeline): references of a key in 500 suggestors took seconds, growing as its square."""
    for name in ("typed.yaml", "typed.test.yaml", "typed.script.yaml"):
        (tmp_path / name).write_text((DATA / name).read_text(encoding="utf-8"), encoding="utf-8")
    server = build_server(debounce=0)
    server.text_document_publish_diagnostics = lambda params: None  # type: ignore[method-assign]
    uri = (tmp_path / "typed.yaml").as_uri()
    identifier = lsp.TextDocumentIdentifier(uri)
    position = lsp.Position(8, 11)  # keys[0].name: tickets
    features = server.protocol.fm.features
    try:
        server.opened(uri, (tmp_path / "typed.yaml").read_text(encoding="utf-8"), 1)
        await asyncio.wait_for(server.scheduler.settle(), 60)
        read: list[str] = []
        lines = Workspace.lines
        monkeypatch.setattr(Workspace, "lines", lambda self, f: read.append(f) or lines(self, f))
        context = lsp.ReferenceContext(include_declaration=True)
        found = features[lsp.TEXT_DOCUMENT_REFERENCES](
            lsp.ReferenceParams(context=context, text_document=identifier, position=position)
        )
        referenced = sorted(read)
        read.clear()
        edit = features[lsp.TEXT_DOCUMENT_RENAME](
            lsp.RenameParams(text_document=identifier, position=position, new_name="requests")
        )
    finally:
        server.scheduler.shutdown(wait=True)
    assert len(found) == 8
    assert sum(len(edits) for edits in edit.changes.values()) == 8
    files = sorted(str(tmp_path / name) for name in ("typed.test.yaml", "typed.yaml"))
    assert referenced == files
    assert sorted(read) == files
