"""A run's events as Server-Sent Events (`GET /v1/runs/{id}/events`): where a stream
resumes (`last_event`, the `Last-Event-ID` checked against the run's events) and the
stream itself (`event_stream`, also the MCP endpoint's progress of a run).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from converge_dsl import codes

from ._requests import one_header, refused
from ._store import SETTLED

if TYPE_CHECKING:
    from starlette.requests import Request

    from ._events import LiveRun
    from ._service import RunService

# How far past the events a stream sends it notes them sent (`_sent`): one write per
# that many events of a followed run; a kill skips at most that many numbers more.
SENT_AHEAD = 64
# How long an event stream waits for news before it sends a keep-alive comment.
KEEPALIVE_S = 15.0
# How often an event stream looks whether a queued run has started.
QUEUED_POLL_S = 0.05
# A Last-Event-ID the service could have sent: an event's number (SQLite's integers).
_EVENT_ID = re.compile(r"[0-9]{1,18}")


def last_event(request: Request, service: RunService, run: str) -> int:
    """The number of the last event of `run` the client has (`Last-Event-ID`), -1 without
    one: 400 when it is not an event's number (CD309) or not one the run has been given
    (CD462, `_check_given`)."""
    last = _header(request)
    return _check_given(service, run, last) if last >= 0 else last


def _header(request: Request) -> int:
    """The number of the last event the client has (`Last-Event-ID`), -1 without one; 400
    (CD309) when it is not an event's number (ASCII digits, HTTP's blanks around them) or
    is given twice, differently."""
    header = one_header(request.headers, "Last-Event-ID", codes.SERVE_BAD_PARAMETER)
    if header is None or not header.strip(" \t"):
        return -1
    if _EVENT_ID.fullmatch(header.strip(" \t")) is None:
        raise refused(
            400,
            codes.SERVE_BAD_PARAMETER,
            f"Last-Event-ID {header[:40]!r} is not the number of an event",
            "",
            "send the `id:` of the last event received, or no Last-Event-ID to start over",
        )
    return int(header.strip(" \t"))


def _check_given(service: RunService, run: str, last: int) -> int:
    """Where to resume `run` for a client that has event `last`: after it, when it is
    below the number the run's next event takes (while an attempt is in progress, the
    next of its records; else `next_event`: past the stored events and the number a
    stream noted sent), whatever its status; else 400 (CD462).

    A number is never given to two events: a stream notes a number past the ones it
    sends before it sends them (`_sent`), and a run continued after a kill numbers its
    events past it. A number of an event the kill lost (or one noted but never given:
    no event lies between it and the next one) resumes after it, at the next event kept.
    """
    live = service.live(run)
    given = service.store.next_event(run) if live is None else live.first + len(live.records)
    if last < given:
        return last
    held = f"all below {given}" if given else "none yet"
    raise refused(
        400,
        codes.SERVE_EVENT_NOT_GIVEN,
        f"Last-Event-ID {last} is past the numbers run {run!r} has given its events ({held})",
        "",
        "send the `id:` of the last event this run's stream sent, or no Last-Event-ID to "
        "read its events from the first",
    )


async def event_stream(service: RunService, run: str, last: int) -> AsyncIterator[str]:
    """The run's events after `last`: stored ones, then live ones as they come; then `end`.

    The stream ends when the run stops or pauses, and without `end` when the server
    stops (a running run once it stopped at its checkpoint: `LiveRun.halt`); until then
    a comment every `KEEPALIVE_S` keeps idle connections open (a client that goes away
    ends it).
    """
    waited = 0.0
    while True:
        for seq, line in service.store.events(run, last):
            yield f"id: {seq}\ndata: {line}\n\n"
            last = seq
        live = service.live(run)
        if live is not None:
            burst = live.after(last)
            _sent(service, run, live, burst)
            for seq, line in burst:
                yield f"id: {seq}\ndata: {line}\n\n"
                last = seq
            if live.halted:
                return  # the server stops: the client resumes from `last` on the next
            if not live.ended:
                await live.changed(last, KEEPALIVE_S)
                if not live.after(last) and not live.ended:
                    yield ": keep-alive\n\n"
                continue
        row = service.store.get(run)
        if row is None or row.status in SETTLED:
            for seq, line in service.store.events(run, last):
                yield f"id: {seq}\ndata: {line}\n\n"
                last = seq
            end = {
                "status": None if row is None else row.status,
                "stop_reason": None if row is None else row.stop_reason,
            }
            yield f"event: end\ndata: {json.dumps(end)}\n\n"
            return
        if service.is_stopping:
            return  # a queued run does not start on this server any more
        waited += QUEUED_POLL_S  # queued: not started yet
        if waited >= KEEPALIVE_S:
            waited = 0.0
            yield ": keep-alive\n\n"
        await asyncio.sleep(QUEUED_POLL_S)


def _sent(service: RunService, run: str, live: LiveRun, burst: list[tuple[int, str]]) -> None:
    """Note, before `burst` (events of the attempt in progress, maybe not stored yet) is
    sent, a number past it, unless one noted for the attempt already is: `SENT_AHEAD`
    past it, so that one write covers that many events more."""
    if burst and burst[-1][0] >= live.sent:
        past = burst[-1][0] + 1 + SENT_AHEAD
        service.store.mark_sent(run, past)
        live.sent = past
