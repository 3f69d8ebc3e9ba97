"""Preparing a service: every pipeline checked first, names unique, secrets redacted; and
how a served process ends on a second Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest

from converge_dsl.errors import PipelineInvalid
from converge_dsl.serve import ServeOptions, prepare
from converge_dsl.serve._errors import ServeRefused
from converge_dsl.serve._store import STATE_FILE

from .conftest import DATA, Server, settled, until

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
