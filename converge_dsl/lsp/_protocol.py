"""The wire: reading framed JSON-RPC from the editor, and what the server answers to a message
it cannot take.

`read_frames` is the one reader of the input stream. A frame is header lines
(`Content-Length: N` is the one read; a header's name in any case, a line ended
by `\\r\\n` or `\\n`) then a blank line and N bytes. A header line is read up to
`MAX_HEADER_LINE` bytes at a time and a body up to `limit` bytes, so memory is
bounded whatever arrives; a length over the limit, or not a number, drops its
header. Bytes that are not a header (the rest of a body shorter than its
length said, a body sent without a header) are skipped up to the next
`Content-Length` header, even one on the same line: one bad frame loses that
frame only, never the session. Two `Content-Length` headers of different values
drop the frame too: reading the larger would take the frames after it.

`PipelineProtocol.receive` answers, as JSON-RPC errors with their code and a
message that says what to send instead, every request it cannot hand to a
feature: a body that is not JSON (ParseError, id null), not a JSON-RPC 2.0
message (InvalidRequest), a request whose id is not a string, an integer or
null (InvalidRequest, id null: it is not run; an id written `7.0` is answered as
`7`, the same JSON number) or whose method is not a string
(InvalidRequest), params that do not fit the method (InvalidParams, each misfit
by its place), a request before `initialize` (ServerNotInitialized),
a second `initialize` (which would forget the open documents) or a request after
`shutdown` (InvalidRequest); a request that fails inside the server is
an InternalError in words, without a traceback (and so is one that fails in pygls's own
handling of a message: the session goes on). Notifications it cannot take are dropped,
and said in the client's log (`window/logMessage`): an editor cannot answer
them, but its user can read why. `quiet_pygls` makes pygls's own log one line
a record on standard error, without the tracebacks it attaches; a refusal the
client was answered or told in its log (a misfit, a feature's JSON-RPC error, a
cancel of a request already answered) writes nothing there, a failure inside
the server its line. A notification no handler takes is dropped: silently when its
method starts with `$/` (the protocol lets a server ignore those), else said there
once per method a session; a response to no request of the server's (one whose id is not
an id included) is said once, and so is a message with neither method nor id. A message
with an id and neither method, result nor error is answered (InvalidRequest).

Params are read by `strict_converter`: a JSON value of the wrong type for a
string, integer, boolean or number field is a misfit (cattrs would make
`null` the text "None" and `1.5` the line 1); what the server sends is written
as pygls writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO, Optional, Union

import cattrs
from cattrs.v import format_exception
from lsprotocol import types as lsp
from lsprotocol.types import ResponseErrorMessage
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    default_converter,
)
from pygls.protocol.language_server import lsp_method

from converge_dsl._collector import quiet_collector

MAX_HEADER_LINE = 8 * 1024
_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)
# What may come before `initialize` and after `shutdown`.
_ALWAYS = frozenset({lsp.EXIT})
_LOG = logging.getLogger(__name__)


# The JSON values each primitive field type takes, and their name: an integer is not a
# float, a bool or a string (a bool is an int in Python); a number may be an integer.
_JSON_TYPES: dict[type, tuple[tuple[type, ...], str]] = {
    str: ((str,), "a string"),
    int: ((int,), "an integer"),
    bool: ((bool,), "true or false"),
    float: ((float, int), "a number"),
}


class WrongType(TypeError):
    """A JSON value of the wrong type for a field (its words are the misfit's)."""


def strict_converter() -> cattrs.Converter:
    """pygls's converter, reading each primitive field only from its own JSON type, and an
    integer-or-string field (a request's id in `$/cancelRequest`, a progress token) only from
    an integer or a string: lsprotocol took any value there, and an array or an object then
    failed inside pygls as unhashable, ending the session."""
    converter: cattrs.Converter = default_converter()  # type: ignore[no-untyped-call]
    for kind, (accepted, name) in _JSON_TYPES.items():
        converter.register_structure_hook(kind, functools.partial(_exactly, accepted, name))
    for either in (Union[int, str], Optional[Union[int, str]]):  # noqa: UP007, UP045
        converter.register_structure_hook(either, _int_or_str)
    return converter


def _int_or_str(value: object, kind: object) -> int | str | None:
    """`value` as an integer or a string (an integral number written `1.0` is an integer);
    null as it is: the id of a request may be null (JSON-RPC 2.0), as it was read before."""
    found = _request_id(value)
    if found is None or isinstance(found, int | str):
        return found
    raise WrongType(f"expected an integer or a string, not {_shown(value)}")


def _exactly(accepted: tuple[type, ...], name: str, value: object, kind: type) -> object:
    """`value` as `kind` when it is one of the `accepted` JSON values. A type's hook is
    its subclasses' too: an enumeration of integers (a diagnostic's severity) is made
    from an integer as cattrs makes it, `kind(value)`. JSON has one number type: an
    integral number written with a fraction or an exponent (`1.0`, `1e2`) is an integer."""
    if isinstance(value, float) and accepted == (int,) and value.is_integer():
        value = int(value)
    if isinstance(value, accepted) and (bool in accepted or not isinstance(value, bool)):
        return kind(value)
    raise WrongType(f"expected {name}, not {_shown(value)}")


class PipelineProtocol(LanguageServerProtocol):
    """pygls's protocol, taking each message from `receive` (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._said: set[str] = set()  # the kinds of message already said on stderr

    def _once(self, kind: str, message: str) -> None:
        """Say `message` about messages of `kind` (a method) on stderr, the first time only."""
        if kind not in self._said:
            self._said.add(kind)
            _LOG.warning("%s (said once a session)", message)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        """A notification the server has no handler for is dropped: one whose method starts
        with `$/` silently (the protocol lets a server ignore those), another said on
        stderr once per method (pygls wrote a line for each, so a client sending them
        flooded stderr)."""
        if method_name != lsp.CANCEL_REQUEST and not self._knows(method_name):
            if not method_name.startswith("$/"):
                self._once(method_name, f"ignoring notifications of unknown method {method_name!r}")
            return
        super()._handle_notification(method_name, params)

    def _handle_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        """A response to no request of the server's (one it never sent, or already
        answered) is dropped and said on stderr once a session: pygls wrote a line for each."""
        if not isinstance(msg_id, str | int) or msg_id not in self._request_futures:
            self._stray_response(msg_id)
            return
        super()._handle_response(msg_id, result, error)

    def _stray_response(self, msg_id: object) -> None:
        self._once("a response", f"ignoring a response to {msg_id!r}, no request of the server's")

    @lsp_method(lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def lsp_work_done_progress_cancel(self, params: lsp.WorkDoneProgressCancelParams) -> None:
        """The server reports no progress of its own: a cancel names no token of it (pygls
        wrote a line for each); said once."""
        future = self.progress.tokens.get(params.token)
        if future is None:
            method = lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL
            self._once(method, f"ignoring {method} of token {params.token!r}, not the server's")
        else:
            future.cancel()

    @property
    def shut_down(self) -> bool:
        """Whether the client asked for `shutdown` (the exit code is 0 only then)."""
        return bool(self._shutdown)

    def log(self, message: str) -> None:
        """Say `message` in the client's log."""
        self.notify(
            lsp.WINDOW_LOG_MESSAGE,
            lsp.LogMessageParams(lsp.MessageType.Error, f"converge-dsl: {message}"),
        )

    def fail(self, msg_id: Any, error: JsonRpcException) -> None:
        """Answer request `msg_id` (None: a message whose id is unknown) with `error`."""
        self._send_data(
            {
                "jsonrpc": "2.0",
                "id": msg_id,
                "error": {"code": error.code, "message": error.message},
            }
        )

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: lsp.ResponseError | None = None
    ) -> None:
        """pygls's answer, but a request that failed inside the server says so in words
        and without the traceback pygls attaches (standard error has its one line)."""
        if error is not None and error.code == JsonRpcInternalError.CODE:
            error = lsp.ResponseError(
                code=error.code,
                message=f"converge-dsl could not answer this request ({error.message}); "
                "the server goes on: please report it with the text that caused it",
            )
        super()._send_response(msg_id, result, error)

    def structure_message(self, data: dict[str, Any]) -> Any:
        """pygls's reading of a message, without the error pygls logs for one that does not
        fit: `receive` answers it, or says it in the client's log."""
        try:
            return self._converter.structure(data, self._message_type(data))
        except cattrs.ClassValidationError as exc:
            raise JsonRpcInvalidParams() from exc
        except Exception as exc:
            raise JsonRpcInternalError() from exc

    def _message_type(self, data: dict[str, Any]) -> Any:
        """The type pygls reads `data` as (`JsonRPCProtocol.structure_message`)."""
        if "id" not in data:
            return self.get_message_type(data.get("method", "")) or JsonRPCNotification
        if "error" in data:
            return ResponseErrorMessage
        if "method" in data:
            return self.get_message_type(data["method"]) or JsonRPCRequestMessage
        return self._result_types.pop(data["id"], None) or JsonRPCResponseMessage

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        """pygls's answer to a request; a refusal a feature raised (a JSON-RPC error: a
        rename the name does not allow, a command's wrong argument) is answered without
        the traceback pygls logs for it. A failure inside the server is logged as before."""
        refused = None if future.cancelled() else future.exception()
        if not isinstance(refused, JsonRpcException):
            super()._send_handler_result(future, msg_id=msg_id)
            return
        self._request_futures.pop(msg_id, None)
        self._send_response(msg_id, error=refused.to_response_error())

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Callable[..., Any],
        callback: Callable[[Future[Any]], None],
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        """pygls's run of a handler. pygls keeps the future of each one that is not
        synchronous by `msg_id`, and takes it back when it answers a request; a
        notification's (a built-in `initialized`, a handler a built-in chains) it kept for
        the session: that one is dropped once done.

        A synchronous handler runs, and its answer is written, with the objects older than
        it frozen (`_collector.quiet_collector`): the pipeline's model the server keeps is
        most of what is alive, and the objects of a large answer (an outline, the semantic
        tokens of a 5 MB pipeline) made the collector walk it whole, twice a request, half
        the answer's time."""
        with quiet_collector():
            super()._execute_handler(msg_id, handler, callback, args, kwargs)
        answers = isinstance(callback, functools.partial) and callback.func == (
            self._send_handler_result
        )
        future = None if answers else self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(lambda _: self._request_futures.pop(msg_id, None))

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        """Cancel request `msg_id`; one already answered (an editor cancels those too) is
        not a warning."""
        if msg_id in self._request_futures:
            super()._handle_cancel_notification(msg_id)

    def receive(self, body: bytes) -> None:
        """Take one frame's body: hand it to pygls, or answer why not."""
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:
            self.fail(None, JsonRpcParseError(f"a message is not JSON ({_reason(exc)})"))
            return
        if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
            found = _request_id(data.get("id")) if isinstance(data, dict) else None
            self.fail(
                None if found is _NOT_AN_ID else found,
                JsonRpcInvalidRequest('a message is not a JSON-RPC 2.0 object ("jsonrpc": "2.0")'),
            )
            return
        if not self._well_formed(data):
            return
        method, is_request = data.get("method"), "id" in data and "method" in data
        refused = self._refusal(method, is_request)
        if refused is not None:
            if is_request:
                self.fail(data["id"], refused)
            else:
                self.log(f"{method}: {refused.message}; ignored")
            return
        try:
            message = self.structure_message(data)
        except JsonRpcException as exc:
            misfit = JsonRpcInvalidParams(f"{method}: {_misfits(exc)}")
            if is_request:
                self.fail(data["id"], misfit)
            else:
                self.log(f"{misfit.message}; ignored")
            return
        try:
            self.handle_message(message)
        except Exception as exc:  # one message never ends the session
            _LOG.error("%s failed inside the server (%s: %s)", method, type(exc).__name__, exc)
            if is_request:  # answered in words (`_send_response`)
                failed = JsonRpcInternalError(f"{type(exc).__name__}: {exc}")
                self._send_response(data["id"], error=failed.to_response_error())

    def _well_formed(self, data: dict[str, Any]) -> bool:
        """Whether `data` is a request, a notification or a response; else it is answered
        (a request, or a message with an id and no method, result nor error: InvalidRequest,
        id null when its id is not an id) or said on stderr once a session (a message with
        no method nor id, which cannot be answered; a response whose id is not an id, as one
        to no request of the server's)."""
        method = data.get("method")
        if "method" not in data and "id" not in data:
            self._once(
                "no method nor id",
                "ignoring a message with neither 'method' nor 'id' (a request has both, "
                "a notification a 'method', a response an 'id')",
            )
            return False
        if "method" not in data and "result" not in data and "error" not in data:
            found = _request_id(data["id"])
            self.fail(
                None if found is _NOT_AN_ID else found,
                JsonRpcInvalidRequest(
                    "a message with an 'id' has a 'method' (a request) or a 'result' or an "
                    "'error' (a response): this one has none of them"
                ),
            )
            return False
        if "method" not in data:
            if _request_id(data["id"]) is _NOT_AN_ID:  # pygls would read an error's id
                self._stray_response(data["id"])
                return False
            return True  # a response: `_handle_response` takes or drops it
        if "id" in data:
            msg_id = _request_id(data["id"])
            if msg_id is _NOT_AN_ID:
                self.fail(
                    None,
                    JsonRpcInvalidRequest(
                        f"a request's id {_shown(data['id'])} is not a string, an integer "
                        "or null: the request is not run"
                    ),
                )
                return False
            data["id"] = msg_id
        if not isinstance(method, str):
            refused = f"'method' must be a string, not {_shown(method)}"
            if "id" in data:
                self.fail(data["id"], JsonRpcInvalidRequest(refused))
            else:
                self._once("method not a string", f"ignoring a notification: its {refused}")
            return False
        return True

    def _knows(self, method: str) -> bool:
        try:
            self._get_handler(method)
        except JsonRpcMethodNotFound:
            return False
        return True

    def _refusal(self, method: object, is_request: bool) -> JsonRpcException | None:
        """Why a message of `method` cannot be taken now, or None."""
        if not isinstance(method, str) or method in _ALWAYS:
            return None
        if is_request and not self._knows(method):
            return JsonRpcMethodNotFound(f"the server has no method {method!r}")
        if self._shutdown:
            return JsonRpcInvalidRequest("the server is shut down: only 'exit' is accepted")
        if self._workspace is not None and method == lsp.INITIALIZE:
            return JsonRpcInvalidRequest(
                "the server is already initialized: 'initialize' is sent once a session"
            )
        if self._workspace is None and method != lsp.INITIALIZE:
            return JsonRpcServerNotInitialized(
                "the server is not initialized: send 'initialize' first"
            )
        return None

    # The open documents are the server's (`_document.Document`, applying each change over
    # the lines it touches): pygls's own copies, which `didChange` rewrote whole, are not kept.
    # These are plain functions: pygls keeps a future for a generator's notification (its
    # way to chain the server's handler) in its table of requests for the session.

    @lsp_method(lsp.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: lsp.DidOpenTextDocumentParams) -> None:
        self._server_handler(lsp.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams) -> None:
        self._server_handler(lsp.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: lsp.DidCloseTextDocumentParams) -> None:
        self._server_handler(lsp.TEXT_DOCUMENT_DID_CLOSE, params)

    def _server_handler(self, method: str, params: object) -> None:
        """Run the server's handler of `method` (`_server.register_sync`: synchronous)."""
        handler = self.fm.features.get(method)
        if handler is not None:
            handler(params)


_NOT_AN_ID = object()


def _request_id(value: object) -> object:
    """`value` as a request's id: a string, an integer (one written `1.0` too: JSON has one
    number type) or null; `_NOT_AN_ID` for any other value (an array, an object, a bool, a
    number with a fraction), which JSON-RPC 2.0 does not allow."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value is None or isinstance(value, str) or type(value) is int:
        return value
    return _NOT_AN_ID


def _shown(value: object) -> str:
    """`value` as JSON, cut to 40 characters."""
    shown = json.dumps(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _reason(exc: BaseException) -> str:
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)


def _misfits(exc: JsonRpcException) -> str:
    """What in the params does not fit, each at its place (cattrs's own words)."""
    cause = exc.__cause__
    if isinstance(cause, cattrs.ClassValidationError):
        return "; ".join(cattrs.transform_error(cause, "message", _misfit))
    return "the params do not fit the method"


def _misfit(exc: BaseException, expected: type | None) -> str:
    """cattrs's words for one misfit, but a value a field's own rule refuses (a negative
    line, a number past the protocol's range) in that rule's words, not "invalid value"."""
    if isinstance(exc, ValueError) and expected is None and str(exc):
        return str(exc).removesuffix(".")
    if isinstance(exc, WrongType):
        return str(exc)
    return format_exception(exc, expected)


class Frames:
    """The input stream, read in a worker thread so the event loop keeps answering."""

    def __init__(self, stream: BinaryIO, executor: ThreadPoolExecutor | None) -> None:
        self.stream = stream
        self.executor = executor

    async def line(self) -> bytes:
        return await self._run(self.stream.readline, MAX_HEADER_LINE)

    async def body(self, length: int) -> bytes:
        return await self._run(self.stream.read, length)

    async def _run(self, read: Callable[[int], bytes], size: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self.executor, read, size)


class Output:
    """The stream the client reads, written and flushed a message at a time (pygls's writer).

    Once the client has closed it (a broken pipe, or any other failure to write), the
    client is gone: nothing is written again, and `stop` is set, so the server ends at
    the next message it reads (or the end of its input). Writing on raised from a future's
    callback, where pygls and `concurrent.futures` wrote a traceback for each message,
    and the server served a client that could read none of it.
    """

    def __init__(self, stream: BinaryIO, stop: threading.Event) -> None:
        self.stream = stream
        self.stop = stop
        self.gone = False

    def write(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            self.stream.write(data)
            self.stream.flush()
        except OSError as exc:
            self.gone = True
            self.stop.set()
            _LOG.error("the client no longer reads the server's output (%s): stopping", exc)

    def close(self) -> None:
        """Close the stream; the bytes a gone client did not read are dropped."""
        with contextlib.suppress(OSError):
            self.stream.close()


async def read_frames(
    frames: Frames, protocol: PipelineProtocol, stop: threading.Event, limit: int
) -> None:
    """Hand each frame's body to `protocol.receive` until the stream ends or `stop` is set.

    A message whose headers hold two Content-Length values that differ as written (`187`
    and `0187` differ too) is skipped: every later Content-Length up to the blank line
    that ends its headers is refused, one equal to the first included."""
    length: int | None = None
    written: bytes | None = None  # the Content-Length of the headers being read, as written
    disagreed = False  # two of these headers' Content-Length differ: the message is skipped
    while not stop.is_set():
        line = await frames.line()
        if not line:
            return
        if not line.strip():
            written, disagreed = None, False
            if length is None:
                continue
            body = await frames.body(length)
            if len(body) < length:
                return  # cut off by the end of the stream
            length = None
            protocol.receive(body)
            continue
        header = _CONTENT_LENGTH.search(line)
        if header is None:
            continue  # another header, or bytes between frames
        value = header.group(1).strip()
        if disagreed:
            continue
        if written is not None and value != written:
            # Which one is the body's? Either read could take the frames after it.
            length, disagreed = None, True
            protocol.log(
                f"a message has two Content-Length headers ({_ascii(written)!r} and "
                f"{_ascii(value)!r}): the message is skipped"
            )
            continue
        written = value
        length = int(value) if value.isdigit() and len(value) <= 20 else None
        if length is not None and length > limit:
            length = None
        if length is None:
            protocol.log(
                f"a message's Content-Length {_ascii(value)!r} is not a number of bytes up to "
                f"{limit}: the message is skipped"
            )


def _ascii(value: bytes) -> str:
    return value[:40].decode("ascii", "replace")


class _FirstLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        lines = record.getMessage().splitlines() or [""]
        return f"converge-dsl lsp: {lines[0]}"


def quiet_pygls() -> None:
    """pygls's warnings and errors, and this module's, as one line each on standard error
    (no traceback)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_FirstLine())
    for name in ("pygls", __name__):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.WARNING)
        logger.propagate = False
