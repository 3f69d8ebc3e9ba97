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
from lsprotocol import types as lsp

from converge_dsl.lsp import _server, build_server
from tests.lsp._wire_client import Wire
from tests.lsp.conftest import large_pipeline

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
        await asyncio.wait_for(server.scheduler.settle(), 30)
    finally:
        release.set()
        server.scheduler.shutdown(wait=True)
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
        await asyncio.wait_for(server.scheduler.settle(), 30)
    finally:
        server.scheduler.shutdown(wait=True)
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
            await asyncio.wait_for(server.scheduler.settle(), 30)
    finally:
        server.scheduler.shutdown(wait=True)
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
        await asyncio.wait_for(server.scheduler.settle(), 60)
        assert len(server.state.latest) == len(uris)
        for uri in uris:
            server.closed(uri)
        await asyncio.wait_for(server.scheduler.settle(), 60)
    finally:
        server.scheduler.shutdown(wait=True)
    state = server.state
    held = (state.open, state.latest, state.good, state.found, state.related)
    assert held == ({}, {}, {}, {}, {})
    held_by_server = (
        server._buffers,
        server.scheduler.pending,
        server._analysed,
        server._tests_saw,
        server.scheduler.turns,
    )
    assert held_by_server == ({}, {}, {}, {}, {})
    assert server._published == {}


async def test_a_closed_pipeline_an_open_model_script_reads_is_kept(tmp_path: Path) -> None:
    server = build_server(debounce=0)
    server.text_document_publish_diagnostics = lambda params: None  # type: ignore[method-assign]
    for name in ("typed.yaml", "typed.script.yaml"):
        (tmp_path / name).write_text((DATA / name).read_text(encoding="utf-8"), encoding="utf-8")
    pipeline, script = tmp_path / "typed.yaml", tmp_path / "typed.script.yaml"
    try:
        server.opened(script.as_uri(), script.read_text(encoding="utf-8"), 1)
        server.opened(pipeline.as_uri(), pipeline.read_text(encoding="utf-8"), 1)
        await asyncio.wait_for(server.scheduler.settle(), 60)
        server.closed(pipeline.as_uri())
        await asyncio.wait_for(server.scheduler.settle(), 60)
        assert pipeline.resolve() in server.state.latest
        server.closed(script.as_uri())
        await asyncio.wait_for(server.scheduler.settle(), 60)
    finally:
        server.scheduler.shutdown(wait=True)
    assert server.state.latest == {}


def _last(published: list[Any]) -> dict[str, list[Any]]:
    """The diagnostics each URI shows: the last published under it."""
    return {params.uri: params.diagnostics for params in published}


async def _serve(server: _server.PipelineServer) -> None:
    await asyncio.wait_for(server.scheduler.settle(), 60)


def _project(tmp_path: Path) -> Path:
    for name in ("broken.yaml", "broken.script.yaml"):
        (tmp_path / name).write_text((DATA / name).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "sub").mkdir()
    return tmp_path


async def test_closing_a_document_clears_its_diagnostics_under_the_uri_the_client_used(
    tmp_path: Path,
) -> None:
    """Closing cleared the file URI's diagnostics, not those of the URI the editor opened
    (`sub/../broken.yaml`): the editor kept them."""
    root = _project(tmp_path)
    uri = f"{root.as_uri()}/sub/../broken.yaml"
    server = build_server(debounce=0)
    published: list[Any] = []
    server.text_document_publish_diagnostics = published.append  # type: ignore[method-assign]
    try:
        server.opened(uri, (root / "broken.yaml").read_text(encoding="utf-8"), 1)
        await _serve(server)
        assert _last(published)[uri]
        server.closed(uri)
        await _serve(server)
    finally:
        server.scheduler.shutdown(wait=True)
    assert _last(published)[uri] == []
    assert not any(_last(published).values())
    assert server._published == {}
    assert (root / "broken.yaml").as_uri() not in _last(published)  # it never showed anything


async def test_closing_one_of_two_buffers_of_a_file_clears_the_closed_one(tmp_path: Path) -> None:
    """A link and its file open: closing the link republished under the file's buffer only,
    and the link's buffer kept its diagnostics."""
    root = _project(tmp_path)
    (root / "link.yaml").symlink_to(root / "broken.yaml")
    text = (root / "broken.yaml").read_text(encoding="utf-8")
    link, file = (root / "link.yaml").as_uri(), (root / "broken.yaml").as_uri()
    server = build_server(debounce=0)
    published: list[Any] = []
    server.text_document_publish_diagnostics = published.append  # type: ignore[method-assign]
    try:
        server.opened(file, text, 1)
        server.opened(link, text, 1)
        await _serve(server)
        assert _last(published)[link]
        assert _last(published)[file]
        server.closed(link)
        await _serve(server)
    finally:
        server.scheduler.shutdown(wait=True)
    assert _last(published)[link] == []
    assert _last(published)[file]


async def test_a_closed_pipeline_an_open_script_reads_shows_its_findings_once(
    tmp_path: Path,
) -> None:
    """A pipeline closed while its open model script still reads it: its later findings
    went to its file URI and the URI the editor had closed kept the old ones (two copies)."""
    root = _project(tmp_path)
    uri = f"{root.as_uri()}/sub/../broken.yaml"
    script = (root / "broken.script.yaml").as_uri()
    text = (root / "broken.yaml").read_text(encoding="utf-8")
    server = build_server(debounce=0)
    published: list[Any] = []
    server.text_document_publish_diagnostics = published.append  # type: ignore[method-assign]
    try:
        server.opened(script, (root / "broken.script.yaml").read_text(encoding="utf-8"), 1)
        server.opened(uri, text, 1)
        await _serve(server)
        server.closed(uri)
        await _serve(server)
        server.edited(script, 2, [lsp.TextDocumentContentChangeWholeDocument(text="")])
        await _serve(server)
        server.edited(
            script,
            3,
            [
                lsp.TextDocumentContentChangeWholeDocument(
                    text=(root / "broken.script.yaml").read_text(encoding="utf-8")
                )
            ],
        )
        await _serve(server)
    finally:
        server.scheduler.shutdown(wait=True)
    shown = {u for u, items in _last(published).items() if items}
    assert uri not in shown
    assert shown == {script, (root / "broken.yaml").as_uri()}


def _held(server: _server.PipelineServer) -> tuple[object, ...]:
    state = server.state
    return (
        state.open,
        state.latest,
        state.good,
        state.found,
        state.related,
        server.scheduler.pending,
        server._analysed,
        server._tests_saw,
        server._published,
        server._tested,
    )


NOTHING_HELD = ({}, {}, {}, {}, {}, {}, {}, {}, {}, {})


def _gate(monkeypatch: pytest.MonkeyPatch, name: str, fail: bool = False) -> threading.Event:
    """Make `_server.<name>` wait for the returned event once it is called (then raise,
    when `fail`); `.started` is set when it is called."""
    real = getattr(_server, name)
    release, started = threading.Event(), threading.Event()

    def gated(*args: Any, **kwargs: Any) -> Any:
        started.set()
        release.wait(10)
        if fail:
            raise RuntimeError("failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(_server, name, gated)
    release.started = started  # type: ignore[attr-defined]
    return release


async def _closed_while_checked(
    path: Path, release: threading.Event
) -> tuple[_server.PipelineServer, list[Any], int]:
    """`path` opened, then closed while its check waits at the `_gate` `release`, which is
    then let go and every task served; the server, what it published, and how many of
    those before the close."""
    server = build_server(debounce=0)
    published: list[Any] = []
    server.text_document_publish_diagnostics = published.append  # type: ignore[method-assign]
    try:
        server.opened(path.as_uri(), path.read_text(encoding="utf-8"), 1)
        assert await asyncio.to_thread(release.started.wait, 10)  # type: ignore[attr-defined]
        checking = server.scheduler.pending[path.resolve()]
        server.closed(path.as_uri())
        before = len(published)
        release.set()
        await asyncio.wait_for(checking, 30)
        await _serve(server)
    finally:
        release.set()
        server.scheduler.shutdown(wait=True)
    return server, published, before


async def test_a_test_file_closed_while_it_is_checked_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test file closed during its check: the check read the same text from disk, so it
    published the findings of a closed file and kept them and its state for the session."""
    for name in ("typed.yaml", "typed.script.yaml", "typed.test.yaml"):
        (tmp_path / name).write_text((DATA / name).read_text(encoding="utf-8"), encoding="utf-8")
    test = tmp_path / "typed.test.yaml"
    server, published, after_close = await _closed_while_checked(
        test, _gate(monkeypatch, "check_test")
    )
    assert [p.uri for p in published[after_close:] if p.diagnostics] == []
    assert test.as_uri() not in {p.uri for p in published[after_close:]}
    assert _held(server) == NOTHING_HELD


async def test_a_pipeline_closed_while_it_is_analysed_is_not_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closed during its analysis, a pipeline's findings were published all the same (its
    text read again from disk), then taken back."""
    root = _project(tmp_path)
    server, published, _ = await _closed_while_checked(
        root / "broken.yaml", _gate(monkeypatch, "analyse")
    )
    assert published == []
    assert _held(server) == NOTHING_HELD


async def test_a_check_that_fails_making_the_model_still_drops_what_is_not_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipeline checked while not open (saved or changed on disk) whose editor model
    failed kept its analysis and findings for the session."""
    root = _project(tmp_path)
    release = _gate(monkeypatch, "with_facts", fail=True)
    release.set()
    server = build_server(debounce=0)
    published: list[Any] = []
    server.text_document_publish_diagnostics = published.append  # type: ignore[method-assign]
    server.window_log_message = lambda params: None  # type: ignore[method-assign]
    try:
        server.changed((root / "broken.yaml").resolve())
        await _serve(server)
    finally:
        server.scheduler.shutdown(wait=True)
    assert _held(server) == NOTHING_HELD
    assert not any(_last(published).values())


async def test_the_pipeline_a_test_names_is_read_once_a_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After every check of a pipeline not open, the scheduler asked which pipeline each open
    test names, a YAML load of the test each time (5 edits of a 216 KB test took 6.2 s
    instead of 3.9 s); it is read once a text now."""
    from converge_dsl.lsp import _related

    for name in ("typed.yaml", "typed.script.yaml", "typed.test.yaml"):
        (tmp_path / name).write_text((DATA / name).read_text(encoding="utf-8"), encoding="utf-8")
    test = tmp_path / "typed.test.yaml"
    text = test.read_text(encoding="utf-8")
    read: list[str] = []
    real = _related.tested_pipeline

    def counted(path: Path, text: str, env: Any) -> Path | None:
        read.append(text)
        return real(path, text, env)

    monkeypatch.setattr(_related, "tested_pipeline", counted)
    server = build_server(debounce=0)
    server.text_document_publish_diagnostics = lambda params: None  # type: ignore[method-assign]
    try:
        server.opened(test.as_uri(), text, 1)
        await _serve(server)
        for version in range(2, 6):
            text += f"# edit {version}\n"
            server.edited(
                test.as_uri(), version, [lsp.TextDocumentContentChangeWholeDocument(text)]
            )
            await _serve(server)
        assert (tmp_path / "typed.yaml").resolve() in server.needed()
        server.closed(test.as_uri())
        await _serve(server)
    finally:
        server.scheduler.shutdown(wait=True)
    assert len(read) == len(set(read)) == 5
    assert _held(server) == NOTHING_HELD


async def test_a_small_documents_diagnostics_do_not_wait_for_a_large_ones(
    wire: Wire, project: Path
) -> None:
    """A real server: a pipeline of thousands of suggestors is opened, then a small one with
    an error. The small one's diagnostics came after the large one's: one analysis ran at a
    time, and the large one had started first."""
    large = project / "large.yaml"
    large.write_text(large_pipeline(4000), encoding="utf-8")
    wire.initialize(project)
    large_uri, _ = wire.open(large)
    small_uri, _ = wire.open(project / "broken.yaml")
    published = "textDocument/publishDiagnostics"
    await asyncio.to_thread(
        wire.notification, published, lambda p: p["uri"] == large_uri, timeout=120
    )
    uris = [m["params"]["uri"] for m in wire.received if m.get("method") == published]
    assert small_uri in uris
    assert uris.index(small_uri) < uris.index(large_uri)
    small = next(m["params"] for m in wire.received if m.get("params", {}).get("uri") == small_uri)
    assert small["diagnostics"]  # its error
    assert wire.request("shutdown")["result"] is None
    assert wire.end()[0] == 0


async def test_a_documents_analyses_never_overlap_across_a_close_and_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A close dropped the file's lock between one analysis's end and the waiting one's
    turn (a lock is not `locked()` then), and a quick reopen made a new lock: two analyses
    of one file ran at once. The waiting one, dropped by the close, no longer runs; the
    reopened text's analysis takes the turn after it."""
    server = build_server(debounce=0)
    server.text_document_publish_diagnostics = lambda params: None  # type: ignore[method-assign]
    real = _server.analyse
    running, most, calls = [0], [0], [0]
    gates = [threading.Event(), threading.Event()]
    guard = threading.Lock()

    def slow(*args: Any, **kwargs: Any) -> Any:
        with guard:
            number = calls[0]
            calls[0] += 1
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            gates[min(number, 1)].wait(10)
            return real(*args, **kwargs)
        finally:
            with guard:
                running[0] -= 1

    monkeypatch.setattr(_server, "analyse", slow)
    path = tmp_path / "typed.yaml"
    text = (DATA / "typed.yaml").read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    try:
        server.opened(uri, text, 1)  # the first analysis holds the turn
        while calls[0] < 1:
            await asyncio.sleep(0.01)
        server.opened(uri, text + "\n# 2\n", 2)  # the second waits for it
        await asyncio.sleep(0.05)
        server.closed(uri)  # the second is dropped
        gates[0].set()  # the first ends, the second's turn passes
        await asyncio.sleep(0.05)
        server.opened(uri, text + "\n# 3\n", 3)  # the third takes the turn
        while calls[0] < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        gates[1].set()
        await asyncio.wait_for(server.scheduler.settle(), 30)
    finally:
        for gate in gates:
            gate.set()
        server.scheduler.shutdown(wait=True)
    assert most[0] == 1
    assert calls[0] == 2  # the first and the third
    assert server.scheduler.turns == {}
