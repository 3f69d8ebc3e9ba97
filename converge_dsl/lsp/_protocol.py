"""What the server answers to a message it cannot take, and how it hands on the others.

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
them, but its user can read why. `_stderr.quiet_pygls` makes pygls's own log one line
a record on standard error, without the tracebacks it attaches; a refusal the
client was answered or told in its log (a misfit, a feature's JSON-RPC error, a
cancel of a request already answered) writes nothing there, a failure inside
the server its line. A notification no handler takes is dropped: silently when its
method starts with `$/` (the protocol lets a server ignore those), else said there
once per method a session; a response to no request of the server's (one whose id is not
an id included) is said once, and so is a message with neither method nor id. A message
with an id and neither method, result nor error is answered (InvalidRequest). A response
that does not fit (an `error` that is not a JSON-RPC error object) is said in the client's
log by the id it answers and what is wrong, once a session; the server's request of that
id ends with it.

Params are read by `_params.strict_converter`.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import cattrs
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
)
from pygls.protocol.language_server import lsp_method

from converge_dsl._collector import quiet_collector
from converge_dsl.lsp._params import NOT_AN_ID, misfits, params_misfit, request_id, shown

# What may come before `initialize` and after `shutdown`.
_ALWAYS = frozenset({lsp.EXIT})
_LOG = logging.getLogger(__name__)


class PipelineProtocol(LanguageServerProtocol):
    """pygls's protocol, taking each message from `receive` (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._said: set[str] = set()  # the kinds of message already said once

    def _first(self, kind: str) -> bool:
        """Whether a message of `kind` (a method, a kind of fault) comes for the first time
        this session; it is not the first again."""
        first = kind not in self._said
        self._said.add(kind)
        return first

    def _once(self, kind: str, message: str) -> None:
        """Say `message` about messages of `kind` on stderr, the first time only."""
        if self._first(kind):
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
        if not self._answers_server_request(msg_id):
            self._stray_response(msg_id)
            return
        super()._handle_response(msg_id, result, error)

    def _answers_server_request(self, msg_id: object) -> bool:
        """Whether a response of `msg_id` answers a request the server sent, which it
        then takes off the waiting ones. Only `send_request` records a result type: pygls's
        table of futures holds the client's own requests in flight too, and a response of
        such an id ended the server's handling of that request (an unfinished `shutdown`
        answered as an internal error)."""
        if not isinstance(msg_id, str | int) or msg_id not in self._result_types:
            return False
        del self._result_types[msg_id]
        return True

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
        return self._result_types.get(data["id"]) or JsonRPCResponseMessage

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
            found = request_id(data.get("id")) if isinstance(data, dict) else None
            self.fail(
                None if found is NOT_AN_ID else found,
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
        message: Any = None
        wrong: str | None = None
        if isinstance(method, str):  # a request or a notification: its params read
            wrong = params_misfit(self.get_message_type(method), data)
        if wrong is None:
            try:
                message = self.structure_message(data)
            except JsonRpcException as exc:
                wrong = misfits(exc)
        if wrong is not None and method is None:  # a response: said by its request's id
            self._misfit_response(data, wrong)
            return
        if wrong is not None:
            misfit = JsonRpcInvalidParams(f"{method}: {wrong}")
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
            found = request_id(data["id"])
            self.fail(
                None if found is NOT_AN_ID else found,
                JsonRpcInvalidRequest(
                    "a message with an 'id' has a 'method' (a request) or a 'result' or an "
                    "'error' (a response): this one has none of them"
                ),
            )
            return False
        if "method" not in data:
            if request_id(data["id"]) is NOT_AN_ID:  # pygls would read an error's id
                self._stray_response(data["id"])
                return False
            return True  # a response: `_handle_response` takes or drops it
        if "id" in data:
            msg_id = request_id(data["id"])
            if msg_id is NOT_AN_ID:
                self.fail(
                    None,
                    JsonRpcInvalidRequest(
                        f"a request's id {shown(data['id'])} is not a string, an integer "
                        "or null: the request is not run"
                    ),
                )
                return False
            data["id"] = msg_id
        if not isinstance(method, str):
            refused = f"'method' must be a string, not {shown(method)}"
            if "id" in data:
                self.fail(data["id"], JsonRpcInvalidRequest(refused))
            else:
                self._once("method not a string", f"ignoring a notification: its {refused}")
            return False
        return True

    def _misfit_response(self, data: dict[str, Any], wrong: str) -> None:
        """A response that does not fit (an `error` that is not a JSON-RPC error object, a
        result of the wrong shape) is said in the client's log by the id it answers, once a
        session for each of these two faults (a faulty client would flood the log), and
        the server's request of that id, if any, ends with that failure: it was said as
        "None: invalid value ...", and the request waited for ever."""
        msg_id = data["id"]
        if "error" in data:
            fault = "has a malformed 'error'"
            wrong = _error_misfit(data["error"]) or wrong
        else:
            fault = "does not fit"
        said = f"the response to request {shown(msg_id)} {fault}: {wrong}"
        if self._first(fault):
            self.log(f"{said}; ignored (said once a session)")
        if self._answers_server_request(msg_id):
            failure = lsp.ResponseError(JsonRpcInternalError.CODE, f"converge-dsl: {said}")
            super()._handle_response(msg_id, None, failure)

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


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if type(exc) is ValueError:  # not a decoding error: Python's limit, said in its words
        return f"a number of more than {sys.get_int_max_str_digits()} digits"
    return str(exc)


def _error_misfit(error: object) -> str | None:
    """How a response's `error` member differs from a JSON-RPC error object (`code`, an
    integer, and `message`, a string); None when it does not."""
    expected = 'expected an object {"code": integer, "message": string}'
    if not isinstance(error, dict):
        return f"{expected}, not {shown(error)}"
    wrong = [
        f"'{name}' is missing" if name not in error else f"'{name}' is {shown(error[name])}"
        for name, fits in (("code", _is_integer), ("message", _is_string))
        if name not in error or not fits(error[name])
    ]
    return f"{expected}: {' and '.join(wrong)}" if wrong else None


def _is_integer(value: object) -> bool:
    return type(request_id(value)) is int  # JSON's integers: `1.0` too, never true or false


def _is_string(value: object) -> bool:
    return isinstance(value, str)
