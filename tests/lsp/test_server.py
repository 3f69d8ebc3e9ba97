"""The scheduler: a text typed while the editor model of the one before is made keeps that
model as the last good one (completion reads it while the new text is broken)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from converge_dsl.lsp import _server, build_server

pytestmark = pytest.mark.asyncio
DATA = Path(__file__).parent / "data"


async def test_an_edit_while_the_model_is_made_keeps_it_as_the_last_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = build_server(debounce=0)
    published: list[object] = []
    monkeypatch.setattr(server, "text_document_publish_diagnostics", published.append)
    making, release = threading.Event(), threading.Event()
    make = _server.with_facts

    def slow(analysis: _server.Analysis) -> _server.Analysis:
        making.set()
        release.wait(10)
        return make(analysis)

    monkeypatch.setattr(_server, "with_facts", slow)
    path = tmp_path / "typed.yaml"
    text = (DATA / "typed.yaml").read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    try:
        server.opened(path.as_uri(), text, 1)
        assert await asyncio.to_thread(making.wait, 10)  # published; the model is being made
        server.opened(path.as_uri(), text.replace("name: escalate", "name: [escalate"), 2)
        release.set()
        await asyncio.wait_for(server.settle(), 30)
    finally:
        release.set()
        server._worker.shutdown(wait=True)
    good = server.state.good[path.resolve()]
    assert good.text == text
    assert good.facts is not None
    assert server.state.model(path.resolve()) is good
    assert len(published) == 2  # the first text's diagnostics, then the broken one's


@pytest.mark.parametrize(
    ("environ", "codes"), [(None, []), ({"CONVERGE_DSL_MAX_FILE_BYTES": "10"}, ["CD011"])]
)
async def test_the_analyses_read_the_environment_the_server_was_given(
    monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str] | None,
    codes: list[str],
) -> None:
    monkeypatch.delenv("CONVERGE_DSL_MAX_FILE_BYTES", raising=False)
    server = build_server(debounce=0, environ=environ)
    published: list[Any] = []
    monkeypatch.setattr(server, "text_document_publish_diagnostics", published.append)
    pipeline = DATA / "typed.yaml"  # valid, and over 10 bytes
    try:
        server.opened(pipeline.as_uri(), pipeline.read_text(encoding="utf-8"), 1)
        await asyncio.wait_for(server.settle(), 30)
    finally:
        server._worker.shutdown(wait=True)
    (params,) = published
    assert [item.code for item in params.diagnostics if item.severity == 1] == codes


async def test_the_checks_are_bound_to_the_server_environment_once(
    monkeypatch: pytest.MonkeyPatch, first_arguments: Callable[[ModuleType, str], list[object]]
) -> None:
    from converge_dsl import validation

    bound = first_arguments(validation, "checks_in")
    environ = {"CONVERGE_DSL_MAX_FILE_BYTES": "10"}
    server = build_server(debounce=0, environ=environ)
    published: list[Any] = []
    monkeypatch.setattr(server, "text_document_publish_diagnostics", published.append)
    pipeline = DATA / "typed.yaml"
    text = pipeline.read_text(encoding="utf-8")
    try:
        for version, typed in enumerate((text, text + "\n", text + "\n\n"), start=1):
            server.opened(pipeline.as_uri(), typed, version)
            await asyncio.wait_for(server.settle(), 30)
    finally:
        server._worker.shutdown(wait=True)
    assert len(published) == 3
    assert bound == [environ]


async def test_closing_documents_leaves_nothing_of_them(tmp_path: Path) -> None:
    """A closed pipeline's last analysis (its text, its model) stayed in memory for the
    session; opening and closing many leaves no state per document now."""
    server = build_server(debounce=0)
    server.text_document_publish_diagnostics = lambda params: None  # type: ignore[method-assign]
    text = (DATA / "typed.yaml").read_text(encoding="utf-8")
    uris = []
    for number in range(8):
        path = tmp_path / f"pipeline{number}.yaml"
        path.write_text(text, encoding="utf-8")
        uris.append(path.as_uri())
    try:
        for uri in uris:
            server.opened(uri, text, 1)
        await asyncio.wait_for(server.settle(), 60)
        assert len(server.state.latest) == len(uris)
        for uri in uris:
            server.closed(uri)
        await asyncio.wait_for(server.settle(), 60)
    finally:
        server._worker.shutdown(wait=True)
    state = server.state
    held = (state.open, state.latest, state.good, state.found, state.related)
    assert held == ({}, {}, {}, {}, {})
    assert (server._buffers, server._pending, server._analysed, server._tests_saw) == (
        {},
        {},
        {},
        {},
    )


async def test_a_closed_pipeline_an_open_model_script_reads_is_kept(tmp_path: Path) -> None:
    server = build_server(debounce=0)
    server.text_document_publish_diagnostics = lambda params: None  # type: ignore[method-assign]
    for name in ("typed.yaml", "typed.script.yaml"):
        (tmp_path / name).write_text((DATA / name).read_text(encoding="utf-8"), encoding="utf-8")
    pipeline, script = tmp_path / "typed.yaml", tmp_path / "typed.script.yaml"
    try:
        server.opened(script.as_uri(), script.read_text(encoding="utf-8"), 1)
        server.opened(pipeline.as_uri(), pipeline.read_text(encoding="utf-8"), 1)
        await asyncio.wait_for(server.settle(), 60)
        server.closed(pipeline.as_uri())
        await asyncio.wait_for(server.settle(), 60)
        assert pipeline.resolve() in server.state.latest
        server.closed(script.as_uri())
        await asyncio.wait_for(server.settle(), 60)
    finally:
        server._worker.shutdown(wait=True)
    assert server.state.latest == {}
