"""The OpenAPI 3.1 document of a service, generated from its pipelines' declarations.

Each pipeline gets its own run route (`/v1/pipelines/{name}/runs` written
out with the name) whose request body schema is made from its `inputs:`
(each input a property, with its description and default; the required ones
listed) and whose result schema lists its keys, each fact's `data` held to
the key's `schema` where it declares one. A key schema is placed as a
component of its own by `_openapi_refs.Components`, which keeps its internal
references resolving (`run_schema` places it under the MCP schema's `$defs`
the same way). The other routes are the same for every pipeline; the MCP endpoint's
(`serve --mcp`) is there when the service has it.
`document(pipelines, mcp)` is plain JSON (`GET /v1/openapi.json`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from converge_dsl._version import __version__

from ._openapi_refs import Components, camel
from ._requests import BUDGET_FIELDS

if TYPE_CHECKING:
    from converge_dsl.batch import Pipeline

_ERROR = {"$ref": "#/components/schemas/Errors"}
_RUN = {"$ref": "#/components/schemas/Run"}


def _json(schema: Mapping[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    words = {
        400: "A body that is not JSON, or a query parameter or header refused (its code says "
        "which: ?wait=, Last-Event-ID).",
        401: "A missing or wrong bearer token.",
        404: "No such pipeline or run.",
        409: "The run is not in a state that allows this.",
        408: "The request body did not arrive in time.",
        413: "The request body is over the cap.",
        415: "The request body is not JSON, says it is compressed, or declares a charset other "
        "than UTF-8.",
        422: "The request is refused; every problem is located by a JSON pointer.",
        429: "The pipeline's queue is full; retry after Retry-After seconds.",
        403: "A request from a web page (an Origin header) to a server on a loopback address "
        "(CD444).",
        406: "The Accept header lacks application/json or text/event-stream (CD449).",
        421: "A Host header that is not a loopback name with the server's port, to a server on "
        "a loopback address (CD444).",
        503: "The service cannot answer now: it holds as many connections as it takes "
        "(CD447), its token file cannot be used (CD461) or its state folder is gone (CD993); "
        "retry after Retry-After seconds.",
    }
    return {str(s): _json(_ERROR, words[s]) for s in statuses}


def inputs_schema(pipeline: Pipeline) -> dict[str, Any]:
    """The JSON Schema of a run's `inputs` (the OpenAPI document's and the MCP tool's)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in pipeline.declared_inputs.items():
        item: dict[str, Any] = {}
        if spec.description:
            item["description"] = spec.description
        if spec.has_default:
            item["default"] = spec.default
        properties[name] = item
        if spec.required and not spec.has_default:
            required.append(name)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def _result_schema(pipeline: Pipeline, base: str, components: Components) -> dict[str, Any]:
    """The run result of `pipeline`, each key schema placed in `components`."""
    keys: dict[str, Any] = {}
    schemas = pipeline.key_schemas
    for key in pipeline.keys:
        fact: dict[str, Any] = components.ref("Fact")
        if key in schemas:
            data = components.place(schemas[key], f"{base}{camel(key)}")
            fact = {"allOf": [fact, {"type": "object", "properties": {"data": data}}]}
        keys[key] = {"type": "array", "items": fact}
    return {
        "allOf": [
            components.ref("RunResult"),
            {"type": "object", "properties": {"facts": {"type": "object", "properties": keys}}},
        ]
    }


def run_schema(pipeline: Pipeline) -> dict[str, Any]:
    """The run object `?wait=true` answers with, its result this pipeline's, as one
    self-contained JSON Schema (`$defs` in place of the document's components, the
    key schemas placed there too): the MCP tool's `outputSchema`."""
    common = {name: _local_refs(_COMMON[name]) for name in ("Run", "RunResult", "Fact")}
    components = Components("#/$defs/", common)
    result = _result_schema(pipeline, component_name(pipeline.name), components)
    return {
        "type": "object",  # MCP asks an output schema for an object at its root
        "allOf": [components.ref("Run"), {"type": "object", "properties": {"result": result}}],
        "$defs": components.schemas,
    }


def _local_refs(schema: Any) -> Any:
    """`schema` (one of this module's own) with `#/components/schemas/X` references
    made `#/$defs/X`."""
    if isinstance(schema, dict):
        return {
            key: (
                value.replace("#/components/schemas/", "#/$defs/", 1)
                if key == "$ref" and isinstance(value, str)
                else _local_refs(value)
            )
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_local_refs(item) for item in schema]
    return schema


def component_name(pipeline: str) -> str:
    """The prefix of a pipeline's component schemas: `market-entry` -> `MarketEntry`."""
    name = "".join(part.capitalize() for part in pipeline.replace("_", "-").split("-") if part)
    return name or "Pipeline"


def _component_bases(names: Iterable[str]) -> dict[str, str]:
    """Each pipeline's `component_name`, numbered (`AB2`) where its `Inputs` or `Result`
    would be another's (`a-b` and `a_b`) or one of the service's (`run`: `RunResult`)."""
    taken = set(_COMMON)
    bases: dict[str, str] = {}
    for name in names:
        wanted = component_name(name)
        base, number = wanted, 1
        while f"{base}Inputs" in taken or f"{base}Result" in taken:
            number += 1
            base = f"{wanted}{number}"
        taken.update((f"{base}Inputs", f"{base}Result"))
        bases[name] = base
    return bases


def _run_path(name: str, base: str, operation: str) -> dict[str, Any]:
    """`POST /v1/pipelines/{name}/runs` of one pipeline, its body and result its own."""
    body = {
        "type": "object",
        "properties": {
            "inputs": {"$ref": f"#/components/schemas/{base}Inputs"},
            "budget": {"$ref": "#/components/schemas/Budget"},
        },
        "additionalProperties": False,
    }
    result = {"$ref": f"#/components/schemas/{base}Result"}
    waited = {"allOf": [_RUN, {"type": "object", "properties": {"result": result}}]}
    return {
        "post": {
            "operationId": operation,
            "summary": f"Start a run of {name}",
            "parameters": [
                {
                    "name": "wait",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "boolean"},
                    "description": "Answer with the run's result once it stops (bounded).",
                },
            ],
            "requestBody": {"required": False, "content": {"application/json": {"schema": body}}},
            "responses": {
                "200": _json(waited, "The run stopped within the wait: its result."),
                "202": _json(_RUN, "The run is queued (or still running after the wait)."),
                **_errors(400, 401, 404, 408, 413, 415, 422, 429, 503),
            },
        }
    }


def _typed(media: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {media: {"schema": {"type": "string"}}}}


def _header(name: str, description: str) -> dict[str, Any]:
    """An optional header parameter of text."""
    return {
        "name": name,
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": description,
    }


def _run_paths() -> dict[str, Any]:
    """The routes of one run, the same for every pipeline."""
    run_id = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    last = _header("Last-Event-ID", "Resume after this event.")
    decisions = {"$ref": "#/components/schemas/Decisions"}
    return {
        "/v1/runs/{id}": {
            "get": {
                "operationId": "get_run",
                "parameters": [run_id],
                "responses": {"200": _json(_RUN, "The run."), **_errors(401, 404, 503)},
            },
            "delete": {
                "operationId": "cancel_run",
                "parameters": [run_id],
                "responses": {
                    "200": _json(_RUN, "The run, cancelled, or done if it ended first."),
                    "202": _json(_RUN, "The run is still stopping after the wait."),
                    **_errors(401, 404, 503),
                },
            },
        },
        "/v1/runs/{id}/events": {
            "get": {
                "operationId": "run_events",
                "parameters": [run_id, last],
                "responses": {
                    "200": _typed(
                        "text/event-stream",
                        "Server-Sent Events: one trace line each, then `end`; `error` (the "
                        "JSON errors of a 500) if the service fails once the stream has begun.",
                    ),
                    **_errors(400, 401, 404, 503),
                },
            }
        },
        "/v1/runs/{id}/report": {
            "get": {
                "operationId": "run_report",
                "parameters": [run_id],
                "responses": {
                    "200": _typed("text/html", "The run's HTML report."),
                    **_errors(401, 404, 503),
                },
            }
        },
        "/v1/runs/{id}/decisions": {
            "post": {
                "operationId": "decide_run",
                "parameters": [run_id],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": decisions}},
                },
                "responses": {
                    "200": _json(_RUN, "The run, queued to resume."),
                    **_errors(400, 401, 404, 408, 409, 413, 415, 422, 503),
                },
            }
        },
    }


def _service_paths() -> dict[str, Any]:
    """The routes of the service itself."""
    return {
        "/v1/pipelines": {
            "get": {
                "operationId": "list_pipelines",
                "responses": {
                    "200": _json({"type": "object"}, "Each pipeline and its inputs."),
                    **_errors(401, 503),
                },
            }
        },
        "/healthz": {
            "get": {
                "operationId": "health",
                "security": [],
                "responses": {
                    "200": _json({"type": "object"}, "The service is up."),
                    **_errors(503),
                },
            }
        },
        "/metrics": {
            "get": {
                "operationId": "metrics",
                "responses": {
                    "200": _typed("text/plain", "Prometheus text format."),
                    **_errors(401, 503),
                },
            }
        },
    }


# One JSON-RPC 2.0 message, as the MCP endpoint takes it (`_mcp_messages`).
_JSON_RPC = {
    "type": "object",
    "description": "One JSON-RPC 2.0 message (a batch is not taken): a request (`method` "
    "and `id`: initialize, tools/list, tools/call, ...), a notification (`method`, no `id`) "
    "or a response (`result` or `error`).",
    "required": ["jsonrpc"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer"]},
        "method": {"type": "string"},
        "params": {"type": "object"},
        "result": {},
        "error": {"type": "object"},
    },
}


def _mcp_paths(path: str) -> dict[str, Any]:
    """The MCP endpoint (`serve --mcp`, docs/serve.md): one JSON-RPC message a POST."""
    version = _header(
        "MCP-Protocol-Version",
        "An MCP protocol version the server speaks (another is 400, CD460).",
    )
    return {
        path: {
            "post": {
                "operationId": "mcp",
                "summary": "MCP over streamable HTTP (stateless): each pipeline a tool.",
                "parameters": [version],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _JSON_RPC}},
                },
                "responses": {
                    "200": _typed(
                        "text/event-stream",
                        "The answer to a request as Server-Sent Events: each `data:` one "
                        "JSON-RPC message (progress notifications, then the response).",
                    ),
                    "202": {
                        "description": "A notification or a response: nothing to answer, an "
                        "empty body (a notification's 202 says `Content-Type: "
                        "application/json` all the same, as the MCP SDK answers it)."
                    },
                    **_errors(400, 401, 403, 406, 408, 413, 415, 421, 503),
                },
            }
        }
    }


def document(pipelines: Mapping[str, Pipeline], mcp: str | None = None) -> dict[str, Any]:
    """The service's OpenAPI document (see the module docstring); with the MCP endpoint
    at `mcp` when given its path (`serve --mcp`)."""
    paths: dict[str, Any] = {}
    bases = _component_bases(pipelines)
    operations = {"get_run", "cancel_run", "run_events", "run_report", "decide_run"}
    components = Components("#/components/schemas/", _COMMON)
    for base in bases.values():  # the pipelines' own names first: a key's never takes one
        components.name(f"{base}Inputs")
        components.name(f"{base}Result")
    for name, pipeline in pipelines.items():
        base = bases[name]
        components.schemas[f"{base}Inputs"] = inputs_schema(pipeline)
        components.schemas[f"{base}Result"] = _result_schema(pipeline, base, components)
        operation = f"run_{name.replace('-', '_').replace('.', '_')}"
        while operation in operations:  # `a-b` and `a_b`
            operation += "_"
        operations.add(operation)
        paths[f"/v1/pipelines/{name}/runs"] = _run_path(name, base, operation)
    return {
        "openapi": "3.1.0",
        "info": {"title": "converge-dsl serve", "version": __version__},
        "paths": {
            **paths,
            **_run_paths(),
            **_service_paths(),
            **({} if mcp is None else _mcp_paths(mcp)),
        },
        "components": {
            "schemas": components.schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


_COMMON: dict[str, Any] = {
    "Budget": {
        "type": "object",
        "description": "Limits that may lower the pipeline's budget, never raise it.",
        "properties": {
            name: {"type": "number" if name == "max_wall_s" else "integer", "exclusiveMinimum": 0}
            for name in BUDGET_FIELDS
        },
        "additionalProperties": False,
    },
    "Decisions": {
        "type": "object",
        "properties": {
            "approve": {"type": "array", "items": {"type": "string"}},
            "reject": {"type": "array", "items": {"type": "string"}},
            "decisions": {"type": "object", "additionalProperties": {"type": "boolean"}},
        },
        "additionalProperties": False,
    },
    "Run": {
        "type": "object",
        "required": ["id", "pipeline", "status"],
        "properties": {
            "id": {"type": "string"},
            "pipeline": {"type": "string"},
            "status": {"enum": ["queued", "running", "paused", "done", "cancelled"]},
            "stop_reason": {"type": ["string", "null"]},
            "attempts": {"type": "integer"},
            "result": {"$ref": "#/components/schemas/RunResult"},
        },
    },
    "RunResult": {
        "type": "object",
        "description": "The run-result document (schemas/run-result.v1.json).",
        "properties": {
            "stop_reason": {"type": "string"},
            "facts": {"type": "object"},
            "diagnostics": {"type": "array", "items": {"type": "object"}},
            "pending": {"type": "array", "items": {"type": "object"}},
            "usage": {"type": "object"},
        },
    },
    "Fact": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "content": {"type": "string"},
            "confidence": {"type": "number"},
        },
    },
    "Errors": {
        "type": "object",
        "required": ["errors"],
        "properties": {
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["code", "message", "pointer"],
                    "properties": {
                        "code": {"type": "string"},
                        "message": {"type": "string"},
                        "pointer": {"type": "string", "description": "RFC 6901, into the body."},
                        "hint": {"type": "string"},
                    },
                },
            }
        },
    },
}


def any_run_schema() -> dict[str, Any]:
    """The run object of any pipeline (its result the run-result document, unnarrowed) as
    one self-contained JSON Schema: the output of the MCP endpoint's run-control tools."""
    defs = {name: _COMMON[name] for name in ("Run", "RunResult")}
    schema: dict[str, Any] = _local_refs({"type": "object", "allOf": [_RUN], "$defs": defs})
    return schema


def decisions_schema() -> dict[str, Any]:
    """The body of `POST /v1/runs/{id}/decisions` (the MCP `decideRun` tool's arguments)."""
    schema: dict[str, Any] = _local_refs(_COMMON["Decisions"])
    return schema
