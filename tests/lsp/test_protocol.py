"""The protocol, driven byte by byte: every request is answered (a JSON-RPC error saying why
when it cannot be taken; in words when it fails inside the server), and the exit code says
whether the client asked for `shutdown`. The framing is tested in `test_wire`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import subprocess
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import default_converter

from converge_dsl.lsp import build_server
from converge_dsl.lsp._params import WrongType, strict_converter
from tests.lsp._wire_client import HOVER, Wire, frame
from tests.lsp.conftest import SERVER


def test_what_cannot_be_taken_is_answered_with_an_error_saying_why(
    wire: Wire, project: Path
) -> None:
    early = wire.request("textDocument/hover", HOVER)["error"]
    assert early == {
        "code": -32002,
        "message": "the server is not initialized: send 'initialize' first",
    }
    wire.initialize(project)
    wire.send(b"Content-Length: 5\r\n\r\nhello")
    not_json = wire.answer(None)["error"]
    assert not_json["code"] == -32700
    assert not_json["message"].startswith("a message is not JSON (")
    wire.send(frame({"jsonrpc": "1.0", "id": 71, "method": "textDocument/hover", "params": HOVER}))
    assert wire.answer(71)["error"]["code"] == -32600
    misfit = wire.request("textDocument/hover", {"position": "x"})["error"]
    assert misfit["code"] == -32602
    assert "expected int @ message.params.position.line" in misfit["message"]
    assert wire.request("custom/thing")["error"] == {
        "code": -32601,
        "message": "the server has no method 'custom/thing'",
    }
    assert wire.request("shutdown")["result"] is None
    assert wire.request("textDocument/hover", HOVER)["error"] == {
        "code": -32600,
        "message": "the server is shut down: only 'exit' is accepted",
    }
    code, stderr = wire.end()
    assert (code, wire.unframed) == (0, [])
    assert "Traceback" not in stderr


def test_a_change_to_a_document_never_opened_is_said_in_the_log(wire: Wire, project: Path) -> None:
    wire.initialize(project)
    uri = (project / "typed.yaml").as_uri()
    change = {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": "x"}]}
    wire.send(frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": change}))
    assert wire.request("textDocument/hover", HOVER)["result"] is None
    said = [
        m["params"]["message"] for m in wire.received if m.get("method", "").startswith("window/")
    ]
    assert said == [
        f"converge-dsl: textDocument/didChange: {uri} is not open: "
        "send 'textDocument/didOpen' first; ignored"
    ]


def test_a_position_out_of_the_protocols_range_is_refused_in_its_rules_words(
    wire: Wire, project: Path
) -> None:
    wire.initialize(project)
    negative = {**HOVER, "position": {"line": -1, "character": 0}}
    assert wire.request("textDocument/hover", negative)["error"] == {
        "code": -32602,
        "message": "textDocument/hover: Position.line should be in range [0:2147483647], "
        "but was -1 @ message.params.position",
    }
    uri = (project / "typed.yaml").as_uri()
    start, end = {"line": 0, "character": 0}, {"line": 0, "character": 2**31}
    change = {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"range": {"start": start, "end": end}, "text": ""}],
    }
    wire.send(frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": change}))
    assert wire.request("textDocument/hover", HOVER)["result"] is None
    said = [
        m["params"]["message"] for m in wire.received if m.get("method", "").startswith("window/")
    ]
    assert said == [
        "converge-dsl: textDocument/didChange: Position.character should be in range "
        "[0:2147483647], but was 2147483648 @ message.params.contentChanges[0].range.end; "
        "ignored"
    ]


def test_a_version_that_does_not_increase_is_said_and_its_change_applied(
    wire: Wire, project: Path
) -> None:
    wire.initialize(project)
    uri, text = wire.open(project / "typed.yaml", version=5)
    change = {
        "textDocument": {"uri": uri, "version": 3},
        "contentChanges": [{"text": text.replace("name: escalate", "name: [escalate")}],
    }
    wire.send(frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": change}))
    published = wire.notification("textDocument/publishDiagnostics", lambda p: p["version"] == 3)
    assert [d["code"] for d in published["diagnostics"]] == ["CD001"]
    assert wire.said() == [
        f"converge-dsl: textDocument/didChange: {uri} is at version 5; version 3 does not "
        "increase it (each change must): applied"
    ]


@pytest.mark.parametrize("shutdown", [True, False])
def test_the_exit_code_says_whether_the_client_asked_for_shutdown(
    wire: Wire, project: Path, shutdown: bool
) -> None:
    wire.initialize(project)
    if shutdown:
        wire.request("shutdown")
    wire.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    code, stderr = wire.end()
    assert code == (0 if shutdown else 1)
    assert ("without a 'shutdown' request" in stderr) is not shutdown


def test_a_failure_inside_the_server_is_answered_in_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    protocol = build_server().protocol
    sent: list[Any] = []
    monkeypatch.setattr(protocol, "_send_data", sent.append)
    failed: Future[object] = Future()
    failed.set_exception(IndexError("list assignment index out of range"))
    protocol._send_handler_result(failed, msg_id=7)
    (answer,) = sent
    assert answer.id == 7
    assert answer.error.code == -32603
    assert answer.error.message == (
        "converge-dsl could not answer this request (IndexError: list assignment index out "
        "of range); the server goes on: please report it with the text that caused it"
    )
    assert answer.error.data is None


def test_a_second_initialize_is_refused_and_the_open_documents_stay(
    wire: Wire, project: Path
) -> None:
    wire.initialize(project)
    uri, _ = wire.open(project / "typed.yaml")
    again = wire.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    assert again["error"] == {
        "code": -32600,
        "message": "the server is already initialized: 'initialize' is sent once a session",
    }
    symbols = wire.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert symbols["result"]


@pytest.mark.parametrize(
    ("position", "misfit"),
    [
        (
            {"line": 1.5, "character": 0},
            "expected an integer, not 1.5 @ message.params.position.line",
        ),
        (
            {"line": 0, "character": True},
            "expected an integer, not true @ message.params.position.character",
        ),
        (
            {"line": "1", "character": 0},
            'expected an integer, not "1" @ message.params.position.line',
        ),
        (
            {"line": None, "character": 0},
            "expected an integer, not null @ message.params.position.line",
        ),
    ],
)
def test_a_value_of_the_wrong_json_type_is_refused_naming_its_field(
    wire: Wire, project: Path, position: dict[str, object], misfit: str
) -> None:
    wire.initialize(project)
    assert wire.request("textDocument/hover", {**HOVER, "position": position})["error"] == {
        "code": -32602,
        "message": f"textDocument/hover: {misfit}",
    }


def test_an_integral_number_is_an_integer_whatever_its_spelling(wire: Wire, project: Path) -> None:
    """JSON has one number type: `"line": 1.0` was refused as not an integer."""
    wire.initialize(project)
    uri, text = wire.open(project / "typed.yaml", version=1.0)
    line = text.splitlines().index(next(t for t in text.splitlines() if t.startswith("models:")))
    position = {"line": float(line), "character": 1e0}
    answer = wire.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": position}
    )
    assert "error" not in answer
    assert answer["result"]
    assert wire.said() == []


def test_integral_floats_are_integers_and_no_other_value_is() -> None:
    converter = strict_converter()
    assert converter.structure(2.0, int) == 2
    assert type(converter.structure(2.0, int)) is int
    assert converter.structure(1.0, lsp.DiagnosticSeverity) is lsp.DiagnosticSeverity.Error
    for value in (1.5, True, "1", float("inf"), float("nan")):
        with pytest.raises(WrongType):
            converter.structure(value, int)


def test_a_change_whose_text_is_not_a_string_is_refused_and_the_document_kept(
    wire: Wire, project: Path
) -> None:
    wire.initialize(project)
    uri, _ = wire.open(project / "typed.yaml")
    for bad in ({"text": None}, {"text": 7}):
        change = {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [bad]}
        wire.send(frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": change}))
    symbols = wire.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert "keys" in [symbol["name"] for symbol in symbols["result"]]
    assert wire.said() == [
        "converge-dsl: textDocument/didChange: expected a string, not "
        f"{shown} @ message.params.contentChanges[0].text; ignored"
        for shown in ("null", "7")
    ]


def test_the_strict_reading_keeps_enumerations_and_numbers_and_writes_as_before() -> None:
    converter = strict_converter()
    severity = converter.structure(1, lsp.DiagnosticSeverity)
    assert severity is lsp.DiagnosticSeverity.Error
    assert converter.structure(3, float) == 3.0
    with pytest.raises(WrongType, match="expected a number, not true"):
        converter.structure(True, float)
    with pytest.raises(WrongType, match="expected true or false, not 1"):
        converter.structure(1, bool)
    diagnostic = lsp.Diagnostic(
        lsp.Range(lsp.Position(0, 0), lsp.Position(0, 1)), "m", severity=severity, data={"a": 1}
    )
    written = converter.unstructure(diagnostic)
    assert written == default_converter().unstructure(diagnostic)
    assert converter.structure(written, lsp.Diagnostic) == diagnostic


def test_a_refusal_the_client_is_answered_writes_nothing_on_standard_error(
    wire: Wire, project: Path
) -> None:
    """pygls wrote a line on standard error for each bad message it had already answered or
    said in the client's log; a failure inside the server still writes its line."""
    wire.initialize(project)
    uri = (project / "typed.yaml").as_uri()
    assert wire.request("textDocument/hover", {"position": "x"})["error"]["code"] == -32602
    lock = {"command": "converge-dsl.lock", "arguments": [1]}
    assert wire.request("workspace/executeCommand", lock)["error"]["code"] == -32602
    rename = {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}
    assert wire.request("textDocument/rename", {**rename, "newName": "x"})["error"]
    change = {"textDocument": {"uri": uri, "version": "x"}, "contentChanges": []}
    wire.send(frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": change}))
    wire.send(frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}}))
    assert wire.request("shutdown")["result"] is None
    wire.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert wire.end() == (0, "")


def test_a_failure_inside_the_server_is_still_logged(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    protocol = build_server().protocol
    monkeypatch.setattr(protocol, "_send_data", lambda data: None)
    refused: Future[object] = Future()
    refused.set_exception(JsonRpcInvalidParams("no"))
    failed: Future[object] = Future()
    failed.set_exception(IndexError("list assignment index out of range"))
    with caplog.at_level(logging.DEBUG, logger="pygls"):
        protocol._send_handler_result(refused, msg_id=1)
        assert caplog.records == []
        protocol._send_handler_result(failed, msg_id=2)
    assert [r.getMessage() for r in caplog.records] == ['Exception occurred for message "2"']


@pytest.mark.asyncio
async def test_notifications_leave_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each didOpen, didChange and didClose left a future in pygls's table of requests
    for the session (10,000 changes kept about 30 MB)."""
    server = build_server(debounce=0)
    protocol = server.protocol
    monkeypatch.setattr(protocol, "_send_data", lambda data: None)
    server.text_document_publish_diagnostics = lambda params: None  # type: ignore[method-assign]

    def send(message: dict[str, Any]) -> None:
        protocol.receive(json.dumps({"jsonrpc": "2.0", **message}).encode())

    send({"id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}})
    send({"method": "initialized", "params": {}})
    uri = (tmp_path / "notes.txt").as_uri()
    for version in range(1, 101):
        item = {"uri": uri, "languageId": "text", "version": version, "text": "a"}
        send({"method": "textDocument/didOpen", "params": {"textDocument": item}})
        change = {"textDocument": {"uri": uri, "version": version + 1}, "contentChanges": []}
        send({"method": "textDocument/didChange", "params": change})
        send({"method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
    await asyncio.wait_for(server.scheduler.settle(), 30)
    server.scheduler.shutdown(wait=True)
    assert protocol._request_futures == {}


def _every_notification(folder: Path) -> dict[str, dict[str, Any]]:
    """A notification of each method an editor sends, to the server's own handlers,
    pygls's built-in ones and none."""
    uri = (folder / "p.yaml").as_uri()
    workspace = {"uri": folder.as_uri(), "name": "other"}
    notebook = {"uri": (folder / "n.ipynb").as_uri()}
    return {
        "initialized": {},
        "textDocument/didSave": {"textDocument": {"uri": uri}},
        "textDocument/willSave": {"textDocument": {"uri": uri}, "reason": 1},
        "workspace/didChangeWatchedFiles": {"changes": [{"uri": uri, "type": 2}]},
        "workspace/didChangeConfiguration": {"settings": {}},
        "workspace/didChangeWorkspaceFolders": {
            "event": {"added": [workspace], "removed": [workspace]}
        },
        "workspace/didCreateFiles": {"files": [{"uri": uri}]},
        "$/cancelRequest": {"id": 99},
        "$/setTrace": {"value": "off"},
        "$/progress": {"token": "t", "value": {}},
        "window/workDoneProgress/cancel": {"token": "t"},
        "notebookDocument/didOpen": {
            "notebookDocument": {**notebook, "notebookType": "j", "version": 1, "cells": []},
            "cellTextDocuments": [],
        },
        "notebookDocument/didClose": {"notebookDocument": notebook, "cellTextDocuments": []},
    }


@pytest.mark.asyncio
async def test_no_notification_leaves_anything_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """300 of each notification the server takes (its own, pygls's built-in ones, those it
    has no handler for) leave no future in pygls's table of requests."""
    server = build_server(debounce=0)
    protocol = server.protocol
    monkeypatch.setattr(protocol, "_send_data", lambda data: None)
    server.text_document_publish_diagnostics = lambda params: None  # type: ignore[method-assign]
    caplog.set_level(logging.ERROR, logger="pygls")  # an unknown method's warning each

    def send(message: dict[str, Any]) -> None:
        protocol.receive(json.dumps({"jsonrpc": "2.0", **message}).encode())

    params = {"processId": None, "capabilities": {}, "rootUri": tmp_path.as_uri()}
    send({"id": 1, "method": "initialize", "params": params})
    left = {}
    for method, notification in _every_notification(tmp_path).items():
        for _ in range(300):
            send({"method": method, "params": notification})
        await asyncio.sleep(0)
        await asyncio.wait_for(server.scheduler.settle(), 30)
        left[method] = len(protocol._request_futures)
    server.scheduler.shutdown(wait=True)
    assert set(left.values()) == {0}, left


def test_a_nul_byte_in_a_files_name_names_no_file(wire: Wire, project: Path) -> None:
    """A URI or a test's `pipeline:` with a NUL byte (`%00`, `"\\0"`) failed every request on
    that file with "embedded null byte", and its opening (or the root's) popped "Error in
    server" up; it is a name no file has: the URI is a buffer that is never analysed, the
    test names no pipeline, the root is the server's folder."""
    params = {"processId": None, "rootUri": project.as_uri() + "/%00", "capabilities": {}}
    assert wire.request("initialize", params)["result"]
    wire.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    text = 'apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: "typed\\0.yaml"\ncases: []\n'
    nul_uri = project.as_uri() + "/nul%00.yaml"
    test_uri = (project / "nul.test.yaml").as_uri()
    for uri in (nul_uri, test_uri):
        document = {"uri": uri, "languageId": "yaml", "version": 1, "text": text}
        params = {"textDocument": document}
        wire.send(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": params}))
    found = wire.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == test_uri)
    assert [d["code"] for d in found["diagnostics"]] == ["CD106"]  # `cases: []`, as `test` says
    on_name = {"line": 2, "character": 13}
    for uri in (nul_uri, test_uri):
        where = {"textDocument": {"uri": uri}, "position": on_name}
        assert wire.request("textDocument/hover", where)["result"] is None
        assert wire.request("textDocument/definition", where)["result"] == []
    assert wire.request("shutdown")["result"] is None
    wire.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert wire.end() == (0, "")
    assert not [m for m in wire.received if m.get("method") == "window/showMessage"]
    assert wire.said() == []


def test_unhandled_notifications_write_on_standard_error_once_a_method_and_never_for_dollar(
    wire: Wire, project: Path
) -> None:
    """pygls wrote a line on standard error for each notification it had no handler for: a
    client sending `$/` notifications (which the protocol lets a server ignore) or one it
    does not know flooded it. `$/` ones are silent; another is said once per method."""
    wire.initialize(project)
    sent = {
        "$/setTrace": {"value": "off"},
        "$/acme/status": {"busy": True},
        "acme/refresh": {},
        "workspace/didChangeConfiguration": {"settings": {}},
        "window/workDoneProgress/cancel": {"token": "t"},
    }
    for _ in range(30):
        for method, params in sent.items():
            wire.send(frame({"jsonrpc": "2.0", "method": method, "params": params}))
    assert wire.request("shutdown")["result"] is None
    wire.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    code, stderr = wire.end()
    assert code == 0
    lines = stderr.splitlines()
    assert len(lines) == 3, stderr
    for method in ("acme/refresh", "workspace/didChangeConfiguration", "workDoneProgress"):
        assert sum(method in line for line in lines) == 1, stderr
    assert "$/" not in stderr


def test_responses_to_no_request_of_the_servers_write_one_line_on_standard_error(
    wire: Wire, project: Path
) -> None:
    """pygls wrote a line on standard error for each response whose id named no request of
    the server's (a client answering twice, or answering requests it was never sent): one
    line a session, and the session goes on."""
    wire.initialize(project)
    for number in range(20):
        for answer in ({"id": 900 + number, "result": None}, {"id": f"x{number}", "result": 1}):
            wire.send(frame({"jsonrpc": "2.0", **answer}))
        wire.send(
            frame({"jsonrpc": "2.0", "id": {"n": number}, "error": {"code": 1, "message": "m"}})
        )
    assert wire.request("shutdown")["result"] is None
    wire.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    code, stderr = wire.end()
    assert code == 0
    assert len(stderr.splitlines()) == 1, stderr
    assert "no request of the server's" in stderr


def test_a_client_that_stops_reading_ends_the_session_without_a_traceback(project: Path) -> None:
    """A client that closed the server's output (it exited, keeping its end of the input a
    moment longer) got a traceback on standard error for each answer the server then
    wrote, the server served on until its input ended, and it ended with 'error[CD361]:
    cannot use: Broken pipe'. Now the server stops at the next message, says why in one
    line, and its exit code is 1 (no 'shutdown')."""
    process = subprocess.Popen(
        SERVER, cwd=project, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdin is not None
    assert process.stdout is not None
    initialize = {"processId": None, "rootUri": project.as_uri(), "capabilities": {}}
    process.stdin.write(
        frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize})
    )
    process.stdin.flush()
    assert process.stdout.readline().startswith(b"Content-Length")
    process.stdout.close()
    try:
        for number in range(2, 6):
            hover = {
                "jsonrpc": "2.0",
                "id": number,
                "method": "textDocument/hover",
                "params": HOVER,
            }
            with contextlib.suppress(BrokenPipeError):  # the server may be gone already
                process.stdin.write(frame(hover))
                process.stdin.flush()
            time.sleep(0.2)
        code = process.wait(20)  # the input still open
    finally:
        process.kill()
        process.wait()
    stderr = process.stderr.read().decode() if process.stderr is not None else ""
    assert code == 1
    assert "Traceback" not in stderr
    assert "CD361" not in stderr
    assert "the client no longer reads the server's output" in stderr


def test_a_small_request_is_answered_after_a_huge_document(wire: Wire, project: Path) -> None:
    """A document over the file-size cap (20 MB here) is not analysed: its one diagnostic
    says so, with the limit and how to raise it; the next request on another document is
    answered as after any other."""
    wire.initialize(project)
    uri, _ = wire.open(project / "typed.yaml")
    rule = "  - name: rule-{0}\n    kind: rule\n    when: \"count('notes') >= {0}\"\n"
    rules = "".join(rule.format(n) for n in range(20 * 1024 * 1024 // len(rule.format(0))))
    huge = {
        "uri": (project / "huge.yaml").as_uri(),
        "languageId": "yaml",
        "version": 1,
        "text": f"apiVersion: converge-dsl/v1\nkind: Pipeline\nname: huge\nsuggestors:\n{rules}",
    }
    opened = {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": huge}}
    wire.send(frame(opened))
    symbols = wire.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert "keys" in [symbol["name"] for symbol in symbols["result"]]
    found = wire.notification(
        "textDocument/publishDiagnostics", lambda params: params["uri"] == huge["uri"]
    )
    (too_large,) = found["diagnostics"]
    assert too_large["code"] == "CD011"
    assert "the limit is 8388608" in too_large["message"]
    assert "CONVERGE_DSL_MAX_FILE_BYTES" in too_large["message"]


def test_a_large_message_of_a_method_without_a_type_is_read_as_json(
    wire: Wire, project: Path
) -> None:
    """pygls made each JSON object in the params of a notification no handler takes (and in
    the result of a response to no request of the server's) a namedtuple of a class
    compiled for it, about 0.1 ms an object before the message was dropped: 200,000 objects
    held the next request for tens of seconds (a 20 MB notification of small objects 39 to
    60 s). Read as JSON, they cost what reading the JSON costs."""
    wire.initialize(project)
    objects = [{"n": n, "of": {"n": n}} for n in range(100_000)]
    wire.send(frame({"jsonrpc": "2.0", "method": "$/progressOfMine", "params": objects[0]}))
    wire.send(frame({"jsonrpc": "2.0", "method": "custom/notice", "params": {"all": objects}}))
    wire.send(frame({"jsonrpc": "2.0", "id": 4242, "result": {"all": objects}}))
    answer = wire.request("textDocument/hover", HOVER)
    assert (answer.get("error"), answer["result"]) == (None, None)


_ERROR_OBJECT = 'expected an object {"code": integer, "message": string}'


@pytest.mark.parametrize(
    ("error", "why"),
    [
        ("boom", f'{_ERROR_OBJECT}, not "boom"'),
        (5, f"{_ERROR_OBJECT}, not 5"),
        ([1], f"{_ERROR_OBJECT}, not [1]"),
        ({"code": "x", "message": "m"}, f"""{_ERROR_OBJECT}: 'code' is "x\""""),
        ({"message": "m"}, f"{_ERROR_OBJECT}: 'code' is missing"),
        ({"code": 1, "message": 2}, f"{_ERROR_OBJECT}: 'message' is 2"),
        ({"code": True}, f"{_ERROR_OBJECT}: 'code' is true and 'message' is missing"),
    ],
)
def test_a_response_with_a_malformed_error_is_said_by_its_id_and_what_is_wrong(
    wire: Wire, project: Path, error: object, why: str
) -> None:
    """It was said in the client's log as "None: invalid value for type, expected int @
    message.error.code; ...": neither which response nor what to fix."""
    wire.initialize(project)
    wire.send(frame({"jsonrpc": "2.0", "id": "req-7", "error": error}))
    assert wire.request("textDocument/hover", HOVER)["result"] is None
    wire.send(frame({"jsonrpc": "2.0", "id": "req-8", "error": error}))  # said once
    assert wire.request("textDocument/hover", HOVER)["result"] is None
    assert wire.said() == [
        f"converge-dsl: the response to request \"req-7\" has a malformed 'error': {why}; "
        "ignored (said once a session)"
    ]
    assert wire.request("shutdown")["result"] is None
    code, stderr = wire.end()
    assert (code, wire.unframed) == (0, [])
    assert "Traceback" not in stderr


def test_a_malformed_answer_to_the_servers_request_ends_that_request() -> None:
    """The request waited for ever for an answer that had come."""
    protocol = build_server(debounce=0).protocol
    sent: list[Any] = []
    protocol._send_data = sent.append  # type: ignore[method-assign]
    initialize = {"id": 0, "method": "initialize", "params": {"capabilities": {}}}
    protocol.receive(json.dumps({"jsonrpc": "2.0", **initialize}).encode())
    waiting = protocol.send_request(lsp.WORKSPACE_CONFIGURATION, lsp.ConfigurationParams([]))
    msg_id = sent[-1].id
    protocol.receive(json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": "boom"}).encode())
    assert waiting.done()
    assert f"the response to request {json.dumps(msg_id)} has a malformed 'error'" in str(
        waiting.exception()
    )
