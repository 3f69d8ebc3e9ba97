"""`converge-dsl run` exporting to a real, third-party OTLP receiver: Arize Phoenix.

No OpenTelemetry Collector can be installed from the package registries here
(tests/e2e/test_otel_cli.py says why); Phoenix, an LLM-observability server
from PyPI that users of GenAI tooling meet, receives OTLP/HTTP traces at
`/v1/traces` and serves what it stored through its REST API. `.ci/run`
installs it into a virtual environment of its own (its dependencies are not
ours) and names its `phoenix` program in `CONVERGE_DSL_PHOENIX`; elsewhere a
`phoenix` on the PATH serves. The test starts `phoenix serve` on free
loopback ports with a private working folder, runs the command as a user
does, and reads the spans back from Phoenix. Skipped, saying why, only when
no Phoenix is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "pipelines" / "agent-review.yaml"
PHOENIX = os.environ.get("CONVERGE_DSL_PHOENIX") or shutil.which("phoenix")
START_BOUND_S = 120.0  # Phoenix migrates its database and starts a web server

pytestmark = pytest.mark.skipif(
    PHOENIX is None,
    reason="Arize Phoenix is not installed (.ci/run installs it in a virtual environment of "
    "its own and sets CONVERGE_DSL_PHOENIX): the real-receiver OpenTelemetry test is skipped",
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a `phoenix serve` on loopback, stopped after the module."""
    pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (the otel extra)")
    folder = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (folder / "phoenix.log").open("wb")
    server = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_BOUND_S
        while True:
            assert server.poll() is None, (folder / "phoenix.log").read_text(errors="replace")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "Phoenix did not start in time"
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _spans(url: str, expected: int) -> list[dict[str, Any]]:
    """Every span of the default project, once `expected` have been stored (ingestion is queued)."""
    deadline = time.monotonic() + 30
    while True:
        answer = httpx.get(f"{url}/v1/projects/default/spans", params={"limit": 1000}, timeout=10)
        answer.raise_for_status()
        spans: list[dict[str, Any]] = answer.json()["data"]
        if len(spans) >= expected or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def _run(url: str, *extra: str) -> dict[str, Any]:
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_SERVICE_NAME": "phoenix-e2e"}
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", "run", str(AGENT), "--format", "json", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr  # every span was delivered
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_phoenix_stores_the_run_as_one_trace_of_nested_spans(phoenix: str) -> None:
    result = _run(phoenix)
    calls = result["usage"]["model_calls"]
    spans = _spans(phoenix, expected=calls + 4)
    assert len({span["context"]["trace_id"] for span in spans}) == 1
    by_id = {span["context"]["span_id"]: span for span in spans}

    def parent(span: dict[str, Any]) -> str:
        return str(by_id[span["parent_id"]]["name"])

    (root,) = [span for span in spans if span["parent_id"] is None]
    assert root["name"] == "run agent-review"
    assert root["attributes"]["converge_dsl.run.stop_reason"] == "converged"
    (agent,) = [span for span in spans if span["name"] == "invoke_agent reviewer"]
    assert parent(agent) == "cycle 1"
    assert parent(by_id[agent["parent_id"]]) == "run agent-review"
    chats = [span for span in spans if span["name"].startswith("chat ")]
    assert len(chats) == calls
    tokens_in = tokens_out = 0
    for chat in chats:
        attributes = chat["attributes"]
        assert parent(chat).startswith("turn ")
        assert parent(by_id[chat["parent_id"]]) == "invoke_agent reviewer"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "scripted"
        tokens_in += attributes["gen_ai.usage.input_tokens"]
        tokens_out += attributes["gen_ai.usage.output_tokens"]
        assert chat["start_time"] <= chat["end_time"]
    usage = result["usage"]
    assert (tokens_in, tokens_out) == (usage["input_tokens"], usage["output_tokens"])
    # No prompt or answer leaves the process unless the user opts in.
    stored = json.dumps(spans)
    assert "gen_ai.input.messages" not in stored
    assert "gen_ai.output.messages" not in stored
