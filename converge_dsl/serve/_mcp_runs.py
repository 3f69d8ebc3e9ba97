"""The run-control tools of the MCP endpoint (`serve --mcp`): what they are called,
their schemas, and how their arguments are read.

Beside one tool per pipeline, the endpoint lists three tools over runs, each
the MCP face of an HTTP route:

- `getRun` `{"run": ID, "wait": false}`: `GET /v1/runs/{id}`; with `wait`
  true it first waits for the run to stop as a pipeline's tool does.
- `decideRun` `{"run": ID, "approve": [...], "reject": [...]}` (or
  `"decisions": {ID: true|false}`): `POST /v1/runs/{id}/decisions`, the same
  body checks; the resumed run is then waited for as a pipeline's tool waits.
- `cancelRun` `{"run": ID}`: `DELETE /v1/runs/{id}`; a running run is waited
  for until its task has stopped.

Each answers the run object a pipeline's tool answers. Their names hold a
capital letter, which a pipeline's `name:` cannot (lowercase letters,
digits, `-`, `_`, `.`), so no pipeline's tool can take one of them. Arguments
that are not of the tool's shape are a 422 (CD440) located by a JSON pointer
into the arguments; a run id of the wrong form, or of no run, is the HTTP
API's 404 (CD990).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._json_pointer import pointer

from ._openapi import any_run_schema, decisions_schema
from ._requests import Decisions, Problem, Refused, decisions_request, refused

if TYPE_CHECKING:
    from mcp import types

GET_RUN = "getRun"
DECIDE_RUN = "decideRun"
CANCEL_RUN = "cancelRun"
CONTROL_TOOLS = (GET_RUN, DECIDE_RUN, CANCEL_RUN)

_RUN_ID = {
    "type": "string",
    "pattern": "^[0-9a-f]{32}$",
    "description": "The run's id, as a pipeline's tool (or POST /v1/pipelines/NAME/runs) "
    "answered it.",
}
_WAIT = {
    "type": "boolean",
    "default": False,
    "description": "Wait (at most the server's --wait-timeout) for the run to stop or pause "
    "before answering.",
}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    """A control tool's input schema: an object of the run id `run` (required) and
    `properties`, nothing else."""
    return {
        "type": "object",
        "properties": {"run": _RUN_ID, **properties},
        "required": ["run"],
        "additionalProperties": False,
    }


def control_tools() -> list[types.Tool]:
    """The three run-control tools, with their input and output schemas."""
    from mcp import types

    decisions = decisions_schema()
    output = {
        "type": "object",
        **any_run_schema(),
        "properties": {
            "links": {
                "type": "object",
                "description": "The URLs of the run's HTTP routes.",
                "additionalProperties": {"type": "string"},
            },
            "note": {
                "type": "string",
                "description": "Where to follow a run that has not stopped, or decide a "
                "paused one.",
            },
        },
    }
    return [
        types.Tool(
            name=GET_RUN,
            title="Get a run",
            description="A run's status, and its result once it has stopped: the run object a "
            "pipeline's tool answers. With wait, first waits for the run to stop or pause.",
            inputSchema=_object({"wait": _WAIT}),
            outputSchema=output,
        ),
        types.Tool(
            name=DECIDE_RUN,
            title="Decide a paused run",
            description="Approves or rejects the held proposals of a paused run (their ids are "
            "its result's pending[].id) and resumes it; answers the run once it stops or "
            "pauses again, or after the wait.",
            inputSchema=_object(dict(decisions["properties"])),
            outputSchema=output,
        ),
        types.Tool(
            name=CANCEL_RUN,
            title="Cancel a run",
            description="Cancels a queued, running or paused run; answers the run once it has "
            "stopped (a run that had already stopped is answered as it is).",
            inputSchema=_object({}),
            outputSchema=output,
        ),
    ]


def run_argument(arguments: dict[str, Any], allowed: tuple[str, ...] | None) -> str:
    """The `run` argument of a control tool's call, once every argument is one of
    `allowed` (with `run`; None: the others are checked elsewhere); `Refused` (422,
    CD440) naming each one that is not."""
    problems: list[Problem] = []
    for name in arguments:
        if allowed is not None and name != "run" and name not in allowed:
            expected = ", ".join(("run", *allowed))
            problems.append(
                Problem(
                    codes.SERVE_MCP_BAD_ARGUMENTS,
                    f"unknown argument {name[:64]!r}",
                    pointer((name,)),
                    f"this tool takes: {expected}",
                )
            )
    run = arguments.get("run")
    if not isinstance(run, str):
        what = "is missing" if "run" not in arguments else "must be a string"
        problems.append(
            Problem(
                codes.SERVE_MCP_BAD_ARGUMENTS,
                f"the run id `run` {what}",
                pointer(("run",)),
                "give the id a pipeline's tool answered with (its `id`)",
            )
        )
    if problems:
        raise Refused(422, tuple(problems))
    assert isinstance(run, str)
    return run


def wait_argument(arguments: dict[str, Any]) -> bool:
    """`getRun`'s `wait` (false when absent); `Refused` (422, CD440) when not a boolean."""
    wait = arguments.get("wait", False)
    if not isinstance(wait, bool):
        raise refused(
            422,
            codes.SERVE_MCP_BAD_ARGUMENTS,
            "`wait` must be true or false",
            pointer(("wait",)),
        )
    return wait


def decisions_argument(arguments: dict[str, Any]) -> Decisions:
    """`decideRun`'s decisions: its arguments but `run`, checked as the body of
    `POST /v1/runs/{id}/decisions` is (the same problems, the same pointers)."""
    return decisions_request({k: v for k, v in arguments.items() if k != "run"})
