"""A fake model provider on 127.0.0.1, speaking both wire formats (for tests and benchmarks).

`FakeProviderServer` answers `POST .../chat/completions` (OpenAI) and
`POST .../messages` (Anthropic), streamed (SSE, chunked) or whole, and can be
told per request to misbehave: delay, fail with a status (429 with
Retry-After, 500, ...), reject given API keys with 401, send garbage, cut a
stream halfway, or drip chunks slowly. Replies queued with `queue` are served
in order, then `default`. Every request is recorded (path, headers, body).
Usage counts a quarter of the answer's characters as its output tokens. A
server made with `honour_max_tokens=True` cuts an answer longer than the
request's `max_tokens` (or `max_completion_tokens`) at that many tokens and
says so (`finish_reason: length`, `stop_reason: max_tokens`), as a real one
does; by default it ignores the cap.
It runs in a background thread, so it is independent of the caller's loop.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class FakeReply:
    """How to answer one request."""

    text: str = "Hello from the fake provider."
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    status: int = 200
    retry_after: str | None = None
    error_body: str | None = None
    delay_s: float = 0.0
    garbage: bool = False
    cut: Literal["no", "abort", "eof"] = "no"
    drip_s: float = 0.0
    chunks: int = 4
    input_tokens: int = 10  # the usage count reported (tests send negative ones)
    cut_at_limit: bool = False  # the answer stopped at the request's max_tokens


@dataclass(frozen=True, slots=True)
class SeenRequest:
    path: str
    headers: dict[str, str]
    body: Any
    client_port: int = 0

    @property
    def api_key(self) -> str | None:
        auth = self.headers.get("authorization", "")
        return auth.removeprefix("Bearer ") if auth else self.headers.get("x-api-key")


@dataclass
class _State:
    default: FakeReply = field(default_factory=FakeReply)
    queued: deque[FakeReply] = field(default_factory=deque)
    reject_keys: set[str] = field(default_factory=set)
    requests: list[SeenRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    honour_max_tokens: bool = False

    def next_reply(self, seen: SeenRequest) -> FakeReply:
        with self.lock:
            self.requests.append(seen)
            reply = self.queued.popleft() if self.queued else self.default
        return capped(reply, seen.body) if self.honour_max_tokens else reply


def capped(reply: FakeReply, body: Any) -> FakeReply:
    """`reply` cut at the request's answer cap (a quarter of its characters a token)."""
    limit = None
    if isinstance(body, dict):
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if not isinstance(limit, int) or len(reply.text) // 4 <= limit:
        return reply
    return replace(reply, text=reply.text[: max(4, limit * 4)], cut_at_limit=True)


def split_text(text: str, pieces: int) -> list[str]:
    """`text` in `pieces` nearly equal parts (fewer when the text is short)."""
    pieces = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), pieces)
    out, start = [], 0
    for index in range(pieces):
        end = start + size + (1 if index < extra else 0)
        out.append(text[start:end])
        start = end
    return [p for p in out if p] or [""]


def openai_events(reply: FakeReply) -> list[bytes]:
    events: list[dict[str, Any]] = []
    for piece in split_text(reply.text, reply.chunks) if reply.text else []:
        events.append({"choices": [{"index": 0, "delta": {"content": piece}}]})
    for index, (name, arguments) in enumerate(reply.tool_calls):
        text = json.dumps(arguments)
        half = len(text) // 2
        head = {
            "index": index,
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": name, "arguments": text[:half]},
        }
        events.append({"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]})
        tail = {"index": index, "function": {"arguments": text[half:]}}
        events.append({"choices": [{"index": 0, "delta": {"tool_calls": [tail]}}]})
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": _finish(reply)}]})
    events.append({"choices": [], "usage": _openai_usage(reply)})
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


def _finish(reply: FakeReply) -> str:
    return "length" if reply.cut_at_limit else "tool_calls" if reply.tool_calls else "stop"


def _stop(reply: FakeReply) -> str:
    return "max_tokens" if reply.cut_at_limit else "tool_use" if reply.tool_calls else "end_turn"


def _openai_usage(reply: FakeReply) -> dict[str, int]:
    return {"prompt_tokens": reply.input_tokens, "completion_tokens": max(1, len(reply.text) // 4)}


def openai_body(reply: FakeReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for i, (name, arguments) in enumerate(reply.tool_calls)
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
        "usage": _openai_usage(reply),
    }


def anthropic_events(reply: FakeReply) -> list[bytes]:
    """The server-sent events of a streamed Anthropic answer carrying `reply`."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_fake",
                "role": "assistant",
                "content": [],
                "usage": {"input_tokens": reply.input_tokens, "output_tokens": 1},
            },
        },
        {"type": "ping"},
    ]
    events.extend(_anthropic_text_events(reply))
    first_tool = 1 if reply.text else 0
    for offset, (name, arguments) in enumerate(reply.tool_calls):
        events.extend(_anthropic_tool_events(first_tool + offset, offset, name, arguments))
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop(reply)},
            "usage": {"output_tokens": max(1, len(reply.text) // 4)},
        }
    )
    events.append({"type": "message_stop"})
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def _anthropic_text_events(reply: FakeReply) -> list[dict[str, Any]]:
    """The text block (index 0) of a streamed Anthropic answer; none without text."""
    if not reply.text:
        return []
    events: list[dict[str, Any]] = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    ]
    events.extend(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
        for piece in split_text(reply.text, reply.chunks)
    )
    events.append({"type": "content_block_stop", "index": 0})
    return events


def _anthropic_tool_events(
    at: int, offset: int, name: str, arguments: dict[str, Any]
) -> list[dict[str, Any]]:
    """One streamed tool-use block at index `at`, its input JSON sent in two halves."""
    text = json.dumps(arguments)
    half = len(text) // 2
    block = {"type": "tool_use", "id": f"toolu_{offset}", "name": name, "input": {}}
    events: list[dict[str, Any]] = [
        {"type": "content_block_start", "index": at, "content_block": block}
    ]
    events.extend(
        {
            "type": "content_block_delta",
            "index": at,
            "delta": {"type": "input_json_delta", "partial_json": part},
        }
        for part in (text[:half], text[half:])
    )
    events.append({"type": "content_block_stop", "index": at})
    return events


def anthropic_body(reply: FakeReply) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    content.extend(
        {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": arguments}
        for i, (name, arguments) in enumerate(reply.tool_calls)
    )
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": _stop(reply),
        "usage": {
            "input_tokens": reply.input_tokens,
            "output_tokens": max(1, len(reply.text) // 4),
        },
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def setup(self) -> None:
        super().setup()
        # Headers and body are separate writes; without this, Nagle + delayed ACK
        # add ~40 ms to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        seen = SeenRequest(self.path, headers, body, int(self.client_address[1]))
        state = self.server.state
        reply = state.next_reply(seen)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        anthropic = self.path.endswith("/messages")
        if seen.api_key in state.reject_keys:
            self._send_json(
                401,
                {
                    "error": {
                        "type": "authentication_error",
                        "message": f"invalid x-api-key {seen.api_key}",
                    }
                },
            )
        elif reply.status != 200:
            error = reply.error_body or json.dumps(
                {"error": {"type": "error", "message": f"fake failure {reply.status}"}}
            )
            headers = {"retry-after": reply.retry_after} if reply.retry_after else {}
            self._send_raw(reply.status, error.encode(), "application/json", headers)
        elif reply.garbage:
            self._send_raw(200, b'{"choices": [ this is not json', "application/json", {})
        elif isinstance(body, dict) and body.get("stream"):
            self._stream(anthropic_events(reply) if anthropic else openai_events(reply), reply)
        else:
            self._send_json(200, anthropic_body(reply) if anthropic else openai_body(reply))

    def _send_json(self, status: int, data: Any) -> None:
        self._send_raw(status, json.dumps(data).encode(), "application/json", {})

    def _send_raw(self, status: int, data: bytes, kind: str, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, events: list[bytes], reply: FakeReply) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        if reply.cut == "eof":
            self.send_header("connection", "close")
            self.close_connection = True
        else:
            self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        if reply.cut != "no":
            events = events[: len(events) // 2]
        if reply.drip_s or reply.cut != "no":
            for event in events:
                self._write(event, chunked=reply.cut != "eof")
                if reply.drip_s:
                    time.sleep(reply.drip_s)
        else:
            self._write(b"".join(events), chunked=True)
        if reply.cut == "abort":
            self.close_connection = True
            self.wfile.flush()
            self.connection.close()
            return
        if reply.cut == "no":
            self.wfile.write(b"0\r\n\r\n")

    def _write(self, data: bytes, *, chunked: bool) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, state: _State) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout, cut stream) is expected here, not an error.
        return None


class FakeProviderServer:
    """Start with `start()` (or `with`); stop with `stop()`."""

    def __init__(self, *, honour_max_tokens: bool = False) -> None:
        self._state = _State(honour_max_tokens=honour_max_tokens)
        self._server = _Server(self._state)
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, kwargs={"poll_interval": 0.05}
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def requests(self) -> list[SeenRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def start(self) -> FakeProviderServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (also for a server never started)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self, default: FakeReply | None = None) -> None:
        with self._state.lock:
            self._state.default = default or FakeReply()
            self._state.queued.clear()
            self._state.reject_keys.clear()
            self._state.requests.clear()

    def queue(self, *replies: FakeReply) -> None:
        with self._state.lock:
            self._state.queued.extend(replies)

    def reject_key(self, key: str) -> None:
        with self._state.lock:
            self._state.reject_keys.add(key)
