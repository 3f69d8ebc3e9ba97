"""The `tools:` section reads as typed, located records; `tool_reference` reads `mcp:` names."""

from __future__ import annotations

from converge_dsl.frontend import (
    HttpServerSpec,
    StdioServerSpec,
    build_manifest,
    load_text,
    tool_reference,
)

TEXT = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: tools
tools:
  time:
    command: [mcp-server-time, --local-timezone, UTC]
    env: {pass: [TZ], set: {LANG: C.UTF-8}}
    cwd: work
    allow: [convert_time]
    call_timeout_s: 5
  search:
    url: http://LOCALHOST:8000/mcp
    hosts: [localhost]
    headers: {Authorization: SEARCH_TOKEN}
    allow: [search, fetch]
    max_result_bytes: 1000
"""


def test_each_server_is_a_typed_record_at_its_place() -> None:
    tools = build_manifest(load_text(TEXT, "p.yaml")).tools
    time, search = tools["time"], tools["search"]
    assert isinstance(time, StdioServerSpec)
    assert (time.command, time.env_pass, dict(time.env_set), time.cwd) == (
        ("mcp-server-time", "--local-timezone", "UTC"),
        ("TZ",),
        {"LANG": "C.UTF-8"},
        "work",
    )
    assert (time.allow, time.call_timeout_s, time.start_timeout_s) == (("convert_time",), 5, None)
    assert isinstance(search, HttpServerSpec)
    assert (search.host, search.hosts, dict(search.headers), search.max_result_bytes) == (
        "localhost",
        ("localhost",),
        {"Authorization": "SEARCH_TOKEN"},
        1000,
    )
    assert time.span is not None
    assert search.span is not None
    assert (time.span.line, search.span.line) == (6, 12)


def test_a_pipeline_without_tools_has_none() -> None:
    text = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: none\n"
    assert dict(build_manifest(load_text(text, "p.yaml")).tools) == {}


def test_tool_reference_reads_server_and_tool() -> None:
    assert tool_reference("mcp:time/convert_time") == ("time", "convert_time")
    assert tool_reference("mcp:search/*") == ("search", "*")
    assert tool_reference("context.read") is None
