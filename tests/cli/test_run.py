"""`converge-dsl run` interrupted (Ctrl-C, SIGINT): a first Ctrl-C stops the run with
`cancelled` and its result; one while no engine runs interrupts at once, and a program
reading standard output still gets a document."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from converge_dsl.runtime import RunResultDocument

# One llm suggestor whose model answers only after a minute: a run to interrupt.
PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: slow
models:
  default: {adapter: scripted, script: slow.script.yaml}
suggestors:
  - name: answer
    kind: llm
    model: default
    target: hypotheses
    prompt: {user: "Say something"}
    output: {format: text, id: answer}
"""
SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
default: {reply: "too late", delay_s: 60}
"""


def _interrupted(tmp_path: Path, *options: str) -> tuple[int, str, str]:
    """Run the slow pipeline, send it a real SIGINT once its model call started."""
    (tmp_path / "slow.yaml").write_text(PIPELINE)
    (tmp_path / "slow.script.yaml").write_text(SCRIPT)
    trace = tmp_path / "trace.jsonl"
    command = [sys.executable, "-m", "converge_dsl", "run", "slow.yaml", "--trace", str(trace)]
    child = subprocess.Popen(
        [*command, *options],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and child.poll() is None:
            if trace.exists() and "model_call_started" in trace.read_text():
                break
            time.sleep(0.02)
        assert child.poll() is None, "the run ended before it was interrupted"
        os.kill(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, out, err


def test_a_first_ctrl_c_stops_the_run_cancelled_with_what_it_reached(tmp_path: Path) -> None:
    """The engine hears it: the run ends as any run does (its stop in the trace, its
    diagnostic at the suggestor in flight), and the document says what it reached."""
    code, out, err = _interrupted(tmp_path, "--format", "json")
    assert code == 130
    assert err.startswith("interrupted: stopping the run (press Ctrl-C again to quit at once)\n")
    assert "Traceback" not in err
    document = RunResultDocument.model_validate(json.loads(out))
    assert document.stop_reason == "cancelled"
    assert (document.cycles, document.usage.model_calls) == (1, 1)
    diagnostic = document.diagnostics[0]
    assert (diagnostic.code, diagnostic.suggestor, diagnostic.line) == ("CD908", "answer", 7)
    last = json.loads((tmp_path / "trace.jsonl").read_text().splitlines()[-1])
    assert (last["type"], last["stop_reason"]) == ("run_finished", "cancelled")


@pytest.mark.parametrize("quiet", [False, True])
def test_a_first_ctrl_c_prints_the_human_result(tmp_path: Path, quiet: bool) -> None:
    code, out, err = _interrupted(tmp_path, *(["-q"] if quiet else []))
    assert code == 130
    assert "stop: cancelled after 1 cycle(s)" in out
    assert "interrupted: stopping the run" in err
    assert "error[CD908]" in err


def test_a_ctrl_c_while_no_engine_runs_interrupts_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the pipeline loads (no engine to ask), Ctrl-C interrupts as before: a
    program reading standard output still gets a document."""
    import asyncio
    import io

    import converge_dsl.runtime
    from converge_dsl.cli import run

    async def loading(options: object) -> None:
        asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGINT)
        await asyncio.sleep(30)

    monkeypatch.setattr(converge_dsl.runtime, "run_pipeline", loading)
    (tmp_path / "slow.yaml").write_text(PIPELINE)
    (tmp_path / "slow.script.yaml").write_text(SCRIPT)
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", str(tmp_path / "slow.yaml"), "--format", "json"], out, err)
    assert (code, err.getvalue()) == (130, "interrupted\n")
    document = RunResultDocument.model_validate(json.loads(out.getvalue()))
    assert document.stop_reason == "cancelled"
    assert [(d.code, d.line) for d in document.diagnostics] == [("CD908", 1)]
    assert "interrupted (Ctrl-C, SIGINT)" in document.diagnostics[0].message
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_before_the_loop_runs_the_run_leaves_no_coroutine_unawaited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C while `asyncio.run` made its loop: the run's coroutine, made before, was
    never awaited, and Python said so on standard error ("RuntimeWarning: coroutine
    'run_pipeline' was never awaited"), after `interrupted` (once in the README's tests)."""
    import asyncio
    import gc
    import io
    import warnings

    from converge_dsl.cli import run

    def interrupted_as_it_starts(coroutine: object, **_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(asyncio, "run", interrupted_as_it_starts)
    (tmp_path / "slow.yaml").write_text(PIPELINE)
    (tmp_path / "slow.script.yaml").write_text(SCRIPT)
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = run(["run", str(tmp_path / "slow.yaml"), "--format", "json"], out, err)
        gc.collect()
    assert (code, err.getvalue()) == (130, "interrupted\n")
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


def test_a_ctrl_c_while_the_result_is_written_is_held_until_it_is_whole() -> None:
    """After a first Ctrl-C a second raises at once; one that came while the document
    was written cut it short (or left standard output empty)."""
    from converge_dsl.cli._interrupts import interrupts_held

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    written: list[str] = []

    def write() -> None:
        with interrupts_held():
            written.append("{")
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # where the interrupt would land, were it not held
            written.append("}")

    with pytest.raises(KeyboardInterrupt):
        write()
    assert written == ["{", "}"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# The console entry point, with a byte on descriptor TOLD (the test's pipe) once `main`
# holds Ctrl-C: a signal before that lands in the interpreter's own start, which no code
# of ours can catch (under load, 1 ms after a byte written before `main` was too soon).
_STARTED = (
    "import os, sys\n"
    "import converge_dsl.cli as cli\n"
    "hold = cli._hold_interrupts\n"
    "def told():\n"
    "    hold()\n"
    "    os.write(TOLD, b'.')\n"
    "cli._hold_interrupts = told\n"
    "sys.argv[1:] = ['run', 'slow.yaml', '--format', 'json']\n"
    "cli.main()\n"
)


@pytest.mark.parametrize("delay", [0.001, 0.003, 0.01, 0.02, 0.04, 0.08, 0.16])
def test_a_ctrl_c_as_the_command_starts_ends_as_a_later_one(tmp_path: Path, delay: float) -> None:
    """A Ctrl-C while `run`'s modules loaded or its arguments were read ended with a
    traceback out of an import, or with `interrupted` and no document on standard output.
    The moment it lands varies with the machine; each must end the same way."""
    (tmp_path / "slow.yaml").write_text(PIPELINE)
    (tmp_path / "slow.script.yaml").write_text(SCRIPT)
    ready, told = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", _STARTED.replace("TOLD", str(told))],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        pass_fds=(told,),
    )
    os.close(told)
    try:
        assert os.read(ready, 1) == b"."
        time.sleep(delay)
        os.kill(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        os.close(ready)
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "Traceback" not in err, err
    # before the engine runs it is raised at once; once it runs, it asks the run to stop
    # (which then says how it was cancelled)
    lines = err.splitlines()
    asked = "interrupted: stopping the run (press Ctrl-C again to quit at once)" in lines
    assert child.returncode == 130, err
    assert asked or lines[-1] == "interrupted", err
    assert RunResultDocument.model_validate(json.loads(out)).stop_reason == "cancelled"


def test_a_second_ctrl_c_as_the_command_starts_interrupts_at_once() -> None:
    """A second Ctrl-C while the first was held at start was swallowed too."""
    from converge_dsl import _entry

    entry = _entry.EntryPoint()
    before = signal.getsignal(signal.SIGINT)
    try:
        entry.hold(signal.SIGINT, None)
        with pytest.raises(KeyboardInterrupt):
            entry.hold(signal.SIGINT, None)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
