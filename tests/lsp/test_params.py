"""Messages read as JSON-RPC 2.0 lets them be written (`converge_dsl.lsp._params`), over a
real server: params left out, and a top-level member no message type has."""

from __future__ import annotations

import json
from pathlib import Path

from converge_dsl.lsp import build_server
from tests.lsp._wire_client import HOVER, Wire, frame

# Notifications without params, and messages with a member of no message type.
_SENT = (
    {"method": "initialized"},
    {"method": "$/np"},
    {"method": "custom/np"},
    {"method": "$/extra", "params": {}, "extra": 1},
    {"method": "custom/extra", "params": {}, "extra": 1},
    {"method": "textDocument/didClose", "params": {"textDocument": HOVER["textDocument"]}, "x": 1},
    {"id": 9998, "result": None, "extra": 1},
)


def test_params_left_out_or_an_extra_member_are_no_misfit(wire: Wire, project: Path) -> None:
    """Each was said in the client's log as "...: the params do not fit the method;
    ignored" (the stray response as "None: ..."): a `$/` notification is dropped silently,
    another no handler takes said once on stderr, the stray response as one; `exit` without
    params ends the session."""
    wire.request("initialize", {"processId": None, "rootUri": project.as_uri(), "capabilities": {}})
    for message in _SENT:
        wire.send(frame({"jsonrpc": "2.0", **message}))
    assert wire.request("textDocument/hover", HOVER)["result"] is None
    assert wire.said() == []
    assert wire.request("shutdown")["result"] is None
    wire.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert wire.process.wait(30) == 0
    assert wire.process.stderr is not None
    stderr = wire.process.stderr.read().decode()
    assert [line.split(": ", 1)[-1] for line in stderr.splitlines()] == [
        "ignoring notifications of unknown method 'custom/np' (said once a session)",
        "ignoring notifications of unknown method 'custom/extra' (said once a session)",
        "ignoring a response to 9998, no request of the server's (said once a session)",
    ]


def test_initialized_without_params_takes_the_workspace_folder(tmp_path: Path) -> None:
    """`initialized` takes an object with no required field: left out, it is that object
    empty, and its handler runs (the workspace folder becomes the server's root)."""
    server = build_server(debounce=0)
    protocol = server.protocol
    protocol._send_data = lambda data: None  # type: ignore[method-assign]
    params = {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
        {"jsonrpc": "2.0", "method": "initialized"},
    ):
        protocol.receive(json.dumps(message).encode())
    assert server.state.root == tmp_path.resolve()
