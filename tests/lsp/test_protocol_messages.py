"""What the server does with a message that is not a request, a notification nor a response
(`PipelineProtocol.receive`), driven in process: the answers it sends and the lines it
writes on standard error."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from typing import Any

import pytest

from converge_dsl.lsp import build_server
from converge_dsl.lsp._protocol import PipelineProtocol

HOVER = {"textDocument": {"uri": "file:///x.yaml"}, "position": {"line": 0, "character": 0}}
LOGGER = "converge_dsl.lsp._protocol"


class Server:
    """An initialized server, driven by `send`; what it sent, as JSON objects."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.protocol: PipelineProtocol = build_server(debounce=0).protocol
        self.sent: list[dict[str, Any]] = []
        unstructure = self.protocol._converter.unstructure
        monkeypatch.setattr(
            self.protocol,
            "_send_data",
            lambda data: self.sent.append(json.loads(json.dumps(data, default=unstructure))),
        )
        self.send({"id": 0, "method": "initialize", "params": {"capabilities": {}}})
        self.sent.clear()

    def send(self, message: dict[str, Any], version: str = "2.0") -> None:
        self.protocol.receive(json.dumps({"jsonrpc": version, **message}).encode())

    def answers(self) -> list[dict[str, Any]]:
        return [m for m in self.sent if "method" not in m]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Server:
    return Server(monkeypatch)


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the server wrote on standard error."""
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


_NO_METHOD_NOR_ID = (
    "ignoring a message with neither 'method' nor 'id' (a request has both, a notification a "
    "'method', a response an 'id') (said once a session)"
)
_STRAY = "ignoring a response to {}, no request of the server's (said once a session)"


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ({}, _NO_METHOD_NOR_ID),
        ({"params": {}}, _NO_METHOD_NOR_ID),
        ({"result": 3}, _NO_METHOD_NOR_ID),
        ({"error": {"code": 1, "message": "m"}}, _NO_METHOD_NOR_ID),
        ({"id": 3, "result": None}, _STRAY.format(3)),
        ({"id": [1], "result": None}, _STRAY.format([1])),
        ({"id": {"a": 1}, "error": {"code": 1, "message": "m"}}, _STRAY.format({"a": 1})),
    ],
)
def test_a_message_that_lacks_its_method_or_id_is_said_once_in_words(
    server: Server, caplog: pytest.LogCaptureFixture, message: dict[str, Any], why: str
) -> None:
    """It was said in the client's log as "None: the params do not fit the method", once
    for each such message; a response whose id is not an id with an error was said there
    as "None: expected an integer or a string...", each time."""
    for _ in range(3):
        server.send(message)
    assert server.sent == []
    assert said(caplog) == [why]


@pytest.mark.parametrize(("msg_id", "echoed"), [(77, 77), ("s", "s"), ([1], None)])
def test_a_message_with_an_id_and_no_method_result_nor_error_is_answered(
    server: Server, msg_id: object, echoed: object
) -> None:
    """It was ignored: a client that sent it waited for its answer for ever."""
    server.send({"id": msg_id, "params": {}})
    assert server.sent == [
        {
            "jsonrpc": "2.0",
            "id": echoed,
            "error": {
                "code": -32600,
                "message": "a message with an 'id' has a 'method' (a request) or a 'result' "
                "or an 'error' (a response): this one has none of them",
            },
        }
    ]


def test_a_method_that_is_not_a_string_is_refused_in_words(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    server.send({"id": 4, "method": 5})
    server.send({"method": None})
    assert server.answers() == [
        {
            "jsonrpc": "2.0",
            "id": 4,
            "error": {"code": -32600, "message": "'method' must be a string, not 5"},
        }
    ]
    assert said(caplog) == [
        "ignoring a notification: its 'method' must be a string, not null (said once a session)"
    ]


@pytest.mark.parametrize(
    ("msg_id", "shown"),
    [([1], "[1]"), ({"n": 1}, '{"n": 1}'), (True, "true"), (False, "false"), (1.5, "1.5")],
)
@pytest.mark.parametrize("method", ["textDocument/hover", "shutdown"])
def test_a_request_whose_id_is_not_an_id_is_refused_with_id_null_and_not_run(
    server: Server, msg_id: object, shown: str, method: str
) -> None:
    """JSON-RPC 2.0 allows a string, a number or null as an id (the protocol an integer or a
    string): an array or an object was echoed in the answer, `shutdown` with one was run
    and failed inside pygls (unhashable), a bool was taken for a number."""
    server.send({"id": msg_id, "method": method, "params": HOVER})
    assert server.sent == [
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": f"a request's id {shown} is not a string, an integer or null: "
                "the request is not run",
            },
        }
    ]
    assert not server.protocol.shut_down


@pytest.mark.parametrize(("msg_id", "echoed"), [("a", "a"), (7, 7), (7.0, 7), (None, None)])
def test_a_request_whose_id_is_a_string_a_number_or_null_is_answered_under_it(
    server: Server, msg_id: object, echoed: object
) -> None:
    server.send({"id": msg_id, "method": "textDocument/hover", "params": HOVER})
    assert server.answers() == [{"jsonrpc": "2.0", "id": echoed, "result": None}]


def test_a_message_not_json_rpc_2_with_an_id_not_an_id_is_refused_with_id_null(
    server: Server,
) -> None:
    server.send({"id": [1]}, version="1.0")
    assert [m["id"] for m in server.answers()] == [None]


def test_nothing_is_logged_by_pygls(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="pygls")
    server.send({"id": [1], "method": "shutdown"})
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_request_is_answered_with_the_older_objects_frozen(
    server: Server, monkeypatch: pytest.MonkeyPatch, unfrozen_collector: None
) -> None:
    """The objects of a large answer (the outline or the semantic tokens of a 5 MB pipeline)
    made the collector walk the whole pipeline model the server keeps, twice a request:
    half of documentSymbol's time. The older objects are frozen while a request is answered
    (its answer written too), and given back after."""
    seen: list[int] = []
    written: list[int] = []
    send_data = server.protocol._send_data

    def hover(params: object) -> None:
        seen.append(gc.get_freeze_count())

    def write(data: Any) -> None:
        written.append(gc.get_freeze_count())
        send_data(data)

    monkeypatch.setitem(server.protocol.fm.features, "textDocument/hover", hover)
    monkeypatch.setattr(server.protocol, "_send_data", write)
    assert gc.get_freeze_count() == 0
    server.send({"id": 5, "method": "textDocument/hover", "params": HOVER})
    assert server.answers() == [{"jsonrpc": "2.0", "id": 5, "result": None}]
    assert seen[0] > 0
    assert written[0] > 0
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("$/cancelRequest", {"id": [1]}, "id"),
        ("$/cancelRequest", {"id": {"n": 1}}, "id"),
        ("window/workDoneProgress/cancel", {"token": [1]}, "token"),
    ],
)
def test_an_id_or_token_that_is_not_an_integer_or_a_string_is_a_misfit(
    server: Server, method: str, params: dict[str, Any], field: str
) -> None:
    """lsprotocol read any value as a request's id or a progress token: an array or an
    object then failed inside pygls (unhashable) and ended the session, its requests
    unanswered and a traceback on standard error."""
    server.send({"method": method, "params": params})
    server.send({"id": 6, "method": "textDocument/hover", "params": HOVER})
    assert server.answers() == [{"jsonrpc": "2.0", "id": 6, "result": None}]
    shown = json.dumps(params[field])
    assert [m["params"]["message"] for m in server.sent if "method" in m] == [
        f"converge-dsl: {method}: expected an integer or a string, not {shown} "
        f"@ message.params.{field}; ignored"
    ]


def test_a_message_that_fails_in_pyglss_own_handling_leaves_the_session_going(
    server: Server, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Such a failure went up through the reading of the input and ended the session."""

    def broken(*args: object) -> None:
        raise RuntimeError("broken")

    monkeypatch.setattr(server.protocol, "_handle_cancel_notification", broken)
    monkeypatch.setattr(server.protocol, "_handle_request", broken)
    server.send({"method": "$/cancelRequest", "params": {"id": 1}})
    server.send({"id": 7, "method": "textDocument/hover", "params": HOVER})
    (answer,) = server.answers()
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32603
    assert "RuntimeError: broken" in answer["error"]["message"]
    assert said(caplog) == [
        "$/cancelRequest failed inside the server (RuntimeError: broken)",
        "textDocument/hover failed inside the server (RuntimeError: broken)",
    ]


@pytest.mark.parametrize(
    ("method", "params", "said"),
    [
        ("$/cancelRequest", None, "expected an object with 'id', not null @ message.params"),
        ("$/cancelRequest", [1], "expected an object with 'id', not [1] @ message.params"),
        ("$/cancelRequest", ..., "missing, expected an object with 'id' @ message.params"),
        (
            "workspace/didChangeConfiguration",
            ...,
            "missing, expected an object with 'settings' @ message.params",
        ),
        (
            "textDocument/didClose",
            "x.yaml",
            "expected an object with 'textDocument', not \"x.yaml\" @ message.params",
        ),
    ],
)
def test_params_that_are_not_the_object_a_notification_takes_are_said_in_words(
    server: Server, method: str, params: object, said: str
) -> None:
    """cattrs said "invalid value for type, expected Union @ message.params.id" for a cancel
    whose params were null: a type of its own, at the place of a field never sent."""
    server.send({"method": method} if params is ... else {"method": method, "params": params})
    assert [m["params"]["message"] for m in server.sent if "method" in m] == [
        f"converge-dsl: {method}: {said}; ignored"
    ]


@pytest.mark.parametrize(
    ("params", "said"),
    [
        (None, "expected an object with 'textDocument' and 'position', not null"),
        (..., "missing, expected an object with 'textDocument' and 'position'"),
        (3, "expected an object with 'textDocument' and 'position', not 3"),
    ],
)
def test_params_that_are_not_the_object_a_request_takes_are_answered_in_words(
    server: Server, params: object, said: str
) -> None:
    hover = {"id": 9, "method": "textDocument/hover"}
    server.send(hover if params is ... else {**hover, "params": params})
    assert server.answers() == [
        {
            "jsonrpc": "2.0",
            "id": 9,
            "error": {
                "code": -32602,
                "message": f"textDocument/hover: {said} @ message.params",
            },
        }
    ]


def test_a_misfit_is_placed_by_the_names_the_protocol_writes(server: Server) -> None:
    """cattrs placed it by the Python names of lsprotocol's fields (`text_document`)."""
    server.send(
        {"id": 10, "method": "textDocument/hover", "params": {"position": HOVER["position"]}}
    )
    server.send(
        {"id": 11, "method": "textDocument/hover", "params": {**HOVER, "workDoneToken": []}}
    )
    assert [m["error"]["message"] for m in server.answers()] == [
        "textDocument/hover: required field missing @ message.params.textDocument",
        "textDocument/hover: expected an integer or a string, not [] "
        "@ message.params.workDoneToken",
    ]


def test_a_misfit_of_an_enumeration_or_a_long_number_is_said_in_the_servers_words(
    server: Server,
) -> None:
    """cattrs said "invalid value for type, expected CompletionTriggerKind", a rule echoed a
    4000-digit line whole, and a 5000-digit number was refused in Python's words (its
    `int_max_str_digits` and the call that raises it)."""
    context = {**HOVER, "context": {"triggerKind": 9}}
    server.send({"id": 1, "method": "textDocument/completion", "params": context})
    far = {**HOVER, "position": {"line": int("9" * 4000), "character": 0}}
    server.send({"id": 2, "method": "textDocument/hover", "params": far})
    server.protocol.receive(b'{"jsonrpc": "2.0", "id": 3, "params": ' + b"9" * 5000 + b"}")
    assert [m["error"]["message"] for m in server.answers()] == [
        "textDocument/completion: expected 1, 2 or 3 (CompletionTriggerKind) "
        "@ message.params.context.triggerKind",
        "textDocument/hover: Position.line should be in range [0:2147483647], but was "
        "9999999999... (4000 digits) @ message.params.position",
        "a message is not JSON (a number of more than 4300 digits)",
    ]


@pytest.mark.parametrize(
    "message",
    [
        {"method": "$/progressOfMine", "params": {"all": [{"n": 1, "of": {"n": 1}}]}},
        {"method": "custom/notice", "params": {"all": [{"n": 1, "of": {"n": 1}}]}},
        {"id": 4242, "result": {"all": [{"n": 1, "of": {"n": 1}}]}},
    ],
)
def test_a_message_of_a_method_without_a_type_keeps_its_json(
    server: Server, message: dict[str, Any]
) -> None:
    """Such a message (a notification no handler takes, a response to no request of the
    server's) is dropped; pygls first made each JSON object in it a namedtuple of a class
    compiled for it, about 0.1 ms an object (`test_protocol`: a large one held the next
    request for tens of seconds)."""
    read = server.protocol.structure_message({"jsonrpc": "2.0", **message})
    kept = read.params if "method" in message else read.result
    assert kept == {"all": [{"n": 1, "of": {"n": 1}}]}
    server.send(message)
    server.send({"id": 9, "method": "textDocument/hover", "params": HOVER})
    assert server.answers() == [{"jsonrpc": "2.0", "id": 9, "result": None}]


@pytest.mark.asyncio
@pytest.mark.parametrize("error", ["boom", {"code": 1, "message": "m"}])
async def test_a_response_with_the_id_of_the_clients_own_request_leaves_that_request(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, error: object
) -> None:
    """pygls's table of futures holds the client's requests in flight too: a "response" of
    the id of an unfinished `shutdown` ended it as an internal error (-32603), with a
    traceback on standard error when the shutdown then finished."""
    server = Server(monkeypatch)
    settled = asyncio.Event()

    async def settle() -> None:
        await settled.wait()

    monkeypatch.setattr(server.protocol._server.scheduler, "settle", settle)
    server.send({"id": 9, "method": "shutdown"})
    await asyncio.sleep(0)
    server.send({"id": 9, "error": error})
    settled.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert server.answers() == [{"jsonrpc": "2.0", "id": 9, "result": None}]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
