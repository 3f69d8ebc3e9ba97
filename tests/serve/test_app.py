"""The HTTP API end to end: a real server on 127.0.0.1, driven by httpx and by curl."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate

from .conftest import DATA, ROOT, Server, serve_with_token

EXPECTED = Path(__file__).parent / "expected"
TOKEN = "c0ffee5e7b1d4a9f8e2c6b3a1d0f9e8c"
MARKET = ROOT / "pipelines" / "market-entry.yaml"


@pytest.fixture
def served(tmp_path: Path, servers: list[Server]) -> tuple[str, dict[str, str]]:
    server = serve_with_token(tmp_path, servers, [DATA, MARKET], TOKEN)
    return server.ready(), {"Authorization": f"Bearer {TOKEN}"}


def client(url: str, headers: dict[str, str]) -> httpx.Client:
    return httpx.Client(base_url=url, headers=headers, timeout=30)


def test_start_and_wait_answers_the_run_result(served: tuple[str, dict[str, str]]) -> None:
    url, headers = served
    with client(url, headers) as http:
        answer = http.post("/v1/pipelines/echo/runs?wait=true", json={"inputs": {"text": "hi"}})
    assert answer.status_code == 200
    run = answer.json()
    assert run["status"] == "done"
    assert run["stop_reason"] == "converged"
    assert run["result"]["facts"]["echoes"][0]["data"] == {"text": "hi"}
    assert run["result"]["facts"]["notes"][0]["content"] == "noted"


def test_start_without_wait_is_202_then_get(served: tuple[str, dict[str, str]]) -> None:
    url, headers = served
    with client(url, headers) as http:
        answer = http.post("/v1/pipelines/market-entry/runs", json={"inputs": {"market": "M"}})
        assert answer.status_code == 202
        run = answer.json()
        assert answer.headers["location"] == f"/v1/runs/{run['id']}"
        deadline = time.monotonic() + 20
        while run["status"] not in ("done", "cancelled") and time.monotonic() < deadline:
            time.sleep(0.05)
            run = http.get(f"/v1/runs/{run['id']}").json()
    assert run["stop_reason"] == "converged"
    assert "Target market: M" in json.dumps(run["result"]["facts"])


def test_events_stream_and_resume_with_last_event_id(
    served: tuple[str, dict[str, str]],
) -> None:
    url, headers = served
    with client(url, headers) as http:
        run = http.post("/v1/pipelines/echo/runs", json={"inputs": {"text": "a"}}).json()
        with http.stream("GET", f"/v1/runs/{run['id']}/events") as stream:
            text = "".join(stream.iter_text())
        blocks = [b for b in text.split("\n\n") if b.strip()]
        ids = [int(b.split("\n")[0][4:]) for b in blocks if b.startswith("id: ")]
        assert ids == list(range(len(ids)))
        first = json.loads(blocks[0].split("data: ", 1)[1])
        assert first["type"] == "run_started"
        assert blocks[-1].startswith("event: end")
        assert json.loads(blocks[-1].split("data: ", 1)[1]) == {
            "status": "done",
            "stop_reason": "converged",
        }
        again = http.get(
            f"/v1/runs/{run['id']}/events", headers={"Last-Event-ID": str(ids[-3])}
        ).text
    resumed = [b for b in again.split("\n\n") if b.startswith("id: ")]
    assert [int(b.split("\n")[0][4:]) for b in resumed] == ids[-2:]


def test_a_last_event_id_past_the_runs_events_is_a_400_whatever_its_status(
    served: tuple[str, dict[str, str]],
) -> None:
    """A number past every event a run has been given cannot come from its stream: 400
    (CD462) for a finished run, a paused one and one running (whose next events may
    still come); the number of its last event resumes after it."""
    url, headers = served
    with client(url, headers) as http:

        def resumed(run: str, last: int) -> httpx.Response:
            headers = {"Last-Event-ID": str(last)}
            return http.get(f"/v1/runs/{run}/events", headers=headers)

        def refused(run: str, last: int, held: str) -> None:
            answer = resumed(run, last)
            assert answer.status_code == 400, answer.text
            (problem,) = answer.json()["errors"]
            assert problem["code"] == "CD462"
            assert problem["message"] == (
                f"Last-Event-ID {last} is past the numbers run {run!r} has given its events "
                f"({held})"
            )
            assert "no Last-Event-ID" in problem["hint"]

        done = http.post("/v1/pipelines/echo/runs?wait=true", json={"inputs": {"text": "a"}})
        paused = http.post("/v1/pipelines/gated/runs?wait=true")
        for run in (done.json()["id"], paused.json()["id"]):
            ids = [int(line[4:]) for line in resumed(run, 0).text.split("\n") if "id: " in line]
            last = ids[-1]
            assert resumed(run, last).text.startswith("event: end\n")
            refused(run, last + 1, f"all below {last + 1}")
        running = http.post("/v1/pipelines/slow/runs").json()["id"]
        with http.stream("GET", f"/v1/runs/{running}/events") as stream:
            for line in stream.iter_lines():
                if line.startswith("id: "):
                    seen = int(line[4:])
                if '"type":"model_call_started"' in line:  # its model call takes 3 s
                    break
            refused(running, seen + 1, f"all below {seen + 1}")
        assert resumed(running, seen).text.startswith(f"id: {seen + 1}\n")


def test_report_is_the_html_report_of_the_run(served: tuple[str, dict[str, str]]) -> None:
    url, headers = served
    with client(url, headers) as http:
        run = http.post("/v1/pipelines/echo/runs?wait=true", json={"inputs": {"text": "r"}})
        page = http.get(f"/v1/runs/{run.json()['id']}/report")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "converge-dsl run report" in page.text
    assert "echo" in page.text


def test_a_head_of_the_report_does_not_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HEAD answers the GET's status and content type without building the page (it
    built the whole report to send none of it), and no Content-Length, which only the
    built page has; a run without events is the GET's 404."""
    from converge_dsl.serve import _app
    from converge_dsl.serve._app import HttpLimits

    from .conftest import in_process

    built: list[int] = []
    render = _app._render

    def counted(lines: list[str]) -> str:
        built.append(len(lines))
        return render(lines)

    monkeypatch.setattr(_app, "_render", counted)
    with in_process(tmp_path / "state", HttpLimits()) as url, httpx.Client(base_url=url) as c:
        run = c.post("/v1/pipelines/echo/runs?wait=true", json={"inputs": {"text": "a"}})
        path = f"/v1/runs/{run.json()['id']}/report"
        head = c.head(path)
        assert (head.status_code, built) == (200, [])
        assert head.headers["content-type"] == "text/html; charset=utf-8"
        assert "content-length" not in head.headers
        assert "transfer-encoding" not in head.headers
        page = c.get(path)
        assert len(built) == 1
        assert int(page.headers["content-length"]) == len(page.content)
        missing = c.head("/v1/runs/0123456789abcdef0123456789abcdef/report")
        assert missing.status_code == 404


def test_a_head_of_the_report_of_a_run_with_no_event_yet_is_the_gets_404(
    served: tuple[str, dict[str, str]],
) -> None:
    """A known run that has no event yet (queued behind a running one, one worker): HEAD
    is the GET's 404 'has no events yet' (the unknown run's 404 comes from the id check,
    before the report's own branch)."""
    url, headers = served
    with client(url, headers) as http:
        running = http.post("/v1/pipelines/slow/runs").json()["id"]
        queued = http.post("/v1/pipelines/slow/runs").json()["id"]
        assert http.get(f"/v1/runs/{queued}").json()["status"] == "queued"
        head = http.head(f"/v1/runs/{queued}/report")
        get = http.get(f"/v1/runs/{queued}/report")
        assert (head.status_code, get.status_code) == (404, 404)
        assert get.json()["errors"][0]["message"] == f"run {queued!r} has no events yet"
        for run in (running, queued):
            http.delete(f"/v1/runs/{run}")


def test_cancel_a_running_run(served: tuple[str, dict[str, str]]) -> None:
    url, headers = served
    with client(url, headers) as http:
        run = http.post("/v1/pipelines/slow/runs").json()
        deadline = time.monotonic() + 10
        while http.get(f"/v1/runs/{run['id']}").json()["status"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        cancelled = http.delete(f"/v1/runs/{run['id']}")
        state = http.get(f"/v1/runs/{run['id']}").json()
    assert cancelled.status_code == 200
    assert cancelled.json() == state
    assert state["status"] == "cancelled"
    assert "result" not in state


def test_a_cancel_racing_the_runs_end_answers_which_came_first(
    served: tuple[str, dict[str, str]],
) -> None:
    """DELETE of a run that is running answers the run once its task stopped: cancelled,
    or done when its end came first; it answered `running` at once, and the client
    could not tell whether the cancel took. A run that pauses is cancelled however the
    DELETE falls (`test_a_cancel_reaching_a_run_as_it_pauses_cancels_it`)."""
    url, headers = served
    with client(url, headers) as http:
        for n in range(40):
            pipeline = ("echo", "gated")[n % 2]
            inputs = {"text": "a"} if pipeline == "echo" else {}
            run = http.post(f"/v1/pipelines/{pipeline}/runs", json={"inputs": inputs}).json()
            time.sleep(0.002 * (n % 10))  # some cancelled running, some once done or paused
            answer = http.delete(f"/v1/runs/{run['id']}").json()
            ends = ("cancelled", "done") if pipeline == "echo" else ("cancelled",)
            assert answer["status"] in ends, answer
            assert answer == http.get(f"/v1/runs/{run['id']}").json()


def test_pause_decision_resume(served: tuple[str, dict[str, str]]) -> None:
    url, headers = served
    with client(url, headers) as http:
        paused = http.post("/v1/pipelines/gated/runs?wait=true").json()
        assert paused["status"] == "paused"
        assert [p["id"] for p in paused["result"]["pending"]] == ["s1", "s2"]
        ident = paused["id"]
        unknown = http.post(f"/v1/runs/{ident}/decisions", json={"approve": ["s3"]})
        assert unknown.status_code == 422
        assert unknown.json()["errors"][0]["hint"] == "pending: s1, s2"
        half = http.post(f"/v1/runs/{ident}/decisions", json={"approve": ["s1"]})
        assert half.status_code == 200
        # queued again: the pause's result and stop reason are not shown beside `queued`
        assert half.json() == {
            "id": ident,
            "pipeline": "gated",
            "status": "queued",
            "stop_reason": None,
            "attempts": 1,
        }
        deadline = time.monotonic() + 20
        while (run := http.get(f"/v1/runs/{ident}").json())["status"] != "paused":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert [p["id"] for p in run["result"]["pending"]] == ["s2"]  # one still undecided
        http.post(f"/v1/runs/{ident}/decisions", json={"reject": ["s2"]})
        while (run := http.get(f"/v1/runs/{ident}").json())["status"] != "done":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        events = http.get(f"/v1/runs/{ident}/events").text
    facts = run["result"]["facts"]
    assert [f["id"] for f in facts["strategies"]] == ["s1"]
    assert [f["id"] for f in facts["evaluations"]] == ["e-1"]
    decided = [
        json.loads(b.split("data: ", 1)[1])
        for b in events.split("\n\n")
        if '"proposal_decided"' in b
    ]
    assert [(d["id"], d["decision"], d["by"]) for d in decided] == [
        ("s1", "approved", "http"),
        ("s2", "rejected", "http"),
    ]


def test_cancel_a_paused_run(served: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    url, headers = served
    with client(url, headers) as http:
        paused = http.post("/v1/pipelines/gated/runs?wait=true").json()
        assert paused["id"] in _journals(tmp_path / "state")
        cancelled = http.delete(f"/v1/runs/{paused['id']}").json()
        late = http.post(f"/v1/runs/{paused['id']}/decisions", json={"approve": ["s1"]})
    assert cancelled["status"] == "cancelled"
    assert "result" not in cancelled  # a cancelled run has none: the pause's was kept
    assert late.status_code == 409
    assert late.json()["errors"][0]["message"].endswith("is cancelled, not paused for a decision")
    assert paused["id"] not in _journals(tmp_path / "state")  # removed with the cancel


def _journals(state: Path) -> set[str]:
    """The run ids with a checkpoint journal in the service's database."""
    with contextlib.closing(sqlite3.connect(state / "runs.sqlite3")) as db:
        return {run for (run,) in db.execute("SELECT DISTINCT run FROM checkpoint_records")}


def _expected(name: str, body: Any) -> None:
    path = EXPECTED / name
    text = json.dumps(body, indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_EXPECTED") == "1":  # rewrites it: read the diff
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_a_secret_sent_as_an_input_name_is_masked_in_the_error_pointer_too(
    served: tuple[str, dict[str, str]],
) -> None:
    url, headers = served
    with client(url, headers) as http:
        answer = http.post("/v1/pipelines/echo/runs", json={"inputs": {"text": "x", TOKEN: 1}})
    assert answer.status_code == 422
    (problem,) = answer.json()["errors"]
    assert problem["pointer"].startswith("/inputs/")
    assert TOKEN not in answer.text


def test_bad_inputs_are_located_json_errors(served: tuple[str, dict[str, str]]) -> None:
    url, headers = served
    with client(url, headers) as http:
        answers = {
            "unknown_and_missing": http.post(
                "/v1/pipelines/echo/runs", json={"inputs": {"txet": "x"}}
            ),
            "budget_raised": http.post(
                "/v1/pipelines/echo/runs",
                json={"inputs": {"text": "x"}, "budget": {"max_cycles": 11, "max_tokens": -1}},
            ),
            "not_json": http.post("/v1/pipelines/echo/runs", content=b"{nope"),
            "not_an_object": http.post("/v1/pipelines/echo/runs", json=[1]),
            "no_pipeline": http.post("/v1/pipelines/ecko/runs", json={}),
        }
    statuses = {name: answer.status_code for name, answer in answers.items()}
    assert statuses == {
        "unknown_and_missing": 422,
        "budget_raised": 422,
        "not_json": 400,
        "not_an_object": 422,
        "no_pipeline": 404,
    }
    _expected("bad_inputs.json", {name: answer.json() for name, answer in answers.items()})


def test_a_lowered_budget_is_the_runs(served: tuple[str, dict[str, str]]) -> None:
    url, headers = served
    with client(url, headers) as http:
        run = http.post(
            "/v1/pipelines/echo/runs?wait=true",
            json={"inputs": {"text": "x"}, "budget": {"max_model_calls": 0.5}},
        )
        assert run.status_code == 422
        run = http.post(
            "/v1/pipelines/market-entry/runs?wait=true", json={"budget": {"max_cycles": 1}}
        ).json()
    assert run["stop_reason"] == "cycle_budget_exhausted"


def test_missing_or_wrong_token_is_401(served: tuple[str, dict[str, str]]) -> None:
    url, _ = served
    with httpx.Client(base_url=url, timeout=10) as http:
        missing = http.post("/v1/pipelines/echo/runs", json={"inputs": {"text": "x"}})
        wrong = http.get("/v1/pipelines", headers={"Authorization": "Bearer not-the-token"})
        health = http.get("/healthz")
    assert missing.status_code == wrong.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["errors"][0]["code"] == "CD987"
    assert TOKEN not in missing.text
    assert health.status_code == 200


def test_a_full_queue_is_429_with_retry_after(served: tuple[str, dict[str, str]]) -> None:
    url, headers = served
    with client(url, headers) as http:
        runs = [http.post("/v1/pipelines/slow/runs") for _ in range(4)]
        statuses = [r.status_code for r in runs]
        for answer in runs:
            if answer.status_code == 202:
                http.delete(f"/v1/runs/{answer.json()['id']}")
        metrics = http.get("/metrics").text
    # one worker takes the first; the queue holds two; the fourth is refused
    assert statuses == [202, 202, 202, 429]
    assert runs[3].headers["retry-after"] == "1"
    assert runs[3].json()["errors"][0]["code"] == "CD988"
    assert 'converge_rejected_total{pipeline="slow"} 1' in metrics


def test_body_over_the_cap_is_413(tmp_path: Path, servers: list[Server]) -> None:
    server = Server([DATA / "echo.yaml"], tmp_path / "state", "--body-cap", "100")
    servers.append(server)
    url = server.ready()
    big = {"inputs": {"text": "x" * 200}}
    answer = httpx.post(f"{url}/v1/pipelines/echo/runs", json=big, timeout=10)
    assert answer.status_code == 413
    assert answer.json()["errors"][0]["code"] == "CD989"


def test_pipelines_metrics_and_unknown_run(served: tuple[str, dict[str, str]]) -> None:
    url, headers = served
    with client(url, headers) as http:
        http.post("/v1/pipelines/echo/runs?wait=true", json={"inputs": {"text": "m"}})
        listed = http.get("/v1/pipelines").json()["pipelines"]
        metrics = http.get("/metrics").text
        served_spec = http.get("/v1/openapi.json").json()
        missing = http.get("/v1/runs/" + "0" * 32)
        odd = http.get("/v1/runs/..%2F..%2Fetc")
    assert sorted(listed) == ["echo", "gated", "market-entry", "slow", "steady"]
    assert listed["echo"]["inputs"]["required"] == ["text"]
    assert 'converge_runs{pipeline="echo",status="done",stop_reason="converged"}' in metrics
    assert 'converge_model_calls_total{pipeline="echo"}' in metrics
    assert "converge_request_latency_seconds_count" in metrics
    assert missing.status_code == odd.status_code == 404
    validate(served_spec)
    assert sorted(p for p in served_spec["paths"] if p.startswith("/v1/pipelines/")) == [
        f"/v1/pipelines/{name}/runs" for name in ["echo", "gated", "market-entry", "slow", "steady"]
    ]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_session(served: tuple[str, dict[str, str]]) -> None:
    url, headers = served

    def curl(*args: str) -> str:
        done = subprocess.run(
            [
                "curl",
                "-sS",
                "--max-time",
                "30",
                "-H",
                f"Authorization: {headers['Authorization']}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout

    run = json.loads(
        curl(
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-d",
            '{"inputs": {"text": "from curl"}}',
            f"{url}/v1/pipelines/echo/runs?wait=true",
        )
    )
    assert run["result"]["facts"]["echoes"][0]["content"] == "echo: from curl"
    stream = curl("-N", f"{url}/v1/runs/{run['id']}/events")
    assert stream.rstrip().endswith('{"status": "done", "stop_reason": "converged"}')
    assert curl(f"{url}/v1/runs/{run['id']}/report").startswith("<!DOCTYPE html>")


def test_an_invalid_pipeline_stops_the_server(tmp_path: Path, servers: list[Server]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((DATA / "echo.yaml").read_text().replace("kind: rule", "kind: rulez"))
    server = Server([bad, DATA / "gated.yaml"], tmp_path / "state")
    servers.append(server)
    assert server.exit_code() == 2
    text = "".join(server.stderr)
    assert "error[CD" in text
    assert "bad.yaml:" in text
    assert "^" in text
    assert " on http://" not in text


def test_serving_beyond_loopback_needs_tokens(tmp_path: Path, servers: list[Server]) -> None:
    server = Server([DATA / "echo.yaml"], tmp_path / "state", "--host", "0.0.0.0")
    servers.append(server)
    assert server.exit_code() == 3
    assert "CD992" in "".join(server.stderr)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_it_with_exit_0(
    tmp_path: Path, servers: list[Server], sig: signal.Signals
) -> None:
    server = Server([DATA / "echo.yaml"], tmp_path / "state")
    servers.append(server)
    url = server.ready()
    assert httpx.get(f"{url}/healthz", timeout=10).json() == {"status": "ok", "pipelines": 1}
    server.process.send_signal(sig)
    assert server.exit_code() == 0
    assert "".join(server.stderr).count("\n") == 1  # the serving line, nothing else


def test_a_retried_post_with_its_idempotency_key_answers_the_first_run(
    served: tuple[str, dict[str, str]],
) -> None:
    url, headers = served
    body = {"inputs": {"text": "once"}}
    with client(url, {**headers, "Idempotency-Key": "order-17"}) as http:
        first = http.post("/v1/pipelines/echo/runs?wait=true", json=body)
        again = http.post("/v1/pipelines/echo/runs?wait=true", content=json.dumps(body, indent=1))
        other = http.post("/v1/pipelines/echo/runs", json={"inputs": {"text": "twice"}})
        elsewhere = http.post("/v1/pipelines/steady/runs", json={"inputs": {"number": 1}})
    with client(url, headers) as http:
        fresh = http.post("/v1/pipelines/echo/runs?wait=true", json=body)
        bad = http.post(
            "/v1/pipelines/echo/runs", json=body, headers={"Idempotency-Key": "x" * 256}
        )
    assert first.status_code == again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["result"] == first.json()["result"]
    assert fresh.json()["id"] != first.json()["id"]  # no key: a new run
    assert other.status_code == elsewhere.status_code == 409
    assert bad.status_code == 400
    _expected(
        "idempotency.json",
        {"other body": other.json(), "other pipeline": elsewhere.json(), "bad key": bad.json()},
    )


def test_retention_deletes_old_finished_runs_and_keeps_paused_ones(tmp_path: Path) -> None:
    server = Server([DATA], tmp_path / "state", "--keep-runs", "2", "--retention-interval", "0.1")
    try:
        url = server.ready()
        with client(url, {}) as http:
            paused = http.post("/v1/pipelines/gated/runs?wait=true").json()
            done = [
                http.post(
                    "/v1/pipelines/echo/runs?wait=true",
                    json={"inputs": {"text": str(n)}},
                    headers={"Idempotency-Key": f"k{n}"},
                ).json()
                for n in range(4)
            ]
            deadline = time.monotonic() + 20
            while http.get(f"/v1/runs/{done[1]['id']}").status_code != 404:
                assert time.monotonic() < deadline, "the retention did not delete the old runs"
                time.sleep(0.05)
            statuses = {run["id"]: http.get(f"/v1/runs/{run['id']}").status_code for run in done}
            events = http.get(f"/v1/runs/{done[0]['id']}/events")
            kept = http.get(f"/v1/runs/{paused['id']}").json()
            reused = http.post(
                "/v1/pipelines/echo/runs",
                json={"inputs": {"text": "new"}},
                headers={"Idempotency-Key": "k0"},
            )
    finally:
        server.stop()
    assert paused["status"] == "paused"
    assert [statuses[run["id"]] for run in done] == [404, 404, 200, 200]
    assert events.status_code == 404
    assert kept["status"] == "paused"  # never deleted, however old
    assert reused.status_code == 202  # the key went with its run
    with contextlib.closing(sqlite3.connect(tmp_path / "state" / "runs.sqlite3")) as db:
        left = {run for (run,) in db.execute("SELECT DISTINCT run FROM events")}
        results = {run for (run,) in db.execute("SELECT run FROM results")}
    assert left.isdisjoint({done[0]["id"], done[1]["id"]})
    assert results.isdisjoint({done[0]["id"], done[1]["id"]})
    assert paused["id"] in _journals(tmp_path / "state")


def test_a_decision_for_a_pipeline_no_longer_served_is_refused_and_the_run_waits(
    tmp_path: Path, servers: list[Server]
) -> None:
    """The state outlives the pipelines a server loads: a run paused under `gated`,
    decided on a server restarted without it, is a 409 and stays paused (not queued
    where no worker takes it); served again, the decision resumes it."""
    state = tmp_path / "state"
    first = Server([DATA / "gated.yaml"], state)
    servers.append(first)
    with client(first.ready(), {}) as http:
        paused = http.post("/v1/pipelines/gated/runs?wait=true").json()
    first.stop()
    assert paused["status"] == "paused"
    ident = paused["id"]
    second = Server([DATA / "echo.yaml"], state)
    servers.append(second)
    with client(second.ready(), {}) as http:
        refused = http.post(f"/v1/runs/{ident}/decisions", json={"approve": ["s1", "s2"]})
        after = http.get(f"/v1/runs/{ident}").json()
    second.stop()
    assert refused.status_code == 409
    [error] = refused.json()["errors"]
    assert error["code"] == "CD991"
    assert error["message"] == (
        f"run {ident!r} is of pipeline 'gated', which this server does not serve"
    )
    assert error["hint"] == (
        "start the server with pipeline 'gated' to decide it; the run stays paused"
    )
    assert after["status"] == "paused"
    third = Server([DATA / "gated.yaml"], state)
    servers.append(third)
    with client(third.ready(), {}) as http:
        decided = http.post(f"/v1/runs/{ident}/decisions", json={"approve": ["s1", "s2"]})
        deadline = time.monotonic() + 20
        while (run := http.get(f"/v1/runs/{ident}").json())["status"] != "done":
            assert time.monotonic() < deadline, "the decided run did not finish"
            time.sleep(0.05)
    assert decided.status_code == 200
    assert run["stop_reason"] == "converged"


@pytest.mark.parametrize(
    ("query", "asked"),
    [
        (b"", False),
        (b"wait=true", True),
        (b"wait=TRUE&x=1", True),
        (b"x=1&wait=1", True),
        (b"wait=yes", True),
        (b"wait=false", False),
        (b"wait=true&wait=1", True),  # given twice, the same answer
        (b"wait=no", False),
        (b"wait=tru%65", True),
        (b"waiting=true", False),
    ],
)
def test_wait_is_read_from_the_query_as_starlette_reads_it(query: bytes, asked: bool) -> None:
    from starlette.requests import Request

    from converge_dsl.serve._app import _wait_asked

    request = Request({"type": "http", "query_string": query, "headers": []})
    assert _wait_asked(request) is asked
    assert (request.query_params.get("wait", "").lower() in ("1", "true", "yes")) is asked


def test_an_odd_wait_or_last_event_id_is_a_400_and_queues_nothing(
    served: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, headers = served
    body = {"inputs": {"text": "hi"}}
    with client(url, headers) as http:
        for query in ("wait=9999", "wait=", "wait", "wait=true&wait=no", "wait=%00"):
            answer = http.post(f"/v1/pipelines/echo/runs?{query}", json=body)
            assert answer.status_code == 400, query
            (problem,) = answer.json()["errors"]
            assert problem["code"] == "CD309"
            assert problem["message"].startswith("?wait= is ")
        run = http.post("/v1/pipelines/echo/runs?wait=true", json=body).json()["id"]
        for value in ("garbage", "-5", "9" * 30, "1e9", "\u0663"):
            answer = http.get(f"/v1/runs/{run}/events", headers={"Last-Event-ID": value.encode()})
            assert answer.status_code == 400, value
            assert answer.json()["errors"][0]["code"] == "CD309"
        events = http.get(f"/v1/runs/{run}/events", headers={"Last-Event-ID": "999999999999"})
        assert events.status_code == 400
        assert events.json()["errors"][0]["code"] == "CD462"
        assert http.get("/healthz").status_code == 200
    with contextlib.closing(sqlite3.connect(tmp_path / "state" / "runs.sqlite3")) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_a_method_no_route_takes_is_a_json_405(served: tuple[str, dict[str, str]]) -> None:
    """Any method a route's path does not take, the API's own methods too (they were a 404
    "no route" for a path that has one), its Allow naming every method of that path
    (Starlette's named those of the first route of it)."""
    url, headers = served
    run = "0123456789abcdef0123456789abcdef"
    asked = [
        ("OPTIONS", "/v1/pipelines", "GET, HEAD"),
        ("TRACE", "/v1/pipelines", "GET, HEAD"),
        ("PUT", "/v1/pipelines", "GET, HEAD"),
        ("DELETE", "/v1/pipelines", "GET, HEAD"),
        ("POST", "/healthz", "GET, HEAD"),
        ("PATCH", f"/v1/runs/{run}", "DELETE, GET, HEAD"),
        ("OPTIONS", f"/v1/runs/{run}", "DELETE, GET, HEAD"),
        ("GET", f"/v1/runs/{run}/decisions", "POST"),
    ]
    with client(url, headers) as http:
        for method, path, allowed in asked:
            answer = http.request(method, path)
            assert answer.status_code == 405, (method, path)
            assert answer.headers["content-type"] == "application/json"
            (problem,) = answer.json()["errors"]
            assert problem["code"] == "CD990"
            assert problem["message"] == f"{method} {path!r}: Method Not Allowed"
            assert answer.headers["allow"] == allowed
            assert problem["hint"] == f"{path} takes {allowed}"
        for method in ("PUT", "OPTIONS", "TRACE", "GET"):  # OPTIONS, TRACE were a 405
            nothing = http.request(method, "/v1/nothing")
            assert nothing.status_code == 404, method
            assert "allow" not in nothing.headers
            (problem,) = nothing.json()["errors"]
            assert (problem["code"], problem["message"]) == ("CD990", "no route '/v1/nothing'")


def test_a_body_of_json_null_is_no_object(served: tuple[str, dict[str, str]]) -> None:
    url, headers = served
    with client(url, headers) as http:
        answer = http.post("/v1/pipelines/market-entry/runs", content=b"null")
        assert answer.status_code == 422
        assert answer.json()["errors"][0]["message"] == "the request body must be a JSON object"
        assert http.post("/v1/pipelines/market-entry/runs", content=b"").status_code == 202


# --- faults outside the handlers: the service's JSON 500 too ------------------------


def _raw(url: str, data: bytes) -> bytes:
    """`data` sent on a new connection; what comes back until the server closes it."""
    import socket

    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(data)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
        return out


def _fault_answer(raw: bytes) -> dict[str, Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 500 "), raw
    assert b"content-type: application/json" in head.lower()
    (problem,) = json.loads(body)["errors"]
    assert problem["code"] == "CD445"
    assert b"secret" not in raw
    assert b"Traceback" not in raw
    return dict(problem)


def test_a_fault_in_the_mcp_endpoint_is_a_json_500_its_traceback_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The MCP endpoint's own code raising (here its message check): CD445 in the
    service's JSON, the traceback in the log only; it was Starlette's plain-text
    'Internal Server Error'."""
    from converge_dsl.serve import _mcp
    from converge_dsl.serve._app import HttpLimits

    from .conftest import in_process

    def broken(message: object) -> None:
        raise RuntimeError("secret internals /srv/state")

    monkeypatch.setattr(_mcp, "checked_message", broken)
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    with in_process(tmp_path / "state", HttpLimits(), mcp=True, log_config=None) as url:
        port = url.rsplit(":", 1)[1]
        request = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n" % (port.encode(), len(body)) + body
        )
        _fault_answer(_raw(url, request))
    assert "RuntimeError: secret internals" in caplog.text
    assert "the service failed on POST /mcp" in caplog.text


def test_an_error_of_ours_in_the_mcp_endpoint_keeps_its_own_code_and_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state failing under a POST of /mcp (here in its message check): a 500 of the
    state's own code and hint, as every HTTP route answers it; it was CD445, 'a fault of
    the service', its hint telling the client to report it."""
    from converge_dsl.serve import _mcp
    from converge_dsl.serve._app import HttpLimits
    from converge_dsl.serve._store import StateError

    from .conftest import in_process

    def broken(message: object) -> None:
        raise StateError("cannot read the state: disk I/O error", hint="free the disk")

    monkeypatch.setattr(_mcp, "checked_message", broken)
    with in_process(tmp_path / "state", HttpLimits(), mcp=True) as url:
        answer = httpx.post(
            f"{url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert answer.status_code == 500
    (problem,) = answer.json()["errors"]
    assert (problem["code"], problem["hint"]) == ("CD993", "free the disk")
    assert problem["message"] == "serve: cannot read the state: disk I/O error"


def test_a_fault_outside_any_handler_is_a_json_500_its_traceback_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A fault past the routes (here in the answer to a method a route does not take):
    CD445 in the service's JSON and the connection closed, the traceback in the log."""
    from converge_dsl.serve._app import HttpLimits, _Api

    from .conftest import in_process

    async def broken(self: object, request: object, exc: Exception) -> None:
        raise RuntimeError("secret internals /srv/state")

    monkeypatch.setattr(_Api, "framework_refusal", broken)
    with in_process(tmp_path / "state", HttpLimits(), log_config=None) as url:
        # kept alive by the client: the server closes it after the fault
        _fault_answer(_raw(url, b"OPTIONS /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert "RuntimeError: secret internals" in caplog.text


def test_an_error_of_the_service_on_a_request_is_a_500_with_its_own_code_and_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state failing under a request: a 500 naming the state's own code, message and
    hint; it read `CD996` with `[CD993] serve: ...` as its message, the hint in it."""
    import httpx

    from converge_dsl.serve._app import HttpLimits
    from converge_dsl.serve._service import RunService
    from converge_dsl.serve._store import StateError

    from .conftest import in_process

    def broken(self: object, *args: object, **kwargs: object) -> None:
        raise StateError("cannot write the state: disk I/O error", hint="free the disk")

    monkeypatch.setattr(RunService, "submit", broken)
    with in_process(tmp_path / "state", HttpLimits()) as url:
        answer = httpx.post(f"{url}/v1/pipelines/echo/runs", json={"inputs": {"text": "a"}})
    assert answer.status_code == 500
    (problem,) = answer.json()["errors"]
    assert (problem["code"], problem["hint"]) == ("CD993", "free the disk")
    assert problem["message"] == "serve: cannot write the state: disk I/O error"
    assert problem["text"].startswith("error[CD993]: serve: cannot write the state: disk I/O")


@pytest.mark.parametrize(
    ("fault", "answer"),
    [
        (RuntimeError("secret internals /srv/state"), ("CD445", "try again; ")),
        ("state", ("CD993", "free the disk")),
    ],
)
def test_a_fault_after_an_event_stream_began_ends_it_with_an_error_event(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fault: Exception | str,
    answer: tuple[str, str],
) -> None:
    """The state failing once a run's events are being sent: the events sent, then an
    `error` event with the errors a request's fault is answered with, and the stream
    ends; the connection was cut with no word of why (an EventSource reconnects). The
    event sets a long reconnection time (`retry:`): an EventSource its page does not
    close came back into the same fault after the browser's default of about 3 s."""
    from converge_dsl.serve._app import HttpLimits
    from converge_dsl.serve._store import RunStore, StateError

    from .conftest import in_process

    stored = RunStore.events
    error = StateError("cannot read the state: disk I/O error", hint="free the disk")

    def failing(self: RunStore, run: str, after: int = -1) -> Any:
        for seq, line in stored(self, run, after):
            if seq == 2:
                raise error if fault == "state" else fault
            yield seq, line

    state = tmp_path / "state"
    with in_process(state, HttpLimits(), log_config=None) as url, httpx.Client(base_url=url) as c:
        run = c.post("/v1/pipelines/echo/runs?wait=true", json={"inputs": {"text": "a"}})
        monkeypatch.setattr(RunStore, "events", failing)
        events = c.get(f"/v1/runs/{run.json()['id']}/events")
    assert events.status_code == 200
    blocks = [block for block in events.text.split("\n\n") if block]
    assert [block.split("\n")[0] for block in blocks] == ["id: 0", "id: 1", "event: error"]
    fields = dict(line.split(": ", 1) for line in blocks[-1].split("\n"))
    assert int(fields["retry"]) >= 10_000
    (problem,) = json.loads(fields["data"])["errors"]
    code, hint = answer
    assert problem["code"] == code
    assert problem["hint"].startswith(hint)
    assert "secret" not in events.text
    if code == "CD445":
        assert "RuntimeError: secret internals" in caplog.text


def test_an_endpoint_that_returns_without_answering_is_a_json_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The MCP endpoint (a library's code) returning without an answer: the service's
    CD445, and a line in the log; uvicorn answered it in plain text."""
    import asyncio

    from converge_dsl.serve._app import FaultsAnswered

    class Silent:
        path = "/mcp"

        def running(self) -> Any:
            return contextlib.nullcontext()

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            return None

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=FaultsAnswered(Silent(), str))
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as http:
            return await http.post("/mcp", json={})

    answer = asyncio.run(post())
    assert answer.status_code == 500
    assert answer.json()["errors"][0]["code"] == "CD445"
    assert "the service answered nothing on POST /mcp" in caplog.text


@contextlib.contextmanager
def _pause_held(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The write of a run's pause queued for the group commit only once a cancel of the
    run was asked (`RunService.cancel` returned); the event is set once it is held."""
    from converge_dsl.serve._service import RunService
    from converge_dsl.serve._store import RunStore

    finish_later, cancel = RunStore.finish_later, RunService.cancel
    pausing, asked = threading.Event(), threading.Event()

    def held(self: RunStore, run: str, **ending: Any) -> Future[bool]:
        if ending["status"] != "paused":
            return finish_later(self, run, **ending)
        journals = self.checkpoints
        queue_write = journals.queue_write

        def later(*args: Any, **options: Any) -> None:
            def queue() -> None:
                asked.wait(30)
                queue_write(*args, **options)

            threading.Thread(target=queue, daemon=True).start()

        journals.queue_write = later  # type: ignore[method-assign]
        try:
            return finish_later(self, run, **ending)
        finally:
            del journals.queue_write
            pausing.set()

    def cancelling(self: RunService, run: str) -> Any:
        row = cancel(self, run)
        asked.set()
        return row

    monkeypatch.setattr(RunStore, "finish_later", held)
    monkeypatch.setattr(RunService, "cancel", cancelling)
    yield pausing


@pytest.mark.parametrize("via", ["DELETE", "cancelRun"])
def test_a_cancel_reaching_a_run_as_it_pauses_cancels_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, via: str
) -> None:
    """A DELETE (or MCP cancelRun) that reached a run while its pause was being
    committed was dropped: the answer said `paused` and the run stayed paused. A paused
    run can still be cancelled: it is, its journal removed with it."""
    from converge_dsl.serve._app import HttpLimits

    from .conftest import in_process

    state = tmp_path / "state"
    paths = (DATA / "gated.yaml",)
    with (
        _pause_held(monkeypatch) as pausing,
        in_process(state, HttpLimits(), mcp=True, paths=paths) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        run = http.post("/v1/pipelines/gated/runs").json()["id"]
        assert pausing.wait(30)
        if via == "DELETE":
            answer = http.delete(f"/v1/runs/{run}")
            assert answer.status_code == 200
            status = answer.json()["status"]
        else:
            call = {"name": "cancelRun", "arguments": {"run": run}}
            message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
            accept = {"Accept": "application/json, text/event-stream"}
            text = http.post("/mcp", json=message, headers=accept).text
            status = json.loads(text.split("data: ", 1)[1])["result"]["structuredContent"]["status"]
        stored = http.get(f"/v1/runs/{run}").json()
    assert status == "cancelled"
    assert stored["status"] == "cancelled"
    assert "result" not in stored
    assert run not in _journals(state)


def test_a_cancel_still_stopping_after_the_wait_is_202(tmp_path: Path) -> None:
    """A DELETE whose run has not stopped within the wait answers 202 with the run still
    `running`, as `?wait=true` does; it answered 200, as if the cancel had taken. The run
    then stops cancelled."""
    from converge_dsl.serve._app import HttpLimits

    from .conftest import in_process

    limits = HttpLimits(wait_s=0.0)  # over before the run's task can stop
    with (
        in_process(tmp_path / "state", limits, paths=(DATA / "slow.yaml",)) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        run = http.post("/v1/pipelines/slow/runs").json()["id"]
        deadline = time.monotonic() + 10
        while http.get(f"/v1/runs/{run}").json()["status"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        answer = http.delete(f"/v1/runs/{run}")
        while (stored := http.get(f"/v1/runs/{run}").json())["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.02)
    assert (answer.status_code, answer.json()["status"]) == (202, "running")
    assert stored["status"] == "cancelled"
