"""The on-disk compile cache (`compiler._compile_cache`): hits, refusals, atomic bounded writes."""

from __future__ import annotations

import marshal
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.compiler import CompileCache, _compile_cache, _sources, open_cache
from converge_dsl.compiler import compile_pipeline as _compile_pipeline
from converge_dsl.frontend import load_text

HEADER = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: t\n"
SECRET = b"k" * 32
TEXT = (
    HEADER
    + "keys: [{name: out}]\nsuggestors:\n"
    + "".join(
        f"  - {{name: r{i}, kind: rule, when: \"count('out') < {i + 5}\", "
        f"emit: [{{key: out, id: 'f{{{{ cycle }}}}-{i}', content: x}}]}}\n"
        for i in range(20)
    )
)


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[_sources.SourceCache]:
    table = _sources.SourceCache()
    from converge_dsl.compiler import _context, _template

    for module in (_sources, _context, _template, _compile_cache):
        monkeypatch.setattr(module, "SOURCES", table)
    return table


def _compile(cache: CompileCache | None) -> Any:
    document = load_text(TEXT, "p.yaml")
    if cache is None:
        return _compile_pipeline(document, inputs={}, models={}, usage=None)  # type: ignore[arg-type]
    with cache.session():
        return _compile_pipeline(document, inputs={}, models={}, usage=None)  # type: ignore[arg-type]


def _cache(root: Path, secret: bytes = SECRET, key: str = "a" * 64, **kw: Any) -> CompileCache:
    return CompileCache(root, secret, key, **kw)


def _no_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("compiled although cached")

    monkeypatch.setattr(_sources, "generated", refuse)


def _second_process(fresh: _sources.SourceCache) -> None:
    fresh.clear()  # as a new process would start


def test_a_second_compilation_takes_every_template_from_the_cache(
    tmp_path: Path, fresh: _sources.SourceCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _cache(tmp_path)
    _compile(first)
    assert (first.hit, first.stored, first.rejected) == (False, True, None)
    assert fresh.compiled == 40  # 20 distinct ids, 20 distinct `when`s
    _second_process(fresh)
    _no_compiling(monkeypatch)
    second = _cache(tmp_path)
    compiled = _compile(second)
    assert (second.hit, second.stored) == (True, False)  # nothing new: not rewritten
    assert fresh.compiled == 0
    # The cached code behaves: the ids render, the `when`s decide.
    emission = compiled.suggestors[3].emissions[0]
    assert emission.id.render({"cycle": 2, **_globals()}) == "f2-3"


def _globals() -> dict[str, Any]:
    from converge_dsl.sandbox._templating import GLOBALS

    return dict(GLOBALS)


def _damaged(tmp_path: Path, fresh: _sources.SourceCache, damage: Any) -> CompileCache:
    cache = _cache(tmp_path)
    _compile(cache)
    damage(cache.path)
    _second_process(fresh)
    again = _cache(tmp_path)
    _compile(again)
    return again


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-7]), id="truncated"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-1] + b"\x00"), id="flipped"),
        pytest.param(lambda p: p.write_bytes(b"garbage"), id="garbage"),
        pytest.param(lambda p: p.write_bytes(b""), id="empty"),
        pytest.param(lambda p: p.write_bytes(b"x" * (1 << 16)), id="noise"),
    ],
)
def test_a_corrupt_file_is_refused_and_rebuilt(
    tmp_path: Path, fresh: _sources.SourceCache, damage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = marshal.loads

    def guarded(data: bytes) -> Any:
        raise AssertionError("unverified bytes reached marshal")

    monkeypatch.setattr(marshal, "loads", guarded)
    again = _damaged(tmp_path, fresh, damage)
    assert not again.hit
    assert again.rejected is not None
    assert again.stored
    assert fresh.compiled == 40
    monkeypatch.setattr(marshal, "loads", loads)
    _second_process(fresh)
    third = _cache(tmp_path)
    _compile(third)
    assert third.hit


def test_a_file_sealed_with_another_key_is_foreign(
    tmp_path: Path, fresh: _sources.SourceCache
) -> None:
    _compile(_cache(tmp_path, secret=b"other user's key".ljust(32)))
    _second_process(fresh)
    mine = _cache(tmp_path)
    _compile(mine)
    assert not mine.hit
    assert "MAC" in (mine.rejected or "")


def test_a_file_renamed_to_another_pipelines_key_is_refused(
    tmp_path: Path, fresh: _sources.SourceCache
) -> None:
    cache = _cache(tmp_path)
    _compile(cache)
    os.replace(cache.path, tmp_path / f"{'b' * 64}.bin")
    _second_process(fresh)
    other = _cache(tmp_path, key="b" * 64)
    _compile(other)
    assert not other.hit
    assert "not a compiled pipeline" in (other.rejected or "")


def test_a_stale_file_costs_misses_never_wrong_code(
    tmp_path: Path, fresh: _sources.SourceCache
) -> None:
    cache = _cache(tmp_path)
    with cache.session():
        fresh.get("{{ 1 + 1 }}")
    _second_process(fresh)
    again = _cache(tmp_path)
    with again.session():  # same key, other templates (a file the key does not cover changed)
        source = fresh.get("{{ 2 + 2 }}")
    assert again.hit
    assert again.stored
    from converge_dsl.sandbox._templating import render

    assert render(source.compiled, _globals()) == "4"


def test_writes_are_atomic_and_the_folder_is_bounded(
    tmp_path: Path, fresh: _sources.SourceCache
) -> None:
    sizes = []
    for i in range(6):
        cache = _cache(tmp_path, key=f"{i:064x}", max_bytes=1)
        with cache.session():
            fresh.get(f"{{{{ {i} * 2 }}}}")
        assert cache.stored
        sizes.append(cache.path.stat().st_size if cache.path.exists() else 0)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [f"{5:064x}.bin"]  # only the newest survives a 1-byte bound; no temporaries


def test_a_failed_compilation_stores_nothing(tmp_path: Path, fresh: _sources.SourceCache) -> None:
    cache = _cache(tmp_path)

    def fail() -> None:
        with cache.session():
            fresh.get("{{ 3 }}")
            raise RuntimeError("compile failed")

    with pytest.raises(RuntimeError):
        fail()
    assert not cache.path.exists()


def test_an_unwritable_root_leaves_the_run_without_cache(
    tmp_path: Path, fresh: _sources.SourceCache
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = _cache(blocker / "compiled")
    _compile(cache)
    assert not cache.stored


def test_open_cache_keys_and_switches(tmp_path: Path) -> None:
    env = {"CONVERGE_DSL_CACHE": str(tmp_path)}
    lock = tmp_path / "converge.lock"
    cache = open_cache(env, TEXT, {}, lock, lambda: SECRET)
    assert cache is not None
    assert cache.root == tmp_path / "compiled"
    lock.write_text("packs: {}")
    locked = open_cache(env, TEXT, {}, lock, lambda: SECRET)
    with_inputs = open_cache(env, TEXT, {"a": 1}, lock, lambda: SECRET)
    keys = {c.key for c in (cache, locked, with_inputs) if c is not None}
    assert len(keys) == 3
    for off in ("1", "true", "yes"):
        assert (
            open_cache({**env, "CONVERGE_DSL_NO_CACHE": off}, TEXT, {}, lock, lambda: SECRET)
            is None
        )
    assert open_cache({**env, "CONVERGE_DSL_NO_CACHE": "0"}, TEXT, {}, lock, lambda: SECRET)

    def unusable() -> bytes:
        raise OSError("no key")

    assert open_cache(env, TEXT, {}, lock, unusable) is None


def test_the_lock_file_is_the_one_packs_write() -> None:
    from converge_dsl.compiler import LOCK_FILE
    from converge_dsl.packs import LOCK_FILE as PACKS_LOCK_FILE

    assert LOCK_FILE == PACKS_LOCK_FILE


def test_a_file_past_the_size_bound_is_neither_read_nor_written(
    tmp_path: Path, fresh: _sources.SourceCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = _cache(tmp_path)
    _compile(cache)
    size = cache.path.stat().st_size
    monkeypatch.setattr(_compile_cache, "MAX_FILE_BYTES", size - 1)
    _second_process(fresh)
    again = _cache(tmp_path)
    _compile(again)  # refused on reading, and too big to be written again
    assert not again.hit
    assert not again.stored
    assert again.rejected == f"larger than {size - 1} bytes"


def test_a_write_cut_short_leaves_the_previous_file_whole(
    tmp_path: Path, fresh: _sources.SourceCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = _cache(tmp_path)
    with cache.session():
        fresh.get("{{ 1 }}")
    before = cache.path.read_bytes()

    def crash(src: Any, dst: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    _second_process(fresh)
    again = _cache(tmp_path)
    with again.session():
        fresh.get("{{ 2 }}")  # a miss: the file would be rewritten
    assert not again.stored
    assert cache.path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [cache.path.name]  # no temporary left
