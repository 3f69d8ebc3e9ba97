"""What the SDK's client drops unread (a stdio line that is not JSON-RPC, an HTTP body cut
short, a content type it does not take) is named in the failure of the request it left
unanswered, and nothing of it reaches the user's stderr."""

from __future__ import annotations

import asyncio
import http.server
import io
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from converge_dsl import codes
from converge_dsl.frontend import HttpServerSpec, StdioServerSpec
from converge_dsl.tools import McpToolServer, ToolFailure, ToolResult

from ._servers import free_port

RAW = Path(__file__).resolve().parent / "raw_server.py"
PARENT = {"PATH": os.environ["PATH"]}


def _raw_echo(folder: Path, mode: str, **limits: Any) -> ToolResult:
    """The result of an `echo` call to `raw_server.py MODE` (started, called, stopped)
    with the server's `limits` (start_timeout_s, call_timeout_s, max_result_bytes)."""
    spec = StdioServerSpec(
        name="raw", command=(sys.executable, str(RAW), mode), allow=("echo",), **limits
    )
    server = McpToolServer(spec, folder, PARENT)
    try:
        assert [tool.name for tool in server.start().tools] == ["echo"]
        return asyncio.run(server.call("echo", {}))
    finally:
        server.close()


def _raw_echo_fails(folder: Path, mode: str) -> ToolFailure:
    """The failure of an `echo` call to `raw_server.py MODE` (started, called, stopped),
    its calls bounded to a second."""
    spec = StdioServerSpec(
        name="raw", command=(sys.executable, str(RAW), mode), allow=("echo",), call_timeout_s=1
    )
    server = McpToolServer(spec, folder, PARENT)
    try:
        server.start()
        with pytest.raises(ToolFailure) as caught:
            asyncio.run(server.call("echo", {}))
    finally:
        server.close()
    return caught.value


def test_a_line_that_is_not_json_rpc_is_named_when_its_call_times_out(tmp_path: Path) -> None:
    # The call timed out naming only call_timeout_s, as if the tool were slow.
    failure = _raw_echo_fails(tmp_path, "not-json")
    assert failure.code == codes.TOOL_CALL_TIMED_OUT
    assert failure.message.endswith(
        "the server was stopped; the client dropped what it sent: a line that is not "
        "JSON-RPC: '{this is not JSON-RPC'"
    )


class _Broken(http.server.BaseHTTPRequestHandler):
    mode = ""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.mode == "silent":
            threading.Event().wait(5)  # answers nothing (the test's client gives up first)
            return
        if self.mode.isdigit():
            self.send_response(int(self.mode))
            self.send_header("content-length", "0")
            self.end_headers()
            return
        self.send_response(200)
        if self.mode == "cut":
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "1000")
            self.end_headers()
            self.wfile.write(b'{"jsonrpc": "2.0"')
            self.close_connection = True
        else:
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>a proxy's login page</html>")


@contextmanager
def _broken_http(
    mode: str, headers: dict[str, str] | None = None, **limits: float
) -> Iterator[HttpServerSpec]:
    handler = type("Handler", (_Broken,), {"mode": mode})
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield HttpServerSpec(
            name="web",
            url=f"http://127.0.0.1:{port}/mcp",
            hosts=("127.0.0.1",),
            allow=("echo",),
            headers=headers or {},
            **({"start_timeout_s": 1} | limits),  # type: ignore[arg-type]
        )
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("mode", "fault"),
    [
        (
            "cut",
            "Error parsing JSON response: peer closed connection without sending complete "
            "message body (received 17 bytes, expected 1000)",
        ),
        ("html", "Unexpected content type: text/html"),
    ],
)
def test_an_http_answer_the_client_cannot_read_is_named_and_not_printed(
    tmp_path: Path, mode: str, fault: str, capfd: pytest.CaptureFixture[str]
) -> None:
    # The SDK's logger printed a traceback (or its complaint) on stderr, and the failure
    # said only that the handshake did not come within start_timeout_s, as if it were slow.
    with _broken_http(mode) as spec:
        server = McpToolServer(spec, tmp_path, PARENT)
        with pytest.raises(ToolFailure) as caught:
            server.start()
    assert caught.value.message == (
        "tool server 'web': did not answer the MCP handshake and tools/list within 1 s; "
        f"the client dropped what it sent: {fault}"
    )
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    ("status", "headers", "hint"),
    [
        (
            "401",
            {"Authorization": "KB_TOKEN"},
            "check the credentials its headers carry (Authorization from $KB_TOKEN)",
        ),
        ("401", {}, "it wants credentials: name the variable that holds them under `headers:`"),
        ("404", {}, "check the server's url: the path of its MCP endpoint, often /mcp"),
        ("429", {}, "the server limits how often it is called: try again later"),
        ("503", {}, "see the server's log for why"),
    ],
)
def test_an_http_status_at_start_is_named_with_what_to_do(
    tmp_path: Path, status: str, headers: dict[str, str], hint: str
) -> None:
    # A 404 read "Session terminated"; the others "Client error '401 Unauthorized' for
    # url ...", with no hint, and the run's error text dropped every server's hint.
    from converge_dsl.tools import RunTools

    with _broken_http(status, headers) as spec:
        tools = RunTools({"web": spec}, tmp_path, environ={"KB_TOKEN": "planted"})
        try:
            text, is_error = asyncio.run(tools.call("me", 1, "web", "echo", {}))
        finally:
            tools.close()
    assert is_error
    assert text == (
        f"CD963: tool server 'web': could not start: {spec.url} answered HTTP {status} "
        f"(hint: {hint})"
    )


def test_a_server_that_exits_at_start_names_the_command_to_run_by_hand(tmp_path: Path) -> None:
    # It read "could not start: Connection closed".
    spec = StdioServerSpec(
        name="quits", command=(sys.executable, "-c", "pass"), allow=("echo",), cwd="work"
    )
    (tmp_path / "work").mkdir()
    with pytest.raises(ToolFailure) as caught:
        McpToolServer(spec, tmp_path, PARENT).start()
    assert caught.value.message == (
        "tool server 'quits': could not start: it exited, or closed its stdout, before "
        "answering the MCP handshake"
    )
    assert caught.value.hint == (
        f"run `cd {tmp_path / 'work'} && {sys.executable} -c pass` by hand to see why it stops"
    )


def test_the_command_to_run_by_hand_pastes_as_it_is(tmp_path: Path) -> None:
    # It was quoted with `shlex.quote`: the newline of the program's text split the
    # pasted line in two, and the folder's byte that is not UTF-8 could not be shown.
    base = tmp_path / "pipe\udcffé"
    os.mkdir(base)
    spec = StdioServerSpec(
        name="quits", command=(sys.executable, "-c", "x = 'a'\npass"), allow=("echo",)
    )
    with pytest.raises(ToolFailure) as caught:
        McpToolServer(spec, base, PARENT).start()
    assert caught.value.hint == (
        f"run `cd $'{tmp_path}/pipe\\xffé' && {sys.executable} -c $'x = \\'a\\'\\x0apass'` "
        "by hand to see why it stops"
    )
    pasted = caught.value.hint.split("`")[1].replace(" && ", " && printf '%s\\0' ")
    words = subprocess.run(["bash", "-c", pasted], capture_output=True, check=True).stdout
    assert words.split(b"\0")[:-1] == [os.fsencode(word) for word in spec.command]


def test_a_server_that_lists_a_tool_twice_does_not_start(tmp_path: Path) -> None:
    # It started: the first of the two answered the checks, both were offered to the model.
    spec = StdioServerSpec(name="raw", command=(sys.executable, str(RAW), "twice"), allow=("echo",))
    with pytest.raises(ToolFailure) as caught:
        McpToolServer(spec, tmp_path, PARENT).start()
    assert caught.value.code == codes.TOOL_SERVER_NOT_STARTED
    assert caught.value.message == "tool server 'raw': its tools/list names 'echo' more than once"
    assert caught.value.hint == "a server's tool names must be unique: fix the server's tool list"


def test_an_http_server_that_does_not_answer_at_start_says_so(tmp_path: Path) -> None:
    # It read "could not start: ReadTimeout".
    with (
        _broken_http("silent", call_timeout_s=0.5, start_timeout_s=3) as spec,
        pytest.raises(ToolFailure) as caught,
    ):
        McpToolServer(spec, tmp_path, PARENT).start()
    assert caught.value.message == (
        f"tool server 'web': could not start: {spec.url} did not answer within 0.5 s (ReadTimeout)"
    )
    assert caught.value.hint == "check that the server is up and answering, or raise call_timeout_s"


def test_a_banner_before_the_handshake_is_not_blamed_for_a_later_timeout(tmp_path: Path) -> None:
    assert _raw_echo_fails(tmp_path, "hang").message == (
        "tool server 'raw': a call passed call_timeout_s (1 s); the server was stopped"
    )


def test_a_long_json_rpc_error_is_cut_at_max_result_bytes(tmp_path: Path) -> None:
    # A tool's error result was capped, a JSON-RPC error's message was not: the model was
    # handed all 50,000 characters of it, whatever max_result_bytes said.
    result = _raw_echo(tmp_path, "long-rpc-error", max_result_bytes=1000)
    assert result.is_error
    assert result.cut
    assert result.text.startswith("tool 'echo' failed: no such ticket no such ticket")
    assert result.text.endswith("\n[result cut: 50030 bytes, over the cap of 1000]")


def test_timeouts_past_what_threading_can_wait_start_and_call(tmp_path: Path) -> None:
    # start_timeout_s: 10000000000 passed validate and the run failed with "suggestor
    # raised OverflowError: timestamp out of range for platform time_t" (CD912).
    forever = 10_000_000_000_000.0
    result = _raw_echo(tmp_path, "ok", start_timeout_s=forever, call_timeout_s=forever)
    assert result.text == "ok"


def test_an_http_server_that_does_not_start_is_not_told_to_start_by_hand(
    tmp_path: Path,
) -> None:
    # A `url:` server got the stdio server's hint: "start it by hand to see where it stalls".
    with (
        _broken_http("silent", call_timeout_s=5, start_timeout_s=0.5) as spec,
        pytest.raises(ToolFailure) as caught,
    ):
        McpToolServer(spec, tmp_path, PARENT).start()
    assert caught.value.code == codes.TOOL_SERVER_NOT_STARTED
    assert caught.value.hint == (
        "raise start_timeout_s if the server is slow to answer, or check that the server "
        f"answers at {spec.url}"
    )


def test_a_server_slow_to_list_its_tools_is_told_what_to_raise(tmp_path: Path) -> None:
    # It said "did not answer the MCP handshake and tools/list within 0.5 s" and no more.
    spec = StdioServerSpec(
        name="raw",
        command=(sys.executable, str(RAW), "slow-list"),
        allow=("echo",),
        start_timeout_s=0.5,
    )
    with pytest.raises(ToolFailure) as caught:
        McpToolServer(spec, tmp_path, PARENT).start()
    assert caught.value.code == codes.TOOL_SERVER_NOT_STARTED
    assert caught.value.message.startswith(
        "tool server 'raw': did not answer the MCP handshake and tools/list within 0.5 s"
    )
    assert caught.value.hint == (
        "raise start_timeout_s if the server is slow to start, or start it by hand to see "
        "where it stalls"
    )


def test_a_command_naming_a_folder_says_so(tmp_path: Path) -> None:
    # It said "program './tools' is not found" and told to install it.
    (tmp_path / "tools").mkdir()
    spec = StdioServerSpec(name="dir", command=("./tools",), allow=("echo",))
    with pytest.raises(ToolFailure) as caught:
        McpToolServer(spec, tmp_path, PARENT).start()
    assert caught.value.message == "tool server 'dir': program './tools' is a folder, not a program"
    assert caught.value.hint == "name the program inside it in `command`"


def _errors_page_example(server: str) -> str:
    """The CD963 example of docs/errors.md for the server named `server`."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text()
    section = page.split("\n## CD963\n", 1)[1].split("\n## ", 1)[0]
    start = f"```text\nerror[CD963]: tool server '{server}':"
    return section.split(start, 1)[1].split("```", 1)[0].join((start[8:], ""))


@pytest.mark.parametrize("transport", ["stdio", "url"])
def test_the_errors_page_shows_what_lock_prints_of_a_server_that_never_answers(
    tmp_path: Path, transport: str
) -> None:
    # The page showed the stdio server's failure only, with a hint line of another form.
    from converge_dsl.cli import run

    with _broken_http("silent", call_timeout_s=5, start_timeout_s=1) as http:
        name, declared = ("mute", 'command: [sleep, "60"]')
        if transport == "url":
            name, declared = ("kb", f"url: {http.url}\n    hosts: [127.0.0.1]")
        (tmp_path / "p.yaml").write_text(
            "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: p\n"
            f"tools:\n  {name}:\n    {declared}\n    allow: [search]\n    start_timeout_s: 1\n"
            "seeds: [{id: go, content: go}]\n"
        )
        out, err = io.StringIO(), io.StringIO()
        code = run(["lock", str(tmp_path / "p.yaml")], out, err)
    assert code == 1
    shown = _errors_page_example(name).replace("http://127.0.0.1:8931/mcp", http.url)
    assert err.getvalue() == shown
