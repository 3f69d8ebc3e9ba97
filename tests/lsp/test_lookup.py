"""A request's file (`Subject`): its kind is the open document's, read once a text."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from converge_dsl.lsp import _lookup, build_server
from converge_dsl.lsp._analysis import PIPELINE, SCRIPT, file_kind

DATA = Path(__file__).parent / "data"


@pytest.mark.asyncio
async def test_a_requests_file_kind_is_the_open_documents_kept_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request read the kind of its file again (a search of the whole text, 64 ms on
    1.6 MB); an open document's kind is kept across the edits that cannot change it."""
    path = tmp_path / "typed.yaml"
    text = (DATA / "typed.yaml").read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    server = build_server(debounce=0)
    server.text_document_publish_diagnostics = lambda params: None  # type: ignore[method-assign]
    try:
        server.opened(path.as_uri(), text, 1)
        await asyncio.wait_for(server.settle(), 60)
        read: list[str] = []
        monkeypatch.setattr(_lookup, "file_kind", lambda text: read.append(text) or file_kind(text))
        subject = _lookup.Subject.of(server, path.as_uri())
        script = _lookup.Subject.of(server, (DATA / "typed.script.yaml").as_uri())  # not open
    finally:
        server._worker.shutdown(wait=True)
    assert subject is not None
    assert script is not None
    assert (subject.kind, script.kind) == (PIPELINE, SCRIPT)
    assert len(read) == 1  # the file not open only


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_a_files_kind_is_read_at_the_start_of_any_line(end: str) -> None:
    head = ["# a comment", "apiVersion: converge-dsl/v1", "kind: ModelScript", "rules: []"]
    assert file_kind(end.join(head)) == SCRIPT
    assert file_kind(end.join([head[0], head[1], "rules: []"])) == PIPELINE
    assert file_kind(end.join(["# kind: ModelScript", "x: 1"])) == "other"
