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
EXAMPLES = Path(__file__).parents[2] / "pipelines"
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


def real_run(path: Path) -> tuple[list[Any], int, int, UsageMeter]:
    """Compaction events of a real scripted run, its reply and tool-result sizes, its meter."""
    document = load_pipeline(path)
    main = Recording(ScriptedModel.from_file(path.parent / "main.script.yaml"))
    cheap = ScriptedModel.from_file(path.parent / "cheap.script.yaml")
    sink = Recorder()
    meter = UsageMeter(Budget())
    compiled = compile_pipeline(
        document,
        inputs={},
        models={"main": main, "cheap": cheap},
        usage=meter,
        events=sink,
        kinds=SUGGESTOR_KINDS,
    )
    agent = next(s for s in compiled.suggestors if isinstance(s, AgentSuggestor))
    facts = [fact(p.key, p.id, str(p.content)) for p in compiled.seeds]
    asyncio.run(agent.execute(Context.from_facts(facts, cycle=1)))
    reply = len(message_text(main.returns[0].message))
    tool = next(m for m in main.requests[1].messages if m.role == "tool")
    return sink.of("agent_compaction"), reply, len(message_text(tool)), meter


def plan_json(path: Path, *args: str) -> list[dict[str, Any]]:
    """The plans of `plan --format json`."""
    plans: list[dict[str, Any]] = plan_document(path, *args)["plans"]
    return plans


def plan_document(path: Path, *args: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code = cli(["plan", str(path), "--format", "json", *args], out, err)
    assert code == 0, err.getvalue()
    result: dict[str, Any] = json.loads(out.getvalue())
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
    real, _, tool, meter = real_run(path)
    assert real, "each case must compact at least once"
    # The replies come from the agent's model script; only the tool results are assumed.
    document = plan_document(path, "--assume-tool-result-chars", str(tool))
    plan = document["plans"]
    planned = [
        (row["turn"], c["level"], c["first_turn"], c["last_turn"], c["replacement"])
        for row in plan[0]["turns"]
        for c in row["compactions"]
    ]
    assert planned == [(c.turn, c.level, c.first_turn, c.last_turn, c.replacement) for c in real]
    assert plan[0]["replies"] == "model script main.script.yaml"
    used = meter.totals
    assert (plan[0]["model_calls"], plan[0]["tokens"]) == (used.model_calls, used.tokens)
    assert document["total"] == {
        "model_calls": used.model_calls,
        "tokens": used.tokens,
        "max_model_calls": None,
        "max_tokens": None,
    }


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
        f"error[CD333]: {option} must be at most {MAX_ASSUMED_CHARS:,} (got 999,999,999,999)\n"
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


HTTP_AGENT = """apiVersion: converge-dsl/v1
kind: Pipeline
name: remote
models:
  remote: {adapter: openai, base_url: "http://127.0.0.1:9/v1", model: m,
           accounts: [{name: main, api_key_env: TEST_API_KEY}]}
  local: {adapter: scripted, script: local.script.yaml}
budget: {max_model_calls: 6, max_tokens: 900}
seeds:
  - {id: s1, content: "a seed"}
suggestors:
  - {name: far, kind: agent, model: remote, target: evaluations, goal: Review, max_turns: 4}
  - {name: near, kind: agent, model: local, target: evaluations, goal: Review, max_turns: 9}
"""
LOCAL_SCRIPT = """apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {suggestor: near, turn: 0}
    tool_calls: [{name: context.read, input: {key: seeds}}]
  - match: {suggestor: near, turn: 1}
    tool_calls: [{name: finish, input: {summary: done}}]
"""


def _remote(tmp_path: Path, script: str = LOCAL_SCRIPT) -> Path:
    path = tmp_path / "remote.yaml"
    path.write_text(HTTP_AGENT)
    (tmp_path / "local.script.yaml").write_text(script)
    return path


def test_plan_reads_the_script_of_a_scripted_agent_and_assumes_the_others(tmp_path: Path) -> None:
    document = plan_document(_remote(tmp_path), "--assume-reply-chars", "100")
    far, near = document["plans"]
    assert (far["replies"], far["status"], len(far["turns"])) == ("assumed", "max_turns", 4)
    assert far["model_calls"] == 4
    # each turn: what the request measures, and the assumed reply of 100 characters
    assert far["tokens"] == sum(row["estimated_tokens"] for row in far["turns"]) + 4 * 25
    assert (near["replies"], near["status"], len(near["turns"])) == (
        "model script local.script.yaml",
        "finished",
        2,
    )
    assert near["model_calls"] == 2
    assert document["total"] == {
        "model_calls": 6,
        "tokens": far["tokens"] + near["tokens"],
        "max_model_calls": 6,
        "max_tokens": 900,
    }


def test_plan_totals_the_agents_against_the_budget(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert cli(["plan", str(_remote(tmp_path)), "--assume-reply-chars", "100"], out, err) == 0
    lines = out.getvalue().splitlines()
    plans = plan_document(_remote(tmp_path), "--assume-reply-chars", "100")
    tokens = plans["total"]["tokens"]
    far = plans["plans"][0]["tokens"]
    assert f"expects: 4 model calls (4 turns, 0 summary calls), ~{far:,} tokens per execution" in (
        lines
    )
    assert lines[-1] == (
        f"total: 6 model calls, ~{tokens:,} tokens for one execution of each of the 2 agents; "
        f"within budget.max_model_calls 6; over budget.max_tokens 900 by {tokens - 900:,}"
    )


def test_a_request_the_script_cannot_answer_stops_the_plan_there(tmp_path: Path) -> None:
    script = LOCAL_SCRIPT[: LOCAL_SCRIPT.index("  - match: {suggestor: near, turn: 1}")]
    plan = plan_json(_remote(tmp_path, script), "--agent", "near")[0]
    assert (plan["status"], plan["model_calls"], len(plan["turns"])) == ("model_error", 1, 2)
    assert plan["detail"].startswith(
        "E_SCRIPT: no rule of model script local.script.yaml matches the request"
    )


def test_plan_reads_the_agents_script_under_the_given_environments_cap(tmp_path: Path) -> None:
    from converge_dsl.agents import plan_pipeline
    from converge_dsl.errors import ConvergeError

    pipeline = tmp_path / "agent-review.yaml"
    pipeline.write_bytes((EXAMPLES / "agent-review.yaml").read_bytes())
    script = EXAMPLES / "agent-review.script.yaml"
    (tmp_path / script.name).write_bytes(script.read_bytes())
    document = load_pipeline(pipeline)
    assert plan_pipeline(document, inputs={}, env={}).plans
    with pytest.raises(ConvergeError, match="the limit is 100"):
        plan_pipeline(document, inputs={}, env={"CONVERGE_DSL_MAX_FILE_BYTES": "100"})
