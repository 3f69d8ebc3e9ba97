"""A third-party mock server, `fakellm` (PyPI), and a fault-injecting proxy in front of it.

`running_fakellm(folder, rules)` starts `fakellm serve` on 127.0.0.1 (a free
port) with a YAML rule file and yields its base URL. fakellm answers text,
JSON text, tool calls and, on plain requests, any HTTP status, chosen by rules
on the prompt, the request headers, the tools offered and the turn of a
conversation (fakellm counts the requests that share a first user message).
It cannot fail a streamed request, cut an answer halfway or send a body that
is not JSON: `FaultProxy` can. It forwards every request to fakellm and, for
the requests whose body contains a given phrase, spoils fakellm's answer
(`500`: a server error instead; `cut`: the first half, then the connection
ends; `garbage`: a 200 whose body is not JSON), so the answers still come from
fakellm.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

Fault = Literal["pass", "500", "cut", "garbage"]
GARBAGE = b'{"choices": [ fakellm said this, the proxy spoiled it'


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_fakellm(folder: Path, rules: str) -> Iterator[str]:
    """`fakellm serve` with `rules` (its YAML config) on 127.0.0.1; yields its base URL."""
    config = folder / "fakellm.yaml"
    config.write_text(rules, encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "fakellm.cli", "serve"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--config", str(config)]
    log_path = folder / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=folder)
        try:
            _wait_ready(url, process, log_path)
            yield url
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """End the server process and wait for it."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"fakellm exited with {process.returncode}: {log.read_text()}")
        try:
            if httpx.get(f"{url}/_fakellm/stats", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail(f"fakellm did not start within 20 s: {log.read_text()}")


def forget_conversations(url: str) -> None:
    """Reset fakellm's turn counters (its rules then see every conversation afresh)."""
    httpx.post(f"{url}/_fakellm/reset", timeout=5).raise_for_status()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        fault = self.server.proxy.fault_for(raw)
        skip = {"host", "content-length", "connection", "accept-encoding"}
        headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
        with httpx.Client(timeout=30) as client:
            url = self.server.proxy.upstream + self.path
            answer = client.post(url, content=raw, headers=headers)
        status, body = answer.status_code, answer.content
        if fault == "500":
            status, body = 500, b'{"error": {"message": "the proxy failed this answer"}}'
        elif fault == "garbage":
            body = GARBAGE
        self.send_response(status)
        self.send_header("content-type", answer.headers.get("content-type", "application/json"))
        self.send_header("content-length", str(len(body)))
        for name in ("retry-after", "x-fakellm-conversation-id"):
            if name in answer.headers:
                self.send_header(name, answer.headers[name])
        self.end_headers()
        if fault == "cut":  # half of fakellm's answer, then the connection ends
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, proxy: FaultProxy) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.proxy = proxy

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a client that gave up on a spoiled answer is expected


class FaultProxy:
    """Forwards to `upstream`; a request whose body holds a phrase of `faults` gets the
    next fault listed for it (`pass` once the list is used up)."""

    def __init__(self, upstream: str, faults: Mapping[str, Sequence[Fault]]) -> None:
        self.upstream = upstream.rstrip("/")
        self._faults = {phrase.encode(): list(kinds) for phrase, kinds in faults.items()}
        self._lock = threading.Lock()
        self.spoiled: list[Fault] = []
        self._server = _ProxyServer(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, kwargs={"poll_interval": 0.05}
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def fault_for(self, body: bytes) -> Fault:
        with self._lock:
            for phrase, kinds in self._faults.items():
                if phrase in body and kinds:
                    fault = kinds.pop(0)
                    if fault != "pass":
                        self.spoiled.append(fault)
                    return fault
        return "pass"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()
