"""Bounded reads: hostile answers stop at a cap (`E_LIMIT`), never at the machine's memory.

Each payload of the audit has a test here (an endless body under a small cap, an
endless error body, an endless event-stream line, a `gzip, gzip` bomb, an answer
nested 5,000 levels deep), beside cases of the mechanism's own.
"""

from __future__ import annotations

import functools
import gzip
import json
import random
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from itertools import repeat
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.models import Model, ModelError, ModelErrorCode, build_model
from converge_dsl.models._limits import MAX_JSON_DEPTH, json_depth, limits_problem

from ._helpers import ask, using
from ._hostile import HostileServer, RawRequest, Sender, head, whole

KEY = "sk-hostile-0123456789abcdef"
WIRES = pytest.mark.parametrize("wire", ["openai", "anthropic"])
SMALL = {"max_response_bytes": 65536, "max_sse_line_bytes": 4096, "max_sse_event_bytes": 8192}
# The same line and event caps under a response cap no network chunk can cross first.
ROOMY = {**SMALL, "max_response_bytes": 4 * 1024 * 1024}


def hostile_model(server: HostileServer, wire: str, *, key: str = KEY, **extra: Any) -> Model:
    """A `wire` model of `server` whose account's variable holds `key`."""
    config: dict[str, Any] = {
        "adapter": wire,
        "base_url": server.url + ("/v1" if wire == "openai" else ""),
        "model": "m",
        "accounts": [{"name": "main", "api_key_env": "MAIN_KEY"}],
        "retries": 0,
        "timeout_s": 8,
        **extra,
    }
    build = {k: config.pop(k) for k in ("deadline", "clock") if k in config}
    return build_model(
        "fast",
        config,
        base_dir=Path("."),
        env={"MAIN_KEY": key},
        clock=build.get("clock", FakeClock()),
        rng=random.Random(7),
        deadline=build.get("deadline"),
    )


def failure(server: HostileServer, wire: str, *, stream: bool = False, **extra: Any) -> ModelError:
    model = hostile_model(server, wire, **extra)

    async def call(m: Model) -> object:
        if stream:
            return await m.call_streaming(ask(), lambda _: None)
        return await m.call(ask())

    with pytest.raises(ModelError) as caught:
        using(model, call)
    return caught.value


def zeros() -> Iterator[bytes]:
    return repeat(b"0" * 65536)


# --- the payloads of the audit ---------------------------------------------------


@WIRES
def test_an_endless_body_stops_at_the_configured_cap(wire: str) -> None:
    def respond(_: RawRequest, send: Sender) -> None:
        send(head())
        send.forever(zeros())

    with HostileServer(respond) as server:
        started = time.monotonic()
        error = failure(server, wire, limits=SMALL)
        assert time.monotonic() - started < 5
        assert len(server.requests) == 1  # a crossed cap is not retried
    assert error.code is ModelErrorCode.LIMIT
    assert "max_response_bytes (65536 bytes)" in error.message
    assert error.hint is not None
    assert "models.fast.limits.max_response_bytes" in error.hint
    assert not error.retryable


@WIRES
def test_an_endless_error_body_is_read_only_up_to_its_cap(wire: str) -> None:
    def respond(_: RawRequest, send: Sender) -> None:
        send(head(500))
        send(b'{"error": {"message": "overloaded"')
        send.forever(zeros())

    with HostileServer(respond) as server:
        started = time.monotonic()
        error = failure(server, wire, limits={"max_error_bytes": 4096})
        assert time.monotonic() - started < 5
    assert error.code is ModelErrorCode.PROVIDER  # the status decides, not the cap
    assert "HTTP 500" in error.message
    assert len(error.message) < 1000


@WIRES
def test_an_endless_event_stream_line_stops_at_its_cap(wire: str) -> None:
    def respond(_: RawRequest, send: Sender) -> None:
        send(head(kind="text/event-stream"))
        send(b"data: ")
        send.forever(zeros())

    with HostileServer(respond) as server:
        error = failure(server, wire, stream=True, limits=ROOMY)
    assert error.code is ModelErrorCode.LIMIT
    assert "max_sse_line_bytes (4096 bytes)" in error.message


@WIRES
def test_an_event_of_many_short_lines_stops_at_the_event_cap(wire: str) -> None:
    def respond(_: RawRequest, send: Sender) -> None:
        send(head(kind="text/event-stream"))
        send.forever(repeat(b"data: " + b"x" * 100 + b"\n"))

    with HostileServer(respond) as server:
        error = failure(server, wire, stream=True, limits=ROOMY)
    assert "max_sse_event_bytes (8192 bytes)" in error.message


@WIRES
def test_an_endless_stream_of_small_events_stops_at_the_response_cap(wire: str) -> None:
    def respond(_: RawRequest, send: Sender) -> None:
        send(head(kind="text/event-stream"))
        send.forever(repeat(b": keep-alive comment\n\n" * 100))

    with HostileServer(respond) as server:
        error = failure(server, wire, stream=True, limits=SMALL)
    assert "max_response_bytes (65536 bytes)" in error.message


@functools.cache
def bomb(size: int = 64 * 1024 * 1024) -> bytes:
    """`size` zero bytes, gzipped twice (a few KB)."""
    inner = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(1024 * 1024)
    once = b"".join(inner.compress(block) for _ in range(size // len(block))) + inner.flush()
    return gzip.compress(once, 9)


@WIRES
@pytest.mark.parametrize("limits", [SMALL, {}], ids=["small-cap", "default-cap"])
def test_a_gzip_gzip_bomb_stops_at_the_cap_without_expanding(
    wire: str, limits: dict[str, int]
) -> None:
    def respond(_: RawRequest, send: Sender) -> None:
        send(whole(bomb(), content_encoding="gzip, gzip"))

    assert len(bomb()) < 20_000
    with HostileServer(respond) as server:
        tracemalloc.start()
        try:
            error = failure(server, wire, limits=limits)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert error.code is ModelErrorCode.LIMIT
    assert "max_response_bytes" in error.message
    cap = limits.get("max_response_bytes", 16 * 1024 * 1024)
    assert peak < 2 * cap + 8 * 1024 * 1024  # never the 64 MiB it expands to


@WIRES
def test_a_gzipped_answer_within_the_cap_is_read(wire: str) -> None:
    body = {
        "openai": {
            "choices": [{"message": {"content": "zipped hello"}, "finish_reason": "stop"}],
        },
        "anthropic": {"content": [{"type": "text", "text": "zipped hello"}], "stop_reason": "x"},
    }[wire]

    def respond(_: RawRequest, send: Sender) -> None:
        send(
            whole(
                gzip.compress(gzip.compress(json.dumps(body).encode())),
                content_encoding="gzip, gzip",
            )
        )

    with HostileServer(respond) as server:
        result = using(hostile_model(server, wire), lambda m: m.call(ask()))
        assert server.requests[0].headers["accept-encoding"] == "gzip, deflate"
    assert result.text == "zipped hello"


@WIRES
def test_an_unknown_or_corrupt_content_encoding_is_e_wire(wire: str) -> None:
    replies = iter(
        [
            whole(b"{}", content_encoding="br"),
            whole(b"not gzip at all", content_encoding="gzip"),
            whole(gzip.compress(b"{}")[:-12], content_encoding="gzip"),
        ]
    )

    def respond(_: RawRequest, send: Sender) -> None:
        send(next(replies))

    with HostileServer(respond) as server:
        messages = [failure(server, wire).message for _ in range(3)]
    assert "unsupported content encoding 'br'" in messages[0]
    assert "corrupt" in messages[1]
    assert "ended early" in messages[2]


NESTED = "[" * 5000 + "]" * 5000


@WIRES
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_an_answer_nested_5000_deep_is_e_wire_not_a_recursion_error(
    wire: str, stream: bool
) -> None:
    def respond(_: RawRequest, send: Sender) -> None:
        if stream:
            send(whole(f"data: {NESTED}\n\n".encode(), kind="text/event-stream"))
        else:
            send(whole(('{"choices": ' + NESTED + ', "content": []}').encode()))

    with HostileServer(respond) as server:
        error = failure(server, wire, stream=stream)
    assert error.code is ModelErrorCode.WIRE
    assert f"levels deep, more than the {MAX_JSON_DEPTH} allowed" in error.message


def test_nested_tool_call_arguments_are_a_soft_problem_not_a_recursion_error() -> None:
    body = {
        "choices": [
            {
                "message": {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "t", "arguments": NESTED},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }

    def respond(_: RawRequest, send: Sender) -> None:
        send(whole(json.dumps(body).encode()))

    with HostileServer(respond) as server:
        result = using(hostile_model(server, "openai"), lambda m: m.call(ask(tools=True)))
    (call,) = result.tool_calls
    assert (call.name, call.input) == ("t", {})
    assert call.problem == (
        f"the arguments nest 5000 levels deep, more than the {MAX_JSON_DEPTH} allowed"
    )


def test_an_error_body_nested_too_deep_is_quoted_not_decoded() -> None:
    def respond(_: RawRequest, send: Sender) -> None:
        send(whole(NESTED.encode(), status=400))

    with HostileServer(respond) as server:
        error = failure(server, "openai")
    assert error.code is ModelErrorCode.PROVIDER
    assert "HTTP 400: [[[[" in error.message


# --- deadlines -----------------------------------------------------------------------


@WIRES
@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_server_dripping_bytes_hits_one_total_deadline(wire: str, where: str) -> None:
    """Each byte comes well within the read timeout; the whole exchange may not."""

    def respond(_: RawRequest, send: Sender) -> None:
        if where == "headers":
            send(b"HTTP/1.1 200 OK\r\n")
            send.forever(repeat(b"X"), pause_s=0.05)
        send(head())
        send.forever(repeat(b" "), pause_s=0.05)

    with HostileServer(respond) as server:
        started = time.monotonic()
        error = failure(server, wire, timeout_s=1, read_timeout_s=30)
        elapsed = time.monotonic() - started
    assert error.code is ModelErrorCode.TIMEOUT
    assert "within timeout_s (1 s)" in error.message
    assert elapsed < 4


@WIRES
def test_the_runs_deadline_bounds_a_request_shorter_than_timeout_s(wire: str) -> None:
    def respond(_: RawRequest, send: Sender) -> None:
        time.sleep(3)
        send(head())

    clock = FakeClock(start=50.0)
    with HostileServer(respond) as server:
        started = time.monotonic()
        error = failure(server, wire, timeout_s=30, clock=clock, deadline=50.5)
        elapsed = time.monotonic() - started
    assert error.code is ModelErrorCode.BUDGET_EXHAUSTED
    assert "the run's deadline ended the request" in error.message
    assert elapsed < 2.5


@WIRES
def test_no_request_is_sent_past_the_runs_deadline(wire: str) -> None:
    with HostileServer(lambda _, send: send(head())) as server:
        error = failure(server, wire, clock=FakeClock(start=10.0), deadline=9.0)
        assert server.requests == []
    assert error.code is ModelErrorCode.BUDGET_EXHAUSTED


# --- the mechanism -------------------------------------------------------------------


def test_json_depth_skips_strings_and_counts_nesting() -> None:
    assert json_depth('"[[["') == 0
    assert json_depth('{"a": [1, {"b": "]]]}"}]}') == 3
    assert json_depth('["\\"[", [[]]]') == 3
    assert json_depth(NESTED) == 5000


def test_limits_problem_names_the_field() -> None:
    assert limits_problem({"max_response_bytes": 2048}) is None
    assert limits_problem([]) == ("", "`limits` must be a mapping of caps in bytes")
    field, message = limits_problem({"max_sse_line_bytes": 10}) or ("", "")
    assert field == "max_sse_line_bytes"
    assert "from 1024 to" in message
    assert (limits_problem({"max_respons_bytes": 2048}) or ("",))[0] == "max_respons_bytes"
    assert limits_problem({"max_error_bytes": True}) is not None


@pytest.mark.parametrize("limits", [{"max_response_bytes": -1}, {"max_lines": 5}, "big"])
def test_a_bad_limit_is_a_config_error_naming_the_field(limits: object) -> None:
    with HostileServer(lambda _, send: None) as server, pytest.raises(ModelError) as caught:
        hostile_model(server, "openai", limits=limits)
    assert caught.value.code is ModelErrorCode.CONFIG
    assert caught.value.hint is not None
    assert "models.fast.limits" in caught.value.hint


def test_lines_split_on_cr_lf_and_crlf_across_chunks() -> None:
    from converge_dsl.models._body import SseLines

    def never() -> None:
        raise AssertionError("no cap crossed")

    lines = SseLines(100, never)
    got = [
        line for chunk in (b"a\r", b"\nb\rc\n", b"d\r\n\r", b"\ne") for line in lines.feed(chunk)
    ]
    got += list(lines.close())
    assert got == ["a", "b", "c", "d", "", "e"]


def test_a_line_over_its_cap_is_refused_before_it_is_whole() -> None:
    from converge_dsl.models._body import SseLines

    class Crossed(Exception):
        pass

    def crossed() -> None:
        raise Crossed

    lines = SseLines(10, crossed)
    assert list(lines.feed(b"0123456789\n")) == ["0123456789"]
    with pytest.raises(Crossed):
        list(lines.feed(b"0123456789a"))
