"""A killed batch leaves no process behind (`batch._process._die_with_parent`).

`converge-dsl run --cases --executor process` is started with its standard
output and error on pipes, its workers busy with cases that sleep a minute,
then killed with SIGKILL. Within 5 s no process it started (its workers and
multiprocessing's resource tracker) may be left, and so the pipes reach their
end: a caller that captures the batch's output is not held. The same holds
for a long single run. A worker killed while its batch goes on has its cases
run again by a new pool. Processes are read from `/proc` (psutil when it is
installed).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import DATA, write_cases

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

# A model that answers a prompt holding "sleepy" after `delay` seconds, any other at once.
SLEEPY_SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {{contains: "sleepy"}}
    delay_s: {delay}
    reply: "awake"
default: {{reply: "said it"}}
"""


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live process (zombies are dead: they hold nothing)."""
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        state, parent = stat.rpartition(")")[2].split()[:2]
        if state not in ("Z", "X"):
            found[int(entry)] = int(parent)
    return found


def _descendants(root: int) -> set[int]:
    parents = _parents()
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _commands(pids: set[int]) -> list[str]:
    shown = []
    for pid in sorted(pids):
        try:
            shown.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            shown.append(f"{pid} (gone)")
    return shown


def _alive(pids: set[int]) -> set[int]:
    return pids & set(_parents())


def _pipe_ends_within(child: subprocess.Popen[bytes], seconds: float) -> bool:
    """Whether both of `child`'s output pipes reach their end within `seconds`."""
    assert child.stdout is not None
    assert child.stderr is not None
    open_pipes = [child.stdout, child.stderr]
    give_up = time.monotonic() + seconds
    while open_pipes and time.monotonic() < give_up:
        ready, _, _ = select.select(open_pipes, [], [], 0.1)
        for pipe in ready:
            if not os.read(pipe.fileno(), 65536):
                open_pipes.remove(pipe)
    return not open_pipes


def _kill_and_check(command: list[str], cwd: Path, wait_for: int) -> None:
    """Start `command`, wait for `wait_for` descendants, SIGKILL it, check nothing is left."""
    child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen: set[int] = set()
        give_up = time.monotonic() + 60
        while len(seen) < wait_for and time.monotonic() < give_up and child.poll() is None:
            seen |= _descendants(child.pid)
            time.sleep(0.1)
        time.sleep(1.0)  # the workers are running their cases
        seen |= _descendants(child.pid)
        assert len(seen) >= wait_for, f"only {len(seen)} process(es) started"
        os.kill(child.pid, signal.SIGKILL)
        killed = time.monotonic()
        child.wait()
        ended = _pipe_ends_within(child, 5.0)
        left = _alive(seen)
        while left and time.monotonic() < killed + 5.0:  # one may still be on its way out
            time.sleep(0.05)
            left = _alive(seen)
    finally:
        for pid in _alive(_descendants(child.pid)) | _alive(seen if "seen" in dir() else set()):
            os.kill(pid, signal.SIGKILL)  # clean up after a failure
        child.kill()
        child.wait()
    assert left == set(), f"still running 5 s after the kill: {_commands(left)}"
    assert ended, "the batch's output pipes are still held open"


def _sleepy(tmp_path: Path, delay: float = 60) -> Path:
    (tmp_path / "echo.script.yaml").write_text(SLEEPY_SCRIPT.format(delay=delay), encoding="utf-8")
    pipeline = tmp_path / "echo.yaml"
    pipeline.write_text((DATA / "echo.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    return pipeline


def test_a_killed_process_batch_leaves_no_worker_and_no_resource_tracker(tmp_path: Path) -> None:
    pipeline = _sleepy(tmp_path)
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": f"sleepy {i}"} for i in range(6)])
    command = [sys.executable, "-m", "converge_dsl", "run", str(pipeline), "--cases", str(cases)]
    command += ["--out", str(tmp_path / "out.jsonl"), "--executor", "process", "--concurrency", "2"]
    command += ["--max-model-calls", "100"]  # a batch-wide cap: a pool in shared memory too
    _kill_and_check(command, tmp_path, wait_for=3)  # two workers and the resource tracker


def test_a_killed_long_run_leaves_nothing(tmp_path: Path) -> None:
    pipeline = _sleepy(tmp_path)
    command = [sys.executable, "-m", "converge_dsl", "run", str(pipeline)]
    command += ["--input", "word=sleepy"]
    _kill_and_check(command, tmp_path, wait_for=0)


def test_the_cases_of_a_killed_worker_are_run_again_by_a_new_pool(tmp_path: Path) -> None:
    """A worker killed mid-batch breaks the pool: a new one is started (forked from the
    batch again, its results file open by then) and every case has one result line."""
    pipeline = _sleepy(tmp_path, delay=1.5)
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": f"sleepy {i}"} for i in range(4)])
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "converge_dsl", "run", str(pipeline), "--cases", str(cases)]
    command += ["--out", str(out), "--executor", "process", "--concurrency", "2"]
    child = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        workers: set[int] = set()
        give_up = time.monotonic() + 60
        while len(workers) < 2 and time.monotonic() < give_up and child.poll() is None:
            workers = {
                pid
                for pid in _descendants(child.pid)
                if "resource_tracker" not in " ".join(_commands({pid}))
            }
            time.sleep(0.05)
        assert len(workers) >= 2, f"workers: {_commands(workers)}"
        time.sleep(0.3)  # each is in its first case's 1.5 s nap
        os.kill(min(workers), signal.SIGKILL)
        _, stderr = child.communicate(timeout=120)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 0, stderr.decode()
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["index"] for line in lines) == [0, 1, 2, 3]
    assert {line["stop_reason"] for line in lines} == {"converged"}
