"""Decoding a provider's HTTP response: an `Answer`, or the `ModelError` its status means.

`read_answer` reads a 200 response, whole or as server-sent events;
`read_error_body` reads the start of any other; `status_error` maps its status
to a `ModelError` (code, retryability, `Retry-After`, hint), with credentials
masked in the provider's detail. Every read stays within the model's `Caps`
(`_limits.ModelLimits`): bodies, lines and events are counted as they arrive.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from converge_dsl.models._body import SseLines, decoded_chunks, read_capped
from converge_dsl.models._limits import MAX_JSON_DEPTH, ModelLimits, exceed, json_depth
from converge_dsl.models._retry_after import retry_after_seconds
from converge_dsl.models._sse import SseDecoder
from converge_dsl.models._wire import Answer, ToolNames, WireFormat, load_json
from converge_dsl.models.port import ModelError, ModelErrorCode, OnEarlyToolCall, OnIncrement

RETRYABLE_STATUS = frozenset({408, 409, 500, 502, 503, 504, 529})


@dataclass(frozen=True, slots=True)
class Caps:
    """The limits of one model's reads, and its name (to say which field raises a cap)."""

    limits: ModelLimits
    model: str = ""

    def on(self, field: str, what: str) -> Callable[[], None]:
        """A callback raising the `E_LIMIT` error of `what` crossing `field`."""
        cap = getattr(self.limits, field)

        def crossed() -> None:
            exceed(field, cap, what, self.model)

        return crossed


async def read_answer(
    response: httpx.Response,
    wire: WireFormat,
    names: ToolNames,
    *,
    stream: bool,
    on_increment: OnIncrement,
    on_early_call: OnEarlyToolCall,
    caps: Caps,
) -> Answer:
    """The answer in a 200 `response`. A streamed call reads server-sent events when
    the provider sends them; a whole body still reports its tool calls early and,
    when streaming, its text as one increment."""
    kind = response.headers.get("content-type", "")
    if stream and kind.startswith("text/event-stream"):
        return await read_stream(response, wire, names, on_increment, on_early_call, caps=caps)
    cap = caps.limits.max_response_bytes
    body = await read_capped(response, cap, caps.on("max_response_bytes", "the answer's body"))
    text = body.decode("utf-8", errors="replace")
    answer = wire.parse(load_json(text, "response body"), names)
    for call in answer.message.tool_calls:
        on_early_call(call)
    if stream and answer.message.text_content:
        on_increment(answer.message.text_content)
    return answer


async def read_stream(
    response: httpx.Response,
    wire: WireFormat,
    names: ToolNames,
    on_increment: OnIncrement,
    on_early_call: OnEarlyToolCall,
    *,
    caps: Caps,
) -> Answer:
    """The answer carried by the server-sent events of `response`; `E_WIRE` if cut short."""
    limits = caps.limits
    lines = SseLines(
        limits.max_sse_line_bytes, caps.on("max_sse_line_bytes", "a line of the event stream")
    )
    decoder = SseDecoder(
        limits.max_sse_event_bytes, caps.on("max_sse_event_bytes", "an event of the stream")
    )
    assembler = wire.assembler(names, on_increment, on_early_call)
    whole = caps.on("max_response_bytes", "the answer's event stream")
    async for chunk in decoded_chunks(response, limits.max_response_bytes, whole):
        for line in lines.feed(chunk):
            event = decoder.feed_line(line)
            if event is not None:
                assembler.feed(event)
    for line in lines.close():
        event = decoder.feed_line(line)
        if event is not None:
            assembler.feed(event)
    event = decoder.feed_line("")
    if event is not None:
        assembler.feed(event)
    return assembler.finish()


async def read_error_body(response: httpx.Response, caps: Caps) -> bytes:
    """The first `max_error_bytes` of a non-200 body (the rest is not read)."""
    return await read_capped(
        response, caps.limits.max_error_bytes, caps.on("max_error_bytes", ""), truncate=True
    )


def _error_json(text: str) -> Any:
    """The error body as JSON, or None when it is not (or nests too deep to read)."""
    if json_depth(text) > MAX_JSON_DEPTH:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def status_error(
    response: httpx.Response,
    body: bytes,
    where: str,
    wire: WireFormat,
    *,
    redact: Callable[[str], str],
    wall_time: Callable[[], float],
) -> ModelError:
    """The failure a non-200 `response`, whose body (or its start) is `body`, stands for.

    401/403 is `E_AUTH`; 429 is `E_RATE_LIMITED` (retryable); anything else is
    `E_PROVIDER`, retryable for 5xx and `RETRYABLE_STATUS`. `Retry-After` dates
    are read against `wall_time` (epoch seconds).
    """
    status = response.status_code
    text = body.decode("utf-8", errors="replace")
    detail = wire.error_detail(_error_json(text))
    detail = redact((detail or text[:200].strip() or response.reason_phrase)[:500])
    message = f"{where} answered HTTP {status}: {detail}"
    retry_after = retry_after_seconds(response.headers, wall_time)
    if status in (401, 403):
        return ModelError(ModelErrorCode.AUTH, message, hint="check the API key of this account")
    if status == 429:
        return ModelError(
            ModelErrorCode.RATE_LIMITED,
            message,
            retryable=True,
            retry_after=retry_after,
            hint="add accounts to the roster or lower max_concurrency",
        )
    return ModelError(
        ModelErrorCode.PROVIDER,
        message,
        retryable=status in RETRYABLE_STATUS or status >= 500,
        retry_after=retry_after,
        hint="the provider failed; retry later"
        if status >= 500
        else "the provider refused the request; check model name, base_url and limits",
    )


def undecodable(exc: BaseException, where: str) -> ModelError:
    """`E_WIRE` for an answer of `where` that broke its decoding (a shape no check
    foresaw): the failure names the exception's type, never a traceback."""
    return ModelError(
        ModelErrorCode.WIRE,
        f"the answer of {where} could not be decoded ({type(exc).__name__}: {exc})"[:400],
        hint="the provider sent something that is not a complete answer; "
        "check base_url points at a compatible API, or retry",
    )
