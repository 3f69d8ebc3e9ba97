"""A server that echoes the API key in every kind of broken answer: the key never shows.

The server reads the key from the request's `Authorization` / `x-api-key`
header and puts it in the answer, for every error path of both adapters (plain,
streamed, tool calls). No exception text, hint, cause, traceback, stderr line or
`--trace` line may hold it (the CLI part drives `converge-dsl run --trace`).
"""

from __future__ import annotations

import io
import json
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.models import ModelError

from ._helpers import ask, using
from ._hostile import HostileServer, RawRequest, Sender, head, whole
from .test_limits import KEY, hostile_model

Answer = Callable[[str], bytes]  # the key -> the raw response


def sse(*events: str) -> bytes:
    return whole("".join(events).encode(), kind="text/event-stream")


def data(value: object) -> str:
    return f"data: {value if isinstance(value, str) else json.dumps(value)}\n\n"


def oa_choice(**delta: object) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta}]}


def oa_whole_call(name: str, arguments: str) -> bytes:
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
    message = {"content": None, "tool_calls": [call]}
    return whole(
        json.dumps({"choices": [{"message": message, "finish_reason": "tool_calls"}]}).encode()
    )


def an_block_events(kind: str, partial: str, name: str = "t") -> list[str]:
    start = {"type": "content_block_start", "index": 0}
    start["content_block"] = {"type": kind, "id": "tu1", "name": name}
    delta = {"type": "content_block_delta", "index": 0}
    delta["delta"] = {"type": "input_json_delta", "partial_json": partial}
    return [data(start), data(delta), data({"type": "content_block_stop", "index": 0})]


COMMON: dict[str, Answer] = {
    "200 body not JSON": lambda k: whole(f"upstream said {k}".encode()),
    "200 JSON of the wrong shape": lambda k: whole(json.dumps({"error": k, k: [k]}).encode()),
    "401 text body": lambda k: whole(f"bad key {k}".encode(), status=401),
    "403 JSON body": lambda k: whole(
        json.dumps({"error": {"message": k, "type": k}}).encode(), 403
    ),
    "429 with Retry-After": lambda k: whole(k.encode(), status=429, retry_after=k),
    "500 JSON body": lambda k: whole(json.dumps({"error": {"message": f"x {k}"}}).encode(), 500),
    "400 nested too deep": lambda k: whole(("[" * 300 + f'"{k}"' + "]" * 300).encode(), 400),
    "unknown content encoding": lambda k: whole(b"{}", content_encoding=k.replace("-", "")),
    "content encoding named by the key": lambda k: whole(b"{}", content_encoding=k),
    "corrupt gzip": lambda k: whole(k.encode(), content_encoding="gzip"),
    "garbage status line": lambda k: f"HTTP/1.1 {k}\r\n\r\n".encode(),
    "garbage header line": lambda k: f"HTTP/1.1 200 OK\r\n{k}\r\n\r\n".encode(),
    "body cut short": lambda k: head(content_length="100000") + k.encode(),
    "over the cap": lambda k: whole(k.encode() * 5000),
    "stream line not JSON": lambda k: sse(data(f"{{oops {k}")),
    "stream line over the cap": lambda k: sse(data(k * 500)),
    "stream cut after the key": lambda k: head(kind="text/event-stream") + f"data: {k}".encode(),
}

# Tool-call arguments that are not a JSON object are the model's mistake: the call
# comes back with its problem named (a soft tool error for the agent), not an error.
SOFT_OPENAI: dict[str, Answer] = {
    "tool-call arguments not JSON": lambda k: oa_whole_call("t", f"{{{k}"),
    "tool-call arguments not an object": lambda k: oa_whole_call(k, json.dumps([k])),
    "stream tool-call arguments not JSON": lambda k: sse(
        data(oa_choice(tool_calls=[{"index": 0, "id": "c", "function": {"name": k}}])),
        data(oa_choice(tool_calls=[{"index": 0, "function": {"arguments": f"{{{k}"}}])),
        data({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ),
}

SOFT_ANTHROPIC: dict[str, Answer] = {
    "stream tool input not JSON": lambda k: sse(
        data({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
        *an_block_events("tool_use", f"{{{k}"),
        data({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}),
        data({"type": "message_stop"}),
    ),
}
SOFT = [
    *(("openai", stream, name) for name in SOFT_OPENAI for stream in (False, True)),
    *(("anthropic", True, name) for name in SOFT_ANTHROPIC),
]

OPENAI: dict[str, Answer] = {
    "stream error chunk": lambda k: sse(data({"error": {"message": f"boom {k}"}})),
    "stream error string": lambda k: sse(data({"error": k})),
    "stream content not text": lambda k: sse(data(oa_choice(content={k: k}))),
}

ANTHROPIC: dict[str, Answer] = {
    "tool_use input not an object": lambda k: whole(
        json.dumps(
            {"content": [{"type": "tool_use", "id": k, "name": k, "input": k}], "stop_reason": k}
        ).encode()
    ),
    "stream error event": lambda k: sse(
        "event: error\n" + data({"type": "error", "error": {"type": k, "message": k}})
    ),
    "stream tool input not JSON": lambda k: sse(*an_block_events("tool_use", f"{{{k}", name=k)),
    "stream answer-less stop": lambda k: sse(
        data({"type": "message_delta", "delta": {"stop_reason": k}}),
        data({"type": "message_stop"}),
        data({"type": "content_block_delta", "index": 9, "delta": {}}),
    ),
    "stream event not an object": lambda k: sse(data(json.dumps([k]))),
}


def cases(wire: str) -> list[tuple[str, Answer]]:
    return [*COMMON.items(), *(OPENAI if wire == "openai" else ANTHROPIC).items()]


SWEEP = [
    pytest.param(wire, stream, name, answer, id=f"{wire}-{'stream' if stream else 'plain'}-{name}")
    for wire in ("openai", "anthropic")
    for stream in (False, True)
    for name, answer in cases(wire)
]


def echoing(answer: Answer) -> Callable[[RawRequest, Sender], None]:
    def respond(request: RawRequest, send: Sender) -> None:
        assert request.api_key == KEY
        send(answer(request.api_key))

    return respond


def everything_about(error: BaseException) -> str:
    """Every text an error carries: its message, hint, args, chain and traceback."""
    texts = [str(error), repr(error.args), str(getattr(error, "hint", ""))]
    texts += traceback.format_exception(error)
    for linked in (error.__cause__, error.__context__):
        if linked is not None:
            texts.append(everything_about(linked))
    return "\n".join(texts)


def broken_call(
    wire: str, stream: bool, answer: Answer, capfd: pytest.CaptureFixture[str], key: str = KEY
) -> str:
    """Everything a call shows when `answer` is all the server says (the variable holds
    `key`): the error with its chain and traceback, the increments, stdout and stderr."""
    pieces: list[str] = []
    with HostileServer(echoing(answer)) as server:
        model = hostile_model(
            server,
            wire,
            key=key,
            stream=stream,
            limits={"max_response_bytes": 8192, "max_sse_line_bytes": 4096},
        )
        with pytest.raises(ModelError) as caught:
            using(
                model, lambda m: m.call_speculating(ask(tools=True), pieces.append, pieces.append)
            )
        assert server.requests, "the request reached the server"
    out, err = capfd.readouterr()
    return "\n".join((everything_about(caught.value), repr(pieces), out, err))


@pytest.mark.parametrize(("wire", "stream", "name", "answer"), SWEEP)
def test_the_key_is_in_no_error_of_any_broken_answer(
    wire: str, stream: bool, name: str, answer: Answer, capfd: pytest.CaptureFixture[str]
) -> None:
    text = broken_call(wire, stream, answer, capfd)
    assert KEY not in text, text


@pytest.mark.parametrize(("wire", "stream", "name"), SOFT)
def test_a_malformed_tool_call_comes_back_named_and_masked(
    wire: str, stream: bool, name: str, capfd: pytest.CaptureFixture[str]
) -> None:
    answers = SOFT_OPENAI if wire == "openai" else SOFT_ANTHROPIC
    pieces: list[object] = []
    with HostileServer(echoing(answers[name])) as server:
        model = hostile_model(server, wire, stream=stream)
        result = using(
            model, lambda m: m.call_speculating(ask(tools=True), pieces.append, pieces.append)
        )
    (call,) = result.tool_calls
    assert call.input == {}
    assert call.problem is not None
    assert call.problem.startswith("the arguments are ")
    out, err = capfd.readouterr()
    assert KEY not in "\n".join((repr(result), repr(pieces), out, err))


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_an_answer_echoing_the_key_is_returned_masked(wire: str) -> None:
    body = {
        "openai": {
            "choices": [
                {
                    "message": {
                        "content": f"the key is {KEY}",
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "t", "arguments": json.dumps({"k": [KEY]})},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        },
        "anthropic": {
            "content": [
                {"type": "text", "text": f"the key is {KEY}"},
                {"type": "tool_use", "id": "c", "name": "t", "input": {"k": [KEY]}},
            ],
            "stop_reason": "tool_use",
        },
    }[wire]
    with HostileServer(lambda _, send: send(whole(json.dumps(body).encode()))) as server:
        result = using(hostile_model(server, wire), lambda m: m.call(ask(tools=True)))
    assert result.text == "the key is [REDACTED]"
    assert result.tool_calls[0].input == {"k": ["[REDACTED]"]}


PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: echo
models:
  remote:
    adapter: {wire}
    base_url: "{url}"
    model: m
    stream: {stream}
    retries: 1
    accounts: [{{name: main, api_key_env: ECHO_API_KEY}}]
seeds:
  - {{id: topic, content: "anything"}}
suggestors:
  - name: ask
    kind: llm
    model: remote
    dependencies: [seeds]
    target: hypotheses
    prompt: {{user: "Say something about {{{{ facts.seeds[0].content }}}}"}}
    output: {{format: text, id: "ask"}}
"""

CLI = [
    ("openai", False, "200 body not JSON"),
    ("openai", True, "stream line not JSON"),
    ("openai", True, "stream error chunk"),
    ("openai", False, "500 JSON body"),
    ("anthropic", True, "stream error event"),
    ("anthropic", True, "stream tool input not JSON"),
    ("anthropic", False, "401 text body"),
]


@pytest.mark.parametrize(
    "case", CLI, ids=[f"{w}-{'stream' if s else 'plain'}-{n}" for w, s, n in CLI]
)
def test_the_key_is_in_no_stderr_stdout_or_trace_line_of_a_run(
    case: tuple[str, bool, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    wire, stream, name = case
    answer = dict(cases(wire))[name]
    monkeypatch.setenv("ECHO_API_KEY", KEY)
    monkeypatch.chdir(tmp_path)
    with HostileServer(echoing(answer)) as server:
        url = server.url + ("/v1" if wire == "openai" else "")
        Path("p.yaml").write_text(
            PIPELINE.format(wire=wire, url=url, stream=str(stream).lower()), encoding="utf-8"
        )
        out, err = io.StringIO(), io.StringIO()
        code = run(["run", "p.yaml", "--trace", "trace.jsonl"], out, err)
        assert server.requests
    trace = Path("trace.jsonl").read_text(encoding="utf-8")
    seen = out.getvalue() + err.getvalue() + trace + "".join(capfd.readouterr())
    assert code != 0 or "[REDACTED]" in seen or "error" in seen
    assert KEY not in seen
    assert trace.strip(), "the run wrote a trace"
