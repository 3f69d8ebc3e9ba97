"""CheckpointStore: a MAC-chained journal, one fdatasynced record per cycle, edits refused."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from converge_dsl import codes
from converge_dsl.engine import EngineState, Fact, PromotionRecord, Provenance
from converge_dsl.engine.state import PendingProposal, fact_to_data, pending_to_data
from converge_dsl.engine.types import ContextKey, FrozenDict, ProposedFact
from converge_dsl.errors import RunError, UsageError
from converge_dsl.runtime import (
    CHECKPOINT_FILE,
    CheckpointRefused,
    CheckpointStore,
    _journal,
    pipeline_digest,
)
from converge_dsl.runtime._checkpoint import check_folder

KEY = bytes(range(32))
TEXT = "apiVersion: converge-dsl/v1\n"


def _fact(n: int, content: str = "") -> Fact:
    return Fact(
        "seeds", f"f{n}", content or f"fact {n}", Provenance("s@t"), 1.0,
        PromotionRecord("seed", "p", n),
    )  # fmt: skip


def _states(cycles: int, per_cycle: int = 1) -> list[EngineState]:
    """The states after cycles 1..`cycles`, each adding `per_cycle` facts (shared objects)."""
    facts = [_fact(n) for n in range(cycles * per_cycle)]
    return [
        EngineState(facts=tuple(facts[: c * per_cycle]), cycle=c, dirty=("seeds",), lamport=c)
        for c in range(1, cycles + 1)
    ]


def _started(folder: Path, key: bytes = KEY, **kwargs: Any) -> CheckpointStore:
    store = CheckpointStore(folder, key, **kwargs)
    store.start(pipeline_text=TEXT, digest=pipeline_digest(TEXT, {"a": 1}), inputs={"a": 1})
    return store


def _lines(store: CheckpointStore) -> list[bytes]:
    return store.file.read_bytes().splitlines(keepends=True)


def test_round_trip_rebuilds_the_last_state_and_keeps_the_inputs(tmp_path: Path) -> None:
    store = _started(tmp_path / "ck")
    for state in _states(5):
        store.save(state)
    store.close()
    checkpoint = CheckpointStore(tmp_path / "ck", KEY).read()
    assert checkpoint.state is not None
    assert checkpoint.state.to_json() == _states(5)[-1].to_json()
    assert checkpoint.inputs == {"a": 1}
    assert len(_lines(store)) == 6  # the snapshot, then one record per cycle


def test_text_utf_8_cannot_hold_is_journalled_and_read_back(tmp_path: Path) -> None:
    """A lone surrogate (JSON text may hold one, a model's answer say) is written escaped."""
    state = EngineState(facts=(_fact(0, "half \ud800 of a pair"),), cycle=1, lamport=1)
    store = _started(tmp_path / "ck")
    store.save(state)
    store.close()
    checkpoint = CheckpointStore(tmp_path / "ck", KEY).read()
    assert checkpoint.state == state


def test_a_journal_before_any_cycle_holds_no_state_but_the_inputs(tmp_path: Path) -> None:
    _started(tmp_path / "ck").close()
    checkpoint = CheckpointStore(tmp_path / "ck", KEY).read()
    assert checkpoint.state is None
    assert checkpoint.inputs == {"a": 1}


def test_each_save_appends_one_record_fdatasynced_and_renames_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _started(tmp_path / "ck")
    calls: list[str] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append("fdatasync"), real(fd)))
    monkeypatch.setattr(os, "replace", lambda *_: calls.append("replace"))
    for state in _states(3):
        store.save(state)
        store.flush()
    assert calls == ["fdatasync"] * 3
    store.save(_states(3)[-1])  # nothing changed: nothing written
    store.close()
    assert calls == ["fdatasync"] * 3
    assert sorted(os.listdir(store.folder)) == [CHECKPOINT_FILE]


def test_records_saved_close_together_share_one_fdatasync_and_flush_does_not_wait_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_journal, "GROUP_COMMIT_S", 30.0)  # longer than any test may take
    store = _started(tmp_path / "ck")
    calls: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real(fd)))
    for state in _states(5):
        store.save(state)
    started = time.monotonic()
    store.flush()  # cuts the gathering window short
    assert time.monotonic() - started < 10
    assert len(calls) == 1
    assert len(_lines(store)) == 6  # the snapshot and 5 cycles, all written at once
    store.close()


def test_a_record_holds_what_changed_not_the_whole_state(tmp_path: Path) -> None:
    store = _started(tmp_path / "ck", compact_bytes=1 << 30)
    states = _states(2000)
    for state in states:
        store.save(state)
    sizes = [len(line) for line in _lines(store)[1:]]
    assert max(sizes) < 600
    assert max(sizes) - min(sizes) < 20  # cycle 2000 costs what cycle 1 did
    record = json.loads(_lines(store)[-1])["record"]
    assert [f["id"] for f in record["facts"]] == ["f1999"]
    assert "pending" not in record
    assert "rejected_ids" not in record


def test_pending_rejected_and_suggestor_states_are_written_when_they_change(
    tmp_path: Path,
) -> None:
    class Counter:
        name = "agent"

        def __init__(self) -> None:
            self.calls = 0

        def checkpoint_state(self) -> dict[str, int]:
            return {"summary_calls": self.calls}

        def restore_checkpoint_state(self, data: Any) -> None:
            self.calls = data["summary_calls"]

    counter = Counter()
    store = CheckpointStore(tmp_path / "ck", KEY)
    digest = pipeline_digest(TEXT, {})
    store.start(pipeline_text=TEXT, digest=digest, inputs={}, suggestors=[counter])  # type: ignore[list-item]
    first, second = _states(2)
    store.save(first)
    counter.calls = 2
    proposal = ProposedFact("seeds", "p1", "wait", 0.5, Provenance("s@t"))
    paused = replace(second, pending=(PendingProposal(proposal, "rule", 2, "gate"),))
    store.save(paused)
    records = [json.loads(line)["record"] for line in _lines(store)]
    assert "suggestors" not in records[1]
    assert "pending" not in records[1]
    assert records[2]["suggestors"] == {"agent": {"summary_calls": 2}}
    assert [p["id"] for p in records[2]["pending"]] == ["p1"]
    store.save(replace(paused, pending=(), rejected_ids=("p1",), cycle=3))
    last = json.loads(_lines(store)[-1])["record"]
    assert last["pending"] == []
    assert last["rejected_ids"] == ["p1"]
    assert "suggestors" not in last
    checkpoint = CheckpointStore(tmp_path / "ck", KEY).read()
    assert checkpoint.suggestors == {"agent": {"summary_calls": 2}}
    assert checkpoint.state is not None
    assert checkpoint.state.rejected_ids == ("p1",)


def test_records_are_the_engine_s_own_data_shapes_written_byte_for_byte(tmp_path: Path) -> None:
    """The store writes frozen data and keys (`FrozenDict`, tuples, `ContextKey`) as the
    plain values they are; each record is the bytes the engine's `to_data` shapes give."""
    data = FrozenDict({"b": (1, 2.5, FrozenDict({"x": (True, None)})), "a": "é\u2028"})
    record = PromotionRecord("gate", "p", 1, ("e1", "e2"), "trace")
    provenance = Provenance("s@t", "m", "acct")
    facts = tuple(
        Fact(ContextKey("signals"), f"f{n}", "text", provenance, 0.5, record, data if n else None)
        for n in range(4)
    )
    pending = PendingProposal(ProposedFact("signals", "p1", "wait", 0.5, data=data), "r", 2, "gate")
    dirty = (ContextKey("signals"), ContextKey("seeds"))
    states = [
        EngineState(facts=facts[:2], cycle=1, dirty=dirty, lamport=3),
        EngineState(facts=facts, cycle=2, dirty=dirty, lamport=5, pending=(pending,)),
        EngineState(facts=facts[:1], cycle=3, dirty=dirty, lamport=6),  # a snapshot
    ]
    store = _started(tmp_path / "ck")
    for state in states:
        store.save(state)
    store.close()
    lines = _lines(store)
    assert len(lines) == 1
    snapshot = json.loads(lines[0])["record"]
    snapshot["state"] = states[2].to_data()
    assert lines[0] == _journal.seal(KEY, "", _journal.encode(snapshot))[1]
    store = _started(tmp_path / "again")
    for state in states[:2]:
        store.save(state)
    lines, mac = _lines(store), json.loads(_lines(store)[0])["mac"]
    for line, state, done in zip(lines[1:], states[:2], (0, 2), strict=True):
        body = json.loads(line)["record"]
        body["dirty"] = list(state.dirty)
        body["facts"] = [fact_to_data(fact) for fact in state.facts[done:]]
        if "pending" in body:
            body["pending"] = [pending_to_data(item) for item in state.pending]
        mac, expected = _journal.seal(KEY, mac, _journal.encode(body))
        assert line == expected
    store.close()


def test_flat_inputs_are_kept_as_json_reads_them_back(tmp_path: Path) -> None:
    inputs = {"z": "text", "a": 1, "m": 2.5, "b": True, "n": None, "big": 10**30, "f": 1e300}
    store = CheckpointStore(tmp_path / "ck", KEY)
    store.start(pipeline_text=TEXT, digest=pipeline_digest(TEXT, inputs), inputs=inputs)
    store.close()
    kept = CheckpointStore(tmp_path / "ck", KEY).read().inputs
    assert kept == json.loads(json.dumps(inputs, sort_keys=True))
    assert list(kept) == sorted(inputs)
    record = _lines(store)[0]
    assert b'"inputs":{"a":1,"b":true,"big":1000000000000000000000000000000,' in record


class _Stateful:
    """A user's stateful suggestor (`StatefulSuggestor` is structural)."""

    name = "dedupe"

    def __init__(self, state: Any) -> None:
        self.state = state

    def checkpoint_state(self) -> Any:
        return self.state

    def restore_checkpoint_state(self, data: Any) -> None:
        self.state = data


def _start_with(folder: Path, suggestor: _Stateful) -> CheckpointStore:
    store = CheckpointStore(folder, KEY)
    digest = pipeline_digest(TEXT, {})
    store.start(pipeline_text=TEXT, digest=digest, inputs={}, suggestors=[suggestor])  # type: ignore[list-item]
    return store


@pytest.mark.parametrize(
    ("state", "refusal", "words"),
    [
        ({"seen": {"a", "b"}}, TypeError, "data at /seen: a set is not a JSON value"),
        ({"price": Decimal("0.1")}, TypeError, "data at /price: a Decimal is not"),
        ({"at": [datetime(2026, 1, 1)]}, TypeError, "data at /at/0: a datetime is not"),
        ({1: "int key", "1": "str key"}, TypeError, "the key 1 is not a string"),
        ({None: 1}, TypeError, "the key None is not a string"),
        ({"n": [10**5000]}, TypeError, "data at /n/0: an integer of more than 4300 digits"),
        ({"n": -(10**4300)}, TypeError, "data at /n: an integer of more than 4300 digits"),
    ],
)
def test_a_suggestor_state_the_journal_cannot_read_back_is_refused_when_written(
    tmp_path: Path, state: Any, refusal: type[Exception], words: str
) -> None:
    """Refused as `json.dumps` would refuse it, not written as something else."""
    with pytest.raises(refusal, match="the checkpoint state of suggestor 'dedupe'") as caught:
        _start_with(tmp_path / "ck", _Stateful(state))
    assert words in str(caught.value)
    assert not (tmp_path / "ck" / CHECKPOINT_FILE).exists()


def test_a_suggestor_state_turning_bad_is_refused_and_the_journal_keeps_the_cycles_before(
    tmp_path: Path,
) -> None:
    suggestor = _Stateful({"n": 10**4300 - 1})  # 4300 digits: what `json.loads` reads
    store = _start_with(tmp_path / "ck", suggestor)
    first, second = _states(2)
    store.save(first)
    suggestor.state = {"n": 10**4300 - 1, "seen": {"a"}}
    with pytest.raises(TypeError, match="data at /seen: a set is not a JSON value"):
        store.save(second)
    store.close()
    checkpoint = CheckpointStore(tmp_path / "ck", KEY).read()
    assert checkpoint.suggestors == {"dedupe": {"n": 10**4300 - 1}}
    assert checkpoint.state == first


def test_a_torn_last_record_is_ignored_and_cut_before_the_next_append(tmp_path: Path) -> None:
    store = _started(tmp_path / "ck")
    states = _states(4)
    for state in states[:3]:
        store.save(state)
    store.close()
    good = store.file.read_bytes()
    whole = json.dumps({"mac": "0" * 64, "record": {"cycle": 4}}).encode()
    store.file.write_bytes(good + whole[: len(whole) // 2])  # killed mid-append
    checkpoint = CheckpointStore(tmp_path / "ck", KEY).read()
    assert checkpoint.state is not None
    assert checkpoint.state.cycle == 3
    again = CheckpointStore(tmp_path / "ck", KEY)
    again.resume(checkpoint)
    again.save(states[3])
    again.close()
    assert store.file.read_bytes().startswith(good)
    final = CheckpointStore(tmp_path / "ck", KEY).read()
    assert final.state is not None
    assert final.state.to_json() == states[3].to_json()


def _tamper(store: CheckpointStore, number: int, edit: Any) -> None:
    lines = _lines(store)
    lines[number] = edit(lines[number])
    store.file.write_bytes(b"".join(lines))


def test_an_edited_fact_is_refused_naming_its_record(tmp_path: Path) -> None:
    store = _started(tmp_path / "ck")
    for state in _states(4):
        store.save(state)
    _tamper(store, 2, lambda line: line.replace(b'"fact 1"', b'"fact X"'))
    with pytest.raises(CheckpointRefused) as caught:
        CheckpointStore(tmp_path / "ck", KEY).read()
    assert caught.value.code == codes.CHECKPOINT_TAMPERED
    assert "record 2 (cycle 2)" in caught.value.message
    assert caught.value.exit_code == 3


def test_an_edit_with_its_sha256_recomputed_is_still_refused(tmp_path: Path) -> None:
    """The fact's new content and any digest beside it change the MAC'd bytes."""
    store = _started(tmp_path / "ck")
    for state in _states(2):
        store.save(state)

    def rewrite(line: bytes) -> bytes:
        data = json.loads(line)
        data["record"]["facts"][0]["content"] = "forged"
        data["record"]["sha256"] = "recomputed"
        body = json.dumps(data["record"], sort_keys=True, separators=(",", ":"))
        return b'{"mac":"' + data["mac"].encode() + b'","record":' + body.encode() + b"}\n"

    _tamper(store, 1, rewrite)
    with pytest.raises(CheckpointRefused, match=r"record 1 \(cycle 1\) .* does not match its MAC"):
        CheckpointStore(tmp_path / "ck", KEY).read()


@pytest.mark.parametrize("how", ["drop", "swap"])
def test_records_dropped_or_moved_in_the_middle_are_refused(tmp_path: Path, how: str) -> None:
    store = _started(tmp_path / "ck")
    for state in _states(4):
        store.save(state)
    lines = _lines(store)
    if how == "drop":
        del lines[2]
    else:
        lines[2], lines[3] = lines[3], lines[2]
    store.file.write_bytes(b"".join(lines))
    with pytest.raises(CheckpointRefused, match="removed or reordered") as caught:
        CheckpointStore(tmp_path / "ck", KEY).read()
    assert caught.value.code == codes.CHECKPOINT_TAMPERED


def test_a_checkpoint_sealed_with_another_key_says_so(tmp_path: Path) -> None:
    _started(tmp_path / "ck").save(_states(1)[0])
    with pytest.raises(CheckpointRefused, match="sealed with another key") as caught:
        CheckpointStore(tmp_path / "ck", bytes(32)).read()
    assert caught.value.code == codes.CHECKPOINT_OTHER_KEY


def test_other_pipeline_or_inputs_are_refused(tmp_path: Path) -> None:
    _started(tmp_path / "ck").close()
    checkpoint = CheckpointStore(tmp_path / "ck", KEY).read()
    checkpoint.check_pipeline(TEXT)
    checkpoint.check_digest(pipeline_digest(TEXT, {"a": 1}))
    with pytest.raises(CheckpointRefused, match="another pipeline") as caught:
        checkpoint.check_pipeline(TEXT + "#")
    assert caught.value.code == codes.CHECKPOINT_FOREIGN
    with pytest.raises(CheckpointRefused, match="other inputs"):
        checkpoint.check_digest(pipeline_digest(TEXT, {"a": 2}))


def test_missing_checkpoint_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no checkpoint"):
        CheckpointStore(tmp_path / "ck", KEY).read()


@pytest.mark.parametrize(
    "content", [bytes(range(128, 256)), b"[" * 100_000, b"", b'{"mac":"x"}\n', b"half a record"]
)
def test_garbage_is_refused_as_torn_or_corrupt(tmp_path: Path, content: bytes) -> None:
    store = CheckpointStore(tmp_path / "ck", KEY)
    store.folder.mkdir()
    store.file.write_bytes(content)
    with pytest.raises(CheckpointRefused, match="is torn or corrupt") as caught:
        store.read()
    assert caught.value.code == codes.CHECKPOINT_CORRUPT


def test_a_journal_past_its_threshold_is_compacted_into_one_snapshot(tmp_path: Path) -> None:
    store = _started(tmp_path / "ck", compact_bytes=4000)
    states = _states(60)
    sizes = []
    for state in states:
        store.save(state)
        sizes.append(store.file.stat().st_size)
    assert max(sizes) < 4000 + 2 * 8000  # bounded by the threshold, not by the run's length
    assert len(_lines(store)) < 30
    checkpoint = CheckpointStore(tmp_path / "ck", KEY).read()
    assert checkpoint.state is not None
    assert checkpoint.state.to_json() == states[-1].to_json()
    assert checkpoint.inputs == {"a": 1}


def test_a_failed_append_stops_the_run_and_keeps_the_last_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _started(tmp_path / "ck")
    first, second = _states(2)
    store.save(first)

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    store.flush()
    monkeypatch.setattr(os, "fdatasync", full)
    store.save(second)  # written; its sync fails in the background
    with pytest.raises(RunError) as caught:
        store.close()
    monkeypatch.undo()
    assert caught.value.exit_code == 1
    assert "No space left on device" in caught.value.message
    assert str(store.folder) in caught.value.message
    checkpoint = CheckpointStore(tmp_path / "ck", KEY).read()
    assert checkpoint.state is not None
    assert checkpoint.state.cycle >= 1


def test_decisions_are_kept_sealed_and_cleared(tmp_path: Path) -> None:
    from converge_dsl.engine import ProposedFact
    from converge_dsl.engine.state import PendingProposal

    store = CheckpointStore(tmp_path / "ck", KEY)
    store.folder.mkdir()
    pending = [
        PendingProposal(ProposedFact("strategies", i, "x"), "p", 1, "gated") for i in ("a", "b")
    ]
    assert store.load_decisions("run", pending) == {}
    store.save_decisions("run", {"b": (False, "cli"), "a": (True, "api")}, pending)
    assert store.load_decisions("run", pending) == {"a": (True, "api"), "b": (False, "cli")}
    with pytest.raises(UsageError, match=r"CD932.*another run"):
        store.load_decisions("other run", pending)
    store.clear_decisions()
    assert store.load_decisions("run", pending) == {}
    (store.folder / "decisions.json").write_text('{"a": true}')
    with pytest.raises(UsageError, match=r"CD932.*not a decisions record sealed"):
        store.load_decisions("run", pending)


def test_check_folder_refuses_a_file_and_creates_a_missing_folder(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        check_folder(afile, "--checkpoint", create=True)
    assert afile.read_text() == "keep"
    check_folder(tmp_path / "new" / "ck", "--checkpoint", create=True)
    assert (tmp_path / "new" / "ck").is_dir()
