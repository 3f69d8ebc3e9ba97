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
