"""The timeout model (docs/architecture.md §8, "Timeouts"), on a loopback server with scaled delays.

`timeout_s` bounds the whole call; `read_timeout_s` defaults to it (no hidden
smaller default); `connect_timeout_s` never exceeds it. Most delays are scaled
down: an answer after 0.7 s within `timeout_s: 1.2` stands for one after 70 s
within `timeout_s: 120`. The literal case is also here: `converge-dsl run` of
an llm suggestor whose server answers after 70 s, with `timeout_s: 120` and
`timeout_s: 30`, over real sockets, httpx and the adapter, in virtual time
(`_virtual_time`: the event loop skips idle waits, and every clock of the run
sees the time skipped), so the 70 s take a fraction of a second.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run
from converge_dsl.clock import SystemClock
from converge_dsl.models import ModelError, ModelErrorCode
from converge_dsl.models._client import ClientLimits, ProviderClient
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply
from converge_dsl.models.http import HttpModel

from ._helpers import ask, http_model, using
from ._virtual_time import LateServer, virtual_time

WIRES = ["openai", "anthropic"]


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as running:
        yield running


def _limits(model: object) -> tuple[float, float, float]:
    assert isinstance(model, HttpModel)
    limits = model._client._limits
    return limits.timeout_s, limits.connect_timeout_s, limits.read_timeout_s


def test_no_hidden_default_is_smaller_than_timeout_s(server: FakeProviderServer) -> None:
    assert _limits(http_model(server, "openai", timeout_s=120)) == (120, 10, 120)
    assert _limits(http_model(server, "openai")) == (120, 10, 120)
    assert _limits(http_model(server, "openai", timeout_s=5)) == (5, 5, 5)
    explicit = http_model(server, "openai", timeout_s=120, read_timeout_s=30, connect_timeout_s=3)
    assert _limits(explicit) == (120, 3, 30)


@pytest.mark.parametrize("wire", WIRES)
def test_a_slow_answer_within_timeout_s_succeeds(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(text="late but fine", delay_s=0.7))
    model = http_model(server, wire, timeout_s=1.2, retries=0, clock=SystemClock())
    answer = using(model, lambda m: m.call(ask()))
    assert answer.text == "late but fine"


@pytest.mark.parametrize("wire", WIRES)
def test_a_call_past_timeout_s_fails_near_it(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(text="too late", delay_s=0.7))
    model = http_model(server, wire, timeout_s=0.3, retries=0, clock=SystemClock())
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        using(model, lambda m: m.call(ask()))
    elapsed = time.monotonic() - started
    assert caught.value.code is ModelErrorCode.TIMEOUT
    assert 0.25 <= elapsed < 0.6
    assert caught.value.message.endswith("within timeout_s (0.3 s)")  # all of it was the attempt's


def test_timeout_s_bounds_every_attempt_together(server: FakeProviderServer) -> None:
    """Retries do not stretch the call: five slow failures stop at timeout_s, not at 5 x 0.4 s."""
    server.reset(FakeReply(status=500, retry_after="0", delay_s=0.4))
    model = http_model(server, "openai", timeout_s=1.0, retries=5, clock=SystemClock())
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        using(model, lambda m: m.call(ask()))
    elapsed = time.monotonic() - started
    assert elapsed < 1.4
    assert caught.value.code is ModelErrorCode.TIMEOUT
    assert len(server.requests) <= 3


LATE_PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: late-model
models:
  slow: {{adapter: {wire}, base_url: "{base_url}", model: slow-model, timeout_s: {timeout_s}}}
seeds:
  - {{id: topic, content: tea}}
suggestors:
  - name: ask
    kind: llm
    model: slow
    dependencies: [seeds]
    target: hypotheses
    prompt: {{user: "Say something about tea."}}
    output: {{format: text, id: answer}}
"""


def run_late(tmp_path: Path, wire: str, timeout_s: int) -> tuple[int, Any, LateServer, float]:
    """`converge-dsl run --format json` of an llm suggestor whose model answers after a
    literal 70 s, in virtual time: its exit code, its result, the server, the time skipped."""
    server = LateServer(70, "Tea is a drink.")
    base_url = f"{server.url}/v1" if wire == "openai" else server.url
    pipeline = tmp_path / "late.yaml"
    pipeline.write_text(
        LATE_PIPELINE.format(wire=wire, base_url=base_url, timeout_s=timeout_s), encoding="utf-8"
    )
    out, err = io.StringIO(), io.StringIO()
    with virtual_time(server.attach) as clock:
        code = run(["run", str(pipeline), "--format", "json"], out, err)
    assert out.getvalue(), err.getvalue()
    return code, json.loads(out.getvalue()), server, clock.skipped


@pytest.mark.parametrize("wire", WIRES)
def test_an_answer_after_70_s_within_timeout_s_120_succeeds(tmp_path: Path, wire: str) -> None:
    """No default smaller than timeout_s (a read timeout of 60 s was one) cuts the wait."""
    code, result, server, skipped = run_late(tmp_path, wire, 120)
    assert (code, result["stop_reason"], result["diagnostics"]) == (0, "converged", [])
    (fact,) = result["facts"]["hypotheses"]
    assert fact["content"] == "Tea is a drink."
    (arrived,), (answered,) = server.arrived, server.answered
    assert abs(answered - arrived - 70) < 0.5
    assert server.hung_up == []
    assert skipped > 69  # the 70 s passed in virtual time


@pytest.mark.parametrize("wire", WIRES)
def test_an_answer_after_70_s_past_timeout_s_30_fails_at_30_s(tmp_path: Path, wire: str) -> None:
    code, result, server, skipped = run_late(tmp_path, wire, 30)
    assert (code, result["stop_reason"]) == (1, "error")
    (diagnostic,) = result["diagnostics"]
    assert diagnostic["code"] == "CD911"
    assert "timeout_s (30 s)" in diagnostic["message"], diagnostic
    last = diagnostic["message"].split("last error: ")[1]
    assert last.startswith("E_TIMEOUT: no complete answer from"), last
    assert last.endswith("within timeout_s (30 s) (suggestor 'ask', cycle 1)"), last
    (arrived,), (hung_up,) = server.arrived, server.hung_up
    assert abs(hung_up - arrived - 30) < 0.5  # the client gave up at 30 s, and did not retry
    assert server.answered == []
    assert 29 < skipped < 69


def test_a_timeout_names_timeout_s_and_what_it_left_a_later_attempt() -> None:
    limits = ClientLimits("http://127.0.0.1:1", 30, 10, 30, 1)
    client = ProviderClient(limits, lambda text: text)
    first = client._failure(TimeoutError(), "m", started=False, total=29.9999)
    assert first.message == "no complete answer from m within timeout_s (30 s)"
    later = client._failure(TimeoutError(), "m", started=True, total=12.5)
    assert later.message.endswith("within the 12.5 s that timeout_s (30 s) left it")
