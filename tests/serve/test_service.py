"""The run service: crash safety (200 runs, the server SIGKILLed twice mid-load, restarted
on the same state), and its checkpoint key read once per pipeline.

After the crashes every run finished exactly once (one result each, naming its own
input) and every paused run is still waiting; a decision then finishes it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import httpx
import pytest

from converge_dsl.serve import RunStore
from converge_dsl.serve._store import STATE_FILE, RunRow, StateError

from .conftest import DATA, Server, post_load, settled, until

RUNS = 200
GATED = 10


def test_two_kills_every_run_finished_exactly_once(tmp_path: Path, servers: list[Server]) -> None:
    state = tmp_path / "state"
    paths = [DATA / "steady.yaml", DATA / "gated.yaml"]
    options = ("--workers", "4", "--queue", "1000")
    server = Server(paths, state, *options)
    servers.append(server)
    url = server.ready()
    ids = post_load(url, RUNS, GATED)
    for share in (0.25, 0.6):
        until(lambda share=share: settled(state) >= RUNS * share, 120)
        server.kill()
        server = Server(paths, state, *options)
        servers.append(server)
        url = server.ready()
    until(lambda: settled(state) == RUNS, 180)
    with sqlite3.connect(state / STATE_FILE) as db:
        statuses = dict(db.execute("SELECT id, status FROM runs").fetchall())
        attempts = dict(db.execute("SELECT id, attempts FROM runs").fetchall())
        results: dict[str, list[str]] = {}
        for run, body in db.execute("SELECT run, body FROM results"):
            results.setdefault(run, []).append(body)
    assert len(statuses) == RUNS
    gated = [run for run, what in ids.items() if what == "gated"]
    assert sorted(statuses[run] for run in gated) == ["paused"] * GATED
    for run, what in ids.items():
        if what == "gated":
            assert run not in results
            continue
        assert statuses[run] == "done"
        assert len(results[run]) == 1, run  # exactly once
        assert f'"content": "run {what}"' in results[run][0]
    assert max(attempts.values()) >= 2  # some runs were cut short and continued
    with httpx.Client(base_url=url, timeout=30) as http:
        for run in gated:
            assert http.post(f"/v1/runs/{run}/decisions", json={"approve": ["s1", "s2"]}).is_success
        until(lambda: all(http.get(f"/v1/runs/{r}").json()["status"] == "done" for r in gated), 60)
        finished = http.get(f"/v1/runs/{gated[0]}").json()
    assert [f["id"] for f in finished["result"]["facts"]["strategies"]] == ["s1", "s2"]


def test_the_checkpoint_key_is_read_once_per_pipeline(tmp_path: Path) -> None:
    """After the first run the key file is made unusable (readable by others, which a
    read refuses): the next run still seals its journal, with the key read at the first."""
    import asyncio

    from converge_dsl.serve._requests import RunRequest

    config = tmp_path / "config"
    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)

    async def one(number: int) -> str | None:
        run = service.submit("steady", RunRequest.of({"inputs": {"number": number}}))
        return (await service.wait(run, 30.0)).stop_reason

    async def main() -> list[str | None]:
        await service.start()
        try:
            first = await one(1)
            key = next(config.rglob("checkpoint.key"))
            key.chmod(0o644)  # a read now refuses it (CD954)
            return [first, await one(2)]
        finally:
            await service.stop()

    try:
        assert asyncio.run(main()) == ["converged", "converged"]
    finally:
        store.close()


def test_a_checkpoint_key_that_cannot_be_read_fails_each_run_and_keeps_the_worker(
    tmp_path: Path,
) -> None:
    """The key's path is a folder: each run ends `done` with the refusal (CD954) as its
    result, one after the other on the one worker, and the service stops cleanly."""
    import asyncio

    from converge_dsl.serve._requests import RunRequest

    (tmp_path / "config" / "checkpoint.key").mkdir(parents=True)
    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)

    async def main() -> list[RunRow]:
        await service.start()
        try:
            runs = [
                service.submit("steady", RunRequest.of({"inputs": {"number": n}})) for n in (1, 2)
            ]
            return [await service.wait(run, 30.0) for run in runs]
        finally:
            await service.stop()

    try:
        ended = asyncio.run(main())
        stored = [store.get(row.id) for row in ended]
    finally:
        store.close()
    assert [(row.status, row.stop_reason) for row in ended] == [("done", "usage_error")] * 2
    assert [row.status if row else None for row in stored] == ["done", "done"]
    for row in ended:
        assert row.result is not None
        assert [item["code"] for item in row.result["diagnostics"]] == ["CD954"]


def test_runs_execute_on_one_thread_by_default(tmp_path: Path) -> None:
    """By default every run executes on one run loop's thread (not the service's): more
    threads run no more at once under the interpreter's lock, and their hand-offs cost
    CPU (bench/serve.py)."""
    import asyncio
    import threading

    from converge_dsl.serve import Limits
    from converge_dsl.serve._requests import RunRequest

    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, str, Limits(concurrency=4))

    async def main() -> set[str]:
        await service.start()
        try:
            threads = {t.name for t in threading.enumerate() if "run-loop" in t.name}
            runs = [
                service.submit("steady", RunRequest.of({"inputs": {"number": n}})) for n in range(4)
            ]
            stopped = [await service.wait(run, 30.0) for run in runs]
            assert [row.stop_reason for row in stopped] == ["converged"] * 4
            return threads
        finally:
            await service.stop()

    try:
        assert asyncio.run(main()) == {"converge-run-loop-0"}
    finally:
        store.close()


def _one_worker_service(
    tmp_path: Path,
    store: RunStore,
    redact: Callable[[str], str],
    limits: Any = None,
    name: str = "steady",
) -> Any:
    """A `RunService` of `name` (default `steady`) over `store`, one run at a time on one
    loop unless `limits` says otherwise, its checkpoint key in `tmp_path`/config, run ids
    numbered from 0."""
    import os

    from converge_dsl.batch import load
    from converge_dsl.clock import SystemClock
    from converge_dsl.runtime import CacheSettings
    from converge_dsl.serve import Limits, RunService

    env = {**os.environ, "CONVERGE_DSL_CONFIG_DIR": str(tmp_path / "config")}
    pipeline = load(DATA / f"{name}.yaml", env=env, cache=CacheSettings(mode="off"))
    ids = iter(f"{n:032x}" for n in range(10))
    return RunService(
        {name: pipeline},
        store,
        tmp_path / "state",
        Limits(concurrency=1) if limits is None else limits,
        clock=SystemClock(),
        new_id=lambda: next(ids),
        redact=redact,
    )


class _FailingStore(RunStore):
    """The store of a Python linked to SQLite 3.31 (no `RETURNING`), where starting
    `first` fails; or a disk that fails the first write of a result (`finish`)."""

    def __init__(self, folder: Path, *, failing: str) -> None:
        super().__init__(folder)
        self.failing = failing
        self.failed = 0

    def _fail(self) -> None:
        self.failed += 1
        raise StateError('cannot write the state: near "RETURNING": syntax error (secret-77)')

    def start(self, run: str, now: float, *, queued: RunRow | None = None) -> RunRow | None:
        if self.failing == "start" and not self.failed:
            self._fail()
        return super().start(run, now, queued=queued)

    def finish(self, run: str, **kwargs: Any) -> bool:
        if self.failing == "finish" and not self.failed:
            self._fail()
        return super().finish(run, **kwargs)

    def finish_later(self, run: str, **kwargs: Any) -> Future[bool]:
        """A run's end in the group commit fails as `finish` does."""
        if self.failing == "finish" and not self.failed:
            failed: Future[bool] = Future()
            try:
                self._fail()
            except StateError as error:
                failed.set_exception(error)
            return failed
        return super().finish_later(run, **kwargs)


@pytest.mark.parametrize("failing", ["start", "finish"])
def test_a_state_error_fails_its_run_and_the_queue_moves_on(tmp_path: Path, failing: str) -> None:
    """One worker; the state fails under the first run (its start, or the write of its
    result): that run ends failed with the error (redacted), and the next run still
    runs instead of waiting behind a dead worker."""
    import asyncio

    from converge_dsl.serve._requests import RunRequest

    store = _FailingStore(tmp_path / "state", failing=failing)
    service = _one_worker_service(
        tmp_path, store, redact=lambda text: text.replace("secret-77", "***")
    )

    async def main() -> list[RunRow]:
        await service.start()
        try:
            runs = [
                service.submit("steady", RunRequest.of({"inputs": {"number": n}})) for n in (1, 2)
            ]
            return [await service.wait(run, 30.0) for run in runs]
        finally:
            await service.stop()

    try:
        first, second = asyncio.run(main())
        stored = store.get(first.id)
    finally:
        store.close()
    assert store.failed == 1
    assert (first.status, second.status) == ("done", "done")
    assert second.stop_reason == "converged"
    assert stored is not None
    assert stored.status == "done"
    assert first.result is not None
    [diagnostic] = first.result["diagnostics"]
    assert diagnostic["code"] == "CD993"
    assert diagnostic["message"] == (
        'serve: cannot write the state: near "RETURNING": syntax error (***)'
    )
    assert stored.result == first.result


class _CountingStore(RunStore):
    """A store that counts the statements reading the table of runs."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.statements: list[str] = []
        self._db.set_trace_callback(self.statements.append)

    @property
    def reads(self) -> int:
        return sum(1 for sql in self.statements if sql.startswith("SELECT id, pipeline"))


def test_a_run_waited_for_as_it_is_queued_is_not_read_back(tmp_path: Path) -> None:
    """Neither its worker nor a wait reads back the run `submit` just queued: the worker
    starts it from the run as added, the wait knows it cannot have stopped yet, and the
    worker hands the waiter the run as it stored it, the result with the JSON text
    written (which the answer sends as it is). Waiting again once it ended reads it."""
    import asyncio
    import json

    from converge_dsl.serve._app import run_answer
    from converge_dsl.serve._requests import RunRequest

    store = _CountingStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)

    async def main() -> tuple[RunRow, int, RunRow]:
        await service.start()
        store.statements.clear()  # the recovery's read of the queued runs
        try:
            run = service.submit("steady", RunRequest.of({"inputs": {"number": 1}}))
            ended = await service.wait(run, 30.0)
            reads = store.reads
            return ended, reads, await service.wait(run, 30.0)
        finally:
            await service.stop()

    try:
        ended, reads, again = asyncio.run(main())
        with contextlib.closing(sqlite3.connect(tmp_path / "state" / STATE_FILE)) as db:
            [(stored,)] = db.execute("SELECT body FROM results").fetchall()
    finally:
        store.close()
    assert reads == 0
    assert store.reads == 1  # the second wait
    assert (ended.status, again.status) == ("done", "done")
    assert ended.result_json == stored
    assert again.result == ended.result == json.loads(stored)
    answer = json.loads(run_answer(ended, 200).body)
    assert answer == {
        "id": ended.id,
        "pipeline": "steady",
        "status": "done",
        "stop_reason": "converged",
        "attempts": 1,
        "result": ended.result,
    }


async def _until_a_worker_waits(service: Any) -> None:
    """Let the service's workers reach their queues (they start on the next turns)."""
    import asyncio

    for _ in range(100):
        if service._idle.get("steady"):
            return
        await asyncio.sleep(0)
    raise AssertionError("no worker waits")


def test_a_run_a_waiting_worker_takes_is_added_started_in_one_write(tmp_path: Path) -> None:
    """A run submitted while a worker waits with nothing queued is stored running, first
    attempt, by the write that adds it (so a restart continues it as any running run):
    its worker starts it without another write. A run queued behind a busy worker is
    added queued and started by its worker."""
    import asyncio

    from converge_dsl.serve._requests import RunRequest

    store = _CountingStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)

    async def main() -> tuple[list[RunRow | None], list[RunRow]]:
        await service.start()
        try:
            await _until_a_worker_waits(service)
            runs = [
                service.submit("steady", RunRequest.of({"inputs": {"number": n}})) for n in (1, 2)
            ]
            added = [store.get(run) for run in runs]
            return added, [await service.wait(run, 30.0) for run in runs]
        finally:
            await service.stop()

    try:
        added, ended = asyncio.run(main())
    finally:
        store.close()
    assert [(row.status, row.attempts) for row in added if row] == [("running", 1), ("queued", 0)]
    assert [(row.status, row.stop_reason, row.attempts) for row in ended] == [
        ("done", "converged", 1)
    ] * 2
    starts = [sql for sql in store.statements if sql.startswith("UPDATE runs SET status = 'run")]
    assert len(starts) == 1  # the queued run's


def test_a_run_cancelled_before_its_waiting_worker_takes_it_never_runs(tmp_path: Path) -> None:
    """Between `submit` (the run added running for a waiting worker) and that worker taking
    it, a cancel ends it as cancelled, no result; the worker then takes the next run."""
    import asyncio

    from converge_dsl.serve._requests import RunRequest

    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)

    async def main() -> tuple[RunRow, RunRow, RunRow]:
        await service.start()
        try:
            await _until_a_worker_waits(service)
            run = service.submit("steady", RunRequest.of({"inputs": {"number": 1}}))
            cancelled = service.cancel(run)
            ended = await service.wait(run, 30.0)
            after = service.submit("steady", RunRequest.of({"inputs": {"number": 2}}))
            return cancelled, ended, await service.wait(after, 30.0)
        finally:
            await service.stop()

    try:
        cancelled, ended, after = asyncio.run(main())
        results = store.results(cancelled.id)
        events = list(store.events(cancelled.id))
    finally:
        store.close()
    assert (cancelled.status, cancelled.stop_reason) == ("cancelled", "cancelled")
    assert (ended.status, ended.result) == ("cancelled", None)
    assert results == []
    assert events == []
    assert (after.status, after.stop_reason) == ("done", "converged")


def test_a_cancel_before_the_runs_task_first_ran_ends_it_and_keeps_the_worker(
    tmp_path: Path,
) -> None:
    """The worker took the run and made its task, which has not run yet, when a cancel
    lands: the run ends cancelled (not left running), and the worker lives on to take
    the next run."""
    import asyncio

    from converge_dsl.serve._requests import RunRequest

    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)

    async def main() -> tuple[RunRow, RunRow, list[bool]]:
        await service.start()
        try:
            await _until_a_worker_waits(service)
            run = service.submit("steady", RunRequest.of({"inputs": {"number": 1}}))
            await asyncio.sleep(0)  # the worker takes it and makes its task, not yet run
            assert run in service._tasks
            service.cancel(run)
            ended = await service.wait(run, 30.0)
            after = service.submit("steady", RunRequest.of({"inputs": {"number": 2}}))
            later = await service.wait(after, 30.0)
            return ended, later, [not task.done() for task in service._workers]
        finally:
            await service.stop()

    try:
        ended, later, alive = asyncio.run(main())
        stored = store.get(ended.id)
    finally:
        store.close()
    assert (ended.status, ended.stop_reason) == ("cancelled", "cancelled")
    assert stored is not None
    assert stored.status == "cancelled"
    assert (later.status, later.stop_reason) == ("done", "converged")
    assert alive == [True]


def test_a_cancel_between_a_runs_end_and_its_workers_next_step_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel landing once the run's task ended, before its worker took the task out
    of the running ones: the run is answered as it ended; the id was kept among the runs
    being cancelled for the life of the process."""
    import asyncio

    from converge_dsl.serve import RunService
    from converge_dsl.serve._requests import RunRequest

    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)
    execute, answers = RunService._execute, list[RunRow]()

    async def then_cancelled(self: RunService, name: str, row: RunRow) -> None:
        await execute(self, name, row)
        # runs once this task is done, before its worker resumes
        asyncio.get_running_loop().call_soon(lambda: answers.append(self.cancel(row.id)))

    monkeypatch.setattr(RunService, "_execute", then_cancelled)

    async def main() -> RunRow:
        await service.start()
        try:
            run = service.submit("steady", RunRequest.of({"inputs": {"number": 1}}))
            ended = await service.wait(run, 30.0)
            for _ in range(100):  # its worker takes the task out
                if not service._tasks:
                    break
                await asyncio.sleep(0)
            return ended
        finally:
            await service.stop()

    try:
        ended = asyncio.run(main())
    finally:
        store.close()
    assert ended.status == "done"
    assert [answer.status for answer in answers] == ["done"]
    assert service._runs.cancelling == set()


def test_a_decision_on_a_pause_stored_before_the_loop_heard_of_it_waits_for_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pause is stored by the group commit before the service's loop hears of it: a
    decision taken in that gap queued the run again while its first task still ended, and
    that end then answered the decision's waiters with the old `paused` row and took the
    new attempt's task out of the running ones (a DELETE then found nothing to cancel)."""
    import asyncio

    from converge_dsl.serve import Limits, _run_ends
    from converge_dsl.serve._requests import RunRequest

    heard = _run_ends.Inbox

    class LateInbox:  # the loop hears of each commit 0.3 s after it is stored
        @staticmethod
        def of(loop: asyncio.AbstractEventLoop) -> Any:
            inbox = heard.of(loop)

            class Late:
                def future(self, done: Any) -> Any:
                    async def later() -> Any:
                        outcome = await inbox.future(done)
                        await asyncio.sleep(0.3)
                        return outcome

                    return asyncio.ensure_future(later())

            return Late()

    monkeypatch.setattr(_run_ends, "Inbox", LateInbox)
    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, str, Limits(concurrency=2), name="gated")

    async def main() -> tuple[bool, RunRow, RunRow]:
        await service.start()
        try:
            run = service.submit("gated", RunRequest.of({}))
            while store.get(run).status != "paused":
                await asyncio.sleep(0.01)
            in_the_gap = run in service._tasks
            pending = [held["id"] for held in store.get(run).result["pending"]]
            await service.decide(run, dict.fromkeys(pending, True))
            return in_the_gap, await service.wait(run, 30.0), store.get(run)
        finally:
            await service.stop()

    try:
        in_the_gap, answered, stored = asyncio.run(main())
    finally:
        store.close()
    assert in_the_gap
    assert (answered.status, stored.status) == ("done", "done")


def test_a_run_handed_to_a_worker_finishes_once_when_the_service_starts_again(
    tmp_path: Path,
) -> None:
    """A run added running for a waiting worker, the service stopped before that worker
    took it and started again (a lifespan entered twice): the run is recovered, runs,
    and its end is stored."""
    import asyncio

    from converge_dsl.serve._requests import RunRequest

    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)

    async def main() -> RunRow:
        await service.start()
        await _until_a_worker_waits(service)
        run = service.submit("steady", RunRequest.of({"inputs": {"number": 1}}))
        await service.stop()  # before the woken worker ran
        await service.start()
        try:
            return await service.wait(run, 30.0)
        finally:
            await service.stop()

    try:
        ended = asyncio.run(main())
        stored = store.get(ended.id)
        results = store.results(ended.id)
    finally:
        store.close()
    assert (ended.status, ended.stop_reason) == ("done", "converged")
    assert stored is not None
    assert (stored.status, stored.stop_reason) == ("done", "converged")
    assert len(results) == 1


class _Ending:
    """Workers that end each run at once, done, as a worker sends it (`RunEnd`)."""

    def __init__(self) -> None:
        self.jobs: list[Any] = []

    def start(self) -> None:
        pass

    def submit(self, job: Any, sinks: Any = (), on_checkpoint: Any = None) -> Any:
        from converge_dsl.batch import RunEnd, RunTicket

        self.jobs.append(job)
        ticket = RunTicket(job.run)
        ticket.future.set_result(RunEnd("done", {"stop_reason": "converged", "n": 1}))
        return ticket

    def cancel(self, run: str) -> None:
        pass

    def close(self) -> None:
        pass


class _Ends(RunStore):
    """A store that counts the ends written in a transaction of their own (`finish`)."""

    finished = 0

    def finish(self, run: str, **kwargs: Any) -> bool:
        self.finished += 1
        return super().finish(run, **kwargs)


def test_a_run_on_workers_ends_in_the_group_commit(tmp_path: Path) -> None:
    """The end a worker sends is stored as a local run's: a write of the journals' next
    group commit, not a transaction of its own, and answered once committed. The run is
    asked with its events made into the sink's records on the worker (`encode_event`)."""
    import asyncio

    from converge_dsl.serve._events import encode_event
    from converge_dsl.serve._requests import RunRequest

    store = _Ends(tmp_path / "state")
    workers = _Ending()
    service = _one_worker_service(tmp_path, store, redact=str)
    service.workers = workers

    async def main() -> RunRow:
        await service.start()
        try:
            run = service.submit("steady", RunRequest.of({"inputs": {"number": 1}}))
            return await service.wait(run, 30.0)
        finally:
            await service.stop()

    try:
        ended = asyncio.run(main())
        stored = store.get(ended.id)
    finally:
        store.close()
    assert (ended.status, ended.result, ended.result_json) == (
        "done",
        {"stop_reason": "converged", "n": 1},
        '{"stop_reason": "converged", "n": 1}',
    )
    assert stored == ended  # as stored, told without reading it back
    assert store.finished == 0
    assert [job.encode for job in workers.jobs] == [encode_event]


def test_runs_added_in_the_group_commit_are_answered_once_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`commit="with_end"` (gathered for an hour, so only its end commits it): the run
    starts at once and `wait` answers it done, its add committed; a second submit with
    the same key while the first's add is still queued finds that run. `commit="group"`:
    `added` returns once the run is committed, without its end."""
    import asyncio

    from converge_dsl.runtime import _checkpoint_sqlite
    from converge_dsl.serve._idempotency import IdempotencyKey
    from converge_dsl.serve._requests import RunRequest

    monkeypatch.setattr(_checkpoint_sqlite, "GROUP_COMMIT_S", 3600.0)
    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)
    request = RunRequest.of({"inputs": {"number": 1}})
    key = IdempotencyKey("order-1", "the Idempotency-Key header")

    async def main() -> tuple[Any, ...]:
        await service.start()
        try:
            await asyncio.sleep(0)  # the worker waits for a run
            run = service.submit("steady", request, key, commit="with_end")
            again = service.submit("steady", request, key, commit="with_end")
            assert store.pending(run) is not None
            done = await service.wait(run, 30.0)
            other = service.submit(
                "steady", RunRequest.of({"inputs": {"number": 2}}), commit="group"
            )
            await service.added(other)
            return run, again, done, store.get(other)
        finally:
            await service.stop()

    try:
        run, again, done, other = asyncio.run(main())
    finally:
        store.close()
    assert again == run
    assert (done.status, done.stop_reason) == ("done", "converged")
    assert other is not None
    with sqlite3.connect(tmp_path / "state" / STATE_FILE) as db:
        assert db.execute("SELECT status FROM runs WHERE id = ?", (run,)).fetchall() == [("done",)]


def test_a_kill_among_waited_runs_leaves_each_answered_run_done_once(
    tmp_path: Path, servers: list[Server]
) -> None:
    """`?wait=true` runs, whose add waits for the group commit: the server is killed while
    they are posted. Every run answered before the kill is stored done with one result;
    after a restart every stored run ends exactly once (a run whose add was not yet
    committed was never answered, and is not stored)."""
    import threading

    state = tmp_path / "state"
    paths = [DATA / "steady.yaml"]
    options = ("--workers", "4", "--queue", "1000")
    server = Server(paths, state, *options)
    servers.append(server)
    url = server.ready()
    answered: dict[str, str] = {}
    stop = threading.Event()

    def post(n: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            while not stop.is_set():
                try:
                    answer = http.post(
                        "/v1/pipelines/steady/runs?wait=true", json={"inputs": {"number": n}}
                    )
                except httpx.HTTPError:
                    return  # the server was killed
                if answer.status_code == 200:
                    answered[answer.json()["id"]] = answer.json()["status"]

    posters = [threading.Thread(target=post, args=(n,)) for n in range(4)]
    for poster in posters:
        poster.start()
    until(lambda: len(answered) >= 20, 120)
    server.kill()
    stop.set()
    for poster in posters:
        poster.join(timeout=60)
    server = Server(paths, state, *options)
    servers.append(server)
    server.ready()
    with sqlite3.connect(state / STATE_FILE) as db:
        stored = {r for (r,) in db.execute("SELECT id FROM runs")}
    until(lambda: settled(state) == len(stored), 120)
    with sqlite3.connect(state / STATE_FILE) as db:
        statuses = dict(db.execute("SELECT id, status FROM runs").fetchall())
        results: dict[str, int] = {}
        for (run,) in db.execute("SELECT run FROM results"):
            results[run] = results.get(run, 0) + 1
    assert set(answered.values()) == {"done"}
    assert set(answered) <= set(statuses)
    assert set(statuses.values()) == {"done"}
    assert all(results.get(run) == 1 for run in statuses), results


def test_a_run_whose_add_the_group_commit_fails_is_told_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    """The group commit holding a run's add fails: `added` raises the `StateError`, the run
    is not run (or no longer), nothing of it is stored, and its metrics keep no start of it
    (they kept it for the life of the process); once the disk has room again the next run
    is added and runs."""
    import asyncio

    from converge_dsl.serve._requests import RunRequest

    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)
    ran: list[str] = []
    run_it = service._run

    async def spy(name: str, row: RunRow) -> None:
        ran.append(row.id)
        await run_it(name, row)

    service._run = spy

    async def main() -> tuple[list[str], RunRow]:
        await service.start()
        try:
            with store._lock:  # the adds of the second and third runs fail
                store._db.execute(
                    f"CREATE TEMP TRIGGER full BEFORE INSERT ON runs WHEN NEW.id IN "
                    f"('{1:032x}', '{2:032x}') "
                    "BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END"
                )
            first = service.submit("steady", RunRequest.of({"inputs": {"number": 1}}))
            second = service.submit(
                "steady", RunRequest.of({"inputs": {"number": 2}}), commit="group"
            )
            with pytest.raises(StateError, match="disk is full"):
                await service.added(second)
            third = service.submit(
                "steady", RunRequest.of({"inputs": {"number": 3}}), commit="with_end"
            )
            with pytest.raises(StateError, match="disk is full"):
                await service.wait(third, 30.0)
            await service.wait(first, 30.0)
            with store._lock:
                store._db.execute("DROP TRIGGER full")
            fourth = service.submit(
                "steady", RunRequest.of({"inputs": {"number": 4}}), commit="group"
            )
            await service.added(fourth)
            return [second, third], await service.wait(fourth, 30.0)
        finally:
            await service.stop()

    try:
        failed, fourth = asyncio.run(main())
        for run in failed:
            assert store.get(run) is None
            for table in ("events", "results", "checkpoint_records"):
                rows = store.checkpoints.query(
                    f"SELECT COUNT(*) FROM {table} WHERE run = ?", (run,)
                )
                assert rows == [(0,)], table
    finally:
        store.close()
    assert failed[0] not in ran
    assert (fourth.status, fourth.stop_reason) == ("done", "converged")
    assert service.metrics._submitted == {}  # every run stopped or was never stored


def test_an_add_that_cannot_be_queued_is_refused_by_submit(tmp_path: Path) -> None:
    """The journals refuse new writes (a group commit failed as a whole): `submit` raises
    the `StateError` and queues nothing, instead of a run no one can find."""
    import asyncio

    from converge_dsl.serve._requests import RunRequest

    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)

    async def main() -> int:
        await service.start()
        try:
            store.checkpoints.close()  # a write queued now is refused at once
            with pytest.raises(StateError):
                service.submit("steady", RunRequest.of({"inputs": {"number": 1}}), commit="group")
            return service.queue_depth("steady")
        finally:
            await service.stop()

    try:
        assert asyncio.run(main()) == 0
    finally:
        store.close()


def test_a_waiter_cancelled_leaves_the_add_to_the_others(tmp_path: Path) -> None:
    """Two requests wait on one queued add (a 202 and its idempotent repeat); the first is
    cancelled (its client went away): the second is still answered, the add committed."""
    import asyncio

    from converge_dsl.serve._results import committed

    store = RunStore(tmp_path)

    async def main() -> bool:
        _, write = store.add_later("a", "p", {}, 1.0, ("k", "d"), urgent=False)
        first = asyncio.create_task(committed(store.pending("a")))
        second = asyncio.create_task(committed(store.pending("a")))
        await asyncio.sleep(0.01)
        first.cancel()
        await second
        return write.cancelled()

    try:
        assert asyncio.run(main()) is False
        assert store.get("a") is not None
    finally:
        store.close()


def test_a_wait_begun_on_a_stopping_service_is_answered_at_once(tmp_path: Path) -> None:
    """A run queued once the stop began (a decision, a call that came with the signal)
    starts no more: its waiter is answered at once with the run as stored (`running`
    when added for a waiting worker: `stop` queues it again). Before, nothing woke
    a waiter that came after the stop's answers: it waited its whole timeout, past
    uvicorn's drain, which then cut its request."""
    import asyncio

    from converge_dsl.serve._requests import RunRequest

    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)

    async def main() -> RunRow:
        await service.start()
        try:
            service.stopping()
            await asyncio.sleep(0.05)  # the stop's answers made (none were waiting)
            run = service.submit("steady", RunRequest.of({"inputs": {"number": 1}}))
            return await asyncio.wait_for(service.wait(run, 30.0), 5.0)
        finally:
            await service.stop()

    try:
        row = asyncio.run(main())
    finally:
        store.close()
    assert row.status in ("queued", "running")
