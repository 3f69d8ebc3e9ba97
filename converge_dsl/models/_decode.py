"""Decoding a provider's HTTP response: an `Answer`, or the `ModelError` its status means.

`read_answer` reads a 200 response, whole or as server-sent events;
`status_error` maps any other status to a `ModelError` (code, retryability,
`Retry-After`, hint), with credentials masked in the provider's detail.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from converge_dsl.models._retry_after import retry_after_seconds
from converge_dsl.models._sse import SseDecoder
from converge_dsl.models._wire import Answer, ToolNames, WireFormat, load_json
from converge_dsl.models.port import ModelError, ModelErrorCode, OnEarlyToolCall, OnIncrement

RETRYABLE_STATUS = frozenset({408, 409, 500, 502, 503, 504, 529})


async def read_answer(
    response: httpx.Response,
    wire: WireFormat,
    names: ToolNames,
    *,
    stream: bool,
    on_increment: OnIncrement,
    on_early_call: OnEarlyToolCall,
) -> Answer:
    """The answer in a 200 `response`. A streamed call reads server-sent events when
    the provider sends them; a whole body still reports its tool calls early and,
    when streaming, its text as one increment."""
    kind = response.headers.get("content-type", "")
    if stream and kind.startswith("text/event-stream"):
        return await read_stream(response, wire, names, on_increment, on_early_call)
    text = (await response.aread()).decode("utf-8", errors="replace")
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
) -> Answer:
    """The answer carried by the server-sent events of `response`; `E_WIRE` if cut short."""
    decoder = SseDecoder()
    assembler = wire.assembler(names, on_increment, on_early_call)
    async for line in response.aiter_lines():
        event = decoder.feed_line(line)
        if event is not None:
            assembler.feed(event)
    event = decoder.feed_line("")
    if event is not None:
        assembler.feed(event)
    return assembler.finish()


def status_error(
    response: httpx.Response,
    where: str,
    wire: WireFormat,
    redact: Callable[[str], str],
    wall_time: Callable[[], float],
) -> ModelError:
    """The failure a non-200 `response` (already read) stands for.

    401/403 is `E_AUTH`; 429 is `E_RATE_LIMITED` (retryable); anything else is
    `E_PROVIDER`, retryable for 5xx and `RETRYABLE_STATUS`. `Retry-After` dates
    are read against `wall_time` (epoch seconds).
    """
    status = response.status_code
    try:
        detail = wire.error_detail(response.json())
    except ValueError:
        detail = None
    detail = redact(detail or response.text[:200].strip() or response.reason_phrase)
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
