"""The `process` executor: workers forked from the batch when it runs one thread only, else
from a fork server that imported their modules while the pipeline loaded (or spawned
before it loads), with the batch's environment; the pipeline sent with the chunks and
unpickled once per worker, no worker left by a pipeline that fails."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import converge_dsl
from converge_dsl.batch import BatchOptions, Case, _process, run_cases
from converge_dsl.batch._outputs import CaseOutputs
from converge_dsl.errors import ConvergeError
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

from .conftest import ECHO, topic_pipeline, write_cases

FORKING = _process._context().get_start_method() == "forkserver"


def _plan(workers: int = 1, context: Any = None) -> _process._Plan:
    """A pool plan for the echo pipeline, its workers set up as a batch's are."""
    start_args = (None, None, CaseOutputs(), os.getpid(), dict(os.environ))
    return _process._Plan(ECHO, workers, context or _process._context(), start_args)


_IMPORTED: list[str] = []


def _note_imported() -> None:
    """A pool initializer: note which of the worker modules this process has already."""
    _IMPORTED.extend(name for name in _process.worker_modules() if name in sys.modules)


def _imported() -> list[str]:
    return _IMPORTED


def _variable(name: str) -> str | None:
    return os.environ.get(name)


@pytest.fixture
def second_thread() -> Iterator[None]:
    """A second thread running while the test does: no pool may fork from this process."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="second-thread")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# Run in a fresh process, which runs one thread only: the workers' parent, whether a fork
# server was started, and the batch's results.
_ONE_THREAD_BATCH = """import json, os, sys
from multiprocessing import forkserver
from pathlib import Path
from converge_dsl.batch import BatchOptions, _process, run_batch
echo, cases, out = map(Path, sys.argv[1:])
assert _process._forks(), os.listdir("/proc/self/task")
options = BatchOptions(pipeline=echo, cases=cases, out=out, executor="process")
summary = run_batch(options)
executor = _process._Plan(echo, 2, _process._context(), (None, None, options.outputs,
    os.getpid(), dict(os.environ))).start()
parents = {executor.submit(os.getppid).result(timeout=60) for _ in range(4)}
executor.shutdown(wait=True)
print(json.dumps({"run": summary.run, "failed": summary.failed, "parents": sorted(parents),
    "pid": os.getpid(), "fork server": forkserver._forkserver._forkserver_pid}))
"""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_a_batch_running_one_thread_forks_its_workers_from_itself(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": w} for w in ("tea", "cup", "pot")])
    out = tmp_path / "out.jsonl"
    ran = subprocess.run(
        [sys.executable, "-c", _ONE_THREAD_BATCH, str(ECHO), str(cases), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.splitlines()[-1])
    assert (seen["run"], seen["failed"]) == (3, 0)
    assert seen["parents"] == [seen["pid"]]
    assert seen["fork server"] is None
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["stop_reason"] for line in lines) == ["converged"] * 3


def test_a_process_with_a_second_thread_does_not_fork_from_itself(second_thread: None) -> None:
    assert not _process._forks()


_OPEN_DATABASE = """\
import sys
from pathlib import Path
from converge_dsl._sqlite import open_wal
from converge_dsl.batch import _process
assert _process._forks()
db = open_wal(Path(sys.argv[1]), busy_timeout=1)
assert not _process._forks()  # a child would take no lock of the file this process holds
db.close()
assert _process._forks()
"""


def test_a_process_with_a_database_open_does_not_fork_from_itself(tmp_path: Path) -> None:
    command = [sys.executable, "-c", _OPEN_DATABASE, str(tmp_path / "held.sqlite3")]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr


# A batch with the answer cache on, in a fresh process running one thread, asking a model
# server of the test's about a topic a case: whether it forked its workers (no fork server
# started), its databases open once the pool started, and the rows of its cache.
_CACHED_BATCH = """\
import json, sqlite3, sys
from multiprocessing import forkserver
from pathlib import Path
from converge_dsl._sqlite import open_connections
from converge_dsl.batch import BatchOptions, Case, run_cases
from converge_dsl.runtime import cache_settings
pipeline, folder = map(Path, sys.argv[1:])
cache = cache_settings(env={}, cache=True, cache_dir=folder)
options = BatchOptions(pipeline=pipeline, cases=pipeline, out=folder / "unused",
    executor="process", cache=cache)
cases = [Case(i, f"c{i}", {"topic": f"topic {i}"}) for i in range(40)]
results = run_cases(options, cases)
first = next(results)  # the pool has started
held = open_connections()
done = [first, *results]
rows = sqlite3.connect(folder / "answers.sqlite3").execute("SELECT count(*) FROM answers")
print(json.dumps({"converged": sum(r.stop_reason == "converged" for r in done),
    "held": held, "rows": rows.fetchone()[0],
    "fork server": forkserver._forkserver._forkserver_pid}))
"""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_a_batch_with_the_cache_on_forks_with_its_own_connection_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCESS_CACHE_KEY", "sk-process-cache-0123456789")
    with FakeProviderServer() as server:  # in this process: the batch's runs one thread
        server.reset(FakeReply(text="said"))
        pipeline = tmp_path / "topics.yaml"
        text = topic_pipeline("topics", "PROCESS_CACHE_KEY").format(url=server.openai_base_url)
        pipeline.write_text(text, encoding="utf-8")
        command = [sys.executable, "-c", _CACHED_BATCH, str(pipeline), str(tmp_path / "cache")]
        ran = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.splitlines()[-1])
    assert seen == {"converged": 40, "held": 0, "rows": 40, "fork server": None}


_JOINED_THREADS = """\
import threading
from converge_dsl.batch import _process
_process.LINGER_S = 5.0  # a loaded machine may end a thread late; a hang fails anyway
for _ in range(2000):  # a joined thread is still listed a moment after some joins
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    assert _process._forks()
"""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_a_thread_joined_a_moment_ago_does_not_keep_a_batch_from_forking() -> None:
    command = [sys.executable, "-c", _JOINED_THREADS]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr


def test_a_worker_unpickles_the_pipeline_its_chunks_carry_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_process, "_die_with_parent", lambda parent: None)
    monkeypatch.setattr(_process, "freeze_alive", lambda: None)
    monkeypatch.setattr(_process._Worker, "pipeline", None)
    _process.set_up_worker(None, None, CaseOutputs(), 0)
    loop = _process._Worker.loop
    assert loop is not None
    try:
        pickled = pickle.dumps(converge_dsl.load(ECHO))
        first = _process._run([Case(0, "a", {"word": "tea"})], pickled)
        kept = _process._Worker.pipeline
        second = _process._run([Case(1, "b", {"word": "tea"})], pickled)
        assert kept is not None
        assert _process._Worker.pipeline is kept
        assert [r.id for r in first + second] == ["a", "b"]
        assert all(r.text is not None and r.text == r.line() for r in first + second)
    finally:
        if _process._Worker.pipeline is not None:
            loop.run_until_complete(_process._Worker.pipeline.aclose())
        loop.close()


def test_a_pipeline_that_does_not_load_leaves_no_worker_running(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: converge-dsl/v1\nkind: Pipeline\n", encoding="utf-8")
    options = BatchOptions(
        pipeline=broken, cases=broken, out=tmp_path / "unused", executor="process"
    )
    with pytest.raises(ConvergeError):
        run_cases(options, [Case(0, None, {})])
    assert multiprocessing.active_children() == []


def _modules_of_a_worker(tmp_path: Path) -> set[str]:
    """The modules of a fresh process once it has done what a worker of a batch of the
    echo pipeline (a scripted model, the cache off) does up to its first case's end."""
    pickled = tmp_path / "pipeline.pickle"
    pickled.write_bytes(pickle.dumps(converge_dsl.load(ECHO)))
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from converge_dsl.batch import Case, _process\n"
        "from converge_dsl.batch._outputs import CaseOutputs\n"
        "_process.set_up_worker(None, None, CaseOutputs(), os.getppid())\n"
        "done = _process._run([Case(0, 'a', {'word': 'tea'})], Path(sys.argv[1]).read_bytes())\n"
        "assert done[0].stop_reason == 'converged', done\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code, str(pickled)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    modules = set(ran.stdout.split())
    assert "converge_dsl.runtime._assembly" in modules  # the case did run here
    return modules


def test_a_worker_with_the_cache_off_imports_no_answer_store_or_report_page(
    tmp_path: Path,
) -> None:
    assert {
        "converge_dsl.models.answer_store",
        "converge_dsl.frontend._run_config",
        "converge_dsl.runtime._report_html",
    }.isdisjoint(_modules_of_a_worker(tmp_path))


def test_a_worker_on_a_scripted_model_imports_no_cassette_or_wire_format(
    tmp_path: Path,
) -> None:
    assert {
        "converge_dsl.models.cassette",
        "converge_dsl.models._wire",
        "converge_dsl.models._sse",
        "difflib",
    }.isdisjoint(_modules_of_a_worker(tmp_path))


@pytest.mark.skipif(not FORKING, reason="the system has no fork server")
def test_a_worker_is_forked_with_its_modules_imported_already() -> None:
    with ProcessPoolExecutor(
        1, mp_context=_process._context(), initializer=_note_imported
    ) as executor:
        imported = executor.submit(_imported).result(timeout=60)
    assert imported == list(_process.worker_modules())


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
@pytest.mark.skipif(not FORKING, reason="the system has no fork server")
def test_the_workers_parent_is_the_fork_server_importing_their_modules(
    second_thread: None,
) -> None:
    executor = _plan(workers=2).start()
    try:
        parents = {executor.submit(os.getppid).result(timeout=60) for _ in range(4)}
    finally:
        executor.shutdown(wait=True)
    assert os.getpid() not in parents
    for parent in parents:
        command = Path(f"/proc/{parent}/cmdline").read_bytes().decode()
        assert "multiprocessing.forkserver" in command
        assert all(repr(name) in command for name in _process.worker_modules())


def test_a_worker_has_the_environment_of_the_batch_that_started_it(
    monkeypatch: pytest.MonkeyPatch, second_thread: None
) -> None:
    monkeypatch.setenv("CONVERGE_DSL_TEST_GONE", "set before the fork server started")
    _plan().start().shutdown(wait=True)  # a fork server (if any) runs from now on
    monkeypatch.setenv("CONVERGE_DSL_TEST_MARK", "set after the fork server started")
    monkeypatch.delenv("CONVERGE_DSL_TEST_GONE")
    executor = _plan().start()
    try:
        mark = executor.submit(_variable, "CONVERGE_DSL_TEST_MARK").result(timeout=60)
        gone = executor.submit(_variable, "CONVERGE_DSL_TEST_GONE").result(timeout=60)
    finally:
        executor.shutdown(wait=True)
    assert (mark, gone) == ("set after the fork server started", None)


def test_the_workers_take_the_environment_the_batch_was_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`BatchOptions.env` (the command line's environment), not this process's."""
    handed: list[Any] = []
    plan = _process._Plan

    def recorded(*args: Any) -> _process._Plan:
        handed.append(args[3][4])  # the environment set_up_worker is started with
        return plan(*args)

    monkeypatch.setattr(_process, "_Plan", recorded)
    env = {**os.environ, "CONVERGE_DSL_TEST_HANDED": "given to the batch"}
    options = BatchOptions(
        pipeline=ECHO, cases=ECHO, out=tmp_path / "unused", executor="process", env=env
    )
    results = list(run_cases(options, [Case(0, "c0", {"word": "tea"})]))
    assert [r.stop_reason for r in results] == ["converged"]
    assert handed == [env]


def test_without_a_fork_server_the_workers_are_spawned_and_run_the_cases(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert _process._context().get_start_method() == "spawn"
    options = BatchOptions(pipeline=ECHO, cases=ECHO, out=tmp_path / "unused", executor="process")
    cases = [Case(i, f"c{i}", {"word": word}) for i, word in enumerate(["tea", "cup", "pot"])]
    results = sorted(run_cases(options, cases), key=lambda r: r.index)
    assert [(r.id, r.stop_reason) for r in results] == [(c.id, "converged") for c in cases]
    assert multiprocessing.active_children() == []


def test_a_process_batch_starts_the_fork_server_before_it_reads_its_cases(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, second_thread: None
) -> None:
    from converge_dsl.batch import _run

    order: list[str] = []
    monkeypatch.setattr(_process, "start_fork_server", lambda: order.append("fork server"))
    cases_text = _run.cases_text
    monkeypatch.setattr(_run, "cases_text", lambda path: order.append("cases") or cases_text(path))
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": "tea"}])
    out = tmp_path / "out.jsonl"
    options = BatchOptions(pipeline=ECHO, cases=cases, out=out, executor="process")
    summary = _run.run_batch(options)
    assert (summary.run, summary.failed) == (1, 0)
    assert order[:2] == ["fork server", "cases"]


def test_a_process_batch_asks_for_its_fork_server_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from converge_dsl.batch import _run

    asked: list[str] = []
    start = _process.start_fork_server
    monkeypatch.setattr(_process, "start_fork_server", lambda: asked.append("") or start())
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": "tea"}])
    options = BatchOptions(
        pipeline=ECHO, cases=cases, out=tmp_path / "out.jsonl", executor="process"
    )
    assert _run.run_batch(options).run == 1
    assert len(asked) == 1
    results = list(run_cases(options, [Case(0, "c0", {"word": "tea"})]))
    assert [r.stop_reason for r in results] == ["converged"]
    assert len(asked) == 2


def test_a_pool_starts_no_more_workers_than_cases_and_a_huge_concurrency_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[int] = []

    def record(
        options: BatchOptions, workers: int, todo: list[Case], spent: Any, loaded: Any
    ) -> Iterator[Any]:
        started.append(workers)
        return iter(())

    monkeypatch.setattr(_process, "run_in_processes", record)
    options = BatchOptions(pipeline=ECHO, cases=ECHO, out=ECHO, executor="process", concurrency=64)
    cases = [Case(i, None, {"word": "tea"}) for i in range(3)]
    assert list(run_cases(options, cases)) == []
    assert started == [3]  # 64 asked, 3 cases: 3 processes
    huge = BatchOptions(pipeline=ECHO, cases=ECHO, out=ECHO, executor="process", concurrency=10**5)
    with pytest.raises(ConvergeError, match="at most 1024 are started"):
        list(run_cases(huge, cases))
    assert started == [3]
