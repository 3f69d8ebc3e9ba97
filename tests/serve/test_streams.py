"""Where an event stream resumes (`Last-Event-ID`), across a restart that lost events;
and, on a real server SIGKILLed mid-cycle, what a client reads of the run then."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from converge_dsl.serve import RunStore
from converge_dsl.serve._events import LiveRun
from converge_dsl.serve._requests import Refused
from converge_dsl.serve._streams import SENT_AHEAD, _check_given, _sent

from .conftest import Server
from .test_resumption import _chain, _stream


def _service(store: RunStore) -> Any:
    return SimpleNamespace(store=store, live=lambda run: None)


def _events(numbers: range) -> list[tuple[int, str]]:
    return [(n, f'{{"type":"e{n}"}}') for n in numbers]


def test_a_number_a_stream_sent_is_never_given_again_after_a_kill(tmp_path: Path) -> None:
    """A server killed with events 3 and 4 sent (noted: `mark_sent`) but not stored: the
    continued run numbers its events from 5, and a client holding 4, or 3, resumes after
    it. Before, the continued run gave 3 and 4 again, to other events, and a client
    holding any number from 3 on resumed after 2, for the run's life."""
    store = RunStore(tmp_path)
    store.add("r", "p", {}, 1.0)
    store.start("r", 1.0)
    store.add_events("r", _events(range(3)))
    store.mark_sent("r", 5)
    store.close()
    store = RunStore(tmp_path)
    store.recover(2.0)
    assert (store.stored_past("r"), store.next_event("r")) == (3, 5)
    service = _service(store)
    assert _check_given(service, "r", 4) == 4
    assert _check_given(service, "r", 1) == 1
    store.start("r", 3.0)
    store.add_events("r", _events(range(5, 8)))
    assert [n for n, _ in store.events("r", 4)] == [5, 6, 7]
    assert _check_given(service, "r", 6) == 6
    with pytest.raises(Refused):
        _check_given(service, "r", 8)
    store.close()


def test_a_number_no_attempt_gave_is_still_cd462(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.add("r", "p", {}, 1.0)
    store.start("r", 1.0)
    store.add_events("r", _events(range(3)))
    store.mark_sent("r", 2)  # sent 0 and 1 only
    assert store.next_event("r") == 3
    assert _check_given(_service(store), "r", 2) == 2
    with pytest.raises(Refused) as refused:
        _check_given(_service(store), "r", 3)
    assert refused.value.status == 400
    assert refused.value.problems[0].code == "CD462"
    store.close()


def test_a_stream_notes_its_numbers_sent_once_per_sent_ahead_events(tmp_path: Path) -> None:
    """A stream sending a run's events one at a time writes its mark once per
    `SENT_AHEAD` events, not once per event (a commit on the event loop each); the mark
    stays past every number sent. Before, 200 events cost 200 writes."""
    store = RunStore(tmp_path)
    store.add("r", "p", {}, 1.0)
    store.start("r", 1.0)
    marks: list[int] = []

    def mark_sent(run: str, past: int) -> None:
        marks.append(past)
        RunStore.mark_sent(store, run, past)

    service = SimpleNamespace(store=SimpleNamespace(mark_sent=mark_sent))
    loop = asyncio.new_event_loop()
    live = LiveRun(0, loop)
    for seq, event in _events(range(200)):
        _sent(service, "r", live, [(seq, event)])  # type: ignore[arg-type]
        assert store.next_event("r") > seq
    loop.close()
    assert SENT_AHEAD == 64
    assert marks == [65, 130, 195, 260]  # before the events numbered 0, 65, 130, 195
    assert store.next_event("r") <= 200 + SENT_AHEAD
    store.close()


def test_a_restart_with_nothing_stored_or_sent_numbers_from_the_first(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.add("r", "p", {}, 1.0)
    store.start("r", 1.0)
    store.close()
    store = RunStore(tmp_path)
    store.recover(2.0)
    assert store.next_event("r") == 0
    with pytest.raises(Refused):
        _check_given(_service(store), "r", 0)
    store.close()


def _story(events: list[tuple[int, Any]]) -> list[tuple[int, str, Any]]:
    return [(n, event["type"], event.get("cycle")) for n, event in events]


def test_a_killed_run_s_event_numbers_name_one_event_each_and_none_comes_twice(
    tmp_path: Path, servers: list[Server]
) -> None:
    """A client reads a run of 5 cycles up to the model call of its third (sent, not yet
    stored: they would be with that cycle's checkpoint record); the server is SIGKILLed
    and started again on the same state. Read from the first and after the last event the
    client had, the stream gives: each number once, naming the event it named before the
    kill or none (a lost one); the stored events, then the continued run's, numbered past
    every number sent (`run_started` with `resumed_from_cycle`, then each cycle after
    it, to the end); after a `Last-Event-ID`, exactly the events numbered above it.
    Before, the continued run numbered its events from the first unstored one again, and
    every `Last-Event-ID` from there on, for the run's life, resumed before it."""
    paths, state = [_chain(tmp_path, 0.3, steps=5)], tmp_path / "state"
    server = Server(paths, state)
    servers.append(server)
    url = server.ready()
    run = httpx.post(f"{url}/v1/pipelines/chain/runs").json()["id"]
    seen: list[tuple[int, Any]] = []
    _stream(url, run, None, seen, 2, until_type="model_call_started")
    _stream(url, run, seen[-1][0], seen, 1, until_type="model_call_started")  # reconnected
    assert [e["cycle"] for _, e in seen if e["type"] == "cycle_started"] == [1, 2, 3]
    server.kill()
    server = Server(paths, state)
    servers.append(server)
    url = server.ready()
    last = seen[-1][0]
    after: list[tuple[int, Any]] = []
    _stream(url, run, last, after, 99)  # to the run's end
    whole: list[tuple[int, Any]] = []
    _stream(url, run, None, whole, 99)

    numbers = [n for n, _ in whole]
    assert numbers == sorted(set(numbers)), _story(whole)
    assert after == [(n, e) for n, e in whole if n > last], _story(after)
    kept = dict(whole)
    assert all(kept.get(n, e) == e for n, e in seen), _story(seen)  # the same, or lost
    starts = [n for n, e in whole if e["type"] == "run_started"]
    assert len(starts) == 2, _story(whole)
    assert starts[1] > last  # past every number sent
    assert [e for n, e in whole if n < starts[1]] == [e for n, e in seen if n in kept]
    resumed = kept[starts[1]]["resumed_from_cycle"] or 0
    continued = [(e["type"], e.get("cycle")) for n, e in whole if n > starts[1]]
    assert continued[0] == ("cycle_started", resumed + 1)
    assert continued[-1] == ("run_finished", None)
    assert [c for t, c in continued if t == "cycle_finished"] == list(range(resumed + 1, 6))
    later: list[tuple[int, Any]] = []  # a client that had the continued run's first event
    _stream(url, run, starts[1], later, 99)
    assert later == [(n, e) for n, e in whole if n > starts[1]]
