"""The answer store: SQLite and in-memory adapters behave alike; rows are checked on read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from converge_dsl.models import answer_store
from converge_dsl.models.answer_store import (
    STORE_FILE,
    AnswerStore,
    CacheRow,
    CacheStoreError,
    MemoryAnswerStore,
    SqliteAnswerStore,
    verify,
)


def row(key: str, *, suggestor: str = "s", used: float = 1.0, value: str = '{"a": 1}') -> CacheRow:
    return CacheRow(
        key=key,
        kind="model",
        identity='{"model":"m"}',
        suggestor=suggestor,
        request='{"messages":[]}',
        value=value,
        created=used,
        duration_s=0.5,
        last_used=used,
    )


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> AnswerStore:
    if request.param == "sqlite":
        return SqliteAnswerStore(tmp_path / "cache", max_bytes=10_000)
    return MemoryAnswerStore(max_bytes=10_000)


def test_a_stored_row_reads_back_sealed_and_verified(store: AnswerStore) -> None:
    store.put(row("k1"))
    found = store.get("k1", now=5.0)
    assert found is not None
    assert verify(found) is None
    assert found.value == '{"a": 1}'
    assert store.get("missing", now=5.0) is None
    assert store.rows()[0].last_used == 5.0  # reading marks it used


def test_rows_filter_by_suggestor_most_recent_first(store: AnswerStore) -> None:
    store.put(row("k1", suggestor="a", used=1.0))
    store.put(row("k2", suggestor="b", used=2.0))
    store.put(row("k3", suggestor="a", used=3.0))
    assert [r.key for r in store.rows(suggestor="a")] == ["k3", "k1"]
    assert store.stats().entries == 3


def test_prune_removes_least_recently_used_first(store: AnswerStore) -> None:
    for number in range(5):
        store.put(row(f"k{number}", used=float(number)))
    size = store.rows()[0].size
    assert store.prune(size * 2) == 3
    assert sorted(r.key for r in store.rows()) == ["k3", "k4"]


def test_a_put_past_the_bound_prunes_to_nine_tenths(store: AnswerStore) -> None:
    big = "x" * 3000
    for number in range(5):
        store.put(row(f"k{number}", used=float(number), value=f'"{big}"'))
    stats = store.stats()
    assert stats.bytes <= 10_000
    assert "k4" in {r.key for r in store.rows()}


def test_delete_and_clear(store: AnswerStore) -> None:
    store.put(row("k1"))
    store.put(row("k2"))
    assert store.delete("k1")
    assert not store.delete("k1")
    assert store.clear() == 1
    assert store.stats().entries == 0


def test_a_changed_value_fails_its_check() -> None:
    sealed = row("k1").sealed()
    assert verify(sealed) is None
    assert "digest" in (verify(CacheRow(**{**_fields(sealed), "value": '{"a": 2}'})) or "")
    truncated = CacheRow(**{**_fields(sealed), "value": sealed.value[:3]})
    assert "digest" in (verify(truncated) or "")
    foreign = CacheRow(**{**_fields(sealed), "format": 99})
    assert "format 99" in (verify(foreign) or "")
    moved = CacheRow(**{**_fields(sealed), "key": "another"})
    assert verify(moved) is not None


def _fields(value: CacheRow) -> dict[str, object]:
    return {name: getattr(value, name) for name in CacheRow.__slots__}


def test_rows_changed_behind_the_stores_back_fail_their_check(tmp_path: Path) -> None:
    store = SqliteAnswerStore(tmp_path)
    store.put(row("k1"))
    store.put(row("k2"))
    with sqlite3.connect(tmp_path / STORE_FILE) as db:
        db.execute("UPDATE answers SET value = substr(value, 1, 3) WHERE key = 'k1'")
        db.execute("UPDATE answers SET format = 0 WHERE key = 'k2'")
    k1, k2 = store.get("k1", 2.0), store.get("k2", 2.0)
    assert k1 is not None
    assert verify(k1) is not None
    assert k2 is not None
    assert verify(k2) is not None


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        ("created = 'abc', duration_s = X'00', size = 'big'", None),
        ("format = 'x'", "its format column holds no format number"),
        ("value = CAST(X'FF41' AS TEXT)", "its digest does not match"),
        ("value = X'7B7D'", "its digest does not match"),
    ],
)
def test_a_row_edited_by_hand_reads_and_the_others_with_it(
    tmp_path: Path, edit: str, problem: str | None
) -> None:
    """A column of another type, or text that is not UTF-8, failed every read of the
    cache (a ValueError traceback, or CD975 for the whole listing)."""
    store = SqliteAnswerStore(tmp_path)
    store.put(row("k1", used=1.0))
    store.put(row("k2", used=2.0))
    with sqlite3.connect(tmp_path / STORE_FILE) as db:
        db.execute(f"UPDATE answers SET {edit} WHERE key = 'k1'")
    assert [r.key for r in store.rows()] == ["k2", "k1"]
    edited = store.get("k1", 3.0)
    assert edited is not None
    assert (verify(edited) or "").startswith(problem or "")
    assert (verify(edited) is None) == (problem is None)
    assert store.stats().entries == 2
    assert store.prune(0) + store.clear() == 2  # a size that is no number counts as 0


def test_a_row_reads_while_another_process_holds_the_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Marking the row used waited the busy timeout, then failed the read: the answer was
    # lost (the model asked again) after 30 s for each call.
    monkeypatch.setattr(answer_store, "BUSY_TIMEOUT_S", 0.2)
    store = SqliteAnswerStore(tmp_path)
    store.put(row("k1", used=1.0))
    holder = sqlite3.connect(tmp_path / STORE_FILE, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        found = store.get("k1", 5.0)
        assert found is not None
        assert verify(found) is None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.rows()[0].last_used == 1.0  # not marked used while the lock was held
    store.get("k1", 6.0)
    assert store.rows()[0].last_used == 6.0


def test_a_row_read_while_the_lock_was_held_is_marked_used_by_the_next_write(
    tmp_path: Path,
) -> None:
    # The mark was dropped: the next LRU prune evicted the answer just used.
    store = SqliteAnswerStore(tmp_path)
    store.put(row("old-but-just-used", used=1.0))
    store.put(row("other", used=2.0))
    holder = sqlite3.connect(tmp_path / STORE_FILE, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing for a moment
    try:
        assert store.get("old-but-just-used", 100.0) is not None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.put(row("new", used=3.0))
    used = {r.key: r.last_used for r in store.rows()}
    assert used == {"old-but-just-used": 100.0, "other": 2.0, "new": 3.0}
    assert store.prune(store.stats().bytes - 1) == 1
    assert sorted(r.key for r in store.rows()) == ["new", "old-but-just-used"]


def test_a_kept_mark_is_written_by_a_prune_too(tmp_path: Path) -> None:
    store = SqliteAnswerStore(tmp_path)
    store.put(row("a", used=1.0))
    store.put(row("b", used=2.0))
    holder = sqlite3.connect(tmp_path / STORE_FILE, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert store.get("a", 50.0) is not None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.prune(store.stats().bytes - 1) == 1
    assert [r.key for r in store.rows()] == ["a"]


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / STORE_FILE).write_bytes(b"not a database at all" * 100)
    with pytest.raises(CacheStoreError) as caught:
        SqliteAnswerStore(tmp_path)
    assert caught.value.code == "CD975"
    assert "cache clear --cache-dir" in (caught.value.hint or "")
    assert caught.value.damaged


def test_the_clear_command_of_a_damaged_store_pastes_into_a_shell(tmp_path: Path) -> None:
    # The folder was single-quoted, then its ESC escaped when the hint was printed:
    # 'a\x1bb', which a shell reads as another folder.
    import os
    import shutil
    import subprocess

    from converge_dsl.frontend import terminal_safe

    folder = tmp_path / "a\x1bb c"
    folder.mkdir()
    (folder / STORE_FILE).write_bytes(b"not a database at all" * 100)
    with pytest.raises(CacheStoreError) as caught:
        SqliteAnswerStore(folder)
    shown = terminal_safe(caught.value.hint or "")
    assert "\x1b" not in shown
    word = shown.split("--cache-dir ", 1)[1].split("`", 1)[0]
    bash = shutil.which("bash")
    assert bash is not None
    said = subprocess.run(
        [bash, "-c", f"printf %s {word}"], capture_output=True, timeout=30, check=True
    )
    assert said.stdout == os.fsencode(folder)


def test_a_store_that_cannot_be_written_says_so_not_to_clear_it(tmp_path: Path) -> None:
    # Every failure of an opened store hinted "`converge-dsl cache clear` starts it
    # afresh": for a read-only file, the very command that had just failed that way.
    store = SqliteAnswerStore(tmp_path)
    store.put(row("k1"))
    store._db.close()
    store._db = sqlite3.connect(f"file:{tmp_path / STORE_FILE}?mode=ro", uri=True)
    with pytest.raises(CacheStoreError) as caught:
        store.clear()
    assert "failed while clearing: attempt to write a readonly database" in caught.value.message
    assert caught.value.hint == (
        "the file or its folder cannot be written: check their permissions, or give another "
        "folder with --cache-dir"
    )
    assert not caught.value.damaged
    store.close()


class _Full:
    """A connection whose every statement fails as SQLite does on a full disk."""

    def execute(self, *args: object) -> None:
        failure = sqlite3.OperationalError("database or disk is full")
        failure.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
        raise failure

    def close(self) -> None:
        pass


def test_a_full_disk_names_the_disk(tmp_path: Path) -> None:
    store = SqliteAnswerStore(tmp_path)
    store._db.close()
    store._db = _Full()  # type: ignore[assignment]
    with pytest.raises(CacheStoreError) as caught:
        store.put(row("k1"))
    assert caught.value.hint == (
        "the disk is full: free some space, or `converge-dsl cache prune --max-bytes N` to "
        "keep less"
    )
