"""The MCP face of the run service (`serve --mcp`): each served pipeline one tool at `/mcp`.

`McpEndpoint(service, tokens, limits, loopback=...)` is a streamable-HTTP MCP
server (the `mcp` SDK's low-level `Server` under its
`StreamableHTTPSessionManager`, stateless: every POST stands alone) mounted by
`build_app` at `MCP_PATH` in the same application as the HTTP API, with
the same bearer tokens (401 without one). On a loopback address a request
whose `Host` is not a loopback name with its port (but 80's: 421, CD444) or that comes
from a web page (an `Origin`: 403, CD444) is refused, as is a POST whose
`Accept` lacks `application/json` or `text/event-stream` (406, CD449), that is
not `application/json` (415, CD307) or whose `MCP-Protocol-Version` is not one the
SDK speaks (400, CD460): the SDK's own transport checks, made first so that the
answer is the service's JSON. A POSTed message is read and
checked before the SDK sees it, as an HTTP API body is (`_bodies`: the cap,
JSON only, located refusals) and for its JSON-RPC shape (`_mcp_messages`).

- `tools/list`: one tool per pipeline, named by `tool_name` (MCP's tool-name
  characters; two pipelines giving one name stop the start, CD436), described
  by the pipeline's `description:`, its `inputSchema` the schema of its
  `inputs` that the OpenAPI document holds (`inputs_schema`, one builder) and
  its `outputSchema` the run object `?wait=true` answers (`run_schema`).
  Beside them, the run-control tools `getRun`, `decideRun` and `cancelRun`
  (`_mcp_runs`: names no pipeline can take).
- `tools/call` of a pipeline's tool: the arguments are the run's inputs and
  `_meta` key `converge-dsl/budget` its budget, checked as the body
  `{"inputs": ..., "budget": ...}` of `POST /v1/pipelines/{name}/runs` is
  (`run_request`), then the run is submitted to the same `RunService` and
  waited for as long as `?wait=true` waits. `_meta` key
  `converge-dsl/idempotency-key` is the `Idempotency-Key` header's promise: a
  call repeating a key with the same request answers the key's run (waited
  for), queuing nothing; with another request it is the HTTP API's 409 (CD997).
- `tools/call` of a run-control tool: the HTTP route it stands for (`GET`,
  `POST .../decisions`, `DELETE` of `/v1/runs/{id}`), with its checks.
- Every tool answers the run object of `?wait=true` with `links`, the URLs
  of the run's routes, as structured content and as JSON text; a run still
  queued, running or paused after the wait says so in `note`. A refusal (bad
  inputs or arguments, a full queue, an unknown tool or run) is a tool error
  whose text is the HTTP API's error body with its `status` (and
  `retry_after` for a full queue), each message passed through the redactor;
  so is a fault of the service in a call (500, CD445, its traceback in the
  server's log), where the SDK would send the exception's own text.
- With a `progressToken`, each trace event of the run is a progress
  notification (its count, and the event's type as the message).
- A call answered as the server stops (`RunService.stopping`), its run not
  stopped, is a tool error (503, CD463) naming the run and how to fetch it
  once the server is back; its event stream ends once it is answered, not at
  the signal (`_server.own_stream_ends`, under `serve`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._version import __version__

from ._app import (
    HttpLimits,
    answered,
    known_run,
    problems_response,
    redacted_problem,
    run_view,
)
from ._bodies import parse_json, read_body
from ._errors import ServeRefused
from ._idempotency import checked_key
from ._mcp_messages import checked_message
from ._mcp_runs import (
    CANCEL_RUN,
    CONTROL_TOOLS,
    DECIDE_RUN,
    GET_RUN,
    control_tools,
    decisions_argument,
    run_argument,
    wait_argument,
)
from ._openapi import inputs_schema, run_schema
from ._requests import Problem, Refused, refused, run_request
from ._store import FINISHED, SETTLED, RunRow
from ._streams import event_stream
from ._tokens import admitted

if TYPE_CHECKING:
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.session import ServerSession
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.datastructures import Headers
    from starlette.responses import JSONResponse
    from starlette.types import Message, Receive, Scope, Send

    from ._service import RunService
    from ._tokens import TokenFile

MCP_PATH = "/mcp"
# The names a `Host` header may give a server on a loopback address (with a port).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
# The media types a POST's `Accept` must list: an answer is a JSON message or an SSE stream.
ACCEPTED = ("application/json", "text/event-stream")
# HTTP's default port: a client leaves it out of `Host` (RFC 9110, 7.2).
DEFAULT_PORT = 80
# The `_meta` key of a tool call that carries the run's budget (the HTTP body's `budget`).
BUDGET_META = "converge-dsl/budget"
# The `_meta` key of a tool call that carries its idempotency key (the `Idempotency-Key` header).
IDEMPOTENCY_META = "converge-dsl/idempotency-key"
# MCP's tool names: 1 to 128 of these characters.
_TOOL_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_TOOL_NAME = 128
# How long a stopped run's last progress notifications may take to be sent (seconds).
PROGRESS_DRAIN_S = 2.0


def loopback_host(host: str, port: int | None) -> bool:
    """Whether `host` (a `Host` header) names a loopback server listening on `port`
    (None: not known): a loopback name with a port, or without one when the server
    listens on `DEFAULT_PORT`, which HTTP clients leave out."""
    if any(host.startswith(f"{name}:") for name in LOOPBACK_NAMES):
        return True
    return port == DEFAULT_PORT and host in LOOPBACK_NAMES


def tool_name(pipeline: str) -> str:
    """The MCP tool name of a pipeline: characters MCP does not allow become `_`, cut at 128."""
    return _TOOL_CHARS.sub("_", pipeline)[:_MAX_TOOL_NAME] or "_"


def tool_names(pipelines: Iterable[str]) -> dict[str, str]:
    """Tool name -> pipeline name; `ServeRefused` (CD436) when two pipelines give one name."""
    out: dict[str, str] = {}
    for pipeline in pipelines:
        name = tool_name(pipeline)
        if name in out:
            raise ServeRefused(
                codes.SERVE_MCP_TOOL_NAME_TAKEN,
                f"pipelines {out[name]!r} and {pipeline!r} are both the MCP tool {name!r}",
                hint=f"rename one (its `name:`) so that the first {_MAX_TOOL_NAME} characters "
                "differ",
            )
        out[name] = pipeline
    return out


class McpEndpoint:
    """The MCP server over one service (see the module docstring)."""

    path = MCP_PATH

    def __init__(
        self,
        service: RunService,
        tokens: TokenFile | None,
        limits: HttpLimits,
        *,
        loopback: bool,
    ) -> None:
        from mcp.server.lowlevel import Server
        from mcp.server.transport_security import TransportSecuritySettings

        self.service = service
        self.tokens = tokens
        self.limits = limits
        self.tools = tool_names(service.pipelines)
        self._listed = [*self._tool_list(), *control_tools()]
        self.server: Server[Any, Any] = Server("converge-dsl serve", __version__)
        self.server.list_tools()(self._list)  # type: ignore[no-untyped-call]
        # Validation is `run_request`'s: the same located errors as the HTTP API's 422.
        self.server.call_tool(validate_input=False)(self._call)
        # A browser page must not reach a loopback server through a rebound name: checked
        # first by `_transport_refusal` (the service's JSON), the SDK's check behind it.
        self.loopback = loopback
        # (the bare names too, for a server on port 80: `loopback_host`, checked first,
        # takes them on that port only)
        allowed = [*(f"{name}:*" for name in LOOPBACK_NAMES), *LOOPBACK_NAMES]
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=loopback,
            allowed_hosts=allowed if loopback else [],
        )
        self._security = security
        # The SDK's transport, while the application's lifespan runs (`running`): uvicorn
        # (`lifespan="on"`) takes no request before it starts nor after it ends.
        self.sessions: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The session manager's task group, for the application's lifespan: a new manager
        each time (the SDK's runs once), so that the application may be served again."""
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.sessions = StreamableHTTPSessionManager(
            self.server,
            stateless=True,
            security_settings=self._security,
            max_request_body_size=self.limits.body_cap,
        )
        try:
            async with self.sessions.run():
                yield
        finally:
            self.sessions = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI endpoint: the token check, then the SDK's transport."""
        from starlette.datastructures import Headers
        from starlette.requests import Request

        headers = Headers(scope=scope)
        server = scope.get("server")
        refusal = admitted(self.tokens, headers) or self._transport_refusal(
            headers, None if server is None else server[1]
        )
        if refusal is not None:
            await problems_response(refusal, self.service.redact)(scope, receive, send)
            return
        method = str(scope.get("method"))
        if method != "POST":
            # a stateless server never has a message to send on a stream of its own (the
            # SDK's would stay open and idle, holding one of the server's bounded
            # connections), nor a session to end: each is refused in the service's words
            await _not_posted(method)(scope, receive, send)
            return
        try:
            _check_accept(headers.get("accept", ""))
            raw = await read_body(
                Request(scope, receive), self.limits.body_cap, self.limits.body_s, lenient=False
            )
            message = parse_json(raw)
            checked_message(message)
            _check_protocol_version(headers.get("mcp-protocol-version"), message)
        except Refused as error:
            await problems_response(error, self.service.redact)(scope, receive, send)
            return
        if "method" not in message:
            # A response: this stateless server sends no request, so it answers none
            # (accepted, as the SDK would, without the SDK's error in the log for each).
            from starlette.responses import Response

            await Response(status_code=202)(scope, receive, send)
            return
        if self.sessions is None:  # a fault of the application's host: a 500 (CD445)
            raise RuntimeError("the MCP endpoint got a request outside its lifespan")
        receive = _replay(raw, receive)
        await self.sessions.handle_request(scope, receive, send)

    def _transport_refusal(self, headers: Headers, port: int | None) -> Refused | None:
        """The SDK's transport checks, refused in the service's words before it makes them
        (its answers are plain text): on a loopback address a `Host` that is not a loopback
        name with a port, or without one on port 80 (`loopback_host`; 421, CD444) and any
        `Origin` (403, CD444), as its `TransportSecuritySettings` configured above refuse
        them. (A POST whose Content-Type is not JSON's own is `read_body`'s 415, CD307.)"""
        if self.loopback:
            host = headers.get("host", "")
            if not loopback_host(host, port):
                return refused(
                    421,
                    codes.SERVE_MCP_HOST_REFUSED,
                    f"the Host header {host[:100]!r} is not this server's: on a loopback "
                    "address /mcp answers a loopback name with its port only",
                    "",
                    "send Host: 127.0.0.1:PORT (or localhost:PORT, [::1]:PORT), the port "
                    "included (but port 80's), as HTTP clients do",
                )
            origin = headers.get("origin")
            if origin:
                return refused(
                    403,
                    codes.SERVE_MCP_HOST_REFUSED,
                    f"the request comes from the web page of {origin[:100]!r}: on a loopback "
                    "address /mcp answers no web page",
                    "",
                    "call /mcp from an MCP client, without an Origin header",
                )
        return None

    # --- tools ------------------------------------------------------------------------

    def _tool_list(self) -> list[types.Tool]:
        from mcp import types

        listed = []
        for name, pipeline_name in self.tools.items():
            pipeline = self.service.pipelines[pipeline_name]
            description = pipeline.document.data.get("description")
            listed.append(
                types.Tool(
                    name=name,
                    title=pipeline_name,
                    description=description if isinstance(description, str) else None,
                    inputSchema=inputs_schema(pipeline),
                    outputSchema=run_schema(pipeline),
                )
            )
        return listed

    async def _list(self) -> list[types.Tool]:
        return self._listed

    async def _call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        context = self.server.request_context
        meta = context.meta
        extra = {} if meta is None else (meta.model_extra or {})
        token = None if meta is None else meta.progressToken
        request_id = str(context.request_id)
        try:
            if name in CONTROL_TOOLS:
                row = await self._control(name, arguments, context.session, token, request_id)
            else:
                pipeline = self._pipeline(name)
                body: dict[str, Any] = {"inputs": arguments}
                if BUDGET_META in extra:
                    body["budget"] = extra[BUDGET_META]
                checked = run_request(self.service.pipelines[pipeline], body)
                key = None
                if IDEMPOTENCY_META in extra:
                    key = checked_key(
                        extra[IDEMPOTENCY_META],
                        codes.SERVE_MCP_BAD_IDEMPOTENCY_KEY,
                        f"the _meta key {IDEMPOTENCY_META}",
                    )
                run = self.service.submit(pipeline, checked, key, commit="with_end")
                row = await self._wait(run, context.session, token, request_id)
        except Exception as error:  # answered as the HTTP API answers it, not by the SDK
            return self._refusal(answered(error, "POST", MCP_PATH))
        base = _base_url(context.request)
        if self.service.is_stopping and row.status not in SETTLED:
            return self._refusal(_stopping(row, base))
        return _answer(row, base)

    async def _control(
        self,
        name: str,
        arguments: dict[str, Any],
        session: ServerSession,
        token: str | int | None,
        request_id: str,
    ) -> RunRow:
        """A run-control tool's call (`_mcp_runs`): the run it answers."""
        service = self.service
        if name == GET_RUN:
            ident = run_argument(arguments, ("wait",))
            wait = wait_argument(arguments)
            run = known_run(service, ident)
            if wait:
                return await self._wait(run, session, token, request_id)
            return service.get(run)
        if name == DECIDE_RUN:
            run = known_run(service, run_argument(arguments, None))
            await service.decide(run, decisions_argument(arguments))
            return await self._wait(run, session, token, request_id)
        if name == CANCEL_RUN:
            run = known_run(service, run_argument(arguments, ()))
            return await service.cancel_and_wait(run, self.limits.wait_s)
        raise AssertionError(f"{name!r} is no run-control tool")  # pragma: no cover

    def _pipeline(self, name: str) -> str:
        pipeline = self.tools.get(name)
        if pipeline is not None:
            return pipeline
        from converge_dsl.diagnostics import unknown_name_hint

        served = [*self.tools, *CONTROL_TOOLS]
        hint = unknown_name_hint(name, served, f"tools: {', '.join(served)}")
        raise refused(
            404, codes.SERVE_MCP_UNKNOWN_TOOL, f"no tool {name[:64]!r} is served", "", hint
        )

    async def _wait(
        self, run: str, session: ServerSession, token: str | int | None, request_id: str
    ) -> RunRow:
        """The run once it stops, or after the wait; its events as progress meanwhile."""
        if token is None:
            return await self.service.wait(run, self.limits.wait_s)
        progress = asyncio.create_task(self._progress(run, session, token, request_id))
        try:
            row = await self.service.wait(run, self.limits.wait_s)
            if row.status in SETTLED:
                # the event stream ends by itself once it has sent the run's last events
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(progress), PROGRESS_DRAIN_S)
            return row
        finally:
            progress.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await progress

    async def _progress(
        self, run: str, session: ServerSession, token: str | int, request_id: str
    ) -> None:
        """One progress notification per trace event of `run`, read from the run's event
        stream (`GET /v1/runs/{id}/events`'s), until the run stops or pauses."""
        count = 0
        async for chunk in event_stream(self.service, run, -1):
            if not chunk.startswith("id: "):
                continue  # a keep-alive comment, or the end
            count += 1
            line = chunk.split("\ndata: ", 1)[1].rstrip("\n")
            await session.send_progress_notification(
                token, count, message=_event_type(line), related_request_id=request_id
            )

    def _refusal(self, error: Refused) -> types.CallToolResult:
        from mcp import types

        body: dict[str, Any] = {
            "status": error.status,
            "errors": [redacted_problem(p, self.service.redact) for p in error.problems],
        }
        if error.retry_after is not None:
            body["retry_after"] = error.retry_after
        text = json.dumps(body, ensure_ascii=False, indent=2)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], isError=True
        )


def _check_accept(header: str) -> None:
    """A POST's `Accept` lists both media types MCP's streamable HTTP answers in, as the
    spec requires of a client and the SDK checks after this (its 406 is a JSON-RPC error
    with a made-up id): else 406 (CD449) in the service's words."""
    given = [part.strip() for part in header.split(",")]
    lacking = [kind for kind in ACCEPTED if not any(g.startswith(kind) for g in given)]
    if lacking:
        raise refused(
            406,
            codes.SERVE_MCP_NOT_ACCEPTABLE,
            f"the Accept header {header[:100]!r} does not list {' and '.join(lacking)}: "
            "an answer of /mcp is either",
            "",
            "send Accept: application/json, text/event-stream (as MCP clients do)",
        )


def _check_protocol_version(header: str | None, message: dict[str, Any]) -> None:
    """A POST's `MCP-Protocol-Version` header, when given with a message other than
    `initialize` (which negotiates the version in its body), is a version the SDK speaks,
    as it checks after this (its 400 is a JSON-RPC error with a made-up id): else 400
    (CD460) in the service's words."""
    from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS

    if header is None or message.get("method") == "initialize":
        return
    if header not in SUPPORTED_PROTOCOL_VERSIONS:
        raise refused(
            400,
            codes.SERVE_MCP_PROTOCOL_VERSION,
            f"the MCP-Protocol-Version header {header[:40]!r} is not a version this server speaks",
            "",
            f"send one of {', '.join(SUPPORTED_PROTOCOL_VERSIONS)} (the version `initialize` "
            "answered), or no MCP-Protocol-Version header",
        )


def _not_posted(method: str) -> JSONResponse:
    """405 to a request of the endpoint that is not a POST: to a GET, MCP's answer from a
    server that offers no stream; to a DELETE, from one that keeps no session."""
    from starlette.responses import JSONResponse

    why = {
        "GET": "this server sends no messages of its own (it is stateless)",
        "DELETE": "this server keeps no session to end (it is stateless)",
    }.get(method, "the endpoint takes POST only")
    problem = Problem(
        codes.SERVE_NOT_FOUND,
        f"{method[:16]} /mcp: {why}",
        "",
        "POST each JSON-RPC message; its answer comes back on that request",
    )
    return JSONResponse({"errors": [problem.data()]}, status_code=405, headers={"Allow": "POST"})


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` whose first message is the whole of `body`, already read (and checked);
    then the connection's own messages (its end)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _event_type(line: str) -> str | None:
    try:
        kind = json.loads(line).get("type")
    except (ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None


def _base_url(request: Any) -> str:
    """The URL the client reached the service at (the SDK hands the Starlette request)."""
    from starlette.requests import Request

    if isinstance(request, Request):
        return str(request.base_url).rstrip("/")
    return ""


def _links(run: str, base: str, paused: bool) -> dict[str, str]:
    links = {
        "run": f"{base}/v1/runs/{run}",
        "events": f"{base}/v1/runs/{run}/events",
        "report": f"{base}/v1/runs/{run}/report",
    }
    if paused:
        links["decisions"] = f"{base}/v1/runs/{run}/decisions"
    return links


def _stopping(row: RunRow, base: str) -> Refused:
    """A call answered as the server stops, its run not stopped (503, CD463): the run is
    kept and continues at the server's next start, where the call's client fetches it."""
    return refused(
        503,
        codes.SERVE_MCP_STOPPING,
        f"the server is stopping: run {row.id} is {row.status}, kept, and continues when "
        "the server starts again",
        "",
        f'once the server is back, call the {GET_RUN} tool with {{"run": "{row.id}", '
        f'"wait": true}}, or GET {base}/v1/runs/{row.id}',
    )


def _answer(row: RunRow, base: str) -> types.CallToolResult:
    """The run as `?wait=true` shows it, with its links and, unless it stopped, a note."""
    from mcp import types

    view = run_view(row)
    paused = row.status == "paused"
    view["links"] = _links(row.id, base, paused)
    if paused:
        view["note"] = (
            f"run {row.id} is paused: its held proposals wait for a decision "
            f"(the {DECIDE_RUN} tool, or POST {view['links']['decisions']}, then "
            f"GET {view['links']['run']})"
        )
    elif row.status not in FINISHED:
        view["note"] = (
            f"run {row.id} is {row.status} after the wait; follow it with the {GET_RUN} tool "
            f"(wait: true), at GET {view['links']['run']} or its events at "
            f"GET {view['links']['events']}"
        )
    text = json.dumps(view, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structuredContent=view,
        isError=False,
    )
