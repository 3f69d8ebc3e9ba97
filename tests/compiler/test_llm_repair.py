"""`output.retries`: an unusable llm answer is asked again with its errors, inside the budget.

A scripted model answers off-schema first (`off_schema: true`, `times: 1`) and
right second. With `retries: 1` the run converges in two calls, the second traced
with purpose `repair` and carrying the errors located in the first answer; under
`max_model_calls: 1` the repair is refused and the run stops with the budget's
diagnostic; `retries: 0` runs exactly as a pipeline that does not write it; a
repaired run recorded and replayed gives byte-identical output.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run as cli_run
from converge_dsl.engine import Context, Fact, PromotionRecord, Provenance
from converge_dsl.models import Message, ModelRequest, ModelReturn, Usage
from converge_dsl.runtime._report_data import report_data

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: repaired
models:
  m: {{adapter: scripted, script: p.script.yaml}}
{budget}seeds:
  - {{id: market, content: tea}}
suggestors:
  - name: scan
    kind: llm
    model: m
    dependencies: [seeds]
    target: competitors
    prompt: {{user: "List competitors of {{{{ facts.seeds[0].content }}}}"}}
    output:
      format: json
      schema:
        type: array
        items: {{type: object, required: [name], properties: {{name: {{type: string}}}}}}
      id: "c-{{{{ index }}}}"
      content: "{{{{ item.name }}}}"
{retries}"""

SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {contains: competitors}
    times: 1
    reply: '[{"title": "Twinings"}, {"name": 7}]'
    off_schema: true
default: {reply: '[{"name": "Twinings"}, {"name": "Lipton"}]'}
"""


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli_run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def write(tmp_path: Path, retries: str = "", budget: str = "") -> Path:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE.format(retries=retries, budget=budget), encoding="utf-8")
    (tmp_path / "p.script.yaml").write_text(SCRIPT, encoding="utf-8")
    return pipeline


def trace_of(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [line.get("event", line) for line in lines]


def model_calls(trace: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (e["call"], e["purpose"], e["status"])
        for e in trace
        if e.get("type") == "model_call_finished"
    ]


def test_an_off_schema_answer_is_repaired_in_two_calls(tmp_path: Path) -> None:
    pipeline = write(tmp_path, "      retries: 1\n")
    trace = tmp_path / "t.jsonl"
    code, out, err = cli("run", pipeline, "--format", "json", "--trace", trace)
    assert code == 0, err
    result = json.loads(out)
    assert result["stop_reason"] == "converged"
    assert [f["content"] for f in result["facts"]["competitors"]] == ["Twinings", "Lipton"]
    assert "diagnostic" not in result["facts"]
    assert model_calls(trace_of(trace)) == [(1, "answer", "ok"), (2, "repair", "ok")]
    calls = report_data(trace)["mc"]  # the report's model calls say what each was for
    assert [(call[0], call[11], call[12]) for call in calls] == [
        (1, "answer", None),
        (2, "repair", None),
    ]


def test_a_repair_the_budget_refuses_stops_with_the_budget_diagnostic(tmp_path: Path) -> None:
    pipeline = write(tmp_path, "      retries: 1\n", "budget: {max_model_calls: 1}\n")
    code, out, err = cli("run", pipeline, "--format", "json")
    result = json.loads(out)
    assert result["stop_reason"] == "model_call_budget_exhausted", err
    assert "competitors" not in result["facts"]
    assert code != 0
    assert "max_model_calls" in err


def test_retries_0_runs_as_a_pipeline_that_does_not_write_it(tmp_path: Path) -> None:
    runs = []
    trace = tmp_path / "t.jsonl"
    for retries in ("      # (no retries)\n", "      retries: 0\n"):  # the same lines
        code, out, err = cli("run", write(tmp_path, retries), "--format", "json", "--trace", trace)
        # what differs between two runs of any pipeline: clocks, and the source excerpts
        varying = ("timing", "time", "excerpts")
        events = [{k: v for k, v in e.items() if k not in varying} for e in trace_of(trace)]
        runs.append((code, out, err, [json.dumps(e, sort_keys=True) for e in events]))
    assert runs[0][:3] == runs[1][:3]
    assert len(runs[0][3]) == 10
    assert runs[0][3] == runs[1][3]
    result = json.loads(runs[0][1])
    (diagnostic,) = result["facts"]["diagnostic"]
    assert diagnostic["id"] == "llm:invalid-output:scan:1"
    assert model_calls(trace_of(trace)) == [(1, "answer", "ok")]


def test_a_repaired_run_replays_byte_identically(tmp_path: Path) -> None:
    pipeline = write(tmp_path, "      retries: 2\n")
    cassette = tmp_path / "c.jsonl"
    code, recorded, err = cli("run", pipeline, "--format", "json", "--record", cassette)
    assert code == 0, err
    assert cassette.read_text(encoding="utf-8").count('"role": "assistant"') == 3  # 2 in a repair
    replay_code, replayed, replay_err = cli(
        "run", pipeline, "--format", "json", "--replay", cassette
    )
    assert replay_code == code, replay_err
    assert replayed == recorded
    assert [f["content"] for f in json.loads(replayed)["facts"]["competitors"]] == [
        "Twinings",
        "Lipton",
    ]


class _Answers:
    """Answers the requests in turn from `answers`; remembers them."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    def model_id(self) -> str:
        return "fake-1"

    async def call(self, request: ModelRequest) -> ModelReturn:
        self.requests.append(request)
        text = self.answers[min(len(self.requests), len(self.answers)) - 1]
        return ModelReturn(Message.text("assistant", text), Usage(3, 5), model_id="fake-1")

    async def aclose(self) -> None:
        return None


BODY = """\
models: {m: {adapter: scripted, script: s.yaml}}
suggestors:
  - name: scan
    kind: llm
    model: m
    dependencies: [seeds]
    target: competitors
    prompt: {user: "Competitors?"}
    output:
      format: json
      schema: {type: array, items: {type: object, required: [name]}}
      content: "{{ item.name }}"
      retries: 2
"""


def _execute(compile_yaml: Any, model: _Answers) -> list[str]:
    compiled = compile_yaml(BODY, models={"m": model})
    seed = Fact(
        "seeds", "m", "tea", Provenance("seeds@t"), 1.0, PromotionRecord("seed", "pipeline", 0)
    )
    effect = asyncio.run(compiled.suggestors[0].execute(Context.from_facts([seed], cycle=1)))
    return [f"{p.key}/{p.id}" for p in effect.proposals]


@pytest.mark.parametrize(
    ("first", "told"),
    [
        (
            '[{"name": "a"}, {"title": "b"}, {"title": "c"}]',
            "- at /1/name: 'name' is a required property\n"
            "- at /2/name: 'name' is a required property\n",
        ),
        ('{"name": "a"}', "- at the root: {'name': 'a'} is not of type 'array'\n"),
        ('[{"name": "a"},]', "- answer is not JSON: Expecting value: line 1 column 16 (char 15)\n"),
    ],
)
def test_the_repair_request_tells_the_errors_located_in_the_answer(
    compile_yaml: Any, first: str, told: str
) -> None:
    model = _Answers(first, '[{"name": "a"}]')
    assert _execute(compile_yaml, model) == ["competitors/scan-0"]
    first_request, repair = model.requests
    assert repair.messages[:-2] == first_request.messages
    assert repair.messages[-2] == Message.text("assistant", first)
    asked = repair.messages[-1].text_content
    assert asked.startswith("Your answer cannot be used:\n" + told)
    assert asked.endswith("Answer again with the whole corrected answer, as JSON only.")
    assert repair.response_schema == first_request.response_schema


def test_when_every_attempt_is_unusable_the_last_one_is_the_diagnostic(
    compile_yaml: Any,
) -> None:
    model = _Answers("no", "still no", '[{"title": "x"}]')
    assert _execute(compile_yaml, model) == ["diagnostic/llm:invalid-output:scan:1"]
    assert len(model.requests) == 3
