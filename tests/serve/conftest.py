"""A real `converge-dsl serve` process on 127.0.0.1 for the tests of tests/serve.

`Server(paths, state, *options)` starts `python -m converge_dsl serve ... --port 0`,
waits (bounded) for the line saying where it listens, and is always stopped:
`stop()` sends SIGTERM and waits, `kill()` sends SIGKILL (the crash tests).
`in_process(state, limits, mcp=..., **config)` serves echo.yaml (or `paths=`) from a thread
of the test's own process instead, for what `serve` does not expose (short bounds, either
parser, a state held at one moment).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from converge_dsl.serve._store import STATE_FILE

if TYPE_CHECKING:
    from converge_dsl.serve._app import HttpLimits

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]
START_S = 60.0


def _shown(path: Path) -> str:
    """A path inside the repository as the server is given it: relative (it runs there)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


class Server:
    """One service process (see the module docstring)."""

    def __init__(self, paths: list[Path], state: Path, *options: str) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "converge_dsl",
                "serve",
                *map(str, paths),
                "--port",
                "0",
                "--state",
                str(state),
                *options,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
            cwd=ROOT,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = ""

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            self.lines.put(line)
        self.lines.put("")

    def ready(self) -> str:
        """The base URL once it listens; fails with what it printed if it stops first."""
        while True:
            try:
                line = self.lines.get(timeout=START_S)
            except queue.Empty:
                raise AssertionError("the server did not start in time") from None
            if " on http://" in line:
                self.url = line.rsplit(" on ", 1)[1].strip()
                return self.url
            if not line:
                self.process.wait(timeout=10)
                raise AssertionError(f"the server stopped: {''.join(self.stderr)}")

    def exit_code(self, timeout: float = 30.0) -> int:
        """The exit code, once every line it wrote to stderr is in `stderr` (the reader may
        still be reading when the process has ended)."""
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout)
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Every server a test starts, stopped when it ends."""
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


def serve_with_token(
    folder: Path, servers: list[Server], paths: list[Path], token: str, *options: str
) -> Server:
    """A server of `paths` whose token file (in `folder`) holds `token`, one run of a
    pipeline at once, a queue of 2 and waits of at most 20 s, then `options`; stopped
    when the test ends."""
    tokens = folder / "tokens"
    tokens.write_text(f"# who may call\n{token}\n")
    server = Server(
        paths,
        folder / "state",
        "--token-file",
        str(tokens),
        "--workers",
        "1",
        "--queue",
        "2",
        "--wait-timeout",
        "20",
        *options,
    )
    servers.append(server)
    return server


def until(predicate: Callable[[], bool], seconds: float) -> None:
    """Wait until `predicate()` holds, failing the test after `seconds`."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def settled(state: Path) -> int:
    """How many runs of the state in `state` are done or paused (read from its database)."""
    with sqlite3.connect(state / STATE_FILE, timeout=5) as db:
        row = db.execute("SELECT COUNT(*) FROM runs WHERE status IN ('done', 'paused')")
        return int(row.fetchone()[0])


def post_load(url: str, runs: int, gated: int) -> dict[str, str]:
    """Start `runs` runs on the server at `url`: `gated` of them of the `gated` pipeline
    (evenly spread), the others of `steady` numbered by their place; {run id: `gated` or
    the number it was given}."""
    ids: dict[str, str] = {}
    with httpx.Client(base_url=url, timeout=30) as http:
        for n in range(runs):
            pause = n % (runs // gated) == 0
            if pause:
                answer = http.post("/v1/pipelines/gated/runs")
            else:
                answer = http.post("/v1/pipelines/steady/runs", json={"inputs": {"number": n}})
            assert answer.status_code == 202
            ids[answer.json()["id"]] = "gated" if pause else str(n)
    return ids


@contextlib.contextmanager
def in_process(
    state: Path,
    limits: HttpLimits,
    *,
    mcp: bool = False,
    paths: tuple[Path, ...] = (DATA / "echo.yaml",),
    **config: Any,
) -> Iterator[str]:
    """`paths` (echo.yaml) served on 127.0.0.1 by uvicorn on a thread of this process, with
    `limits`, the MCP endpoint if `mcp`, and `config` (given to `uvicorn.Config`); its URL,
    until the block ends."""
    from converge_dsl.serve import ServeOptions, prepare
    from converge_dsl.serve._app import build_app

    prepared = prepare(ServeOptions(list(paths), state=state))
    endpoint = None
    if mcp:
        from converge_dsl.serve._mcp import McpEndpoint

        endpoint = McpEndpoint(prepared.service, None, limits, loopback=True)
    app = build_app(prepared.service, None, limits, endpoint)
    try:
        with on_a_thread(app, **config) as url:
            yield url
    finally:
        prepared.service.store.close()


@contextlib.contextmanager
def on_a_thread(app: Any, **config: Any) -> Iterator[str]:
    """`app` served on 127.0.0.1 by uvicorn on a thread of this process, with `config`
    (given to `uvicorn.Config`); its URL, until the block ends (its lifespan then ends)."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive(), "the server did not start (its log says why)"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
