"""`converge-dsl schema NAME` prints a schema an editor can use alone: the pack schema's
`tools`, which are the pipeline schema's definitions, come with those definitions."""

from __future__ import annotations

import io
import json

import jsonschema_rs

from converge_dsl.cli import run
from converge_dsl.frontend._schema import load_schema

PACK = {
    "apiVersion": "converge-dsl/v1",
    "kind": "Pack",
    "name": "glossary",
    "version": "1.0.0",
    "suggestors": {"note": {"kind": "rule", "template": {}}},
}


def test_the_pack_schema_is_printed_with_the_tool_server_definitions_it_uses() -> None:
    assert "pipeline.v1.json#" in json.dumps(load_schema("pack.v1.json"))  # one definition
    out = io.StringIO()
    assert run(["schema", "pack"], out, io.StringIO()) == 0
    printed = out.getvalue()
    assert ".v1.json#" not in printed
    schema = json.loads(printed)
    pipeline = load_schema("pipeline.v1.json")["$defs"]
    for name in ("toolServer", "stdioToolServer", "httpToolServer", "toolName", "envVar"):
        assert schema["$defs"][name] == pipeline[name]
    validator = jsonschema_rs.validator_for(schema)  # no retrieval needed
    server = {"command": ["python3", "server.py"], "allow": ["define"]}
    assert validator.is_valid({**PACK, "tools": {"terms": server}})
    assert not validator.is_valid({**PACK, "tools": {"terms": {**server, "shell": True}}})
    assert not validator.is_valid({**PACK, "tools": {"Terms": server}})
