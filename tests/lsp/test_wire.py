"""The stdio framing (`converge_dsl.lsp._wire`): a bad frame loses that frame only, a body
shorter than its length is cut at the next frame's header, a body read whole never is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.lsp._wire_client import HOVER, Wire, frame


@pytest.mark.parametrize(
    "bad",
    [
        b'\r\n{"jsonrpc": "2.0", "id": 900, "method": "shutdown"}',  # a body without a header
        b'Content-Length: 10\n\n{"id": 10}',  # LF line ends and a length in order
        b'Content-Length: 20\r\n\r\n{"jsonrpc": "2.0", "id": 900, "method": "shutdown"}',  # short
        b"Content-Length: 99999999999999999999\r\n\r\n{}",  # past any index
        b"Content-Length: 3000000000\r\n\r\n{}",  # over the limit
        b"Content-Length: twelve\r\n\r\n{}",
        b"Content-Length: 2\r\nContent-Length: 500\r\n\r\n{}",  # the larger took what follows
        # A third length equal to the first brought the message back.
        b"Content-Length: 51\r\nContent-Length: 500\r\nContent-Length: 51\r\n\r\n"
        b'{"jsonrpc": "2.0", "id": 900, "method": "shutdown"}',
    ],
)
def test_a_bad_frame_loses_that_frame_only(wire: Wire, project: Path, bad: bytes) -> None:
    wire.initialize(project)
    wire.send(bad)
    assert wire.request("textDocument/hover", HOVER)["result"] is None
    assert wire.request("textDocument/hover", HOVER)["result"] is None
    assert wire.request("shutdown")["result"] is None
    code, stderr = wire.end()
    assert (code, wire.unframed) == (0, [])
    assert "Traceback" not in stderr


@pytest.mark.parametrize("over", [1, 9, 18, 21, 22, 40, 100_000])
def test_a_body_shorter_than_its_length_loses_that_message_only(
    wire: Wire, project: Path, over: int
) -> None:
    """The length said `over` bytes more than the body has: the read took that much of the
    next message (its header cut anywhere, whole, or with its blank line) or waited for bytes
    the client never sends, as it waits for the answer to the next message."""
    wire.initialize(project)
    cut = b'{"jsonrpc": "2.0", "id": 80, "method": "textDoc'
    wire.send(b"Content-Length: %d\r\n\r\n%s" % (len(cut) + over, cut))
    body = json.dumps({"jsonrpc": "2.0", "id": 81, "method": "textDocument/hover", "params": HOVER})
    wire.send(b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode()))
    assert wire.answer(81)["result"] is None
    refused = [m for m in wire.received if "error" in m]
    assert [(m["id"], m["error"]["code"]) for m in refused] == [(None, -32700)]
    assert refused[0]["error"]["message"] == (
        f"a message's body is {len(cut)} bytes, not the {len(cut) + over} its Content-Length "
        "said: the next message's header came within it; the message is skipped"
    )
    assert wire.request("shutdown")["result"] is None
    code, stderr = wire.end()
    assert (code, wire.unframed) == (0, [])
    assert "Traceback" not in stderr


def test_a_header_written_inside_a_json_body_is_its_text(wire: Wire, project: Path) -> None:
    """JSON writes a line break in a string as `\\n`: a body's text never reads as a header."""
    wire.initialize(project)
    text = "# Content-Length: 12\r\n\r\n{}\nkey: 1 # content-length"
    document = {"uri": (project / "x.yaml").as_uri(), "languageId": "yaml", "version": 1}
    params = {"textDocument": {**document, "text": text}}
    wire.send(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": params}))
    hover = {"textDocument": {"uri": document["uri"]}, "position": {"line": 0, "character": 0}}
    wire.send(frame({"jsonrpc": "2.0", "id": 82, "method": "textDocument/hover", "params": hover}))
    assert "result" in wire.answer(82)
    assert [m for m in wire.received if "error" in m] == []


def test_a_header_is_read_in_any_case_with_lf_line_ends(wire: Wire, project: Path) -> None:
    wire.initialize(project)
    body = json.dumps({"jsonrpc": "2.0", "id": 70, "method": "textDocument/hover", "params": HOVER})
    wire.send(b"content-length: %d\n\n%s" % (len(body), body.encode()))
    assert wire.answer(70)["result"] is None
