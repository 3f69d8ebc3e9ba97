"""The shape of a JSON-RPC message POSTed to the MCP endpoint, checked before the SDK
reads it (`checked_message`), so that a malformed one is refused as the HTTP API
refuses a body: 400, CD983, a JSON pointer at the field at fault, and the
service's words rather than the SDK's validation report.

A message is one JSON object (a batch, an array, is not taken: MCP's
streamable HTTP sends one message a request): `jsonrpc` is "2.0"; `id`, when
there, a string or an integer; `method` a string, or, without one, a response
(`result` or `error`, not both); `params`, when there, an object, its `_meta` an object
and its `progressToken` a string or an integer; a `tools/call`'s `name` a
string and its `arguments` an object; and the method is one MCP has, its
message what the SDK's model of it takes (each field at fault located).
"""

from __future__ import annotations

import functools
from typing import Any

from converge_dsl import codes
from converge_dsl._json_pointer import pointer

from ._requests import Problem, Refused

_ONE_MESSAGE = "send one JSON-RPC 2.0 message as a JSON object"


def checked_message(message: Any) -> None:
    """Nothing when `message` has the shape of the module docstring; else `Refused` (400)
    with every problem found."""
    if isinstance(message, list):
        raise _refused([("", "a batch of JSON-RPC messages is not taken", _ONE_MESSAGE)])
    if not isinstance(message, dict):
        raise _refused([("", "the message is not a JSON object", _ONE_MESSAGE)])
    found: list[tuple[str, str, str | None]] = []
    if message.get("jsonrpc") != "2.0":
        found.append((pointer(("jsonrpc",)), '`jsonrpc` must be "2.0"', None))
    if "id" in message and not _is_id(message["id"]):
        found.append((pointer(("id",)), "`id` must be a string or an integer", None))
    method = message.get("method")
    if "method" in message and not isinstance(method, str):
        found.append((pointer(("method",)), "`method` must be a string", None))
    elif method is None and "result" not in message and "error" not in message:
        found.append(
            (pointer(("method",)), "the message has no `method`", 'e.g. "method": "tools/list"')
        )
    elif method is None and "result" in message and "error" in message:
        found.append(
            (
                pointer(("error",)),
                "a response holds `result` or `error`, not both",
                "send the `result` of a request that succeeded, else its `error`",
            )
        )
    params = message.get("params")
    if params is not None and not isinstance(params, dict):  # null: none, as the SDK reads it
        found.append((pointer(("params",)), "`params` must be a JSON object", None))
    elif isinstance(params, dict):
        found.extend(_params(params, method))
    if not found and isinstance(method, str):
        found.extend(_of_method(message, method, "id" in message))
    if found:
        raise _refused(found)


def _of_method(
    message: dict[str, Any], method: str, request: bool
) -> list[tuple[str, str, str | None]]:
    """The problems of a message as the MCP method it names takes it (the SDK's own model
    of it), or of a method MCP does not have."""
    from pydantic import ValidationError

    models = _methods()[0 if request else 1]
    model = models.get(method)
    if model is None:
        from converge_dsl.diagnostics import unknown_name_hint

        what = "request" if request else "notification"
        hint = unknown_name_hint(method, models, f"{what}s: {', '.join(models)}")
        return [(pointer(("method",)), f"MCP has no {what} {method[:64]!r}", hint)]
    try:
        model.model_validate(message)
    except ValidationError as error:
        return [
            (pointer(tuple(item["loc"])), _wrong(method, item), f"see MCP's {method}")
            for item in error.errors(include_url=False)[:8]
        ]
    return []


def _wrong(method: str, item: Any) -> str:
    if item["type"] == "missing":
        return f"{method} needs this field"
    reason = str(item["msg"])
    return f"{method} does not take this value: {reason[:1].lower()}{reason[1:]}"


@functools.cache
def _methods() -> tuple[dict[str, Any], dict[str, Any]]:
    """The SDK's model of each request and each notification a client may send, by method."""
    import typing

    from mcp import types

    out: list[dict[str, Any]] = []
    for union in (types.ClientRequest, types.ClientNotification):
        models = typing.get_args(union.model_fields["root"].annotation)
        named = {typing.get_args(m.model_fields["method"].annotation)[0]: m for m in models}
        out.append(named)
    return out[0], out[1]


def _params(params: dict[str, Any], method: Any) -> list[tuple[str, str, str | None]]:
    found: list[tuple[str, str, str | None]] = []
    meta = params.get("_meta")
    if "_meta" in params and not isinstance(meta, dict):
        found.append((pointer(("params", "_meta")), "`_meta` must be a JSON object", None))
    elif isinstance(meta, dict) and "progressToken" in meta and not _is_id(meta["progressToken"]):
        found.append(
            (
                pointer(("params", "_meta", "progressToken")),
                "`progressToken` must be a string or an integer",
                None,
            )
        )
    if method == "tools/call":
        if not isinstance(params.get("name"), str):
            found.append(
                (pointer(("params", "name")), "`name` must be the name of a tool", "see tools/list")
            )
        if "arguments" in params and not isinstance(params["arguments"], dict):
            found.append(
                (
                    pointer(("params", "arguments")),
                    "`arguments` must be a JSON object",
                    "give the tool's inputs by name, as its inputSchema says",
                )
            )
    return found


def _is_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _refused(found: list[tuple[str, str, str | None]]) -> Refused:
    problems = tuple(
        Problem(codes.SERVE_BAD_BODY, f"the MCP message: {message}", where, hint)
        for where, message, hint in found
    )
    return Refused(400, problems)
