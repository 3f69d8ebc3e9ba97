"""Run and decision requests: checked as `--input` is, budgets only lowered, located errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from converge_dsl.batch import load
from converge_dsl.engine import Budget
from converge_dsl.serve._requests import (
    Problem,
    Refused,
    RunRequest,
    decisions_request,
    run_request,
)

from .conftest import DATA, Server, serve_with_token

ECHO = load(DATA / "echo.yaml")


def problems(call: Any) -> list[tuple[str, str]]:
    with pytest.raises(Refused) as caught:
        call()
    return [(p.code, p.pointer) for p in caught.value.problems]


def test_a_good_request() -> None:
    request = run_request(ECHO, {"inputs": {"text": "x"}, "budget": {"max_cycles": 3}})
    assert request == RunRequest({"text": "x"}, {"max_cycles": 3})
    assert run_request(ECHO, {"inputs": {"text": "x"}}).budget == {}


def test_every_problem_is_located() -> None:
    found = problems(
        lambda: run_request(
            ECHO, {"inputs": {"tex": 1}, "extra": 1, "budget": {"max_facts": True, "depth": 1}}
        )
    )
    assert found == [
        ("CD983", "/extra"),
        ("CD984", "/inputs/tex"),
        ("CD985", "/inputs/text"),
        ("CD983", "/budget/max_facts"),
        ("CD983", "/budget/depth"),
    ]


def test_inputs_that_are_not_an_object_are_refused_even_when_empty() -> None:
    """`[]`, `""`, `0` or `false` as `inputs` were read as no inputs (a pipeline without a
    required one then ran); each is now refused where it stands, as a `budget` is; `null`
    still says none."""
    gated = load(DATA / "gated.yaml")
    for given in ([], "", 0, False, [1]):
        assert problems(lambda g=given: run_request(gated, {"inputs": g})) == [("CD983", "/inputs")]
    assert run_request(gated, {"inputs": None}) == RunRequest({}, {})


def test_a_budget_may_lower_never_raise() -> None:
    assert problems(
        lambda: run_request(ECHO, {"inputs": {"text": "x"}, "budget": {"max_model_calls": 6}})
    ) == [("CD986", "/budget/max_model_calls")]
    request = RunRequest({}, {"max_cycles": 2, "max_wall_s": 1.5, "max_tokens": 7})
    lowered = request.lowered(Budget(max_cycles=10, max_tokens=None, max_wall_s=600))
    assert (lowered.max_cycles, lowered.max_wall_s, lowered.max_tokens) == (2, 1.5, 7)
    kept = RunRequest({}, {"max_cycles": 20}).lowered(Budget(max_cycles=10))
    assert kept.max_cycles == 10


def test_decisions() -> None:
    assert decisions_request({"approve": ["a"], "reject": ["b"]}) == {"a": True, "b": False}
    assert decisions_request({"decisions": {"a": False}}) == {"a": False}
    assert problems(lambda: decisions_request({})) == [("CD991", "")]
    assert problems(lambda: decisions_request({"approve": "a", "x": 1})) == [
        ("CD991", "/approve"),
        ("CD991", "/x"),
    ]


def test_a_problem_s_text_keeps_the_place_it_names_on_one_line() -> None:
    from converge_dsl.diagnostics import SourceSpan

    declared = SourceSpan("a\nb.yaml", 4, 3, 4, 9)
    problem = Problem("CD985", "the request lacks input 'x'", "/inputs", declared=declared)
    assert problem.text().splitlines()[1] == " --> a\\nb.yaml:4:3"
    assert problem.data()["declared_at"]["file"] == "a\nb.yaml"  # JSON: the real name


def test_an_error_under_a_request_is_a_500_with_its_own_cd_code_else_cd996() -> None:
    from converge_dsl.errors import ConvergeError
    from converge_dsl.models import ModelError, ModelErrorCode
    from converge_dsl.serve._requests import failed

    (own,) = failed(ConvergeError("the state is gone", code="CD993", hint="restart")).problems
    assert (own.code, own.message, own.hint) == ("CD993", "the state is gone", "restart")
    (model,) = failed(ModelError(ModelErrorCode.RATE_LIMITED, "slow down")).problems
    assert (model.code, model.message) == ("CD996", "E_RATE_LIMITED: slow down")
    (bare,) = failed(ConvergeError("it broke")).problems
    assert (bare.code, bare.message) == ("CD996", "it broke")


def test_a_header_given_twice_differently_is_refused_not_guessed(
    tmp_path: Path, servers: list[Server]
) -> None:
    """Two `Authorization` headers were read as the first (a good one then a bad one let the
    request in, the other order not), two `Last-Event-ID` or `Idempotency-Key` headers as the
    first without a word: each is now 400 when they differ (the token never shown), over
    HTTP and at the MCP endpoint; the same value twice is read as once."""
    token = "c0ffee5e7b1d4a9f8e2c6b3a1d0f9e8c"
    server = serve_with_token(tmp_path, servers, [DATA / "echo.yaml"], token, "--mcp")
    url = server.ready()
    good, bad = ("Authorization", f"Bearer {token}"), ("Authorization", "Bearer nope")
    with httpx.Client(base_url=url, timeout=30) as http:
        run = http.post(
            "/v1/pipelines/echo/runs?wait=true", json={"inputs": {"text": "a"}}, headers=[good]
        ).json()["id"]
        for pair in ([good, bad], [bad, good]):
            answer = http.get(f"/v1/runs/{run}", headers=pair)
            (problem,) = answer.json()["errors"]
            assert (answer.status_code, problem["code"]) == (400, "CD309")
            assert "Authorization header 2 times" in problem["message"]
            assert token not in answer.text
        assert http.get(f"/v1/runs/{run}", headers=[good, good]).status_code == 200
        lower = ("Authorization", f"bearer  {token}")  # HTTP's scheme has no case
        assert http.get(f"/v1/runs/{run}", headers=[good, lower]).status_code == 200
        last = [good, ("Last-Event-ID", "1"), ("Last-Event-ID", "2")]
        answer = http.get(f"/v1/runs/{run}/events", headers=last)
        assert (answer.status_code, answer.json()["errors"][0]["code"]) == (400, "CD309")
        answer = http.get(
            f"/v1/runs/{run}/events", headers={**dict([good]), "Last-Event-ID": b"1\xa0"}
        )
        assert answer.status_code == 400  # a blank of HTTP's is a space or a tab only
        keys = [good, ("Idempotency-Key", "a"), ("Idempotency-Key", "b")]
        answer = http.post("/v1/pipelines/echo/runs", json={"inputs": {"text": "a"}}, headers=keys)
        assert (answer.status_code, answer.json()["errors"][0]["code"]) == (400, "CD998")
        mcp = [("Accept", "application/json, text/event-stream"), good]
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        answer = http.post("/mcp", json=message, headers=[*mcp, bad])
        assert (answer.status_code, answer.json()["errors"][0]["code"]) == (400, "CD309")
        assert http.post("/mcp", json=message, headers=mcp).status_code == 200


def test_duplicate_headers_checked_where_read_and_content_headers_too(tmp_path: Path) -> None:
    """With no tokens configured, the Authorization header is not read: two of it are not
    refused (over HTTP and at the MCP endpoint). Two Content-Type or Content-Encoding
    headers that differ are refused (400, CD309), not read as the first."""
    from converge_dsl.serve._app import HttpLimits

    from .conftest import in_process

    two = [("Authorization", "Bearer a"), ("Authorization", "Bearer b")]
    mcp = [("Accept", "application/json, text/event-stream"), *two]
    body = b'{"inputs": {"text": "a"}}'
    with (
        in_process(tmp_path / "state", HttpLimits(), mcp=True) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        answer = http.post("/v1/pipelines/echo/runs", content=body, headers=two)
        assert answer.status_code == 202, answer.text
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert http.post("/mcp", json=message, headers=mcp).status_code == 200
        for name, values in (
            ("Content-Type", ("application/json", "text/plain")),
            ("Content-Encoding", ("identity", "gzip")),
        ):
            headers = [(name, value) for value in values]
            answer = http.post("/v1/pipelines/echo/runs", content=body, headers=headers)
            (problem,) = answer.json()["errors"]
            assert (answer.status_code, problem["code"]) == (400, "CD309"), name
            assert f"{name} header 2 times" in problem["message"]
