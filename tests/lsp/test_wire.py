"""The stdio framing (`converge_dsl.lsp._wire`): a bad frame loses that frame only, a body
shorter than its length is cut at the next frame's header, a body read whole never is."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pygls.exceptions import JsonRpcException

from converge_dsl.lsp._wire import Frames, read_frames
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


class Received:
    """What `read_frames` hands on: the bodies taken, the refusals, the log."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.refused: list[str] = []
        self.said: list[str] = []

    def receive(self, body: bytes) -> None:
        self.bodies.append(bytes(body))

    def fail(self, msg_id: object, error: JsonRpcException) -> None:
        self.refused.append(error.message)

    def log(self, message: str) -> None:
        self.said.append(message)


def read(stream: bytes, pieces: Callable[[int], int] | None = None) -> Received:
    """`stream` read by `read_frames` from a pipe, written whole or `pieces(at)` bytes at a
    time (the client's writes)."""
    readable, writable = os.pipe()

    def write() -> None:
        at = 0
        try:
            while at < len(stream):
                size = len(stream) if pieces is None else pieces(at)
                os.write(writable, stream[at : at + size])
                at += size
        finally:
            os.close(writable)

    writer = threading.Thread(target=write)
    writer.start()
    received = Received()
    with os.fdopen(readable, "rb") as source:
        frames = Frames(source, None)
        asyncio.run(read_frames(frames, cast(Any, received), threading.Event(), 10**8))
    writer.join()
    return received


def framed(body: bytes, length: int | None = None) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length) + body


NEXT = json.dumps({"jsonrpc": "2.0", "id": 6, "method": "m"}).encode()


@pytest.mark.parametrize(
    "end",
    [b"c", b"Content-Len", b"Content-Length:", b"Content-Length: 9", b"Content-Length: 9\r"],
)
@pytest.mark.parametrize("whole", [True, False])
def test_a_body_read_whole_is_never_cut_whatever_its_end(end: bytes, whole: bool) -> None:
    """A bad body of its whole length, ending as a header begins, is not JSON; the next
    message was read with that end glued on its header, and lost."""
    bad = b'{"jsonrpc":"2.0","id":5}' + end
    received = read(framed(bad) + framed(NEXT), None if whole else lambda at: 1)
    assert (received.bodies, received.refused, received.said) == ([bad, NEXT], [], [])


def test_a_body_counted_in_characters_is_not_json_not_short() -> None:
    """A client counting characters, not bytes: the body read ends after a `c` and its
    rest comes before the next header. It was said to be shorter than its length."""
    message = {"jsonrpc": "2.0", "id": 7, "method": "m", "params": {"t": "ééé abc"}}
    text = json.dumps(message, ensure_ascii=False)
    body = text.encode()
    read_as = body[: len(text)]
    assert read_as.endswith(b"c")
    received = read(framed(body, len(text)) + framed(NEXT))
    assert (received.bodies, received.refused, received.said) == ([read_as, NEXT], [], [])


@pytest.mark.parametrize("whole", [True, False])
def test_the_rest_of_a_long_body_is_skipped_to_the_first_whole_header(whole: bool) -> None:
    """The rest of a body longer than its length names Content-Length: the next frame's
    header was taken as that one's value (`5 here"}}Content-Length: 9`) and the frame lost."""
    long = json.dumps({"jsonrpc": "2.0", "method": "$/x", "params": "see Content-Length: 5 a"})
    text = json.dumps({"jsonrpc": "2.0", "method": "m", "params": "# Content-Length: 3\nk: 1"})
    stream = framed(long.encode(), 20) + framed(text.encode()) + framed(NEXT)
    received = read(stream, None if whole else lambda at: 1 + at % 7)
    assert received.bodies == [long.encode()[:20], text.encode(), NEXT]
    assert (received.refused, received.said) == ([], [])


def test_one_pattern_reads_a_header_and_finds_it_in_a_body() -> None:
    """A header with spaces or tabs around its value, in any case, ended by LF or CRLF."""
    headers = [b"content-LENGTH:\t%d \n", b"Content-Length : %d\r\n", b"CONTENT-LENGTH:%d\t\r\n"]
    stream = b"".join(header % len(NEXT) + b"\r\n" + NEXT for header in headers)
    cut = b'{"jsonrpc": "2.0", "id": 80, "met'
    for header in headers:
        stream += framed(cut, len(cut) + 30) + header % len(NEXT) + b"\n" + NEXT
    received = read(stream)
    assert received.bodies == [NEXT] * 6
    assert len(received.refused) == 3


def test_a_body_of_line_breaks_is_read_in_time_linear_in_its_size() -> None:
    """Each line break was searched for a header with a regex of its own: 8 MB of them
    took about 10 s of CPU; one search of each byte read takes about 0.1 s."""
    body = b'{"jsonrpc": "2.0", "method": "$/x"' + b"\n" * (8 * 1024 * 1024) + b"}"
    spent = time.process_time()
    received = read(framed(body) + framed(NEXT))
    assert time.process_time() - spent < 3
    assert received.bodies == [body, NEXT]


# Text that looks like framing, inside JSON strings and keys: it is never a header there.
WORDS = ["Content-Length", "content-length: 12", "Content-Length: 5\r\n\r\n{}", "c", "\n"]
WORDS += ["\r\n", "é", "\u2028", "x" * 50, ":", " 12", "Content-Len"]
TEXT = st.lists(st.sampled_from(WORDS), max_size=6).map("".join)
VALUES = st.recursive(
    TEXT | st.integers(-5, 10**6) | st.sampled_from([None, True, False, 1.5]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def frame_of(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A valid frame and its body: JSON in any layout, any header the reader takes."""
    message = {"jsonrpc": "2.0", "method": draw(TEXT), "params": draw(VALUES)}
    indent = draw(st.sampled_from([None, 0, 2, "\t"]))
    ascii_only = draw(st.booleans())
    text = draw(st.sampled_from(["", " ", "\n"])) + json.dumps(message, indent=indent)
    text = text if ascii_only else json.dumps(message, indent=indent, ensure_ascii=False)
    body = (text + draw(st.sampled_from(["", " ", "\n", "\r\n", "\t"]))).encode()
    end = draw(st.sampled_from([b"\r\n", b"\n"]))
    name = draw(st.sampled_from([b"Content-Length", b"content-length", b"CONTENT-LENGTH"]))
    colon = draw(st.sampled_from([b": ", b":", b" : ", b":\t"]))
    length = name + colon + b"%d" % len(body) + draw(st.sampled_from([b"", b" "])) + end
    other = b"Content-Type: application/vscode-jsonrpc; charset=utf-8" + end
    headers = draw(st.sampled_from([[length], [other, length], [length, other], [length] * 2]))
    return b"".join(headers) + end + body, body


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(frame_of(), min_size=1, max_size=8),
    st.sampled_from(["whole", "pieces", "bytes"]),
    st.lists(st.integers(1, 64), min_size=1, max_size=8),
)
def test_valid_frames_are_read_as_sent_however_they_arrive(
    frames: list[tuple[bytes, bytes]], arrival: str, pieces: list[int]
) -> None:
    """Never cut, never misread, whatever text the bodies hold and however the pipe splits
    the stream."""
    sizes = {"whole": None, "pieces": lambda at: pieces[at % len(pieces)], "bytes": lambda at: 1}
    received = read(b"".join(frame for frame, _ in frames), sizes[arrival])
    assert received.bodies == [body for _, body in frames]
    assert (received.refused, received.said) == ([], [])
