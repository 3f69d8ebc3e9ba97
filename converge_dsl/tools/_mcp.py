"""`McpToolServer`: the tools port on the `mcp` SDK, over stdio or streamable HTTP.

Each server lives in a thread of its own running an event loop that owns the
SDK's session (its task groups must be entered and left by one task); callers
on any loop await `call`, which hands the request to that loop. `start` opens
the transport, does the MCP handshake and reads `tools/list` within
`start_timeout_s`; `call` waits at most `call_timeout_s`, and a call that
passes it stops the server (a hung child is killed with its process group), so
later calls fail at once. `close` stops the server and joins its thread; it is
idempotent and bounded. Every failure of the SDK, the child or the network is
translated here into `ToolFailure` (CD963-CD966); nothing of `mcp`, `anyio` or
`httpx` escapes, nor reaches stderr: what the SDK's client drops unread (and only
logs) is named in the timeout of the request it left unanswered (`_ClientFaults`).
A streamable HTTP server is reached with the proxies and certificates of the
environment the server is given, not the process's (`_http_env`).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import os
import shutil
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeVar

import anyio

from converge_dsl import codes
from converge_dsl._escapes import shell_join, shell_word
from converge_dsl._json_types import JsonObject, JsonValue
from converge_dsl.frontend import HttpServerSpec, StdioServerSpec, ToolServerSpec
from converge_dsl.tools._environment import child_environment
from converge_dsl.tools._port import (
    ServerInfo,
    ServerLimits,
    ToolFailure,
    ToolInfo,
    ToolResult,
    cap_result,
)

T = TypeVar("T")
JOIN_TIMEOUT_S = 10.0
LINE_OVERHEAD = 65_536  # room for the JSON-RPC envelope and escapes around a result
FAULT_CHARS = 300  # how much of a fault the client dropped a message for is quoted


class _ClientFaults(logging.Handler):
    """What the SDK's client logs when it drops a message it cannot read (an HTTP body
    cut short, a content type it does not take, a line that is not JSON-RPC), kept for
    the failure message of the server whose thread logged it. Those messages are never
    printed: the request they answered only times out, so the timeout's message names
    the fault instead (a record of another thread goes where logging sends it)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.watched: dict[int, str] = {}  # a server thread's ident -> its last fault

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread not in self.watched:
            if not logging.getLogger().handlers:  # as with no handler at all
                logging.lastResort.handle(record)  # type: ignore[union-attr]
            return
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text = f"{text}: {_reason(record.exc_info[1])}"
        self.watched[record.thread] = text[:FAULT_CHARS]


_FAULTS = _ClientFaults()
logging.getLogger("mcp.client").addHandler(_FAULTS)


class McpToolServer:
    """The tools port on the `mcp` SDK (see the module docstring).

    `base_dir` is the pipeline's folder (a stdio server's `cwd` and a relative
    program are resolved against it); `environ` the parent's environment (the
    process's by default), read for `env.pass` and for HTTP headers.
    """

    def __init__(
        self,
        spec: ToolServerSpec,
        base_dir: Path,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.spec = spec
        self.limits = ServerLimits.of(spec)
        self.base_dir = base_dir
        self.environ = dict(os.environ if environ is None else environ)
        self.info: ServerInfo | None = None
        self.child_pid: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._session: Any = None
        self._child: Any = None
        self._broken: ToolFailure | None = None
        self._last_fault = ""  # `_fault` once the server's thread has ended
        self._task: asyncio.Task[None] | None = None  # `_serve`, in the server's loop
        self._serving = False  # started: `_serve` waits for `_stopped`
        self._closing = False  # `close` was called: a start in progress gives up

    @property
    def name(self) -> str:
        return self.spec.name

    def _fail(self, code: str, message: str, hint: str | None = None) -> ToolFailure:
        return ToolFailure(code, self.name, f"tool server {self.name!r}: {message}", hint=hint)

    # --- start -------------------------------------------------------------------------

    def start(self) -> ServerInfo:
        """Start the server and read its tools (see the module docstring)."""
        if self.info is not None:
            return self.info
        ready: concurrent.futures.Future[ServerInfo] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._run_loop, args=(ready,), name=f"mcp-{self.name}", daemon=True
        )
        self._thread.start()
        try:
            self.info = ready.result(timeout=self.limits.start_timeout_s + JOIN_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            self.close()
            raise self._fail(
                codes.TOOL_SERVER_NOT_STARTED,
                f"did not start within {self.limits.start_timeout_s:g} s",
                hint=self._slow_start(),
            ) from None
        except ToolFailure:
            self.close()
            raise
        return self.info

    def _slow_start(self) -> str:
        """What to do about a server that did not start in time, by its transport."""
        if isinstance(self.spec, HttpServerSpec):
            return (
                "raise start_timeout_s if the server is slow to answer, or check that the "
                f"server answers at {self.spec.url}"
            )
        return (
            "raise start_timeout_s if the server is slow to start, or start it by hand to see "
            "where it stalls"
        )

    def _run_loop(self, ready: concurrent.futures.Future[ServerInfo]) -> None:
        ident = threading.get_ident()
        _FAULTS.watched[ident] = ""
        # The runner closes its loop as `asyncio.run` does, after running what is still
        # scheduled: a child's pipe that reached its end as the server stopped is closed
        # by callbacks that a loop closed at once never runs (its transport, collected
        # later, then warns into whatever runs at that time).
        try:
            with asyncio.Runner() as runner:
                self._loop = runner.get_loop()
                runner.run(self._serve(ready))
        finally:
            self._last_fault = _FAULTS.watched.pop(ident, "")

    async def _serve(self, ready: concurrent.futures.Future[ServerInfo]) -> None:
        self._stopped = asyncio.Event()
        self._task = asyncio.current_task()
        try:
            if self._closing:
                raise asyncio.CancelledError
            async with AsyncExitStack() as stack:
                session = await self._connect(stack)
                try:
                    with anyio.fail_after(self.limits.start_timeout_s):
                        info = await self._handshake(session)
                except TimeoutError:
                    raise self._fail(
                        codes.TOOL_SERVER_NOT_STARTED,
                        f"did not answer the MCP handshake and tools/list within "
                        f"{self.limits.start_timeout_s:g} s{self._fault()}{self._stderr()}",
                        hint=self._slow_start(),
                    ) from None
                ready.set_result(info)
                self._serving = True
                await self._stopped.wait()
        except asyncio.CancelledError:  # `close` while it started: it is stopped, as asked
            if not ready.done():
                ready.set_exception(
                    self._fail(codes.TOOL_SERVER_NOT_STARTED, "was stopped while it started")
                )
        except ToolFailure as failure:
            if not ready.done():
                ready.set_exception(failure)
        except Exception as exc:  # the SDK, anyio, httpx or the OS: translated here
            if not ready.done() and isinstance(_leaf(exc), ToolFailure):
                ready.set_exception(_leaf(exc))  # raised inside the transport's task group
            elif not ready.done():
                code = codes.TOOL_SERVER_NOT_STARTED
                if isinstance(_leaf(exc), _HostRefused):
                    code = codes.TOOL_HOST_REFUSED
                reason, hint = _start_failure(exc, self.spec, self.base_dir)
                message = f"could not start: {reason}{self._stderr()}"
                ready.set_exception(self._fail(code, message, hint))
        finally:
            self._session = None

    def _fault(self) -> str:
        """What the server last sent that the client dropped unread (see `_ClientFaults`;
        a stdio line that is not JSON-RPC), for a timeout's message."""
        thread = self._thread
        fault = self._last_fault
        if thread is not None and thread.ident in _FAULTS.watched:
            fault = _FAULTS.watched[thread.ident]
        if self._child is not None and self._child.not_json:
            fault = f"a line that is not JSON-RPC: {self._child.not_json}"
        return f"; the client dropped what it sent: {fault}" if fault else ""

    def _forget_faults(self) -> None:
        if threading.get_ident() in _FAULTS.watched:
            _FAULTS.watched[threading.get_ident()] = ""
        if self._child is not None:
            self._child.not_json = ""

    def _stderr(self) -> str:
        text = self._child.stderr_text() if self._child is not None else ""
        return f"; its stderr ends: {text[-500:]}" if text else ""

    async def _connect(self, stack: AsyncExitStack) -> Any:
        """The SDK's session over the server's transport (entered on `stack`, so it is
        left by the task that entered it)."""
        from mcp import ClientSession

        if isinstance(self.spec, StdioServerSpec):
            read, write = await self._stdio(stack, self.spec)
        elif isinstance(self.spec, HttpServerSpec):
            read, write = await self._http(stack, self.spec)
        else:  # a record of another kind cannot come from the schema
            raise self._fail(codes.TOOL_SERVER_NOT_STARTED, "unknown transport")
        return await stack.enter_async_context(ClientSession(read, write))

    async def _handshake(self, session: Any) -> ServerInfo:
        initialized = await session.initialize()
        tools: list[ToolInfo] = []
        cursor: str | None = None
        while True:
            listed = await session.list_tools(cursor=cursor)
            tools.extend(
                ToolInfo(t.name, t.description or "", _json(t.inputSchema)) for t in listed.tools
            )
            cursor = listed.nextCursor
            if not cursor:
                break
        counted = collections.Counter(tool.name for tool in tools)
        twice = sorted(name for name, n in counted.items() if n > 1)
        if twice:  # which one a call reaches, and which schema the model is offered, is moot
            raise self._fail(
                codes.TOOL_SERVER_NOT_STARTED,
                f"its tools/list names {', '.join(map(repr, twice))} more than once",
                hint="a server's tool names must be unique: fix the server's tool list",
            )
        self._session = session
        self._forget_faults()  # a banner before the handshake explains no later timeout
        server = initialized.serverInfo
        return ServerInfo(server.name, server.version, tuple(tools))

    async def _stdio(self, stack: AsyncExitStack, spec: StdioServerSpec) -> tuple[Any, Any]:
        from converge_dsl.tools._stdio import stdio_transport

        cwd = self.base_dir / (spec.cwd or ".")
        program = _program(spec.command[0], cwd, self.environ)
        if program is None and "/" in spec.command[0] and os.path.isdir(cwd / spec.command[0]):
            raise self._fail(
                codes.TOOL_SERVER_NOT_STARTED,
                f"program {spec.command[0]!r} is a folder, not a program",
                hint="name the program inside it in `command`",
            )
        if program is None:
            raise self._fail(
                codes.TOOL_SERVER_NOT_STARTED,
                f"program {spec.command[0]!r} is not found",
                hint="install it, or name it by its path relative to the pipeline's folder",
            )
        env = child_environment(spec, self.environ)
        limit = self.limits.max_result_bytes * 6 + LINE_OVERHEAD
        read, write, child = await stack.enter_async_context(
            stdio_transport((program, *spec.command[1:]), env, str(cwd), limit)
        )
        self._child = child
        self.child_pid = child.pid
        return read, write

    async def _http(self, stack: AsyncExitStack, spec: HttpServerSpec) -> tuple[Any, Any]:
        import httpx
        from mcp.client.streamable_http import streamable_http_client

        from converge_dsl.tools._http_env import client_options

        headers: dict[str, str] = {}
        for header, variable in spec.headers.items():
            value = self.environ.get(variable)
            if value is None:
                raise self._fail(
                    codes.TOOL_SERVER_NOT_STARTED,
                    f"header {header!r} reads variable {variable!r}, which is not set",
                    hint=f"set {variable} in the environment of the run",
                )
            headers[header] = value
        hosts = {h.lower() for h in spec.hosts}

        async def check_host(request: httpx.Request) -> None:
            host = request.url.host.lower()
            if host not in hosts:
                raise _HostRefused(host)

        client = await stack.enter_async_context(
            httpx.AsyncClient(
                headers=headers,
                timeout=httpx.Timeout(self.limits.call_timeout_s),
                event_hooks={"request": [check_host]},
                **client_options(self.environ),  # the run's proxies and certificates
            )
        )
        read, write, _ = await stack.enter_async_context(
            streamable_http_client(spec.url, http_client=client)
        )
        return read, write

    # --- calls -------------------------------------------------------------------------

    async def call(self, tool: str, arguments: JsonObject) -> ToolResult:
        """Call `tool` (see the module docstring); the tool's own error is a result."""
        return await self._submit(lambda: self._call(tool, arguments))

    async def _submit(self, make: Callable[[], Awaitable[T]]) -> T:
        if self._broken is not None:
            raise self._broken
        loop, session = self._loop, self._session
        if loop is None or session is None or self.info is None:
            raise self._fail(codes.TOOL_SERVER_GONE, "is not running")

        async def run() -> T:
            return await make()

        future = asyncio.run_coroutine_threadsafe(run(), loop)
        try:
            return await asyncio.wait_for(
                asyncio.wrap_future(future), timeout=self.limits.call_timeout_s
            )
        except TimeoutError:
            future.cancel()
            fault = self._fault()
            await asyncio.to_thread(self.close)
            self._broken = self._fail(
                codes.TOOL_CALL_TIMED_OUT,
                f"a call passed call_timeout_s ({self.limits.call_timeout_s:g} s); the server "
                f"was stopped{fault}",
                hint="raise call_timeout_s, or find why the tool hangs",
            )
            raise self._broken from None

    async def _call(self, tool: str, arguments: JsonObject) -> ToolResult:
        from mcp.shared.exceptions import McpError

        from converge_dsl.tools._stdio import TOO_LARGE

        try:
            result = await self._session.call_tool(tool, dict(arguments))
        except McpError as exc:
            if exc.error.code == TOO_LARGE:
                return ToolResult(
                    f"tool {tool!r} of server {self.name!r}: {exc.error.message}; not read",
                    is_error=True,
                    cut=True,
                )
            if (self._child is not None and self._child.returncode is not None) or (
                exc.error.message == "Connection closed"
            ):
                self._broken = self._fail(
                    codes.TOOL_SERVER_GONE, f"closed the connection{self._stderr()}"
                )
                raise self._broken from None
            said = f"tool {tool!r} failed: {exc.error.message}"
            return cap_result(said, None, True, self.limits.max_result_bytes)
        except Exception as exc:
            self._broken = self._fail(codes.TOOL_SERVER_GONE, f"failed: {_reason(exc)}")
            raise self._broken from None
        text = "\n".join(_part_text(part) for part in result.content)
        structured: JsonValue = (
            None if result.structuredContent is None else _json(result.structuredContent)
        )
        return cap_result(text, structured, result.isError, self.limits.max_result_bytes)

    # --- close -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the server (its process group too) and join its thread; idempotent.

        A server still starting is not waited for (its `start_timeout_s` can be long, and
        a run stopping at its deadline must not): its start is cancelled, which stops
        its process group as any stop does."""
        self._closing = True
        loop, thread = self._loop, self._thread
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._stop_serving)
        if thread is not None and thread is not threading.current_thread():
            thread.join(JOIN_TIMEOUT_S)
        if self.child_pid is not None:
            import signal

            from converge_dsl.tools._stdio import kill_group

            kill_group(self.child_pid, signal.SIGKILL)  # whatever the thread could not stop
        self._session = None

    def _stop_serving(self) -> None:
        """In the server's loop: end `_serve`, whether it serves or still starts."""
        if self._serving and self._stopped is not None:
            self._stopped.set()
        elif self._task is not None:
            self._task.cancel()


class _HostRefused(Exception):
    def __init__(self, host: str) -> None:
        super().__init__(f"host {host!r} is not among the server's hosts")


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside exception groups (or `exc` itself)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    """A one-line reason for `exc`, looking inside exception groups."""
    exc = _leaf(exc)
    if isinstance(exc, FileNotFoundError | PermissionError | NotADirectoryError):
        return exc.strerror or str(exc)
    text = str(exc) or exc.__class__.__name__
    return text.splitlines()[0] if text else exc.__class__.__name__


def _start_failure(exc: BaseException, spec: ToolServerSpec, base: Path) -> tuple[str, str | None]:
    """Why a server did not start, and what to do, from what the SDK raised: an HTTP
    status (the SDK's own text names neither the status's meaning nor the headers) or
    timeout (its text is "ReadTimeout"), a
    404 (which the SDK reports as "Session terminated"), a child that closed its
    stdout before the handshake (the SDK says "Connection closed")."""
    import httpx

    leaf, reason = _leaf(exc), _reason(exc)
    if isinstance(spec, StdioServerSpec) and reason == "Connection closed":
        where = base / (spec.cwd or ".")
        cd = "" if where == Path() else f"cd {shell_word(str(where))} && "
        return (
            "it exited, or closed its stdout, before answering the MCP handshake",
            f"run `{cd}{shell_join(list(spec.command))}` by hand to see why it stops",
        )
    if not isinstance(spec, HttpServerSpec):
        return reason, None
    if isinstance(leaf, httpx.TimeoutException):  # the SDK's text is the class name alone
        limit = spec.call_timeout_s or ServerLimits.of(spec).call_timeout_s
        return (
            f"{spec.url} did not answer within {limit:g} s ({type(leaf).__name__})",
            "check that the server is up and answering, or raise call_timeout_s",
        )
    status = leaf.response.status_code if isinstance(leaf, httpx.HTTPStatusError) else None
    if status is None and reason == "Session terminated":  # the SDK's word for a 404
        status = 404
    if status is None:
        return reason, None
    said = f"{spec.url} answered HTTP {status}"
    named = ", ".join(f"{header} from ${variable}" for header, variable in spec.headers.items())
    if status in (401, 403):
        return said, (
            f"check the credentials its headers carry ({named})"
            if named
            else "it wants credentials: name the variable that holds them under `headers:`"
        )
    if status == 404:
        return said, "check the server's url: the path of its MCP endpoint, often /mcp"
    if status == 429:
        return said, "the server limits how often it is called: try again later"
    return said, "see the server's log for why" if status >= 500 else None


def _program(name: str, cwd: Path, environ: Mapping[str, str]) -> str | None:
    """The program to run: a bare name looked up in the parent's PATH (the child has
    none unless passed), a path relative to the server's working folder."""
    if "/" in name:
        path = os.path.abspath(cwd / name)  # links kept: a venv's python finds its venv
        return path if os.path.isfile(path) else None
    return shutil.which(name, path=environ.get("PATH", os.defpath))


def _part_text(part: Any) -> str:
    text = getattr(part, "text", None)
    if isinstance(text, str):
        return text
    mime = getattr(part, "mimeType", None) or getattr(part, "type", "content")
    return f"[{mime} content]"


def _json(value: Any) -> Any:
    """A JSON value from the SDK's parsed JSON (dicts, lists, scalars) as it is."""
    return value
