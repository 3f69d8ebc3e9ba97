"""CheckpointStore: atomic replace, torn/altered/foreign files refused, decisions kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from converge_dsl.engine import EngineState, Fact, PromotionRecord, Provenance
from converge_dsl.errors import RunError, UsageError
from converge_dsl.runtime import CHECKPOINT_FILE, CheckpointStore, pipeline_digest
from converge_dsl.runtime._checkpoint import check_folder


def _state(cycle: int) -> EngineState:
    fact = Fact("seeds", "a", "x", Provenance("s@t"), 1.0, PromotionRecord("seed", "p", 0))
    return EngineState(facts=(fact,), cycle=cycle, dirty=("seeds",), lamport=1)


def _store(tmp_path: Path) -> CheckpointStore:
    return CheckpointStore(tmp_path / "ck", pipeline_digest("text", {"a": 1}))


def test_round_trip(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save(_state(3))
    assert store.load().to_json() == _state(3).to_json()


def test_save_replaces_by_fsynced_rename_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    store.save(_state(1))
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        # the old checkpoint is intact until the rename
        assert json.loads(store.file.read_text())["cycle"] == 1
        assert Path(src).parent == store.folder
        calls.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    store.save(_state(2))
    assert calls == ["fsync", "replace", "fsync"]  # file, rename, folder
    assert sorted(os.listdir(store.folder)) == [CHECKPOINT_FILE]
    assert store.load().cycle == 2


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.99])
def test_torn_file_is_refused(tmp_path: Path, cut: float) -> None:
    store = _store(tmp_path)
    store.save(_state(2))
    text = store.file.read_text()
    store.file.write_text(text[: int(len(text) * cut)])
    with pytest.raises(UsageError, match="torn or corrupt"):
        store.load()


def test_altered_state_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save(_state(2))
    data = json.loads(store.file.read_text())
    data["state"] = data["state"].replace('"cycle":2', '"cycle":9')
    store.file.write_text(json.dumps(data))
    with pytest.raises(UsageError, match="torn or corrupt"):
        store.load()


def test_other_pipeline_or_inputs_are_refused(tmp_path: Path) -> None:
    _store(tmp_path).save(_state(2))
    other = CheckpointStore(tmp_path / "ck", pipeline_digest("text", {"a": 2}))
    with pytest.raises(UsageError, match="another pipeline"):
        other.load()


def test_missing_checkpoint_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no checkpoint"):
        _store(tmp_path).load()


def test_decisions_are_kept_and_cleared(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.load_decisions() == {}
    store.save_decisions({"b": False, "a": True})
    assert store.load_decisions() == {"a": True, "b": False}
    store.clear_decisions()
    assert store.load_decisions() == {}
    (store.folder / "decisions.json").write_text('{"a": "yes"}')
    with pytest.raises(UsageError, match="corrupt"):
        store.load_decisions()


def test_a_failed_save_keeps_the_last_checkpoint_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    store.save(_state(1))

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(RunError) as caught:
        store.save(_state(2))
    monkeypatch.undo()
    assert caught.value.exit_code == 1
    assert "No space left on device" in caught.value.message
    assert str(store.folder) in caught.value.message
    assert store.load().cycle == 1
    assert sorted(p.name for p in store.folder.iterdir()) == [CHECKPOINT_FILE]


@pytest.mark.parametrize("content", [bytes(range(128, 256)), b"[" * 100_000])
def test_a_non_utf8_or_deep_checkpoint_is_refused_as_corrupt(
    tmp_path: Path, content: bytes
) -> None:
    store = _store(tmp_path)
    store.folder.mkdir()
    store.file.write_bytes(content)
    with pytest.raises(UsageError, match="is torn or corrupt"):
        store.load()


def test_check_folder_refuses_a_file_and_creates_a_missing_folder(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        check_folder(afile, "--checkpoint", create=True)
    assert afile.read_text() == "keep"
    check_folder(tmp_path / "new" / "ck", "--checkpoint", create=True)
    assert (tmp_path / "new" / "ck").is_dir()
