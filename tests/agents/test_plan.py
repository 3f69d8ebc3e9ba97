"""`plan` against real scripted runs: the same turn machine, the same compaction turns."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import Recorder, Recording, fact

from converge_dsl.agents import AgentSuggestor
from converge_dsl.agents._planner import MAX_ASSUMED_CHARS, sized_reply, sized_result
from converge_dsl.agents._policy import message_text
from converge_dsl.cli import run as cli
from converge_dsl.compiler import compile_pipeline
from converge_dsl.engine.budget import Budget, UsageMeter
from converge_dsl.engine.context import Context
from converge_dsl.models import ScriptedModel
from converge_dsl.runtime import SUGGESTOR_KINDS
from converge_dsl.validation import load_pipeline

EXPECTED = Path(__file__).parent / "expected"
SUMMARY = "s" * 40

PIPELINE = """apiVersion: converge-dsl/v1
kind: Pipeline
name: agree
models:
  main: {{adapter: scripted, script: main.script.yaml}}
  cheap: {{adapter: scripted, script: cheap.script.yaml}}
seeds:
  - {{id: s1, content: "{seed}"}}
  - {{id: c1, key: constraints, content: "keep it short"}}
suggestors:
  - name: rev
    kind: agent
    model: main
    target: evaluations
    goal: "Review {{{{ count('seeds') }}}} seeds"
    max_turns: {turns}
    context_window: {window}
    contributors:
      - {{kind: reminder, every: 3, text: "Reminder: {{{{ goal }}}}"}}
      - {{kind: facts, keys: [constraints], persist: false}}
{summarizer}"""

SUMMARIZER = """    summarizer:
      model: cheap
      clear_turns_older_than: 2
      budget: {max_calls: 2, max_input_chars: 5000, timeout_s: 5,
               expected_summary_bytes: 40, cost_floor_multiple: 2}
"""


def write(tmp_path: Path, *, seed: str, window: int, turns: int, summarizer: str) -> Path:
    path = tmp_path / "agree.yaml"
    path.write_text(PIPELINE.format(seed=seed, window=window, turns=turns, summarizer=summarizer))
    (tmp_path / "main.script.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\n"
        "default: {tool_calls: [{name: context.read, input: {key: seeds}}]}\n"
    )
    (tmp_path / "cheap.script.yaml").write_text(
        f"apiVersion: converge-dsl/v1\nkind: ModelScript\ndefault: {{reply: {SUMMARY}}}\n"
    )
    return path


def real_run(path: Path) -> tuple[list[Any], int, int]:
    """Compaction events of a real scripted run, and its reply and tool-result sizes."""
    document = load_pipeline(path)
    main = Recording(ScriptedModel.from_file(path.parent / "main.script.yaml"))
    cheap = ScriptedModel.from_file(path.parent / "cheap.script.yaml")
    sink = Recorder()
    compiled = compile_pipeline(
        document,
        inputs={},
        models={"main": main, "cheap": cheap},
        usage=UsageMeter(Budget()),
        events=sink,
        kinds=SUGGESTOR_KINDS,
    )
    agent = next(s for s in compiled.suggestors if isinstance(s, AgentSuggestor))
    facts = [fact(p.key, p.id, str(p.content)) for p in compiled.seeds]
    asyncio.run(agent.execute(Context.from_facts(facts, cycle=1)))
    reply = len(message_text(main.returns[0].message))
    tool = next(m for m in main.requests[1].messages if m.role == "tool")
    return sink.of("agent_compaction"), reply, len(message_text(tool))


def plan_json(path: Path, *args: str) -> list[dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    code = cli(["plan", str(path), "--format", "json", *args], out, err)
    assert code == 0, err.getvalue()
    result: list[dict[str, Any]] = json.loads(out.getvalue())
    return result


@pytest.mark.parametrize(
    ("seed", "window", "turns", "summarizer"),
    [
        ("a" * 120, 700, 12, ""),  # normal compactions, stubs
        ("a" * 120, 420, 9, ""),  # emergency compactions
        ("b" * 200, 650, 12, SUMMARIZER),  # summaries, then budget_exhausted stubs
        ("c" * 60, 480, 10, SUMMARIZER),
    ],
)
def test_plan_agrees_with_a_real_run(
    tmp_path: Path, seed: str, window: int, turns: int, summarizer: str
) -> None:
    path = write(tmp_path, seed=seed, window=window, turns=turns, summarizer=summarizer)
    real, reply, tool = real_run(path)
    assert real, "each case must compact at least once"
    plan = plan_json(
        path, "--assume-reply-chars", str(reply), "--assume-tool-result-chars", str(tool)
    )
    planned = [
        (row["turn"], c["level"], c["first_turn"], c["last_turn"], c["replacement"])
        for row in plan[0]["turns"]
        for c in row["compactions"]
    ]
    assert planned == [(c.turn, c.level, c.first_turn, c.last_turn, c.replacement) for c in real]


def test_plan_reports_summary_budget_decisions(tmp_path: Path) -> None:
    path = write(tmp_path, seed="b" * 200, window=650, turns=12, summarizer=SUMMARIZER)
    plan = plan_json(path, "--assume-reply-chars", "60", "--assume-tool-result-chars", "300")[0]
    decisions = [s["decision"] for row in plan["turns"] for s in row["summaries"]]
    assert decisions[:2] == ["call", "call"]
    assert set(decisions[2:]) == {"budget_exhausted"}
    fired = [(row["turn"], [name for name, _ in row["contributors"]]) for row in plan["turns"]]
    assert fired[0] == (0, ["facts-1"])
    assert fired[3] == (3, ["reminder-0"])
    assert plan["turns"][0]["contributors"] == [["facts-1", False]]


def test_plan_human_output_of_the_example_pipeline() -> None:
    root = Path(__file__).parents[2]
    out, err = io.StringIO(), io.StringIO()
    code = cli(
        [
            "plan",
            str(root / "pipelines" / "agent-review.yaml"),
            "--assume-reply-chars",
            "150",
            "--assume-tool-result-chars",
            "250",
        ],
        out,
        err,
    )
    assert code == 0, err.getvalue()
    assert out.getvalue() == (EXPECTED / "plan_agent_review.txt").read_text()


def test_plan_usage_errors(tmp_path: Path) -> None:
    path = write(tmp_path, seed="a", window=700, turns=3, summarizer="")
    out, err = io.StringIO(), io.StringIO()
    assert cli(["plan", str(path), "--agent", "revv"], out, err) == 3
    assert "no agent named 'revv'" in err.getvalue()
    assert "did you mean 'rev'?" in err.getvalue()
    assert cli(["plan", str(path), "--turns", "-1"], out, err) == 3


@pytest.mark.parametrize("option", ["--assume-reply-chars", "--assume-tool-result-chars"])
def test_plan_bounds_the_assumed_sizes(tmp_path: Path, option: str) -> None:
    path = write(tmp_path, seed="a", window=700, turns=3, summarizer="")
    out, err = io.StringIO(), io.StringIO()
    assert cli(["plan", str(path), option, "999999999999"], out, err) == 3
    assert err.getvalue().startswith(
        f"error: {option} must be at most {MAX_ASSUMED_CHARS:,} (got 999,999,999,999)\n"
    )
    plans = plan_json(path, option, str(MAX_ASSUMED_CHARS))
    assert plans[0]["assumptions"][option.removeprefix("--assume-").replace("-", "_")] == (
        MAX_ASSUMED_CHARS
    )


def test_sized_messages_are_built_once_per_size() -> None:
    assert sized_reply(1000) is sized_reply(1000)
    assert sized_result(1000) is sized_result(1000)
    with pytest.raises(ValueError, match="exceeds"):
        sized_reply(MAX_ASSUMED_CHARS + 1)
