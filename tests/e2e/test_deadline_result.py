"""The deadline covers building the result: a run stopped at `max_wall_s` holding a huge
context is printed in a time of the order of writing it, with what it has.

The pipeline below adds 10,000 facts a model call, two suggestors feeding each
other until the deadline, with every other budget out of reach. Its human
listing is written from the result a chunk of facts at a time, never through
the whole run-result document (one pydantic model per fact, then one string
of the whole listing), which took longer than the run itself and gigabytes.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run
from converge_dsl.engine import engine as engine_module

LINES = "\\n".join(f"line {i}" for i in range(10000))
SCRIPT = f"""\
apiVersion: converge-dsl/v1
kind: ModelScript
default: {{reply: "{LINES}"}}
"""
PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: grow
budget:
  max_cycles: 100000000
  max_facts: 100000000
  max_model_calls: 100000000
  max_tokens: 100000000000
  max_wall_s: {wall}
models:
  default: {{adapter: scripted, script: grow.script.yaml}}
seeds:
  - {{id: s, key: seeds, content: start}}
suggestors:
  - name: ping
    kind: llm
    when: "true"
    model: default
    dependencies: [strategies, seeds]
    target: hypotheses
    prompt: {{user: "more {{{{ facts.strategies | length }}}}"}}
    output: {{format: lines, id: "h-{{{{ facts.strategies | length }}}}-{{{{ index }}}}"}}
  - name: pong
    kind: llm
    when: "true"
    model: default
    dependencies: [hypotheses]
    target: strategies
    prompt: {{user: "more {{{{ facts.hypotheses | length }}}}"}}
    output: {{format: lines, id: "s-{{{{ facts.hypotheses | length }}}}-{{{{ index }}}}"}}
"""


class _Counting(io.TextIOBase):
    """Standard output that keeps only its size and its last few thousand characters."""

    def __init__(self) -> None:
        self.size = 0
        self.tail = ""

    def write(self, text: str) -> int:
        self.size += len(text)
        self.tail = (self.tail + text)[-4000:]
        return len(text)


def _grow(folder: Path, wall: float) -> Path:
    (folder / "grow.script.yaml").write_text(SCRIPT, encoding="utf-8")
    path = folder / "grow.yaml"
    path.write_text(PIPELINE.format(wall=wall), encoding="utf-8")
    return path


def _timed_run(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, *argv: str
) -> tuple[int, float, float, _Counting]:
    """Exit code, CPU seconds the engine ran, CPU seconds from its stop to the end of the
    command, and what stdout got. CPU time, not wall time: on a loaded machine the run
    gets less CPU and so makes fewer facts, and printing them costs less in step, so the
    ratio of the two does not depend on the load."""
    stopped: list[float] = []
    run_engine = engine_module.Engine.run

    async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        stopped.append(time.process_time())
        result = await run_engine(self, *args, **kwargs)
        stopped.append(time.process_time())
        return result

    monkeypatch.setattr(engine_module.Engine, "run", timed)
    out = _Counting()
    code = run(["run", str(pipeline), "--quiet", *argv], out, io.StringIO())
    ended = time.process_time()
    return code, stopped[1] - stopped[0], ended - stopped[1], out


@pytest.mark.parametrize("output", ["human", "json"])
def test_a_run_stopped_at_its_deadline_prints_its_result_in_a_fraction_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    pipeline = _grow(tmp_path, wall=3)
    code, ran, after, out = _timed_run(pipeline, monkeypatch, "--format", output)
    assert code == 4
    # At least one model call's 10,000 facts (a loaded machine makes fewer in the time).
    assert out.size > 400_000, "the run holds a large context"
    # Printing the facts costs a small part of making them (it cost more than the run).
    assert after < max(0.4 * ran, 0.5), f"ran {ran:.1f} s of CPU, then {after:.1f} s"
    if output == "human":
        assert "stop: time_budget_exhausted after " in out.tail


def test_the_listing_never_builds_the_whole_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge_dsl.runtime import RunOutcome
    from converge_dsl.runtime import _documents as documents

    built: list[int] = []
    construct = documents._unvalidated

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return construct(*args, **kwargs)

    monkeypatch.setattr(documents, "_unvalidated", counted)

    def refuse(self: RunOutcome) -> None:
        raise AssertionError("the listing built the whole run-result document")

    monkeypatch.setattr(RunOutcome, "document", property(refuse))
    out = io.StringIO()
    code = run(["run", str(_grow(tmp_path, wall=0.5)), "--quiet"], out, io.StringIO())
    assert code == 4
    assert built == []
    assert out.getvalue().startswith(
        "\nseeds (1)\n  - s: start\n    confidence 1.00  from seeds@grow\n"
    )
    assert "\nstop: time_budget_exhausted after " in out.getvalue()
