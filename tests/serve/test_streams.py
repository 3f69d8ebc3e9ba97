"""Where an event stream resumes (`Last-Event-ID`), across a restart that lost events."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from converge_dsl.serve import RunStore
from converge_dsl.serve._requests import Refused
from converge_dsl.serve._streams import _check_given


def _service(store: RunStore) -> Any:
    return SimpleNamespace(store=store, live=lambda run: None)


def _events(numbers: range) -> list[tuple[int, str]]:
    return [(n, f'{{"type":"e{n}"}}') for n in numbers]


def test_a_number_a_lost_attempt_gave_resumes_after_the_stored_events(tmp_path: Path) -> None:
    """A server killed with events 3 and 4 sent but not stored: the continued run gives
    3 and 4 again, to other events. A client holding 4 was refused (400 CD462) while the
    continued run had made fewer, and resumed after the new 4 once it had (never seeing
    the new 3); it now resumes after 2, the last stored before the restart, and a number
    below 3 resumes where it says."""
    store = RunStore(tmp_path)
    store.add("r", "p", {}, 1.0)
    store.start("r", 1.0)
    store.add_events("r", _events(range(3)))
    store.close()
    store = RunStore(tmp_path)
    store.recover(2.0)
    assert store.first_unstored("r") == 3
    service = _service(store)
    assert _check_given(service, "r", 4) == 2  # was CD462: 4 past the stored 0 to 2
    assert _check_given(service, "r", 1) == 1
    store.start("r", 3.0)
    store.add_events("r", _events(range(3, 6)))
    assert _check_given(service, "r", 4) == 2  # was 4: another event's number now
    assert _check_given(service, "r", 99) == 2  # a lost attempt may have given it
    store.close()
    store = RunStore(tmp_path)
    store.recover(4.0)  # a second restart: the first one's number is kept
    assert store.first_unstored("r") == 3
    store.close()


def test_a_number_no_attempt_gave_is_still_cd462(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.add("r", "p", {}, 1.0)
    store.start("r", 1.0)
    store.add_events("r", _events(range(3)))
    assert store.first_unstored("r") is None
    assert _check_given(_service(store), "r", 2) == 2
    with pytest.raises(Refused) as refused:
        _check_given(_service(store), "r", 3)
    assert refused.value.status == 400
    assert refused.value.problems[0].code == "CD462"
    store.close()


def test_a_restart_with_no_event_stored_resumes_from_the_first(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.add("r", "p", {}, 1.0)
    store.start("r", 1.0)
    store.close()
    store = RunStore(tmp_path)
    store.recover(2.0)
    assert store.first_unstored("r") == 0
    assert _check_given(_service(store), "r", 5) == -1
    store.close()
