"""`converge-dsl run` exporting OpenTelemetry traces, end to end.

One test runs the command as a subprocess against a real OTLP/HTTP receiver
on 127.0.0.1 that this test starts. No OpenTelemetry Collector can be
installed here from the package registries (Debian has none; npm and PyPI
have no maintained package of it: the one PyPI wheel that bundles a
collector binary is an unattributed example), so the receiver is a small
HTTP server that decodes each `ExportTraceServiceRequest` with
`opentelemetry-proto`, the OpenTelemetry project's own protobuf bindings, and
answers as a collector does. The other tests run the command in process:
`--otel` without the SDK (exit 3, CD980), a collector that is down (a warning,
exit 0, a bounded wait), `--otel` refused for a batch.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from converge_dsl import __version__
from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "pipelines" / "agent-review.yaml"
TRIAGE = ROOT / "pipelines" / "support-triage.yaml"


class _Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP traces receiver: keeps every span it is sent, decoded."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[dict[str, Any]] = []
        self.requests: list[dict[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.requests.append({"path": self.path, **dict(self.headers.items())})
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    decoded = MessageToDict(span)
                    decoded["resource"] = resource
                    decoded["scope"] = scope_spans.scope.name
                    self.server.spans.append(decoded)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    pytest.importorskip("opentelemetry.proto", reason="opentelemetry-proto (the otel extra)")
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _attributes(span: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in span.get("attributes", []):
        value = item["value"]
        (kind,) = value
        values[item["key"]] = int(value[kind]) if kind == "intValue" else value[kind]
    return values


def test_a_run_sends_its_spans_to_a_real_otlp_receiver(receiver: _Receiver) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (the otel extra)")
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_EXPORTER_OTLP_HEADERS": "x-team=ml%20ops",
        "OTEL_SERVICE_NAME": "otel-e2e",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=ci",
    }
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", "run", str(AGENT), "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stop_reason"] == "converged"
    assert "warning" not in done.stderr
    assert {r["path"] for r in receiver.requests} == {"/v1/traces"}
    assert all(r.get("x-team") == "ml ops" for r in receiver.requests)

    spans = receiver.spans
    by_id = {span["spanId"]: span for span in spans}
    names = [span["name"] for span in spans]
    assert names.count("run agent-review") == 1
    assert names.count("invoke_agent reviewer") == 1
    assert {span["resource"]["service.name"] for span in spans} == {"otel-e2e"}
    assert {span["resource"]["service.version"] for span in spans} == {__version__}
    assert {span["resource"]["deployment.environment"] for span in spans} == {"ci"}
    assert {span["scope"] for span in spans} == {"converge_dsl"}
    assert len({span["traceId"] for span in spans}) == 1

    def parent(span: dict[str, Any]) -> str:
        return str(by_id[span["parentSpanId"]]["name"])

    calls = [span for span in spans if span["name"].startswith("chat ")]
    assert len(calls) >= 5
    for call in calls:
        attributes = _attributes(call)
        assert call["kind"] == "SPAN_KIND_CLIENT"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "scripted"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert "gen_ai.input.messages" not in attributes
        assert parent(call).startswith("turn ")
        assert parent(by_id[call["parentSpanId"]]) == "invoke_agent reviewer"
    assert parent(by_id[calls[0]["parentSpanId"]]) == "invoke_agent reviewer"
    (agent,) = [span for span in spans if span["name"] == "invoke_agent reviewer"]
    assert parent(agent) == "cycle 1"
    assert parent(by_id[agent["parentSpanId"]]) == "run agent-review"
    # Times are the run's own: nanoseconds since the epoch, now-ish, ends after starts.
    for span in spans:
        assert abs(int(span["startTimeUnixNano"]) / 1e9 - time.time()) < 600
        assert int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"])


def _cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(args, out, err)
    return code, out.getvalue(), err.getvalue()


def test_otel_without_the_sdk_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # As when the extra is not installed: importing the SDK's module fails.
    monkeypatch.setitem(sys.modules, "converge_dsl.runtime._otel", None)
    code, out, err = _cli(["run", str(TRIAGE), "--otel"])
    assert code == 3
    assert out == ""
    assert "error[CD980]: OpenTelemetry: --otel needs the OpenTelemetry SDK" in err
    assert "pip install 'converge-dsl[otel]'" in err
    assert "Traceback" not in err


def test_otel_variables_without_the_sdk_only_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "converge_dsl.runtime._otel", None)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    code, out, err = _cli(["run", str(TRIAGE), "--format", "json"])
    assert code == 0
    assert json.loads(out)["stop_reason"] == "converged"
    assert "warning[CD980]" in err
    assert "no span is exported" in err


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_collector_that_is_down_costs_a_warning_not_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (the otel extra)")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    started = time.monotonic()
    code, out, err = _cli(["run", str(TRIAGE), "--format", "json"])
    elapsed = time.monotonic() - started
    assert code == 0
    assert json.loads(out)["stop_reason"] == "converged"
    assert "warning[CD982]: OpenTelemetry: " in err
    assert "Connection refused" in err
    assert "the run itself is not affected" in err
    assert elapsed < 5.0  # the exporter gives up waiting one second after it first fails


def test_a_bad_otel_variable_stops_the_run_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    code, _, err = _cli(["run", str(TRIAGE), "--otel"])
    assert code == 3
    assert "[CD981]" in err
    assert "cycle 1" not in err


def test_sdk_disabled_turns_otel_off_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    code, _, err = _cli(["run", str(TRIAGE), "--otel"])
    assert code == 0
    assert "OTEL_SDK_DISABLED=true: --otel is ignored" in err


def test_otel_under_cases_without_the_sdk_is_refused_before_any_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under --cases, --otel exports each case (tests/batch/test_outputs_under_cases.py);
    without the SDK it is refused once, before any case runs."""
    monkeypatch.setitem(sys.modules, "converge_dsl.runtime._otel", None)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("{}\n", encoding="utf-8")
    out = tmp_path / "o.jsonl"
    code, _, err = _cli(["run", str(TRIAGE), "--cases", str(cases), "--out", str(out), "--otel"])
    assert code == 3
    assert "error[CD980]: OpenTelemetry: --otel needs the OpenTelemetry SDK" in err
    assert not out.exists()


def test_a_run_without_otel_never_imports_opentelemetry(tmp_path: Path) -> None:
    probe = (
        "import io, sys\n"
        "from converge_dsl.cli import run\n"
        f"code = run(['run', {str(TRIAGE)!r}, '--format', 'json'], io.StringIO(), io.StringIO())\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "print(code, loaded)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False
    )
    assert done.stdout.strip() == "0 []", done.stderr
    # The probe can see an import: the same run with --otel loads the SDK.
    done = subprocess.run(
        [sys.executable, "-c", probe.replace("'json']", "'json', '--otel']")],
        env={**env, "OTEL_TRACES_EXPORTER": "console"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.startswith("0 ['opentelemetry"), done.stderr


def test_otel_content_alone_says_that_nothing_is_exported() -> None:
    code, _, err = _cli(["run", str(TRIAGE), "--otel-content"])
    assert code == 3
    assert "--otel-content records prompts and answers in exported spans" in err
    assert "add --otel, or set OTEL_EXPORTER_OTLP_ENDPOINT" in err


def test_a_collector_that_never_answers_holds_the_run_no_longer_than_its_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (the otel extra)")
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
        started = time.monotonic()
        code, out, err = _cli(["run", str(TRIAGE), "--format", "json"])
        elapsed = time.monotonic() - started
    assert code == 0
    assert json.loads(out)["stop_reason"] == "converged"
    assert f"could not be sent to 'http://127.0.0.1:{port}/v1/traces'" in err
    assert elapsed < 4.0  # the run, then one second of waiting at most


def test_a_refused_setting_keeps_its_code_in_the_json_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")
    code, out, err = _cli(["run", str(TRIAGE), "--otel", "--format", "json"])
    assert code == 3
    (diagnostic,) = json.loads(out)["diagnostics"]
    assert diagnostic["code"] == "CD981"
    assert diagnostic["message"].startswith("OpenTelemetry: OTEL_EXPORTER_OTLP_TIMEOUT=")
    assert "error[CD981]: OpenTelemetry: " in err


class _Flooding(BaseHTTPRequestHandler):
    """A hostile collector: answers every export with a body of 1.5 GiB, streamed."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(3 << 29))
        self.end_headers()
        chunk = b"\0" * (1 << 16)  # the same 64 KiB again and again: the test holds no more
        try:
            for _ in range((3 << 29) // len(chunk)):
                self.wfile.write(chunk)
        except OSError:
            return  # the exporter hung up: what it should do past its cap

    def log_message(self, format: str, *args: Any) -> None:
        return


class _Plain(BaseHTTPRequestHandler):
    """A well-behaved collector: an empty answer to every export."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


def _export_to(handler: type[BaseHTTPRequestHandler]) -> tuple[int, int, str]:
    """Run the triage example exporting to a loopback collector; (exit, peak RSS KiB, stderr)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    probe = (
        "import io, resource, sys\n"
        "from converge_dsl.cli import run\n"
        "err = io.StringIO()\n"
        f"code = run(['run', {str(TRIAGE)!r}, '--otel'], io.StringIO(), err)\n"
        "print(code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
        "print(err.getvalue())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    finally:
        server.shutdown()
        server.server_close()
    first, _, err = done.stdout.partition("\n")
    code, peak_kib = (int(word) for word in first.split())
    return code, peak_kib, err or done.stderr


def test_a_collector_answering_a_huge_body_costs_its_cap_not_the_body() -> None:
    """Measured against the same run exporting to a plain collector, in the same test."""
    pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (the otel extra)")
    code, baseline_kib, _ = _export_to(_Plain)
    assert code == 0
    code, peak_kib, err = _export_to(_Flooding)
    assert code == 0, err
    assert peak_kib - baseline_kib < 64 * 1024, f"peak RSS {peak_kib} KiB, {baseline_kib} plain"
    assert "warning[CD982]" in err
    assert "over 1048576 bytes" in err
