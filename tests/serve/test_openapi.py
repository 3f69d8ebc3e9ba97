"""The OpenAPI document: valid OpenAPI 3.1, made from each pipeline's inputs and key schemas."""

from __future__ import annotations

from openapi_spec_validator import validate

from converge_dsl.batch import load
from converge_dsl.serve import document

from .conftest import DATA, ROOT


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
    assert facts["echoes"]["items"]["allOf"][1]["properties"]["data"] == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
    }
    assert "/v1/pipelines/echo/runs" in spec["paths"]
    assert "/v1/pipelines/market-entry/runs" in spec["paths"]
