"""The contract of `JournalMedium`, checked on each adapter: the folder's files and SQLite."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.engine import EngineState, Fact, PromotionRecord, Provenance
from converge_dsl.engine.state import PendingProposal
from converge_dsl.engine.types import ProposedFact
from converge_dsl.errors import UsageError
from converge_dsl.runtime import (
    CHECKPOINT_FILE,
    CheckpointRefused,
    CheckpointStore,
    FolderJournal,
    JournalMedium,
    SqliteJournals,
    pipeline_digest,
)

KEY = bytes(range(32))
TEXT = "apiVersion: converge-dsl/v1\n"


@dataclass
class Adapter:
    """One medium under test: a fresh medium of the same journal, and its raw records."""

    medium: Callable[[], JournalMedium]
    lines: Callable[[], list[bytes]]
    set_lines: Callable[[list[bytes]], None]


def _folder(tmp_path: Path) -> Adapter:
    folder = tmp_path / "ck"
    folder.mkdir()
    file = folder / CHECKPOINT_FILE
    return Adapter(
        lambda: FolderJournal(folder),
        lambda: file.read_bytes().splitlines(keepends=True),
        lambda lines: file.write_bytes(b"".join(lines)),
    )


def _sqlite(tmp_path: Path) -> Adapter:
    db = sqlite3.connect(tmp_path / "state.db", check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    journals = SqliteJournals(db, threading.Lock(), "state.db")

    def lines() -> list[bytes]:
        journals.commit_now()  # what the group commit writes at most GROUP_COMMIT_S later
        rows = db.execute("SELECT line FROM checkpoint_records WHERE run = 'r' ORDER BY seq")
        return [bytes(line) for (line,) in rows]

    def set_lines(new: list[bytes]) -> None:
        journals.commit_now()
        db.execute("DELETE FROM checkpoint_records WHERE run = 'r'")
        for seq, line in enumerate(new):
            db.execute("INSERT INTO checkpoint_records VALUES ('r', ?, ?)", (seq, line))

    return Adapter(lambda: journals.journal("r"), lines, set_lines)


@pytest.fixture(params=["folder", "sqlite"])
def adapter(request: pytest.FixtureRequest, tmp_path: Path) -> Adapter:
    return _folder(tmp_path) if request.param == "folder" else _sqlite(tmp_path)


def _fact(n: int) -> Fact:
    return Fact(
        "seeds", f"f{n}", f"fact {n}", Provenance("s@t"), 1.0, PromotionRecord("seed", "p", n)
    )


def _states(cycles: int) -> list[EngineState]:
    facts = [_fact(n) for n in range(cycles)]
    return [
        EngineState(facts=tuple(facts[:c]), cycle=c, dirty=("seeds",), lamport=c)
        for c in range(1, cycles + 1)
    ]


def _store(adapter: Adapter, key: bytes = KEY, **kwargs: object) -> CheckpointStore:
    return CheckpointStore(None, key, medium=adapter.medium(), **kwargs)  # type: ignore[arg-type]


def _started(adapter: Adapter, **kwargs: object) -> CheckpointStore:
    store = _store(adapter, **kwargs)
    store.start(pipeline_text=TEXT, digest=pipeline_digest(TEXT, {"a": 1}), inputs={"a": 1})
    return store


def test_round_trip_rebuilds_the_last_state_one_record_per_cycle(adapter: Adapter) -> None:
    store = _started(adapter)
    for state in _states(5):
        store.save(state)
    store.close()
    checkpoint = _store(adapter).read()
    assert checkpoint.state is not None
    assert checkpoint.state.to_json() == _states(5)[-1].to_json()
    assert checkpoint.inputs == {"a": 1}
    assert len(adapter.lines()) == 6


def test_a_journal_before_any_cycle_holds_no_state(adapter: Adapter) -> None:
    _started(adapter).close()
    checkpoint = _store(adapter).read()
    assert checkpoint.state is None
    assert checkpoint.inputs == {"a": 1}


def test_a_resumed_journal_goes_on_appending(adapter: Adapter) -> None:
    states = _states(6)
    store = _started(adapter)
    for state in states[:3]:
        store.save(state)
    store.close()
    again = _store(adapter)
    again.resume(again.read())
    for state in states[3:]:
        again.save(state)
    again.close()
    assert len(adapter.lines()) == 7
    final = _store(adapter).read()
    assert final.state is not None
    assert final.state.to_json() == states[-1].to_json()


def test_a_long_journal_is_compacted_into_one_snapshot(adapter: Adapter) -> None:
    store = _started(adapter, compact_bytes=4000)
    states = _states(60)
    for state in states:
        store.save(state)
    store.close()
    assert len(adapter.lines()) < 30
    checkpoint = _store(adapter).read()
    assert checkpoint.state is not None
    assert checkpoint.state.to_json() == states[-1].to_json()


@pytest.mark.parametrize("how", ["edit", "drop", "swap"])
def test_edited_dropped_or_moved_records_are_refused(adapter: Adapter, how: str) -> None:
    store = _started(adapter)
    for state in _states(4):
        store.save(state)
    store.close()
    lines = adapter.lines()
    if how == "edit":
        lines[2] = lines[2].replace(b'"fact 1"', b'"fact X"')
    elif how == "drop":
        del lines[2]
    else:
        lines[2], lines[3] = lines[3], lines[2]
    adapter.set_lines(lines)
    with pytest.raises(CheckpointRefused, match="does not match its MAC") as caught:
        _store(adapter).read()
    assert caught.value.code == codes.CHECKPOINT_TAMPERED


def test_another_key_and_a_missing_journal_are_refused(adapter: Adapter) -> None:
    with pytest.raises(UsageError, match="no checkpoint"):
        _store(adapter).read()
    _started(adapter).close()
    with pytest.raises(CheckpointRefused, match="sealed with another key") as caught:
        _store(adapter, bytes(32)).read()
    assert caught.value.code == codes.CHECKPOINT_OTHER_KEY


def test_decisions_are_kept_sealed_and_cleared(adapter: Adapter) -> None:
    store = _started(adapter)
    pending = [
        PendingProposal(ProposedFact("strategies", i, "x"), "p", 1, "gated") for i in ("a", "b")
    ]
    assert store.load_decisions("run", pending) == {}
    store.save_decisions("run", {"b": (False, "cli"), "a": (True, "api")}, pending)
    assert _store(adapter).load_decisions("run", pending) == {
        "a": (True, "api"),
        "b": (False, "cli"),
    }
    with pytest.raises(UsageError, match=r"CD932.*another run"):
        store.load_decisions("other run", pending)
    store.clear_decisions()
    assert store.load_decisions("run", pending) == {}


def test_a_second_run_on_the_same_journal_is_refused(adapter: Adapter) -> None:
    first, second = adapter.medium(), adapter.medium()
    refused = pytest.raises(UsageError, match="in use by another run")
    with first.hold("--checkpoint"), refused, second.hold("--checkpoint"):
        pass  # pragma: no cover
    with second.hold("--checkpoint"):
        pass


_WRITER = textwrap.dedent(
    """
    import sqlite3, sys, threading
    from pathlib import Path
    from converge_dsl.engine import EngineState, Fact, PromotionRecord, Provenance
    from converge_dsl.runtime import CheckpointStore, FolderJournal, SqliteJournals, pipeline_digest

    kind, place = sys.argv[1], Path(sys.argv[2])
    if kind == "folder":
        medium = FolderJournal(place)
    else:
        db = sqlite3.connect(place, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        medium = SqliteJournals(db, threading.Lock(), str(place)).journal("r")
    store = CheckpointStore(None, bytes(range(32)), medium=medium, compact_bytes=20000)
    text = "apiVersion: converge-dsl/v1\\n"
    store.start(pipeline_text=text, digest=pipeline_digest(text, {}), inputs={})
    facts = []
    for cycle in range(1, 10**6):
        facts.append(Fact("seeds", f"f{cycle}", f"fact {cycle}", Provenance("s@t"), 1.0,
                          PromotionRecord("seed", "p", cycle)))
        store.save(EngineState(facts=tuple(facts), cycle=cycle, dirty=("seeds",), lamport=cycle))
        if cycle == 50:
            medium.flush()  # a group commit has happened, however slow the machine
            print("ready", flush=True)
    """
)


@pytest.mark.parametrize("kind", ["folder", "sqlite"])
def test_a_writer_killed_mid_journal_leaves_a_checkpoint_that_resumes(
    tmp_path: Path, kind: str
) -> None:
    place = tmp_path / ("ck" if kind == "folder" else "state.db")
    if kind == "folder":
        place.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, kind, str(place)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
    if kind == "folder":
        medium: JournalMedium = FolderJournal(place)
    else:
        db = sqlite3.connect(place, check_same_thread=False, isolation_level=None)
        medium = SqliteJournals(db, threading.Lock(), str(place)).journal("r")
    store = CheckpointStore(None, KEY, medium=medium)
    checkpoint = store.read()
    assert checkpoint.state is not None
    cycle = checkpoint.state.cycle
    assert cycle >= 50
    assert [f.content for f in checkpoint.state.facts] == [f"fact {n}" for n in range(1, cycle + 1)]
    store.resume(checkpoint)
    facts = [*checkpoint.state.facts, _fact(cycle + 1)]
    store.save(EngineState(facts=tuple(facts), cycle=cycle + 1, dirty=("seeds",), lamport=1))
    store.close()
    again = CheckpointStore(None, KEY, medium=medium).read()
    assert again.state is not None
    assert again.state.cycle == cycle + 1
