"""The answer cache decorator: hits, misses, checked rows, offline misses, budgets, secrets."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.engine import Budget, UsageMeter
from converge_dsl.models import ModelDefaults, ModelRequest, ModelReturn, ToolSpec, metered_call
from converge_dsl.models._answer_key import ROUTING_FIELDS, answer_key, model_request_json
from converge_dsl.models.answer_store import (
    STORE_FILE,
    CacheRow,
    CacheStoreError,
    MemoryAnswerStore,
    SqliteAnswerStore,
)
from converge_dsl.models.caching import AnswerCache, CachedModel, CacheMiss
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply
from converge_dsl.models.port import Message, ModelWrapper, Usage

from ._helpers import KEYS, http_model


class Counting(ModelDefaults):
    """A model that answers with a numbered text and says who it is."""

    def __init__(self, identity: dict[str, Any] | None = None) -> None:
        self.calls = 0
        self.identity = identity or {"wire": "test", "model": "m"}

    def model_id(self) -> str:
        return "test:m"

    def cache_identity(self) -> dict[str, Any]:
        return dict(self.identity)

    async def call(self, req: ModelRequest) -> ModelReturn:
        self.calls += 1
        return ModelReturn(
            Message.text("assistant", f"answer {self.calls}"),
            Usage(7, 3),
            model_id="test:m-2024",
            account="main",
        )


def request(text: str = "hello", **extra: Any) -> ModelRequest:
    return ModelRequest(model="m", messages=(Message.text("user", text),), suggestor="ask", **extra)


def cache(store: Any = None, **options: Any) -> tuple[AnswerCache, list[str]]:
    warnings: list[str] = []
    made = AnswerCache(
        store if store is not None else MemoryAnswerStore(),
        clock=FakeClock(),
        warn=warnings.append,
        wall=lambda: 1000.0,
        **options,
    )
    return made, warnings


def test_a_second_identical_call_is_answered_from_the_cache() -> None:
    answers, _ = cache()
    inner = Counting()
    model = answers.wrap("remote", inner)
    first = asyncio.run(model.call(request()))
    second = asyncio.run(model.call(request()))
    assert inner.calls == 1
    assert second == first  # the ModelReturn exactly as the port returned it
    assert [r.outcome for r in answers.records] == ["miss", "hit"]
    assert answers.hits == 1


def test_what_reaches_the_wire_is_in_the_key_and_routing_is_not() -> None:
    base = model_request_json(request())
    identity = {"model": "m"}
    key = answer_key("model", identity, base)
    for changed in (
        request("other"),
        request(temperature=0.7),
        request(max_tokens=10),
        request(system=("be brief",)),
        request(response_schema={"type": "object"}),
        request(tools=(ToolSpec("t", "d", {"type": "object"}),)),
        request(tool_choice="required"),
    ):
        assert answer_key("model", identity, model_request_json(changed)) != key
    routed = dataclasses.replace(request(), suggestor="other", turn=3)
    assert answer_key("model", identity, model_request_json(routed)) == key
    assert answer_key("model", {"model": "n"}, base) != key
    assert answer_key("tool", identity, base) != key  # the kind of call is in the key


def test_every_request_field_is_keyed_or_named_as_routing() -> None:
    keyed = set(model_request_json(request(response_schema={}, tool_choice="auto")))
    fields = {f.name for f in dataclasses.fields(ModelRequest)}
    assert fields == keyed | ROUTING_FIELDS


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("corrupt", "digest"),
        ("truncated", "digest"),
        ("foreign", "format"),
    ],
)
def test_a_damaged_row_is_a_miss_and_a_warning(damage: str, said: str) -> None:
    store = MemoryAnswerStore()
    answers, warnings = cache(store)
    inner = Counting()
    model = answers.wrap("remote", inner)
    asyncio.run(model.call(request()))
    (key,) = store.data
    good = store.data[key]
    spoiled = {
        "corrupt": dataclasses.replace(good, value=good.value.replace("answer 1", "answer 9")),
        "truncated": dataclasses.replace(good, value=good.value[: len(good.value) // 2]),
        "foreign": dataclasses.replace(good, format=0),
    }[damage]
    store.data[key] = spoiled
    answer = asyncio.run(model.call(request()))
    assert answer.text == "answer 2"  # asked again, never the damaged answer
    assert inner.calls == 2
    assert len(warnings) == 1
    assert warnings[0].startswith("warning[CD974]: cached answer ")
    assert said in warnings[0]


def test_a_damaged_sqlite_row_is_a_miss_and_a_warning(tmp_path: Path) -> None:
    import sqlite3

    answers, warnings = cache(SqliteAnswerStore(tmp_path))
    inner = Counting()
    model = answers.wrap("remote", inner)
    asyncio.run(model.call(request()))
    with sqlite3.connect(tmp_path / STORE_FILE) as db:
        db.execute("UPDATE answers SET value = substr(value, 1, 10)")
    assert asyncio.run(model.call(request())).text == "answer 2"
    assert "digest" in warnings[0]


def test_read_only_answers_but_stores_nothing() -> None:
    store = MemoryAnswerStore()
    answers, _ = cache(store, mode="read-only")
    asyncio.run(answers.wrap("remote", Counting()).call(request()))
    assert not store.data


def test_an_offline_miss_names_the_suggestor_and_shows_a_diff() -> None:
    store = MemoryAnswerStore()
    online, _ = cache(store)
    asyncio.run(online.wrap("remote", Counting()).call(request("summarise the tea market")))
    offline, _ = cache(store, mode="read-only", offline=True)
    inner = Counting()
    with pytest.raises(CacheMiss) as caught:
        asyncio.run(offline.wrap("remote", inner).call(request("summarise the coffee market")))
    assert inner.calls == 0
    message = caught.value.message
    assert "suggestor 'ask'" in message
    assert "the request differs at messages[0].parts[0].text" in message
    assert re.search(r'^- +"text": "summarise the tea market",$', message, re.M)
    assert re.search(r'^\+ +"text": "summarise the coffee market",$', message, re.M)
    assert caught.value.diagnostic_code == "CD973"


def test_an_offline_miss_counts_toward_no_budget() -> None:
    offline, _ = cache(mode="read-only", offline=True)
    meter = UsageMeter(Budget(max_model_calls=3))
    with pytest.raises(CacheMiss):
        asyncio.run(metered_call(offline.wrap("remote", Counting()), request(), meter))
    assert meter.totals.model_calls == 0


def test_a_model_that_says_not_who_it_is_is_not_cached() -> None:
    answers, _ = cache()
    plain = ModelDefaults()
    assert answers.wrap("m", plain) is plain  # type: ignore[arg-type]
    off, _ = cache(mode="off")
    inner = Counting()
    assert off.wrap("m", inner) is inner


def test_a_cached_answer_counts_toward_no_budget() -> None:
    answers, _ = cache()
    model = answers.wrap("remote", Counting())
    # A hit is answered before anything is reserved (docs/cache.md): cached calls never add up.
    meter = UsageMeter(Budget(max_model_calls=2))
    first = asyncio.run(metered_call(model, request(), meter))
    again = [asyncio.run(metered_call(model, request(), meter)) for _ in range(5)]
    assert first is not None
    assert not first.cached
    assert all(m is not None and m.cached for m in again)
    assert meter.totals.model_calls == 1
    assert meter.totals.tokens == 10


class Wrapped(ModelWrapper):
    """A wrapper as the run puts around the cache (tracing, recording): it passes calls on."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def model_id(self) -> str:
        return self._inner.model_id()  # type: ignore[no-any-return]

    async def call(self, req: ModelRequest) -> ModelReturn:
        return await self._inner.call(req)  # type: ignore[no-any-return]


def test_a_hit_needs_no_room_in_a_spent_call_budget() -> None:
    answers, _ = cache()
    inner = Counting()
    model = Wrapped(answers.wrap("remote", inner))
    meter = UsageMeter(Budget(max_model_calls=1))

    async def calls() -> list[Any]:
        return [
            await metered_call(model, request("tea"), meter),  # a miss: the one call allowed
            await metered_call(model, request("coffee"), meter),  # a miss: refused
            await metered_call(model, request("tea"), meter),  # a hit: needs no reservation
            await metered_call(model, request("tea"), meter),
        ]

    first, refused, *hits = asyncio.run(calls())
    assert first is not None
    assert not first.cached
    assert refused is None
    assert all(hit is not None and hit.cached and hit.answer.text == "answer 1" for hit in hits)
    assert inner.calls == 1
    assert meter.totals.model_calls == 1
    assert answers.hits == 2
    assert [r.outcome for r in answers.records] == ["miss", "hit", "hit"]  # refused: not asked


def test_misses_stay_within_the_call_budget_under_concurrency() -> None:
    answers, _ = cache()

    class Slow(Counting):
        async def call(self, req: ModelRequest) -> ModelReturn:
            await asyncio.sleep(0.01)  # every miss in flight at once
            return await super().call(req)

    inner = Slow()
    model = Wrapped(answers.wrap("remote", inner))
    meter = UsageMeter(Budget(max_model_calls=5))

    async def calls() -> list[Any]:
        cached = await metered_call(model, request("cached"), meter)
        assert cached is not None
        wanted = [request(f"miss {n}") if n % 2 else request("cached") for n in range(40)]
        return await asyncio.gather(*(metered_call(model, r, meter) for r in wanted))

    done = asyncio.run(calls())
    hits = [m for m in done[0::2] if m is not None and m.cached]
    misses = [m for m in done[1::2] if m is not None]
    assert len(hits) == 20  # every hit answered, none reserved
    assert len(misses) == 4  # the budget's 5 calls less the first
    assert inner.calls == 5
    assert meter.totals.model_calls == 5


def test_a_streaming_hit_hands_its_text_over_as_increments() -> None:
    answers, _ = cache()
    model = answers.wrap("remote", Counting())
    asyncio.run(model.call(request()))
    seen: list[str] = []
    answer = asyncio.run(model.call_streaming(request(), seen.append))
    assert "".join(seen) == answer.text == "answer 1"


def test_an_api_key_reaches_neither_the_key_nor_the_store(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.reset(FakeReply(text="fine"))
        inner = http_model(server, "openai")
        answers, _ = cache(SqliteAnswerStore(tmp_path))
        model = answers.wrap("remote", inner)
        assert isinstance(model, CachedModel)

        async def twice() -> None:
            await model.call(request())
            await model.call(request())
            await model.aclose()

        asyncio.run(twice())
        assert len(server.requests) == 1
        assert server.requests[0].api_key == KEYS["main"]
    for path in tmp_path.iterdir():
        assert KEYS["main"].encode() not in path.read_bytes()
    stored: CacheRow = SqliteAnswerStore(tmp_path).rows()[0]
    assert KEYS["main"] not in stored.identity + stored.request + stored.value + stored.key
    assert '"origin":"http://127.0.0.1:' in stored.identity


def test_a_speculating_hit_hands_over_the_answers_tool_calls() -> None:
    from converge_dsl.models import ToolCallPart

    class Calling(Counting):
        async def call(self, req: ModelRequest) -> ModelReturn:
            self.calls += 1
            part = ToolCallPart("c1", "look", {"q": "tea"})
            return ModelReturn(Message("assistant", (part,)), stop_reason="tool_use")

    answers, _ = cache()
    inner = Calling()
    model = answers.wrap("remote", inner)
    first: list[object] = []
    asyncio.run(model.call_speculating(request(), lambda _: None, first.append))
    again: list[object] = []
    answer = asyncio.run(model.call_speculating(request(), lambda _: None, again.append))
    assert inner.calls == 1
    assert again == first == list(answer.tool_calls)


def test_an_offline_miss_with_nothing_cached_for_the_suggestor_says_so() -> None:
    offline, _ = cache(mode="read-only", offline=True)
    with pytest.raises(CacheMiss) as caught:
        asyncio.run(offline.wrap("remote", Counting()).call(request()))
    assert "nothing is cached for suggestor 'ask'" in caught.value.message


def test_an_offline_miss_passes_over_cached_entries_that_fail_their_check() -> None:
    # The nearest row's request was read as JSON unchecked: a run failed with CD912
    # "suggestor raised JSONDecodeError" instead of the offline miss.
    store = MemoryAnswerStore()
    online, _ = cache(store)
    asyncio.run(online.wrap("remote", Counting()).call(request("summarise the tea market")))
    (stored,) = store.data.values()
    store.data[stored.key] = dataclasses.replace(stored, request="not json")
    offline, _ = cache(store, mode="read-only", offline=True)
    with pytest.raises(CacheMiss) as caught:
        asyncio.run(offline.wrap("remote", Counting()).call(request("summarise the coffee market")))
    assert "nothing is cached for suggestor 'ask' (1 cached entries fail their check)" in (
        caught.value.message
    )


def test_a_failing_store_is_a_warning_that_names_its_own_code() -> None:
    # It read `warning[CD974]: answer cache: ... failed while reading`, the store's
    # CD975 gone once codes left error messages.

    class Failing(MemoryAnswerStore):
        def get(self, key: str, now: float) -> Any:
            raise CacheStoreError("answer cache: the store failed while reading: disk I/O error")

    answers, warnings = cache(Failing())
    assert answers.lookup("a" * 64) is None
    assert warnings == [
        "warning[CD974]: CD975: answer cache: the store failed while reading: disk I/O error; "
        "the call is made as if nothing were cached"
    ]


class _Held(MemoryAnswerStore):
    """A store another process holds: every store fails (after `wait_s`, its busy timeout)."""

    def __init__(self, wait_s: float = 0.0) -> None:
        super().__init__()
        self.wait_s = wait_s
        self.puts = 0

    def put(self, row: CacheRow) -> None:
        self.puts += 1
        time.sleep(self.wait_s)
        raise CacheStoreError("answer cache: 'x' failed while writing: database is locked")


def test_a_store_that_failed_to_store_an_answer_is_not_asked_again_in_the_run() -> None:
    # Each later answer waited the store's 30 s busy timeout and warned again: a run of
    # many calls against a cache another process held took 30 s a call.

    held = _Held()
    answers, warnings = cache(held)
    model = answers.wrap("remote", Counting())
    for text in ("one", "two", "three"):
        asyncio.run(model.call(request(text)))
    assert held.puts == 1
    assert warnings == [
        "warning[CD974]: CD975: answer cache: 'x' failed while writing: database is locked; "
        "the answer was not cached, nor will any for 60 s"
    ]


def test_a_failed_store_pauses_storing_for_every_run_on_the_store_then_tries_again() -> None:
    # The pause was each run's own: an evaluation of N cases on a held cache waited the
    # busy timeout and warned once per case.
    from converge_dsl.clock import SystemClock
    from converge_dsl.models.caching import SavePause
    from converge_dsl.runtime import AnswerCaching

    now = [0.0]
    warnings: list[str] = []
    held = _Held()
    caching = AnswerCaching(held, warn=warnings.append, saving=SavePause(60.0, lambda: now[0]))
    for case in range(3):  # one AnswerCache a run (an evaluation's case)
        run = caching.open(SystemClock())
        asyncio.run(run.wrap("remote", Counting()).call(request(f"case {case}")))
    assert (held.puts, len(warnings)) == (1, 1)
    now[0] = 61.0  # the pause is over: the store is tried again
    asyncio.run(caching.open(SystemClock()).wrap("remote", Counting()).call(request("late")))
    assert (held.puts, len(warnings)) == (2, 2)


def test_runs_on_several_threads_wait_for_one_failing_store_and_warn_once() -> None:
    # The pause was looked at before the store's lock: each thread found storing open,
    # then queued on the store and waited out its busy timeout in turn, and each warned.
    import threading

    from converge_dsl.clock import SystemClock
    from converge_dsl.runtime import AnswerCaching

    warnings: list[str] = []
    held = _Held(wait_s=0.2)  # the busy timeout
    caching = AnswerCaching(held, warn=warnings.append)
    started = threading.Barrier(4)

    def one(case: int) -> None:
        run = caching.open(SystemClock())
        started.wait()
        asyncio.run(run.wrap("remote", Counting()).call(request(f"case {case}")))

    threads = [threading.Thread(target=one, args=(case,)) for case in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert (held.puts, len(warnings)) == (1, 1)


def test_a_pause_file_is_shared_and_one_that_cannot_be_a_pause_is_none(tmp_path: Path) -> None:
    import json
    import os

    from converge_dsl.models.caching import PAUSE_FILE, SavePause

    now = [1000.0]
    file = tmp_path / PAUSE_FILE
    first, second = (SavePause(60.0, lambda: now[0], file) for _ in range(2))
    first.failed("CD975: database is locked")
    assert json.loads(file.read_text()) == {
        "until": 1060.0,
        "pid": os.getpid(),
        "why": "CD975: database is locked",
    }
    assert (first.open(), second.open()) == (False, False)  # another process's pause
    now[0] = 1060.0
    assert second.open()
    for text in ("garbage", "99999999", "nan", "inf", "", '{"until": 1e99, "pid": 1, "why": ""}'):
        file.write_text(text)  # no end, or one past the pause
        assert SavePause(60.0, lambda: now[0], file).open(), text
    file.unlink()
    os.mkfifo(file)  # never read: it would block
    assert SavePause(60.0, lambda: now[0], file).open()
    unwritable = SavePause(60.0, lambda: now[0], tmp_path / "gone" / PAUSE_FILE)
    unwritable.failed()  # the file cannot be written: this process still pauses
    assert not unwritable.open()
    now[0] -= 3600.0  # the wall clock set back an hour: the pause does not last an hour more
    assert unwritable.open()


def _paused_by_another_process(folder: Path, until: float) -> Path:
    import json

    from converge_dsl.models.caching import PAUSE_FILE

    file = folder / PAUSE_FILE
    file.write_text(json.dumps({"until": until, "pid": 4242, "why": "CD975: disk full"}))
    return file


def test_a_store_skipped_for_another_process_pause_warns_once_what_until_why_and_how(
    tmp_path: Path,
) -> None:
    # The shared file stopped storing for every later process on the folder in silence:
    # an unrelated later run or serve cached nothing and said nothing.
    from converge_dsl.clock import SystemClock
    from converge_dsl.models.caching import SavePause
    from converge_dsl.runtime import AnswerCaching

    file = _paused_by_another_process(tmp_path, 1060.0)
    warnings: list[str] = []
    store = MemoryAnswerStore()
    for _ in range(2):  # two AnswerCachings of one process (two runs of serve): one warning
        caching = AnswerCaching(
            store, warn=warnings.append, saving=SavePause(60.0, lambda: 1000.0, file)
        )
        for case in range(2):
            run = caching.open(SystemClock())
            asyncio.run(run.wrap("remote", Counting()).call(request(f"case {case}")))
    assert store.stats().entries == 0
    assert warnings == [
        "warning[CD974]: answer cache: no answer is stored until 00:17:40 UTC (60 s more), "
        "by any process on the cache: process 4242 failed to store one (CD975: disk full) "
        f"and wrote {file}; the pause ends by itself, or now with `rm -- {file}` "
        "(`converge-dsl cache clear` and `cache prune` remove it too)"
    ]


def test_a_pause_file_of_another_user_pauses_nobody_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file written by a user whose own permissions made the store fail paused
    # every other user of a shared cache folder.
    import os

    from converge_dsl.models.caching import SavePause, read_pause

    file = _paused_by_another_process(tmp_path, 1060.0)
    assert not SavePause(60.0, lambda: 1000.0, file).open()
    mine = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: mine + 1)  # the file is now another user's
    pause = read_pause(file)
    assert pause is not None
    assert not pause.honoured
    assert SavePause(60.0, lambda: 1000.0, file).open()
