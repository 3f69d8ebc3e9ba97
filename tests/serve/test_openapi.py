"""The OpenAPI document: valid OpenAPI 3.1, made from each pipeline's inputs and key schemas."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from openapi_spec_validator import validate
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from converge_dsl.batch import load
from converge_dsl.serve import document

from .conftest import DATA, ROOT, Server, serve_with_token


def test_the_document_validates_and_follows_the_inputs() -> None:
    pipelines = {
        p.name: p
        for p in (load(DATA / "echo.yaml"), load(ROOT / "pipelines" / "market-entry.yaml"))
    }
    spec = document(pipelines)
    validate(spec)  # raises on an invalid document
    schemas = spec["components"]["schemas"]
    assert schemas["EchoInputs"] == {
        "type": "object",
        "properties": {
            "text": {"description": "What to echo"},
            "shout": {"description": "Whether to shout", "default": False},
        },
        "additionalProperties": False,
        "required": ["text"],
    }
    assert "required" not in schemas["MarketEntryInputs"]
    facts = schemas["EchoResult"]["allOf"][1]["properties"]["facts"]["properties"]
    data = facts["echoes"]["items"]["allOf"][1]["properties"]["data"]
    assert data == {"$ref": "#/components/schemas/EchoEchoes"}
    assert schemas["EchoEchoes"] == {"type": "object", "properties": {"text": {"type": "string"}}}
    assert "/v1/pipelines/echo/runs" in spec["paths"]
    assert "/v1/pipelines/market-entry/runs" in spec["paths"]


# Key schemas that refer within themselves: recursive, nested, same-named definitions, an
# anchor, a pointer into the schema (tests/serve/data_refs/trees.yaml).
REFS = Path(__file__).parent / "data_refs"
TOKEN = "9c1f6e2a7b3d4c5e8f0a1b2c3d4e5f60"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
DOC = "urn:converge-dsl:served-document"
BOUND_S = 60.0
WAITED = "#/paths/~1v1~1pipelines~1trees~1runs/post/responses/200/content/application~1json/schema"


def _refs(node: Any) -> Iterator[str]:
    """Every `$ref` in `node` (none of these documents holds one as data)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _registry(contents: dict[str, Any]) -> Registry[Any]:
    return Registry().with_resource(DOC, Resource(contents, specification=DRAFT202012))


def _refused_variants(run: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """`run` with one fact's data changed so that its key schema refuses it, per key."""
    for key, change in {
        "tree": lambda data: data["children"][0].update(label="trunk"),
        "graph": lambda data: data["nodes"][1].update(edges=[-1]),
        "chain": lambda data: data["next"]["next"].update(value=0),
    }.items():
        wrong = copy.deepcopy(run)
        change(wrong["result"]["facts"][key][0]["data"])
        yield wrong


@pytest.fixture
def trees(tmp_path: Path, servers: list[Server]) -> str:
    return serve_with_token(tmp_path, servers, [REFS], TOKEN, "--mcp").ready()


def test_the_served_document_resolves_every_key_schemas_references(trees: str) -> None:
    spec = httpx.get(f"{trees}/v1/openapi.json", headers=BEARER, timeout=BOUND_S).json()
    validate(spec)
    resolver = _registry(spec).resolver(DOC)
    refs = set(_refs(spec))
    assert "#/components/schemas/TreesTreeNode" in refs
    assert "#/components/schemas/TreesGraphNode" in refs  # the other key's `node`, its own
    for ref in refs:
        assert ref.startswith("#/components/schemas/"), ref
        resolver.lookup(DOC + ref)  # raises when it does not resolve
    answered = httpx.post(
        f"{trees}/v1/pipelines/trees/runs?wait=true",
        json={"inputs": {"root": "oak"}},
        headers=BEARER,
        timeout=BOUND_S,
    )
    assert answered.status_code == 200, answered.text
    run = answered.json()
    assert run["stop_reason"] == "converged"
    assert run["result"]["facts"]["tree"][0]["data"]["name"] == "oak"
    result = Draft202012Validator({"$ref": DOC + WAITED}, registry=_registry(spec))
    result.validate(run)
    for wrong in _refused_variants(run):
        assert not result.is_valid(wrong)


def test_the_mcp_output_schema_is_self_contained_and_a_call_is_accepted(trees: str) -> None:
    async def main() -> tuple[types.ListToolsResult, types.CallToolResult]:
        async with (
            httpx.AsyncClient(headers=BEARER, timeout=BOUND_S) as http,
            streamable_http_client(f"{trees}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            # The SDK's client checks the answer against the tool's output schema.
            return await session.list_tools(), await session.call_tool("trees", {"root": "oak"})

    listed, called = asyncio.run(asyncio.wait_for(main(), BOUND_S))
    [tool] = [tool for tool in listed.tools if tool.name == "trees"]
    output = tool.outputSchema
    assert output is not None
    resolver = _registry(output).resolver(DOC)
    for ref in set(_refs(output)):
        assert ref.startswith("#/$defs/"), ref
        resolver.lookup(DOC + ref)
    assert not called.isError
    run = called.structuredContent
    assert run is not None
    assert run["result"]["facts"]["chain"][0]["data"]["next"]["value"] == 2
    checked = Draft202012Validator(output, registry=Registry())
    checked.validate(run)
    for wrong in _refused_variants(run):
        assert not checked.is_valid(wrong)


def _pipeline(folder: Path, name: str, key: str) -> Any:
    path = folder / f"{name}.yaml"
    path.write_text(
        "apiVersion: converge-dsl/v1\nkind: Pipeline\n"
        f"name: {name}\n"
        f"inputs: {{{name.replace('-', '_').replace('.', '_')}: {{required: true}}}}\n"
        f"keys:\n  - name: {key}\n"
        "    schema: {$ref: '#/$defs/node', $defs: {node: {type: string}}}\n"
        "seeds:\n  - {id: start, content: go}\n"
        "suggestors:\n"
        "  - {name: r, kind: rule, when: 'true', emit: [{key: seeds, id: s, content: x}]}\n"
    )
    return load(path)


def test_pipelines_and_keys_whose_names_meet_get_components_of_their_own(tmp_path: Path) -> None:
    named = [
        ("a-b", "node"),
        ("a_b", "node"),
        ("run", "inputs"),
        ("a-b-inputs", "x"),
        ("events", "x"),
    ]
    pipelines = {name: _pipeline(tmp_path, name, key) for name, key in named}
    spec = document(pipelines)
    validate(spec)
    schemas = spec["components"]["schemas"]
    assert None not in schemas.values()
    assert schemas["RunResult"]["description"].startswith("The run-result document")
    bodies = {
        name: spec["paths"][f"/v1/pipelines/{name}/runs"]["post"]["requestBody"]["content"][
            "application/json"
        ]["schema"]["properties"]["inputs"]["$ref"]
        for name in pipelines
    }
    operations = {name: spec["paths"][f"/v1/pipelines/{name}/runs"]["post"] for name in pipelines}
    assert {name: post["operationId"] for name, post in operations.items()} == {
        "a-b": "run_a_b",
        "a_b": "run_a_b_",
        "run": "run_run",
        "a-b-inputs": "run_a_b_inputs",
        "events": "run_events_",
    }
    assert bodies == {
        "a-b": "#/components/schemas/ABInputs",
        "a_b": "#/components/schemas/AB2Inputs",
        "run": "#/components/schemas/Run2Inputs",
        "a-b-inputs": "#/components/schemas/ABInputsInputs",
        "events": "#/components/schemas/EventsInputs",
    }
    assert schemas["AB2Inputs"]["required"] == ["a_b"]
    assert schemas["Run2Inputs"]["required"] == ["run"]
    # Key `inputs` of `run` and the pipeline `a-b-inputs` would both be `Run2Inputs`,
    # `ABInputs`...: each key's schema is a component no pipeline's name takes.
    assert schemas["ABNode"] == {"$ref": "#/components/schemas/ABNodeNode"}
    assert schemas["AB2Node"] == {"$ref": "#/components/schemas/AB2NodeNode"}
    assert schemas["Run2Inputs2"] == {"$ref": "#/components/schemas/Run2Inputs2Node"}
    resolver = _registry(spec).resolver(DOC)
    for ref in set(_refs(spec)):
        resolver.lookup(DOC + ref)


def test_each_refusal_a_route_answers_is_in_its_responses(trees: str) -> None:
    """A client generated from the document knows every status it may get: a body not
    JSON (415), a bad ?wait= (400), a decision's body not JSON (400), a Last-Event-ID past
    the run's events (400) were answered but not documented."""
    spec = httpx.get(f"{trees}/v1/openapi.json", headers=BEARER, timeout=BOUND_S).json()
    start = f"{trees}/v1/pipelines/trees/runs"
    run = httpx.post(
        f"{start}?wait=true", json={"inputs": {"root": "oak"}}, headers=BEARER, timeout=BOUND_S
    ).json()["id"]
    asked = [
        ("/v1/pipelines/trees/runs", "post", httpx.post(start, content=b"x", headers=BEARER)),
        ("/v1/pipelines/trees/runs", "post", httpx.post(f"{start}?wait=maybe", headers=BEARER)),
        (
            "/v1/runs/{id}/decisions",
            "post",
            httpx.post(f"{trees}/v1/runs/{run}/decisions", content=b"{", headers=BEARER),
        ),
        (
            "/v1/runs/{id}/events",
            "get",
            httpx.get(
                f"{trees}/v1/runs/{run}/events",
                headers={**BEARER, "Last-Event-ID": "999999"},
                timeout=BOUND_S,
            ),
        ),
    ]
    for path, method, answer in asked:
        assert answer.status_code >= 400, (path, answer.text)
        assert str(answer.status_code) in spec["paths"][path][method]["responses"], (
            path,
            answer.status_code,
        )
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            if path != "/healthz":  # every route but the health check reads the tokens
                assert "401" in operation["responses"], (path, method)
            assert "503" in operation["responses"], (path, method)  # tokens or state gone


def test_the_mcp_endpoint_is_in_the_document_with_each_status_it_answers(trees: str) -> None:
    """`/mcp` (`serve --mcp`) is a POST of one JSON-RPC message: its body, its answers and
    each refusal it gives are documented (the document still valid OpenAPI 3.1). Before,
    the document had no `/mcp`; without `--mcp` it still has none."""
    spec = httpx.get(f"{trees}/v1/openapi.json", headers=BEARER, timeout=BOUND_S).json()
    validate(spec)
    post = spec["paths"]["/mcp"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    streamed = {"Accept": "application/json, text/event-stream"}
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    Draft202012Validator(body).validate(listing)
    assert not Draft202012Validator(body).is_valid([listing])  # a batch is not taken
    mcp = f"{trees}/mcp"
    answers = {
        "listed": httpx.post(mcp, json=listing, headers={**BEARER, **streamed}),
        "notified": httpx.post(
            mcp,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers={**BEARER, **streamed},
        ),
        "no token": httpx.post(mcp, json=listing, headers=streamed),
        "not JSON": httpx.post(
            mcp,
            content=b"x",
            headers={**BEARER, **streamed, "Content-Type": "application/json"},
        ),
        "not text": httpx.post(
            mcp, content=b"x", headers={**BEARER, **streamed, "Content-Type": "text/plain"}
        ),
        "no stream": httpx.post(mcp, json=listing, headers={**BEARER, "Accept": "text/html"}),
        "a web page": httpx.post(
            mcp, json=listing, headers={**BEARER, **streamed, "Origin": "http://example.org"}
        ),
    }
    assert {why: answer.status_code for why, answer in answers.items()} == {
        "listed": 200,
        "notified": 202,
        "no token": 401,
        "not JSON": 400,
        "not text": 415,
        "no stream": 406,
        "a web page": 403,
    }
    assert answers["listed"].headers["content-type"].startswith("text/event-stream")
    assert "text/event-stream" in post["responses"]["200"]["content"]
    # A notification's 202: an empty body that says it is JSON (the SDK's), as documented.
    notified = answers["notified"]
    assert (notified.content, notified.headers["content-type"]) == (b"", "application/json")
    assert "Content-Type: application/json" in post["responses"]["202"]["description"]
    # 503: every cause named, the connections past the limit (CD447) too.
    assert "CD447" in post["responses"]["503"]["description"]
    for why, answer in answers.items():
        assert str(answer.status_code) in post["responses"], why
    assert "/mcp" not in document({"trees": load(REFS / "trees.yaml")})["paths"]
