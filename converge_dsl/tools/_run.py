"""`RunTools`: the MCP tool servers of one run, as agents list and call them.

Each declared server is started on its first use in the run (once, whatever
the number of agents asking at the same time) and every started server is
stopped by `close()`, which the runtime calls when the run ends, however it
ends. `listing(server)` gives the allowed tools as the model is offered them
(`mcp:SERVER/TOOL`, the input schema from the server's `tools/list`);
`call(...)` checks the arguments against that schema before anything is sent,
counts the call against `budget.max_tool_calls`, and answers `(text, is_error)`:
a tool's error, a refused or malformed call, a server that failed (its
`ToolFailure` message and code) are all error text for the model (tool errors
are soft). A server's start and a call are bounded by its `start_timeout_s` and
`call_timeout_s` and by what is left of the run's deadline (`budget.max_wall_s`),
whichever comes first; one cut at the deadline stops its server like a timeout.
Every result is redacted of the values the run hands its servers (passed
variables, header values) before the model sees it.

A server the lock records as declared (`locked`, the same transport identity)
is a `LockedToolServer` (unless a cassette's replay stands in for it: the replay
answers the recorded start, and starts nothing): its tools are the locked ones,
it starts on its first call and its tool list is checked against the lock before
that call
(`ToolListChanged`, a hard error). `wrap` puts each server behind another port
(the answer cache: `tools.caching`). A tool suggestor's call (`answer`) refused
by `budget.max_tool_calls` is told to `on_refused` (the meter, so the run
stops with `tool_call_budget_exhausted`, as for an llm suggestor's refused
model call; an agent's refused call stays an error result its model sees),
and each call made (not answered from the cache) to `on_called` (the meter,
which says who made them).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TypeVar

from converge_dsl import codes
from converge_dsl._json_types import JsonObject, JsonSchema
from converge_dsl.clock import Clock
from converge_dsl.engine.events import Timing
from converge_dsl.frontend import MCP_PREFIX, ToolServerSpec
from converge_dsl.models import Redactor
from converge_dsl.models.port import ToolSpec
from converge_dsl.sandbox import GovernedValidator, UnsafeSchema, meta_error, python_validator
from converge_dsl.tools._cassette import is_replay
from converge_dsl.tools._environment import server_secrets
from converge_dsl.tools._events import McpToolCalled
from converge_dsl.tools._locked import LockedServer, LockedToolServer, transport_identity
from converge_dsl.tools._port import (
    ServerFactory,
    ServerInfo,
    ServerLimits,
    ToolFailure,
    ToolInfo,
    ToolResult,
    ToolServer,
)
from converge_dsl.tools._real import real_server

# A server put behind another port, given its declaration and the run's redactor.
ServerWrapper = Callable[[ToolServer, ToolServerSpec, Callable[[str], str]], ToolServer]
_T = TypeVar("_T")


def tool_name(server: str, tool: str) -> str:
    """The name an agent's model calls a server's tool by."""
    return f"{MCP_PREFIX}{server}/{tool}"


class RunTools:
    """The tool servers of one run (see the module docstring)."""

    def __init__(
        self,
        specs: Mapping[str, ToolServerSpec],
        base_dir: Path,
        *,
        environ: Mapping[str, str] | None = None,
        max_calls: int | None = None,
        factory: ServerFactory = real_server,
        events: Callable[[McpToolCalled], None] | None = None,
        locked: Mapping[str, LockedServer] | None = None,
        relock: str = "run: converge-dsl lock PIPELINE",
        wrap: ServerWrapper | None = None,
        on_refused: Callable[[], None] | None = None,
        on_called: Callable[[], None] | None = None,
        clock: Clock | None = None,
        deadline: Callable[[], float | None] | None = None,
        folders: Mapping[str, Path] | None = None,
    ) -> None:
        """`deadline()` reads the run's deadline on `clock` (None: no time budget); no
        call outlasts it. `folders` gives a server the folder it is declared in when that
        is not `base_dir` (a pack's server, `PACK/SERVER`: its pack's folder)."""
        self.specs = specs
        self.base_dir = base_dir
        self.folders = dict(folders or {})
        self.environ = dict(os.environ if environ is None else environ)
        self.max_calls = max_calls
        self.factory = factory
        self.events = events
        self.locked = {
            name: record
            for name, record in (locked or {}).items()
            if name in specs and record.transport == transport_identity(specs[name])
        }
        self.relock = relock
        self.wrap = wrap
        self.on_refused = on_refused
        self.on_called = on_called
        self.clock = clock
        self.deadline = deadline
        self.calls = 0
        self.servers: dict[str, ToolServer] = {}
        self._infos: dict[str, ServerInfo] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._inputs: dict[tuple[str, str], GovernedValidator | str | None] = {}
        self.redact = Redactor(self._secrets())

    def _secrets(self) -> list[str]:
        return [s for spec in self.specs.values() for s in server_secrets(spec, self.environ)]

    async def started(self, server: str) -> ServerInfo:
        """The server's `ServerInfo`, starting it on first use (`ToolFailure` if it cannot)."""
        info = self._infos.get(server)
        if info is not None:
            return info
        lock = self._locks.setdefault(server, asyncio.Lock())
        async with lock:
            info = self._infos.get(server)
            if info is None:
                instance = self._server(server)
                self.servers[server] = instance
                if is_replay(instance):
                    # Nothing to wait for; a thread hop would let a replay's waiting
                    # calls take it for a stall and answer out of the recorded order.
                    info = instance.start()
                else:
                    info = await self._start(server, instance)
                self._infos[server] = info
        return info

    async def _start(self, server: str, instance: ToolServer) -> ServerInfo:
        """The server started, cut at the run's deadline (`_by_deadline`)."""
        return await self._by_deadline(
            server,
            ServerLimits.of(self.specs[server]).start_timeout_s,
            lambda: asyncio.to_thread(instance.start),
            code=codes.TOOL_SERVER_NOT_STARTED,
            during="while it started",
            hint="raise budget.max_wall_s, or find why the server is slow to start",
        )

    async def _by_deadline(
        self,
        server: str,
        limit: float,
        work: Callable[[], Awaitable[_T]],
        *,
        code: str,
        during: str,
        hint: str,
    ) -> _T:
        """`work()` (a start or a call of `server`), cut at the run's deadline when that
        comes before the server's own `limit`; work cut there stops the server (its
        process group with it), so the run stops on time: a `ToolFailure` (`code`)."""
        remaining = self._remaining()
        if remaining is None or remaining >= limit:
            return await work()
        try:
            async with asyncio.timeout(remaining):
                return await work()
        except TimeoutError:
            await asyncio.to_thread(self.servers[server].close)
            raise ToolFailure(
                code,
                server,
                f"tool server {server!r}: the run's deadline (budget.max_wall_s) passed "
                f"{during}; the server was stopped",
                hint=hint,
            ) from None

    def _remaining(self) -> float | None:
        """What is left of the run's deadline on its clock (None: no time budget)."""
        deadline = None if self.deadline is None else self.deadline()
        if deadline is None or self.clock is None:
            return None
        return max(0.0, deadline - self.clock.monotonic())

    def _server(self, server: str) -> ToolServer:
        spec = self.specs[server]
        instance = self.factory(spec, self.folders.get(server, self.base_dir), self.environ)
        record = self.locked.get(server)
        if record is not None and not is_replay(instance):
            # A replay answers the recorded start, tools and calls: nothing live to hold
            # to the lock (the recording run was).
            instance = LockedToolServer(instance, record, spec, self.relock)
        return instance if self.wrap is None else self.wrap(instance, spec, self.redact)

    async def listing(self, server: str) -> tuple[ToolSpec, ...]:
        """The server's allowed tools, named `mcp:SERVER/TOOL`, in the server's order. A
        tool listed with an input schema that is not JSON Schema is offered with an empty
        object's schema and a description saying why it cannot be called (a provider
        refuses a whole request over one broken schema; its call is an error result)."""
        info = await self.started(server)
        allowed = set(self.specs[server].allow)
        return tuple(self._offered(server, t) for t in info.tools if t.name in allowed)

    def _offered(self, server: str, tool: ToolInfo) -> ToolSpec:
        name = tool_name(server, tool.name)
        broken = self._input_validator(server, tool)
        if isinstance(broken, str):
            said = "Cannot be called: its server lists it with an input schema that is not "
            return ToolSpec(name, f"{said}JSON Schema ({broken}).", {"type": "object"})
        return ToolSpec(name, tool.description, dict(tool.input_schema))

    async def call(
        self,
        suggestor: str,
        cycle: int,
        server: str,
        tool: str,
        arguments: JsonObject,
        *,
        call_id: str | None = None,
    ) -> tuple[str, bool]:
        """An agent's call (see the module docstring), traced; `suggestor` is the caller,
        `call_id` the id of the model's tool call. A call `budget.max_tool_calls` refuses
        is an error text the model sees."""
        answered = await self._traced(suggestor, cycle, server, tool, arguments, call_id=call_id)
        return (self._spent(), True) if answered is None else answered

    async def answer(
        self, suggestor: str, cycle: int, server: str, tool: str, arguments: JsonObject
    ) -> tuple[str, bool] | None:
        """A tool suggestor's call: `call`, but None when `budget.max_tool_calls` refused
        it, which `on_refused` hears (the run stops after the cycle)."""
        answered = await self._traced(suggestor, cycle, server, tool, arguments, call_id=None)
        if answered is None and self.on_refused is not None:
            self.on_refused()
        return answered

    async def _traced(
        self,
        suggestor: str,
        cycle: int,
        server: str,
        tool: str,
        arguments: JsonObject,
        *,
        call_id: str | None,
    ) -> tuple[str, bool] | None:
        started = None if self.clock is None else self.clock.monotonic()
        answered = await self._answer(suggestor, server, tool, arguments)
        if self.events is not None:
            text, is_error = (self._spent(), True) if answered is None else answered
            timing = None
            if self.clock is not None and started is not None:
                at = self.clock.monotonic()
                timing = Timing(at=at, duration_s=at - started)
            self.events(
                McpToolCalled(
                    suggestor=suggestor,
                    cycle=cycle,
                    server=server,
                    tool=tool,
                    arguments=dict(arguments),
                    output=text[:2000],
                    is_error=is_error,
                    call_id=call_id,
                    timing=timing,
                )
            )
        return answered

    def _failed(self, failure: ToolFailure) -> str:
        """A server's failure as the caller's error text: its code, message and hint
        (what to do: install the program, check the url, the credentials), redacted."""
        hint = f" (hint: {failure.hint})" if failure.hint else ""
        return self.redact(f"{failure.code}: {failure.message}{hint}")

    def _spent(self) -> str:
        return f"budget.max_tool_calls ({self.max_calls}) is spent; no more tool calls"

    async def _answer(
        self, suggestor: str, server: str, tool: str, arguments: JsonObject
    ) -> tuple[str, bool] | None:
        spec = self.specs.get(server)
        if spec is None or tool not in spec.allow:
            return f"tool {tool_name(server, tool)!r} is not allowed for {suggestor!r}", True
        try:
            info = await self.started(server)
        except ToolFailure as failure:
            return self._failed(failure), True
        declared = info.tool(tool)
        if declared is None:
            return f"server {server!r} does not offer tool {tool!r}", True
        checker = self._input_validator(server, declared)
        if isinstance(checker, str):
            return (
                f"tool {tool_name(server, tool)!r} cannot be called: server {server!r} lists it "
                f"with an input schema that is not JSON Schema ({checker}); the server's "
                "definition of the tool must be fixed",
                True,
            )
        problem = _input_problem(checker, arguments)
        if problem is not None:
            return f"invalid input for {tool_name(server, tool)}: {problem}", True
        if self.max_calls is not None and self.calls >= self.max_calls:
            return None
        self.calls += 1
        try:
            result = await self._bounded(server, tool, arguments)
        except ToolFailure as failure:
            if self.on_called is not None:
                self.on_called()  # it reached the server, or tried to
            return self._failed(failure), True
        if result.cached:
            self.calls -= 1  # a cached answer counts toward no budget
        elif self.on_called is not None:
            self.on_called()
        text = result.text
        if result.structured is not None and not text:
            text = json.dumps(result.structured, ensure_ascii=False, sort_keys=True)
        return self.redact(text), result.is_error

    def _input_validator(self, server: str, tool: ToolInfo) -> GovernedValidator | str | None:
        """The validator of `tool`'s input schema (None: one this project will not apply;
        text: what breaks its meta-schema), built once for the run, when the tool is first
        listed or called: a started server's tool list stays for the run."""
        key = (server, tool.name)
        if key not in self._inputs:
            self._inputs[key] = _input_validator(tool.input_schema)
        return self._inputs[key]

    async def _bounded(self, server: str, tool: str, arguments: JsonObject) -> ToolResult:
        """The call, cut at the run's deadline (`_by_deadline`)."""
        instance = self.servers[server]
        return await self._by_deadline(
            server,
            ServerLimits.of(self.specs[server]).call_timeout_s,
            lambda: instance.call(tool, arguments),
            code=codes.TOOL_CALL_TIMED_OUT,
            during="during a call",
            hint="raise budget.max_wall_s, or find why the tool is slow",
        )

    def close(self) -> None:
        """Stop every started server (each stops its own process group)."""
        for server in self.servers.values():
            server.close()


def _input_validator(schema: JsonSchema) -> GovernedValidator | str | None:
    """The validator of a tool's input schema; None for one this project will not apply
    (the server checks its input); the problem, as text, of one that is not JSON Schema
    (it would fail in the middle of validating the arguments, as a crash of the caller)."""
    import jsonschema

    from converge_dsl._json_pointer import pointer

    try:
        validator = python_validator(schema, "the tool's input schema")
    except (UnsafeSchema, jsonschema.exceptions.SchemaError):
        return None  # a schema this project will not apply: the server checks its input
    error = meta_error(schema)
    if error is not None:
        return f"at {pointer(list(error.absolute_path)) or 'the root'}: {error.message}"
    return validator


def _input_problem(validator: GovernedValidator | None, arguments: JsonObject) -> str | None:
    import jsonschema

    from converge_dsl._json_pointer import error_pointer

    if validator is None:
        return None
    error = jsonschema.exceptions.best_match(validator.iter_errors(dict(arguments)))
    if error is None:
        return None
    return f"at {error_pointer(error) or 'the root'}: {error.message}"
