"""A client of a real `converge-dsl lsp` over pipes: frames written as bytes, the server's
output read strictly as frames (anything else is kept in `unframed`)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.lsp.conftest import SERVER

HOVER = {"textDocument": {"uri": "file:///x.yaml"}, "position": {"line": 0, "character": 0}}


def frame(message: object) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Wire:
    """The server in a subprocess; its output read strictly as frames (anything else fails)."""

    def __init__(self, cwd: Path) -> None:
        self.process = subprocess.Popen(
            SERVER, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.received: list[dict[str, Any]] = []
        self.unframed: list[bytes] = []
        self.arrived = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        out = self.process.stdout
        while True:
            headers: dict[bytes, bytes] = {}
            while (line := out.readline()) != b"\r\n":
                if not line:
                    return
                name, _, value = line.rstrip(b"\r\n").partition(b": ")
                if not line.endswith(b"\r\n") or not value:
                    self.unframed.append(line)
                headers[name.lower()] = value
            body = out.read(int(headers[b"content-length"]))
            with self.arrived:
                self.received.append(json.loads(body))
                self.arrived.notify_all()

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def request(self, method: str, params: object = None) -> dict[str, Any]:
        self.next_id += 1
        self.send(frame({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}))
        return self.answer(self.next_id)

    def answer(self, msg_id: object, timeout: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while True:
                for message in self.received:
                    if message.get("id") == msg_id and "method" not in message:
                        return message
                left = deadline - time.monotonic()
                assert left > 0, f"no answer to request {msg_id!r}"
                self.arrived.wait(left)

    def notification(self, method: str, matches: Callable[[Any], bool], timeout: float = 20) -> Any:
        """The params of the first notification of `method` whose params match."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while True:
                for message in self.received:
                    if message.get("method") == method and matches(message["params"]):
                        return message["params"]
                left = deadline - time.monotonic()
                assert left > 0, f"no {method} that matches"
                self.arrived.wait(left)

    def said(self) -> list[str]:
        """What the server said in the client's log."""
        return [
            m["params"]["message"] for m in self.received if m.get("method") == "window/logMessage"
        ]

    def open(self, path: Path, version: float = 1) -> tuple[str, str]:
        """`didOpen` of the file `path` at `version`; its URI and text."""
        uri, text = path.as_uri(), path.read_text(encoding="utf-8")
        document = {"uri": uri, "languageId": "yaml", "version": version, "text": text}
        params = {"textDocument": document}
        self.send(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": params}))
        return uri, text

    def initialize(self, root: Path) -> None:
        self.request(
            "initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}
        )
        self.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def end(self) -> tuple[int, str]:
        """Close the input; the exit code and standard error."""
        assert self.process.stdin is not None
        assert self.process.stderr is not None
        self.process.stdin.close()
        code = self.process.wait(30)
        return code, self.process.stderr.read().decode()
