"""A request's file (`Subject`) and the files around it: an open document's kind is the one
the server keeps, read once a text."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from converge_dsl.lsp import _lookup, _navigate, _server, _workspace, build_server
from converge_dsl.lsp._analysis import PIPELINE, SCRIPT, file_kind
from converge_dsl.lsp._index import KEY

DATA = Path(__file__).parent / "data"


@pytest.mark.asyncio
async def test_a_requests_file_kind_is_the_open_documents_kept_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request read the kind of its file again (a search of the whole text, 64 ms on
    1.6 MB); an open document's kind is kept across the edits that cannot change it."""
    path = tmp_path / "typed.yaml"
    text = "# opened\n" + (DATA / "typed.yaml").read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    server = build_server(debounce=0)
    server.text_document_publish_diagnostics = lambda params: None  # type: ignore[method-assign]
    try:
        server.opened(path.as_uri(), text, 1)
        await asyncio.wait_for(server.scheduler.settle(), 60)
        read = _count_kinds(monkeypatch)
        subject = _lookup.Subject.of(server, path.as_uri())
        script = _lookup.Subject.of(server, (DATA / "typed.script.yaml").as_uri())  # not open
    finally:
        server.scheduler.shutdown(wait=True)
    assert subject is not None
    assert script is not None
    assert (subject.kind, script.kind) == (PIPELINE, SCRIPT)
    script_text = (DATA / "typed.script.yaml").read_text(encoding="utf-8")
    assert read.count(script_text) == 1  # the file not open only, once
    assert text not in read


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_a_files_kind_is_read_at_the_start_of_any_line(end: str) -> None:
    head = ["# a comment", "apiVersion: converge-dsl/v1", "kind: ModelScript", "rules: []"]
    assert file_kind(end.join(head)) == SCRIPT
    assert file_kind(end.join([head[0], head[1], "rules: []"])) == PIPELINE
    assert file_kind(end.join(["# kind: ModelScript", "x: 1"])) == "other"


def _count_kinds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts whose kind the server's modules read from now on."""
    read: list[str] = []
    for module in (_lookup, _navigate, _server, _workspace):
        counted = lambda text: read.append(text) or file_kind(text)  # noqa: E731
        monkeypatch.setattr(module, "file_kind", counted, raising=False)
    return read


@pytest.mark.asyncio
async def test_references_read_the_kept_kind_of_each_open_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """References read the kind of each test file and model script beside the pipeline from
    its text again, open or not (a search of the whole text each request)."""
    for name in ("typed.yaml", "typed.test.yaml", "typed.script.yaml"):
        (tmp_path / name).write_text((DATA / name).read_text(encoding="utf-8"), encoding="utf-8")
    server = build_server(debounce=0)
    server.text_document_publish_diagnostics = lambda params: None  # type: ignore[method-assign]
    try:
        for name in ("typed.yaml", "typed.test.yaml", "typed.script.yaml"):
            path = tmp_path / name
            server.opened(path.as_uri(), path.read_text(encoding="utf-8"), 1)
        await asyncio.wait_for(server.scheduler.settle(), 60)
        subject = _lookup.Subject.of(server, (tmp_path / "typed.yaml").as_uri())
        assert subject is not None
        read = _count_kinds(monkeypatch)
        places = _navigate.occurrences(subject, (KEY, "tickets"))
        named = _navigate.definitions(subject, lsp.Position(4, 7))  # name: typed
    finally:
        server.scheduler.shutdown(wait=True)
    assert sorted({place.path.name for place in places}) == ["typed.test.yaml", "typed.yaml"]
    assert [path.name for path, _ in named] == ["typed.test.yaml"]
    assert read == []
