"""The HTTP face of the run service: a Starlette application (`build_app`).

Routes (docs/serve.md): `POST /v1/pipelines/{name}/runs` (`?wait=true`
waits at most `wait_s` and answers the run with its result, else 202),
`GET /v1/runs/{id}`, `GET /v1/runs/{id}/events` (Server-Sent Events,
resumable with `Last-Event-ID`), `GET /v1/runs/{id}/report` (HTML),
`DELETE /v1/runs/{id}`, `POST /v1/runs/{id}/decisions`, `GET /v1/pipelines`,
`GET /v1/openapi.json`, `GET /healthz` (no token needed) and `GET /metrics`.

Every refusal is `{"errors": [{code, message, pointer, hint}]}` with its
status; each message passes through the redactor. A fault of the service on a
request is a 500 of that shape too (CD445), its traceback in the server's log
only: a handler's, the MCP endpoint's (`FaultsAnswered`) or one outside them
(`_Api.fault`, after which the connection closes). One mapping (`answered`) says
what a handler's or the MCP endpoint's exception is answered with, so an error of
ours keeps its own code and hint wherever it is raised. A token is needed on every
route but `/healthz` when the service has tokens. Bodies are read by `_bodies`
(up to `body_cap` bytes, 413 past it; JSON only, 415 else). Run ids are checked
against their form before any use: no path on the server is made from a request
but the pipeline names and run ids the service itself made.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from converge_dsl import codes
from converge_dsl.errors import ConvergeError

from ._bodies import BODY_S, parse_json, read_body
from ._idempotency import IdempotencyKey, checked_key
from ._openapi import document, inputs_schema
from ._requests import (
    Problem,
    Refused,
    decisions_request,
    failed,
    one_header,
    refused,
    run_request,
)
from ._store import SETTLED, RunRow
from ._streams import event_stream, last_event
from ._tokens import TokenFile, admitted

if TYPE_CHECKING:
    from starlette.types import Message, Receive, Scope, Send

    from ._service import RunService

RUN_ID = re.compile(r"[0-9a-f]{32}")
_CATCH_ALL = "/{rest:path}"  # the route of every other path: 404 (or 405) as JSON
# The reconnection time (`retry:`, in ms) an `error` event gives an `EventSource` that
# its page does not close: not back at once into the fault that ended its stream.
ERROR_RETRY_MS = 30_000


@dataclass(frozen=True)
class HttpLimits:
    """The request body cap (bytes), the longest `?wait=true` and the longest a body may
    take to arrive (seconds)."""

    body_cap: int = 1 << 20
    wait_s: float = 60.0
    body_s: float = BODY_S


class Endpoint(Protocol):
    """An ASGI endpoint mounted beside the routes at `path`, running while the
    application runs (`serve --mcp`: `_mcp.McpEndpoint`)."""

    path: str

    def running(self) -> contextlib.AbstractAsyncContextManager[object]: ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


def _idempotency_key(request: Request) -> IdempotencyKey | None:
    """The request's `Idempotency-Key` header (None without one); 400 (CD998) when it is
    not 1 to `MAX_IDEMPOTENCY_KEY` printable ASCII characters."""
    key = one_header(request.headers, "Idempotency-Key", codes.SERVE_BAD_IDEMPOTENCY_KEY)
    if key is None:
        return None
    return checked_key(key, codes.SERVE_BAD_IDEMPOTENCY_KEY, "the Idempotency-Key header")


_WAIT = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _wait_asked(request: Request) -> bool:
    """Whether the query asks `?wait=true` (or 1, yes; false, 0, no or none: not); 400
    (CD309) for another value, or two that differ."""
    given = {value.lower() for value in request.query_params.getlist("wait")}
    asked = {_WAIT.get(value) for value in given}
    if None in asked or len(asked) > 1:
        shown = ", ".join(repr(value[:20]) for value in sorted(given))
        raise refused(
            400,
            codes.SERVE_BAD_PARAMETER,
            f"?wait= is {shown}: it takes one of true or false",
            "",
            "ask ?wait=true to wait for the run (at most --wait-timeout), else leave it out",
        )
    return asked == {True}


def _no_events(run: str) -> Refused:
    return refused(
        404,
        codes.SERVE_NOT_FOUND,
        f"run {run!r} has no events yet",
        "",
        "ask again once the run has started",
    )


def known_run(service: RunService, ident: str) -> str:
    """`ident` once it has the form of a run id and the run exists; else the 404 (CD990).
    Checked before any other use of an id a request gave (the HTTP path, an MCP tool's
    arguments)."""
    if not RUN_ID.fullmatch(ident):
        raise refused(404, codes.SERVE_NOT_FOUND, f"no run {ident[:64]!r}", "")
    service.get(ident)
    return ident


def problems_response(error: Refused, redact: Callable[[str], str]) -> JSONResponse:
    """The JSON errors a refusal is answered with, by the HTTP API and at `/mcp` alike
    (a 401 names the scheme it asks for; a refusal that ends, its `Retry-After`)."""
    body = {"errors": [redacted_problem(p, redact) for p in error.problems]}
    headers = {} if error.retry_after is None else {"Retry-After": str(error.retry_after)}
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(body, status_code=error.status, headers=headers)


def redacted_problem(problem: Problem, redact: Callable[[str], str]) -> dict[str, Any]:
    data = problem.data()
    for field in ("message", "pointer", "hint", "text"):
        if field in data:
            data[field] = redact(data[field])
    return data


def run_view(row: RunRow, *, result: bool = True) -> dict[str, Any]:
    """A run as the API shows it."""
    view: dict[str, Any] = {
        "id": row.id,
        "pipeline": row.pipeline,
        "status": row.status,
        "stop_reason": row.stop_reason,
        "attempts": row.attempts,
    }
    if result and row.result is not None:
        view["result"] = row.result
    return view


def run_answer(row: RunRow, status_code: int) -> Response:
    """`run_view(row)` as a JSON answer. A result whose text the service wrote to the store
    (`RunRow.result_json`, JSON text `JSONResponse` would accept) goes in as that text."""
    if row.result is None or row.result_json is None:
        return JSONResponse(run_view(row), status_code=status_code)
    head = json.dumps(run_view(row, result=False), ensure_ascii=False, separators=(",", ":"))
    content = f'{head[:-1]},"result":{row.result_json}}}'
    return Response(content, status_code, media_type="application/json")


Handler = Callable[[Request], Awaitable[Response]]


class _Api:
    """The route handlers over one service (see the module docstring)."""

    def __init__(
        self,
        service: RunService,
        tokens: TokenFile | None,
        limits: HttpLimits,
        mcp: str | None = None,
    ) -> None:
        self.service = service
        self.tokens = tokens
        self.limits = limits
        self.openapi = document(service.pipelines, mcp)  # `mcp`: the MCP endpoint's path
        self.routes: list[Route] = []  # the application's (`build_app`), for 405's Allow
        self.state = service.state_file

    def guarded(self, handler: Handler, *, open_route: bool = False) -> Handler:
        """`handler` behind the token check, its refusals answered as JSON errors."""
        redact = self.service.redact

        async def call(request: Request) -> Response:
            try:
                refusal = None if open_route else admitted(self.tokens, request.headers)
                if refusal is not None:
                    return problems_response(refusal, redact)
                return await handler(request)
            except Exception as error:
                return problems_response(answered(error, request.method, request.url.path), redact)

        return call

    async def body(self, request: Request, empty: Any) -> Any:
        """The JSON body, read up to the cap (`_bodies`); `empty` when there is none (a
        body `null` is JSON, and no object)."""
        raw = await read_body(request, self.limits.body_cap, self.limits.body_s)
        return empty if not raw.strip() else parse_json(raw)

    def run_id(self, request: Request) -> str:
        """The run id of the path, once it has the form of one (and the run exists)."""
        return known_run(self.service, str(request.path_params["id"]))

    async def start_run(self, request: Request) -> Response:
        service = self.service
        name = str(request.path_params["name"])
        pipeline = service.pipelines.get(name)
        if pipeline is None:
            from converge_dsl.diagnostics import unknown_name_hint

            served = ", ".join(service.pipelines)
            hint = unknown_name_hint(name, service.pipelines, f"served: {served}")
            raise refused(404, codes.SERVE_NOT_FOUND, f"no pipeline {name[:64]!r}", "", hint)
        wait = _wait_asked(request)
        checked = run_request(pipeline, await self.body(request, {}))
        # the add in the journals' group commit: with the run's end when the answer waits
        # for it, else at once and before the answer
        key = _idempotency_key(request)
        run = service.submit(name, checked, key, commit="with_end" if wait else "group")
        if wait:
            row = await service.wait(run, self.limits.wait_s)
            stopped = row.status in SETTLED
            return run_answer(row, 200 if stopped else 202)
        await service.added(run)
        return JSONResponse(
            run_view(service.get(run)),
            status_code=202,
            headers={"Location": f"/v1/runs/{run}"},
        )

    async def get_run(self, request: Request) -> Response:
        return JSONResponse(run_view(self.service.get(self.run_id(request))))

    async def cancel_run(self, request: Request) -> Response:
        """The run once cancelled: a running one once its task stopped, so that the answer
        says whether the cancel took or the run ended first (200); 202 when it is still
        stopping after `wait_s`, as a `?wait=true` still running is."""
        row = await self.service.cancel_and_wait(self.run_id(request), self.limits.wait_s)
        return run_answer(row, 202 if row.status == "running" else 200)

    async def decide(self, request: Request) -> Response:
        try:
            ident = self.run_id(request)
        except Refused as error:
            if error.status == 503:  # the state is gone; a malformed body is 422 regardless
                decisions_request(await self.body(request, None))
            raise
        decisions = decisions_request(await self.body(request, None))
        return JSONResponse(run_view(await self.service.decide(ident, decisions)))

    async def events(self, request: Request) -> Response:
        ident = self.run_id(request)
        last = last_event(request, self.service, ident)
        stream = event_stream(self.service, ident, last)
        return StreamingResponse(
            faults_as_events(stream, self.service.redact, request.url.path),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store"},
        )

    async def report(self, request: Request) -> Response:
        """The run's HTML report, built from its events; a HEAD the GET's status and
        headers without building it: its length is known only once built, so the HEAD
        has no Content-Length (RFC 9110 §9.3.2 lets it leave out what only the content
        makes)."""
        ident = self.run_id(request)
        live = self.service.live(ident)
        if request.method == "HEAD":
            stored = self.service.store.stored_past(ident)  # 0: no event stored
            if not stored and (live is None or not live.records):
                raise _no_events(ident)
            head = HTMLResponse(None)
            del head.headers["content-length"]
            return head
        lines = [line for _, line in self.service.store.events(ident)]
        if live is not None:
            lines += live.pending()
        if not lines:
            raise _no_events(ident)
        return HTMLResponse(await asyncio.to_thread(_render, lines))

    async def pipelines(self, request: Request) -> Response:
        listed = {
            name: {
                "description": pipeline.document.data.get("description"),
                "inputs": inputs_schema(pipeline),
                "keys": list(pipeline.keys),
                "queue_depth": self.service.queue_depth(name),
            }
            for name, pipeline in self.service.pipelines.items()
        }
        return JSONResponse({"pipelines": listed})

    async def openapi_document(self, request: Request) -> Response:
        return JSONResponse(self.openapi)

    async def health(self, request: Request) -> Response:
        """Ok, or the 503 every other request would meet: the state gone (CD993), the
        token file unusable (CD461), so that a load balancer drains the instance."""
        self.state.check()
        if self.tokens is not None:
            self.tokens.usable()
        return JSONResponse({"status": "ok", "pipelines": len(self.service.pipelines)})

    async def metrics(self, request: Request) -> Response:
        service = self.service
        text = service.metrics.text(
            service.store.counts(),
            {name: service.queue_depth(name) for name in service.pipelines},
            service.running(),
        )
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    async def framework_refusal(self, request: Request, exc: Exception) -> Response:
        """A refusal Starlette makes itself (a method a route does not take: 405) as the
        service's JSON errors, rather than its plain text."""
        assert isinstance(exc, HTTPException)
        # Starlette's Allow names the methods of the first route of the path only
        allowed = self.allowed(request) if exc.status_code == 405 else None
        if exc.status_code == 405 and allowed is None:  # a method not even the catch-all takes
            return problems_response(_no_route(request), self.service.redact)
        return self.refusal(request, exc.status_code, str(exc.detail), allowed)

    def allowed(self, request: Request) -> str | None:
        """The methods the routes of the request's path take, all of them (None when no
        route but the catch-all has that path)."""
        path = request.url.path
        methods = {
            method
            for route in self.routes
            if route.path != _CATCH_ALL and route.methods and route.path_regex.match(path)
            for method in route.methods
        }
        return ", ".join(sorted(methods)) if methods else None

    def refusal(self, request: Request, status: int, detail: str, allowed: str | None) -> Response:
        """A refusal of the request's method or path as the service's JSON errors (405
        with the `Allow` header when `allowed`)."""
        hint = f"{request.url.path[:100]} takes {allowed}" if allowed else None
        error = refused(
            status,
            codes.SERVE_NOT_FOUND,
            f"{request.method[:20]} {request.url.path[:100]!r}: {detail}",
            "",
            hint,
        )
        response = problems_response(error, self.service.redact)
        if allowed:
            response.headers["Allow"] = allowed
        return response

    async def fault(self, request: Request, exc: Exception) -> Response:
        """A fault no handler answered (an exception handler's, a middleware's), answered
        as `guarded` answers a handler's: Starlette raises it again after this answer,
        and uvicorn logs its traceback and closes the connection."""
        return problems_response(Refused(500, (INTERNAL_ERROR,)), self.service.redact)

    async def not_found(self, request: Request) -> Response:
        """404, or 405 for a path a route has, with a method it does not take (the
        catch-all takes the methods of the API, before Starlette could refuse them)."""
        allowed = self.allowed(request)
        if allowed is not None:
            return self.refusal(request, 405, "Method Not Allowed", allowed)
        raise _no_route(request)


def _no_route(request: Request) -> Refused:
    """The 404 of a path no route takes, whatever its method."""
    path = request.url.path[:100]
    return refused(404, codes.SERVE_NOT_FOUND, f"no route {path!r}", "", "see GET /v1/openapi.json")


def answered(error: Exception, method: str, path: str) -> Refused:
    """What a request that raised `error` is answered: a refusal as it is; another error
    of ours a 500 of its own code (`failed`); a fault of this service a 500 of CD445,
    its traceback in the server's log only (call it while `error` is being handled)."""
    if isinstance(error, Refused):
        return error
    if isinstance(error, ConvergeError):
        return failed(error)
    _log_fault(method, path)
    return Refused(500, (INTERNAL_ERROR,))


async def faults_as_events(
    stream: AsyncIterator[str], redact: Callable[[str], str], path: str
) -> AsyncIterator[str]:
    """`stream`, with a fault after its answer began sent as a last `error` event (the
    JSON errors a request's fault is answered with, `answered`) before the stream ends:
    the client learns why it ended, where a cut connection would have it reconnect. The
    event sets the reconnection time to `ERROR_RETRY_MS`: a browser's `EventSource`
    reconnects after any end its page does not close, and would meet the same fault
    every few seconds (docs/serve.md: a client closes on `error`)."""
    try:
        async for block in stream:
            yield block
    except Exception as error:
        problems = answered(error, "GET", path).problems
        body = {"errors": [redacted_problem(problem, redact) for problem in problems]}
        yield f"event: error\nretry: {ERROR_RETRY_MS}\ndata: {json.dumps(body)}\n\n"


def _log_fault(method: str, path: str) -> None:
    """The traceback of the exception being handled, in the server's log."""
    logging.getLogger("uvicorn.error").exception("the service failed on %s %s", method, path)


class FaultsAnswered:
    """An ASGI endpoint (`Endpoint`) with what it raises answered as a handler's is
    (`_Api.guarded`, one mapping: `answered`): a refusal as it is, an error of ours
    a 500 of its own code, a fault a 500 of CD445, the traceback logged; an endpoint
    that returns without answering is a 500 of CD445 too (uvicorn would answer it in
    plain text). A fault after its answer began is raised on (uvicorn logs it and
    closes the connection: nothing more can be answered). A class: Starlette's `Route`
    calls a plain function with a request."""

    def __init__(self, endpoint: Endpoint, redact: Callable[[str], str]) -> None:
        self.endpoint = endpoint
        self.redact = redact

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        method, path = str(scope.get("method", "")), str(scope.get("path", ""))
        try:
            await self.endpoint(scope, receive, tracked)
        except Exception as error:
            if started:
                raise
            refusal = answered(error, method, path)
        else:
            if started:
                return
            logging.getLogger("uvicorn.error").error(
                "the service answered nothing on %s %s", method, path
            )
            refusal = Refused(500, (INTERNAL_ERROR,))
        await problems_response(refusal, self.redact)(scope, receive, send)


INTERNAL_ERROR = Problem(
    codes.SERVE_INTERNAL_ERROR,
    "the service failed on this request (a fault of the service, not of the request)",
    "",
    "try again; if it fails again, the service's log has the fault: report it",
)


def build_app(
    service: RunService,
    tokens: TokenFile | None,
    limits: HttpLimits,
    mcp: Endpoint | None = None,
) -> Starlette:
    """The application over `service` (see the module docstring), with the MCP endpoint
    at `/mcp` when given one (`serve --mcp`, docs/serve.md)."""
    api = _Api(service, tokens, limits, None if mcp is None else mcp.path)
    guarded = api.guarded

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await service.start()
        try:
            async with contextlib.AsyncExitStack() as stack:
                if mcp is not None:
                    await stack.enter_async_context(mcp.running())
                yield
        finally:
            await service.stop()

    routes = [
        Route("/v1/pipelines/{name}/runs", guarded(api.start_run), methods=["POST"]),
        Route("/v1/runs/{id}", guarded(api.get_run), methods=["GET"]),
        Route("/v1/runs/{id}", guarded(api.cancel_run), methods=["DELETE"]),
        Route("/v1/runs/{id}/events", guarded(api.events), methods=["GET"]),
        Route("/v1/runs/{id}/report", guarded(api.report), methods=["GET"]),
        Route("/v1/runs/{id}/decisions", guarded(api.decide), methods=["POST"]),
        Route("/v1/pipelines", guarded(api.pipelines), methods=["GET"]),
        Route("/v1/openapi.json", guarded(api.openapi_document), methods=["GET"]),
        Route("/healthz", guarded(api.health, open_route=True), methods=["GET"]),
        Route("/metrics", guarded(api.metrics), methods=["GET"]),
        *([] if mcp is None else [Route(mcp.path, FaultsAnswered(mcp, service.redact))]),
        Route(
            _CATCH_ALL,
            guarded(api.not_found),
            methods=["GET", "POST", "DELETE", "PUT", "PATCH"],
        ),
    ]
    api.routes = routes
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: api.framework_refusal, Exception: api.fault},
    )


def _render(lines: list[str]) -> str:
    from converge_dsl.runtime import render_report

    with tempfile.TemporaryDirectory(prefix="converge-serve-") as folder:
        path = Path(folder) / "trace.jsonl"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return render_report(path)
