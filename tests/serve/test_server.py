"""Preparing a service: every pipeline checked first, names unique, secrets redacted; and
how a served process ends on a second Ctrl-C."""

from __future__ import annotations

import contextlib
import io
import json
import signal
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest

from converge_dsl.cli import run
from converge_dsl.errors import PipelineInvalid
from converge_dsl.serve import ServeOptions, prepare
from converge_dsl.serve._errors import ServeRefused
from converge_dsl.serve._store import STATE_FILE

from .conftest import DATA, ROOT, Server, settled, until

TOKEN = "a-secret-token-0123456789"


def test_errors_are_redacted(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN + "\n")
    prepared = prepare(ServeOptions([DATA / "echo.yaml"], state=tmp_path / "s", token_file=tokens))
    assert prepared.names == ("echo",)
    assert TOKEN not in prepared.service.redact(f"upstream said: Bearer {TOKEN}")
    prepared.service.store.close()


def test_every_invalid_pipeline_is_reported_at_once(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(
            (DATA / "gated.yaml").read_text().replace("kind: rule", "kind: rulez", 1)
        )
    with pytest.raises(PipelineInvalid) as caught:
        prepare(ServeOptions([tmp_path / "a.yaml", tmp_path / "b.yaml"], state=tmp_path / "s"))
    files = {Path(d.span.file).name for d in caught.value.diagnostics if d.span is not None}
    assert files == {"a.yaml", "b.yaml"}


def test_two_pipelines_of_one_name(tmp_path: Path) -> None:
    copy = tmp_path / "copy.yaml"
    copy.write_text((DATA / "gated.yaml").read_text())
    both = r"^\[CD994\] serve: pipelines .* are both named 'gated'"
    with pytest.raises(ServeRefused, match=both):
        prepare(ServeOptions([DATA / "gated.yaml", copy], state=tmp_path / "s"))


def test_a_server_never_uses_the_answer_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cache.md: `serve` is off whatever the environment says."""
    monkeypatch.setenv("CONVERGE_DSL_CACHE_MODE", "read-write")
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cache"))
    prepared = prepare(ServeOptions([DATA / "echo.yaml"], state=tmp_path / "s"))
    assert [p.cache.mode for p in prepared.service.pipelines.values()] == ["off"]


def test_a_second_ctrl_c_before_the_shutdown_ends_it_with_one_line(
    tmp_path: Path, servers: list[Server]
) -> None:
    """Two SIGINTs, the second while uvicorn still drains a connection (a `?wait=true`
    on a run in a slow model call), before the application's shutdown: the server stops
    at once, exit 0, with one plain line saying so. Before, uvicorn skipped the
    application's shutdown on that second signal: the service was not stopped, and its
    lifespan, cancelled at the loop's end, logged a `CancelledError` traceback."""
    state = tmp_path / "state"
    server = Server([DATA / "slow.yaml"], state)
    servers.append(server)
    url = server.ready()

    def wait_for_a_run() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server goes away under it
            httpx.post(f"{url}/v1/pipelines/slow/runs?wait=true", timeout=30)

    threading.Thread(target=wait_for_a_run, daemon=True).start()
    until(lambda: settled(state) == 0 and _running(state), 30)
    server.process.send_signal(signal.SIGINT)
    time.sleep(0.5)  # the first one taken: uvicorn drains the waiting connection
    server.process.send_signal(signal.SIGINT)
    assert server.exit_code() == 0
    said = [line for line in server.stderr if " on http://" not in line]
    assert "Traceback" not in "".join(server.stderr), server.stderr
    assert len(said) == 1, said
    assert "stopped at once" in said[0]


def _running(state: Path) -> bool:
    with contextlib.closing(sqlite3.connect(state / STATE_FILE, timeout=5)) as db:
        return db.execute("SELECT COUNT(*) FROM runs WHERE status = 'running'").fetchone() == (1,)


def _follow(url: str, run: str, seen: list[tuple[int, str]]) -> None:
    """Read the event stream of `run` into `seen` (number, type) until it ends."""
    with (
        contextlib.suppress(httpx.HTTPError),  # the server goes away under it
        httpx.stream("GET", f"{url}/v1/runs/{run}/events", timeout=30) as stream,
    ):
        number = -1
        for line in stream.iter_lines():
            if line.startswith("id: "):
                number = int(line[4:])
            elif line.startswith("data: ") and number >= 0:
                seen.append((number, json.loads(line[6:])["type"]))
                number = -1


def _following(server: Server) -> tuple[str, list[tuple[int, str]], threading.Thread]:
    """A run of the `slow` pipeline started on `server` and its stream followed, once
    the run is in its model call: the run, what the stream gave so far, its reader."""
    url = server.ready()
    run = httpx.post(f"{url}/v1/pipelines/slow/runs", timeout=30).json()["id"]
    seen: list[tuple[int, str]] = []
    follower = threading.Thread(target=_follow, args=(url, run, seen), daemon=True)
    follower.start()
    until(lambda: any(kind == "model_call_started" for _, kind in seen), 30)
    return run, seen, follower


def _stored(state: Path, run: str) -> list[tuple[int, str]]:
    """The stored events of `run` (number, type)."""
    with contextlib.closing(sqlite3.connect(state / STATE_FILE, timeout=5)) as db:
        rows = db.execute("SELECT seq, line FROM events WHERE run = ? ORDER BY seq", (run,))
        return [
            (seq + offset, json.loads(record.split("\t", 3)[3])["type"])
            for seq, line in rows.fetchall()
            for offset, record in enumerate(line.split("\n"))
        ]


@pytest.mark.parametrize("attempt", range(3))
def test_a_second_ctrl_c_ends_the_open_streams_and_stores_what_they_were_given(
    tmp_path: Path, servers: list[Server], attempt: int
) -> None:
    """Two SIGINTs while a client follows the stream of a run in a slow model call: one
    line said, exit 0, and every event the client was given is stored under its number.
    Before, the stream was cancelled at the loop's end (`ERROR: Exception in ASGI
    application ... CancelledError`), and the run, cancelled without its cleanup, left
    the events past its last commit unstored: the next start gave their numbers again,
    to other events."""
    state = tmp_path / "state"
    server = Server([DATA / "slow.yaml"], state)
    servers.append(server)
    run, seen, follower = _following(server)
    server.process.send_signal(signal.SIGINT)
    time.sleep(0.3)  # the first one taken: the run goes on to its checkpoint
    server.process.send_signal(signal.SIGINT)
    assert server.exit_code() == 0
    follower.join(10)
    said = [line for line in server.stderr if " on http://" not in line]
    assert len(said) == 1, said
    assert "stopped at once" in said[0]
    stored = dict(_stored(state, run))
    assert [(number, stored.get(number)) for number, _ in seen] == seen


def test_a_sigterm_in_a_cycle_longer_than_the_stop_ends_the_open_stream(
    tmp_path: Path, servers: list[Server]
) -> None:
    """A SIGTERM while a run is in a model call longer than the stop (`STOP_S`) and a
    client follows its stream: the stream ends (without `end`) before uvicorn's drain of
    connections, the server stops saying nothing, exit 0, every event the client was
    given stored. Before, uvicorn cancelled the stream at its timeout: `Cancel 1 running
    task(s), timeout graceful shutdown exceeded`, then a `CancelledError` traceback."""
    (tmp_path / "slow.yaml").write_text((DATA / "slow.yaml").read_text())
    (tmp_path / "slow.script.yaml").write_text(
        (DATA / "slow.script.yaml").read_text().replace("delay_s: 3", "delay_s: 8")
    )
    state = tmp_path / "state"
    server = Server([tmp_path / "slow.yaml"], state)
    servers.append(server)
    run, seen, follower = _following(server)
    server.process.send_signal(signal.SIGTERM)
    assert server.exit_code() == 0
    follower.join(10)
    said = [line for line in server.stderr if " on http://" not in line]
    assert said == []
    stored = dict(_stored(state, run))
    assert [(number, stored.get(number)) for number, _ in seen] == seen


def test_a_late_second_ctrl_c_while_the_server_closes_is_no_interrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGINT that comes once the server stopped serving, while it closes its state,
    ends it as one a moment earlier would: `serve` returns (exit 0), and then the
    handlers it found are back. Before, the server had put Python's own handler back
    already: `KeyboardInterrupt` out of `serve`, exit 130 (twice in some sixty stops)."""
    import os

    from converge_dsl.serve import serve
    from converge_dsl.serve._store import RunStore

    close = RunStore.close

    def interrupted(store: RunStore) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # a late second Ctrl-C, while it closes
        close(store)

    monkeypatch.setattr(RunStore, "close", interrupted)
    options = ServeOptions([DATA / "echo.yaml"], port=0, state=tmp_path / "state")
    before = signal.getsignal(signal.SIGINT)
    serve(options, lambda url: os.kill(os.getpid(), signal.SIGTERM))
    assert signal.getsignal(signal.SIGINT) is before


def _folder_of_kinds(tmp_path: Path) -> Path:
    """A folder holding a pipeline (echo.yaml and its script), an evaluation file, a pack
    manifest and a run configuration, each saying its kind at the top."""
    folder = tmp_path / "kinds"
    (folder / "pack").mkdir(parents=True)
    for name in ("echo.yaml", "echo.script.yaml"):
        (folder / name).write_text((DATA / name).read_text())
    (folder / "echo.eval.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: Evaluation\nname: e\npipeline: echo.yaml\n"
    )
    (folder / "pack" / "pack.yaml").write_text("apiVersion: converge-dsl/v1\nkind: Pack\n")
    (folder / "fast.yaml").write_text("apiVersion: converge-dsl/v1\nkind: RunConfig\n")
    return folder


def test_a_folder_serves_only_the_files_validate_checks_as_pipelines(
    tmp_path: Path, servers: list[Server]
) -> None:
    server = Server([_folder_of_kinds(tmp_path)], tmp_path / "s")
    servers.append(server)
    url = server.ready()
    assert "serving 1 pipeline(s)" in "".join(server.stderr)
    assert list(httpx.get(f"{url}/v1/pipelines").json()["pipelines"]) == ["echo"]


def test_the_repository_pipelines_folder_is_served(tmp_path: Path, servers: list[Server]) -> None:
    """docs/serve.md's own command: its evaluation file is not taken for a pipeline."""
    server = Server([ROOT / "pipelines"], tmp_path / "s")
    servers.append(server)
    server.ready()
    assert "serving 8 pipeline(s)" in "".join(server.stderr)
    server.stop()
    assert server.exit_code() == 0


@pytest.mark.parametrize(
    ("named", "said"),
    [
        ("echo.eval.yaml", "is an evaluation file, not a pipeline"),
        ("pack/pack.yaml", "is a pack manifest, not a pipeline"),
        ("fast.yaml", "is a run configuration, not a pipeline"),
        ("pack", "no pipeline files found in"),
    ],
)
def test_a_file_named_that_is_no_pipeline_is_a_usage_error(
    tmp_path: Path, named: str, said: str
) -> None:
    path = _folder_of_kinds(tmp_path) / named
    out, err = io.StringIO(), io.StringIO()
    assert run(["serve", str(path), "--state", str(tmp_path / "s")], out, err) == 3
    assert err.getvalue().startswith("error[CD334]: ")
    assert said in err.getvalue()


_EMBEDDED = """
import asyncio, contextlib, socket, sys
from pathlib import Path
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from sse_starlette.sse import EventSourceResponse
from converge_dsl.serve import ServeOptions, prepare

async def ticks():
    number = 0
    while True:
        yield {"data": str(number)}
        number += 1
        await asyncio.sleep(0.2)

async def mine(request):
    return EventSourceResponse(ticks())

prepared = prepare(ServeOptions([Path(sys.argv[1])], state=Path(sys.argv[2]), mcp=True))

@contextlib.asynccontextmanager
async def lifespan(app):
    async with prepared.app.router.lifespan_context(prepared.app):
        yield

app = Starlette(routes=[Route("/mine", mine), Mount("/", app=prepared.app)], lifespan=lifespan)
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
"""


def test_an_embedded_application_leaves_its_hosts_streams_their_end_at_sigterm(
    tmp_path: Path,
) -> None:
    """`prepare(...).app` (with MCP) mounted in a host's Starlette application beside the
    host's own Server-Sent Events route, under the host's uvicorn: a SIGTERM while a client
    follows that route ends the process at once, as sse-starlette does by default. Before,
    the MCP face turned sse-starlette's drain off for the whole process when its
    application started, and the host's stream, never ended, held the process forever."""
    import subprocess
    import sys

    script = tmp_path / "host.py"
    script.write_text(_EMBEDDED)
    process = subprocess.Popen(
        [sys.executable, str(script), str(DATA / "echo.yaml"), str(tmp_path / "state")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = f"http://127.0.0.1:{int(process.stdout.readline())}"
        until(lambda: _answers(url), 60)
        with httpx.stream("GET", f"{url}/mine", timeout=30) as stream:
            lines = stream.iter_lines()
            while not next(lines).startswith("data: "):
                pass
            process.send_signal(signal.SIGTERM)
            started = time.monotonic()
            with contextlib.suppress(httpx.HTTPError):
                for _ in lines:  # until the stream ends (bounded: the stream ticks)
                    if time.monotonic() - started > 5:
                        break
            process.wait(10)  # uvicorn raises the signal again: -15
        assert time.monotonic() - started < 3
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("drain", [True, False])
def test_serve_puts_sse_starlettes_drain_back_when_it_returns(tmp_path: Path, drain: bool) -> None:
    """`serve` (with MCP) turns sse-starlette's drain off while it serves only: stopped by a
    SIGTERM, it returns with the drain as it found it. Before, it stayed off for the process."""
    import os

    from sse_starlette.sse import AppStatus

    from converge_dsl.serve import serve

    AppStatus.enable_automatic_graceful_drain = drain
    seen: list[bool] = []

    def ready(url: str) -> None:
        seen.append(AppStatus.enable_automatic_graceful_drain)
        os.kill(os.getpid(), signal.SIGTERM)

    try:
        options = ServeOptions([DATA / "echo.yaml"], port=0, state=tmp_path / "s", mcp=True)
        serve(options, ready)
        assert seen == [False]
        assert AppStatus.enable_automatic_graceful_drain is drain
    finally:
        AppStatus.enable_automatic_graceful_drain = True
