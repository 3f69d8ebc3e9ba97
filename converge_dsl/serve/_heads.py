"""A request's head on the wire, before the application sees it: bounded, timed, and
refused in the service's JSON.

`protocol(head_cap, head_s)` is the HTTP/1.1 protocol class `serve` gives
uvicorn (`Config(http=...)`): uvicorn's own (httptools' parser where it is
installed, as uvicorn picks, else h11's), with three changes at the edge where
uvicorn reads bytes, before any route or middleware runs:

- A head (the request line and headers) holds at most `head_cap` bytes: past
  them the connection answers 431 (CD442) and stops reading, so memory does
  not grow with what a client sends (httptools would otherwise gather a header
  of any length).
- A head must arrive within `head_s` seconds, counted from the connection's
  start or from the first byte of a later request on it: a client sending a
  header a byte at a time is answered 408 (CD443); a connection that sent
  nothing is closed. While a response on the connection is still being
  written, the clock waits for it. The body's own bound (`_bodies`, CD308) and
  uvicorn's keep-alive timeout are untouched.
- A request the parser refuses (a bad request line, header or Content-Length)
  is answered 400 (CD441) with the parser's reason, instead of uvicorn's plain
  text.
- A request read while the server holds `limit_concurrency` connections or
  requests (uvicorn's `Config`) is answered 503 (CD447) with `Retry-After`,
  instead of uvicorn's plain-text 503: the same count at the same point, the
  answer the service's; such refusals are logged as one line every
  `REFUSALS_EVERY_S` seconds with their count (`RefusalLog`), not one each.

`protocol()` first checks that uvicorn's protocol class still has what this
one overrides and reads (`ServeFailed`, CD448, naming the installed uvicorn
and `UVICORN_SUPPORTED`, the releases it was tested with): a uvicorn that
renamed one would otherwise serve with a bound silently gone.

Each refusal is the service's `{"errors": [...]}` document with
`Connection: close`, sent after the answers to the requests read before it
(pipelined ones too: HTTP/1.1 answers in order); the connection then reads no
further request, discards what the client still sends for at most `LINGER_S`
seconds (closing at once could reset the connection before the client reads
the answer) and closes. Only a head counts: the bytes of a next request that
arrive in the same read as the end of the one before are not counted, so a
head is bounded to `head_cap` plus one read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import TYPE_CHECKING, Any, cast

from converge_dsl import codes
from converge_dsl.clock import Clock, SystemClock

from ._errors import ServeFailed
from ._requests import Problem

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

HEAD_CAP = 64 * 1024
HEAD_S = 10.0
# How long a refused connection reads (and drops) what its client still sends.
LINGER_S = 2.0

# The uvicorn releases this module was tested with (tests/serve against each minor
# release): pyproject's bounds of uvicorn, said again when the installed one lacks a part.
UVICORN_SUPPORTED = ">=0.30,<0.56"
# What the protocol class takes of uvicorn's: the methods it overrides or calls, and the
# attributes uvicorn's `__init__` sets that it reads (besides `transport`, set on a
# connection, with `cycle.response_complete` and `server_state.default_headers`).
_METHODS = (
    "connection_made",
    "connection_lost",
    "data_received",
    "send_400_response",
    "on_response_complete",
)
_ATTRIBUTES = ("app", "config", "connections", "cycle", "limit_concurrency", "loop", "tasks")
# ... and of each parser's class, its own.
_PARSER_PARTS = {"httptools": (("on_message_complete",), ("pipeline",)), "h11": ((), ("conn",))}

# The Retry-After of a request refused past the server's connections (seconds).
BUSY_RETRY_S = 1


# How often the requests refused past the server's connections are logged (seconds).
REFUSALS_EVERY_S = 10.0


class RefusalLog:
    """The requests refused past the server's connections (CD447), logged as one line
    per `every` seconds that had any, with their count, not one line each. The first
    refusal after a quiet interval starts the count; its line comes `every` seconds later
    on `clock` (a task of the loop refusing), or when that task is cancelled (the
    server's loop ends: the count so far)."""

    def __init__(self, clock: Clock, every: float = REFUSALS_EVERY_S) -> None:
        self._clock = clock
        self.every = every
        self.count = 0
        self._counting: asyncio.Task[None] | None = None

    def refused(self) -> None:
        self.count += 1
        if self._counting is None:
            self._counting = asyncio.get_running_loop().create_task(self._say())

    async def _say(self) -> None:
        try:
            await self._clock.sleep(self.every)
        finally:
            self._flush()

    def _flush(self) -> None:
        count, self.count, self._counting = self.count, 0, None
        connections = "connection" if count == 1 else "connections"
        logging.getLogger("uvicorn.error").warning(
            f"refused {count} {connections} over the concurrency limit in the last {self.every:g} s"
        )


_REASONS = {400: b"Bad Request", 408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


def protocol(
    head_cap: int = HEAD_CAP,
    head_s: float = HEAD_S,
    parser: str | None = None,
    clock: Clock | None = None,
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol class with the head bounded (see the module docstring):
    of `parser` "httptools" or "h11", by default httptools' where it is installed (as
    uvicorn chooses). With h11, uvicorn's `h11_max_incomplete_event_size` must be no
    lower than `head_cap` (else h11 refuses a smaller head first, as a malformed one).
    Its refusals past the connections are logged on `clock` (`RefusalLog`)."""
    if parser is None:
        try:
            import httptools  # noqa: F401
        except ImportError:  # pragma: no cover (the test environment has httptools)
            parser = "h11"
        else:
            parser = "httptools"
    make = _h11_protocol if parser == "h11" else _httptools_protocol
    made = make(head_cap, head_s, RefusalLog(clock or SystemClock()))
    methods, attributes = _PARSER_PARTS[parser]
    _check(made.__mro__[2], _METHODS + methods, _ATTRIBUTES + attributes)  # uvicorn's class
    return made


def _check(base: type, methods: tuple[str, ...], attributes: tuple[str, ...]) -> None:
    """`ServeFailed` (CD448) unless uvicorn's protocol class `base` has `methods` and its
    instances `attributes` (one is made, on a loop of its own, and dropped)."""
    import uvicorn
    from uvicorn.server import ServerState

    missing = [name for name in methods if not callable(getattr(base, name, None))]
    if not missing:
        loop = asyncio.new_event_loop()
        try:
            config = uvicorn.Config(_no_app, log_config=None)
            made = base(config=config, server_state=ServerState(), app_state={}, _loop=loop)
            missing = [name for name in attributes if not hasattr(made, name)]
            if not hasattr(ServerState(), "default_headers"):
                missing.append("ServerState.default_headers")
        except (TypeError, AttributeError, ValueError) as error:  # its constructor changed
            missing = [f"__init__ as it was ({type(error).__name__}: {error})"]
        finally:
            loop.close()
    if missing:
        raise ServeFailed(
            codes.SERVE_UVICORN_UNSUPPORTED,
            f"uvicorn {uvicorn.__version__} is not supported: its {base.__name__} has no "
            f"{', '.join(missing)} (the service's HTTP edge needs it; supported: uvicorn"
            f"{UVICORN_SUPPORTED})",
            hint=f"install a supported uvicorn: pip install 'uvicorn{UVICORN_SUPPORTED}'",
        )


async def _no_app(scope: Scope, receive: Receive, send: Send) -> None:
    """The application of the configuration `_check` makes its instance with."""


def answer(status: int, problem: Problem, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A whole HTTP/1.1 answer: `problem` as the service's JSON errors, `Connection: close`."""
    body = _document(problem)
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status])]
    lines += [name + b": " + value + b"\r\n" for name, value in default_headers]
    lines += [
        b"content-type: application/json\r\n",
        b"content-length: %d\r\n" % len(body),
        b"connection: close\r\n\r\n",
        body,
    ]
    return b"".join(lines)


def _document(problem: Problem) -> bytes:
    """`problem` as the service's JSON errors."""
    return json.dumps(
        {"errors": [problem.data()]}, ensure_ascii=False, separators=(",", ":")
    ).encode()


def malformed(reason: str) -> Problem:
    shown = f": {reason[:200]}" if reason else ""
    return Problem(
        codes.SERVE_BAD_HTTP,
        f"the request is not valid HTTP/1.1{shown}",
        "",
        "send a request line `METHOD /path HTTP/1.1`, then `Name: value` headers of "
        "visible ASCII, a Content-Length of digits only, and an empty line",
    )


def too_large(head_cap: int) -> Problem:
    return Problem(
        codes.SERVE_HEAD_TOO_LARGE,
        f"the request line and headers are over {head_cap} bytes",
        "",
        "send fewer or shorter headers (a long value belongs in the body)",
    )


def busy(limit: int) -> Problem:
    return Problem(
        codes.SERVE_BUSY,
        f"the server is answering as many connections as it takes ({limit}): this request "
        "is not served",
        "",
        "retry after the number of seconds Retry-After gives; close the connections (event "
        "streams, say) no longer read",
    )


def too_slow(head_s: float) -> Problem:
    return Problem(
        codes.SERVE_HEAD_TIMEOUT,
        f"the request line and headers did not arrive within {head_s:g} seconds",
        "",
        "send the request's head at once",
    )


class _Head:
    """A connection's state at its edge: the bytes of the head being read, its clock, the
    cycle whose request was read whole (httptools), the refusal waiting for the answers
    to the requests before it, the refusal's linger."""

    __slots__ = ("linger", "read", "refused", "size", "timer", "waiting")

    def __init__(self) -> None:
        self.size = 0
        self.timer: asyncio.TimerHandle | None = None
        self.read: object = None
        self.linger: asyncio.TimerHandle | None = None
        self.refused = False
        self.waiting: tuple[int, Problem] | None = None


class _Bounded:
    """What both protocol classes add (see the module docstring); `_reading_head` says
    whether the parser is between requests or inside a head, as each parser knows it.
    Its state is one attribute (`_head`): uvicorn's protocol sets nearly 30, about as
    many as CPython keeps in a layout shared between instances; five more cost some
    2,800 instructions a request (callgrind)."""

    head_cap: int
    head_s: float
    refusals: RefusalLog
    # uvicorn's protocol attributes this uses
    transport: asyncio.Transport
    cycle: Any
    loop: asyncio.AbstractEventLoop
    server_state: Any
    config: Any
    connections: set[Any]
    tasks: set[Any]
    limit_concurrency: int | None

    _head: _Head
    _app: ASGIApp

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn's own answer past the limit is plain text: `app` makes the same count
        self.limit_concurrency = None

    @property
    def app(self) -> ASGIApp:
        """The application a request just read goes to, as uvicorn asks for it: the
        refusal (CD447) once the server holds `limit_concurrency` connections or requests
        (uvicorn's count, at the point it makes it)."""
        limit = self.config.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            self.refusals.refused()
            return self._busy
        return self._app

    @app.setter
    def app(self, app: ASGIApp) -> None:
        self._app = app

    async def _busy(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = _document(busy(self.config.limit_concurrency))
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            (b"retry-after", b"%d" % BUSY_RETRY_S),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _reading_head(self) -> bool:
        raise NotImplementedError

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._head = _Head()
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._head.linger is not None:
            self._head.linger.cancel()
        super().connection_lost(exc)  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        head = self._head
        if head.refused:
            return  # lingering: what the client still sends is dropped
        reading = self._reading_head()
        if reading:
            room = self.head_cap - head.size
            if len(data) > room:
                self._overflow(data, room)
                return
            head.size += len(data)
        self._fed(data)
        if reading and head.size and head.timer is None and not head.refused:
            # a later request's head begun, not ended (most come whole in one read: they
            # never set the clock)
            self._arm()

    def _overflow(self, data: bytes, room: int) -> None:
        """`data` would take the head past the cap: what fits, then 431 if no head ended in
        it (`_fed` starts the count again at a head's end), else the rest as usual (the
        requests that ended in it, pipelined ones too, are answered)."""
        head = self._head
        head.size = self.head_cap
        if room:
            self._fed(data[:room])
        if head.refused or self.transport.is_closing():
            return
        if head.size and self._reading_head():
            self._refuse(431, too_large(self.head_cap))
        else:
            self.data_received(data[room:])

    def _fed(self, data: bytes) -> None:
        """`data` to uvicorn's parser; a head it completed stops the head's clock and
        starts the next one's count."""
        cycle = self.cycle
        super().data_received(data)  # type: ignore[misc]
        if self.cycle is not cycle:
            head = self._head
            head.size = 0
            if head.timer is not None and not head.refused:
                self._disarm()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request its parser refused, called in the parser's
        `except`: the service's JSON, with the parser's reason."""
        error = sys.exc_info()[1]
        self._refuse(400, malformed(str(error) if error is not None else ""))

    def _arm(self) -> None:
        self._disarm()
        self._head.timer = self.loop.call_later(self.head_s, self._late)

    def _disarm(self) -> None:
        if self._head.timer is not None:
            self._head.timer.cancel()
            self._head.timer = None

    def _late(self) -> None:
        self._head.timer = None
        handed_on = self.transport.get_protocol() is not cast(object, self)  # a WebSocket
        if self.transport.is_closing() or self._head.refused or handed_on:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self._arm()  # a response is still being written: the next head waits for it
            return
        if self._head.size == 0:
            self.transport.close()  # nothing sent: nothing to answer
            return
        self._refuse(408, too_slow(self.head_s))

    def _refuse(self, status: int, problem: Problem) -> None:
        """Answer `problem` after the requests read before it, then linger (see the
        module docstring)."""
        self._head.refused = True
        self._disarm()
        if self._answering():
            self._head.waiting = (status, problem)
            return
        self._answer(status, problem)

    def _answering(self) -> bool:
        """A request read before is still being answered, or waits its turn (httptools
        queues pipelined requests in `pipeline`)."""
        cycle = self.cycle
        in_flight = cycle is not None and not cycle.response_complete
        return in_flight or bool(getattr(self, "pipeline", None))

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        waiting = self._head.waiting
        if waiting is not None and not self._answering() and not self.transport.is_closing():
            self._head.waiting = None
            self._answer(*waiting)

    def _answer(self, status: int, problem: Problem) -> None:
        transport = self.transport
        transport.write(answer(status, problem, self.server_state.default_headers))
        if not transport.can_write_eof():  # pragma: no cover (TLS: no half-close)
            transport.close()
            return
        transport.write_eof()
        self._head.linger = self.loop.call_later(LINGER_S, transport.close)


def _httptools_protocol(
    head_cap: int, head_s: float, refusals: RefusalLog
) -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class Protocol(_Bounded, HttpToolsProtocol):
        def _reading_head(self) -> bool:
            return self.cycle is self._head.read  # a new head makes a new cycle

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._head.read = self.cycle

    Protocol.head_cap, Protocol.head_s, Protocol.refusals = head_cap, head_s, refusals
    return Protocol


def _h11_protocol(head_cap: int, head_s: float, refusals: RefusalLog) -> type[asyncio.Protocol]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Protocol(_Bounded, H11Protocol):
        def _reading_head(self) -> bool:
            return bool(self.conn.their_state is h11.IDLE)

    Protocol.head_cap, Protocol.head_s, Protocol.refusals = head_cap, head_s, refusals
    return Protocol
