"""Judge metrics: rubric, verdicts, bad verdicts, the answer cache and cassettes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.errors import PipelineInvalid
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply
from converge_dsl.pipetest import parse_verdict, read_eval_file

from .conftest import DATA, ROOT, cli, expected, untimed

EVAL = DATA / "eval"
EXAMPLE = ROOT / "pipelines" / "support-triage" / "triage.eval.yaml"

_JUDGED = """\
apiVersion: converge-dsl/v1
kind: Evaluation
pipeline: classify.yaml
dataset: tickets.jsonl
judges:
  grader: {judge}
metrics:
  - name: category
    exact: {{key: labels, field: /category, expected: category}}
  - name: fits
    judge:
      model: grader
      verdict: {verdict}
      rubric: |
        Ticket: {{{{ case.inputs.ticket }}}}
        Label: {{{{ run.facts.labels[0].data.category }}}}
        Expected: {{{{ case.expected.category }}}}
    threshold: 0.5
"""


def _folder(tmp_path: Path, judge: str, script: str | None = None, verdict: str = "score") -> Path:
    for name in ("classify.yaml", "classify.script.yaml", "tickets.jsonl"):
        shutil.copy(EVAL / name, tmp_path / name)
    if script is not None:
        (tmp_path / "judge.script.yaml").write_text(
            "apiVersion: converge-dsl/v1\nkind: ModelScript\n" + script, encoding="utf-8"
        )
    path = tmp_path / "judged.eval.yaml"
    path.write_text(_JUDGED.format(judge=judge, verdict=verdict), encoding="utf-8")
    return path


_SCRIPTED = "{adapter: scripted, script: judge.script.yaml}"
# Fair when the label is the expected one: a judge that can tell.
_FAIR = """\
rules:
  - match: {regex: "Label: billing\\nExpected: billing"}
    reply: '{"score": 1, "reason": "right"}'
  - match: {regex: "Label: bug\\nExpected: bug"}
    reply: '{"score": 1, "reason": "right"}'
  - match: {regex: "Label: account\\nExpected: account"}
    reply: '{"score": 1, "reason": "right"}'
default: {reply: '{"score": 0.25, "reason": "wrong label"}'}
"""


def test_a_judge_scores_each_case_from_its_rendered_rubric(tmp_path: Path) -> None:
    path = _folder(tmp_path, _SCRIPTED, _FAIR)
    code, out, err = cli("eval", path, "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    fits = {m["name"]: m for m in result["metrics"]}["fits"]
    assert fits["mean"] == 1.0
    assert {c["reasons"]["fits"] for c in result["cases"]} == {"right"}
    assert result["judge_usage"]["model_calls"] == 10
    assert result["usage"]["input_tokens"] < result["judge_usage"]["input_tokens"]


def test_a_judge_sees_what_the_run_proposed(tmp_path: Path) -> None:
    # Under the second prompt the "error" billing tickets come back as bugs: the judge,
    # reading the run's facts, gives exactly those three cases its low score.
    path = _folder(tmp_path, _SCRIPTED, _FAIR)
    shutil.copy(EVAL / "classify-v2.yaml", tmp_path / "classify.yaml")
    _, out, _ = cli("eval", path, "--format", "json")
    cases = json.loads(out)["cases"]
    low = sorted(c["name"] for c in cases if c["scores"]["fits"] < 1)
    assert low == ["double-charge", "refund-failed", "vat-number"]
    assert {c["scores"]["fits"] for c in cases if c["name"] in low} == {0.25}


def test_a_pass_fail_verdict_scores_one_or_zero(tmp_path: Path) -> None:
    script = 'default: {reply: \'{"pass": false, "reason": "no"}\'}\n'
    path = _folder(tmp_path, _SCRIPTED, script, verdict="pass")
    code, out, _ = cli("eval", path)
    assert code == 1
    assert "FAIL fits: 0.000 [0.000, 0.278] over 10 cases (threshold 0.5)" in out


_SCORE = '{"score": a number from 0 to 1, "reason": "..."}'


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("looks fine to me", "the answer is not JSON: 'looks fine to me'"),
        (
            '{\\"score\\": 1.5, \\"reason\\": \\"great\\"}',
            "the verdict's score 1.5 is not in [0, 1]",
        ),
        ('{\\"score\\": 1}', f"the verdict gives no `reason` (text); a judge answers {_SCORE}"),
        (
            '{\\"score\\": \\"0.5\\"}',
            'the verdict gives `score` as text ("0.5") where a number is needed and gives no '
            f"`reason` (text); a judge answers {_SCORE}",
        ),
    ],
)
def test_a_bad_verdict_is_a_located_error_that_fails_the_evaluation(
    tmp_path: Path, reply: str, problem: str
) -> None:
    path = _folder(tmp_path, _SCRIPTED, f'default: {{reply: "{reply}"}}\n')
    code, out, _ = cli("eval", path)
    assert code == 1
    first = next(line for line in out.splitlines() if line.startswith("error["))
    assert first == (
        f"error[{codes.EVAL_BAD_VERDICT}]: judge 'grader' of metric 'fits', case "
        f"'double-charge': {problem}"
    )
    assert "judged.eval.yaml:12:7\n" in out
    assert out.count(f"error[{codes.EVAL_BAD_VERDICT}]") == 3
    assert "... and 7 more judge error(s) (all in --format json)" in out


def test_parse_verdict_unwraps_a_fenced_block_and_checks_the_form() -> None:
    assert parse_verdict('```json\n{"score": 0.5, "reason": "half"}\n```', "score") == (
        0.5,
        "half",
        None,
    )
    assert parse_verdict('{"pass": true, "reason": "ok"}', "pass") == (1.0, "ok", None)
    assert parse_verdict('{"pass": "yes", "reason": "ok"}', "pass")[2] == (
        'the verdict gives `pass` as text ("yes") where true or false is needed; '
        'a judge answers {"pass": true or false, "reason": "..."}'
    )
    assert parse_verdict('{"score": true, "reason": "ok"}', "score")[2] == (
        f"the verdict gives `score` as a boolean (true) where a number is needed; "
        f"a judge answers {_SCORE}"
    )
    assert parse_verdict('{"score": null, "reason": ["x"]}', "score")[2] == (
        "the verdict gives `score` as null where a number is needed and gives `reason` "
        f'as a list (["x"]) where text is needed; a judge answers {_SCORE}'
    )
    assert parse_verdict("{}", "score")[2] == (
        f"the verdict gives no `score` (a number) and gives no `reason` (text); "
        f"a judge answers {_SCORE}"
    )
    assert parse_verdict("[1]", "score")[2] == "the answer is not a JSON object"


def test_a_judged_evaluation_reruns_byte_identically_from_its_cassette(tmp_path: Path) -> None:
    path = _folder(tmp_path, _SCRIPTED, _FAIR)
    cassette = tmp_path / "recorded"
    code, recorded, _ = cli("eval", path, "--record", cassette, "--format", "json", "--no-timings")
    assert code == 0
    judged = (cassette / "judges.jsonl").read_text().splitlines()
    assert len(judged) == 10  # one judge call per case
    # The judge now says otherwise: only the cassette gives the recorded verdicts.
    (tmp_path / "judge.script.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\n"
        'default: {reply: \'{"score": 0, "reason": "changed"}\'}\n'
    )
    code, replayed, err = cli(
        "eval", path, "--replay", cassette, "--format", "json", "--no-timings"
    )
    assert code == 0, err
    assert replayed == recorded
    for form in ("human", "junit"):
        once = cli("eval", path, "--replay", cassette, "--format", form, "--no-timings")[1]
        again = cli("eval", path, "--replay", cassette, "--format", form, "--no-timings")[1]
        assert once == again


def test_a_replayed_judge_missing_an_answer_is_a_located_judge_failure(tmp_path: Path) -> None:
    path = _folder(tmp_path, _SCRIPTED, _FAIR)
    cassette = tmp_path / "recorded"
    assert cli("eval", path, "--record", cassette)[0] == 0
    (cassette / "judges.jsonl").write_text("")
    code, out, _ = cli("eval", path, "--replay", cassette)
    assert code == 1
    assert f"error[{codes.EVAL_JUDGE_FAILED}]: judge 'grader' of metric 'fits'" in out
    assert "E_REPLAY_MISS" in out


def test_an_openai_compatible_judge_is_cached_and_answers_offline(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with FakeProviderServer() as server:
        server.reset(FakeReply(text='{"score": 0.75, "reason": "mostly"}'))
        judge = f"{{adapter: openai, base_url: '{server.openai_base_url}', model: judge-1}}"
        path = _folder(tmp_path, judge)
        code, first, err = cli(
            "eval", path, "--cache", "--cache-dir", cache, "--format", "json", "--no-timings"
        )
        assert code == 0, err
        asked = len(server.requests)
    assert asked == 10
    # The server is gone: every verdict comes from the answer cache.
    code, again, err = cli(
        "eval", path, "--offline", "--cache-dir", cache, "--format", "json", "--no-timings"
    )
    assert code == 0, err
    assert again == first
    fits = {m["name"]: m for m in json.loads(again)["metrics"]}["fits"]
    assert fits["mean"] == 0.75


def test_an_openai_compatible_judge_records_a_cassette_that_replays_offline(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "recorded"
    with FakeProviderServer() as server:
        server.reset(FakeReply(text='{"score": 1, "reason": "fine"}'))
        judge = f"{{adapter: openai, base_url: '{server.openai_base_url}', model: judge-1}}"
        path = _folder(tmp_path, judge)
        recorded = cli("eval", path, "--record", cassette, "--format", "json", "--no-timings")[1]
    replayed = cli("eval", path, "--replay", cassette, "--format", "json", "--no-timings")[1]
    assert replayed == recorded


def test_a_rubric_and_a_judge_name_are_checked_when_the_file_is_read(tmp_path: Path) -> None:
    path = _folder(tmp_path, _SCRIPTED, _FAIR)
    text = path.read_text().replace("model: grader", "model: grade")
    path.write_text(text.replace("case.inputs.ticket", "cases.inputs.ticket"))
    with pytest.raises(PipelineInvalid) as caught:
        read_eval_file(path)
    found = {(d.code, d.message, d.hint) for d in caught.value.diagnostics}
    assert (
        codes.EVAL_UNKNOWN_MODEL,
        "no judge model 'grade' is declared under `judges`",
        "did you mean 'grader'?",
    ) in found
    assert (
        codes.EVAL_BAD_RUBRIC,
        "rubric of metric 'fits' reads 'cases', which it is not given",
        "did you mean 'case'?",
    ) in found


def test_a_judge_whose_script_is_not_there_is_located(tmp_path: Path) -> None:
    path = _folder(tmp_path, "{adapter: scripted, script: judg.script.yaml}", _FAIR)
    with pytest.raises(PipelineInvalid) as caught:
        read_eval_file(path)
    (problem,) = caught.value.diagnostics
    assert problem.code == codes.EVAL_BAD_MODEL
    assert problem.message == "script file 'judg.script.yaml' is not there"
    assert problem.hint == "did you mean 'judge.script.yaml'?"
    assert (problem.line, problem.column) == (6, 39)


def test_the_shipped_example_has_a_judged_metric_that_passes_offline() -> None:
    code, out, _ = cli("eval", EXAMPLE, "--format", "json", "--offline")
    assert code == 0
    summary = {m["name"]: m for m in json.loads(out)["metrics"]}["summary"]
    assert summary["mean"] == 1.0
    assert summary["cases"] == 52


def test_judge_calls_count_toward_the_evaluations_caps_and_a_refused_one_is_not_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = _folder(tmp_path, _SCRIPTED, _FAIR)
    # The process executor runs every case (10 calls) before the judges: 5 calls are left.
    args = ("--max-model-calls", "15", "--executor", "process", "--no-timings")
    code, out, err = cli("eval", path.name, *args, "--format", "json")
    assert code == 1, err
    result = json.loads(out)
    assert "not_run" not in result
    assert result["judge_usage"]["model_calls"] == 5
    assert len(result["not_judged"]) == 5
    assert {p["code"] for p in result["problems"]} == {codes.EVAL_NOT_JUDGED}
    assert [c["scores"]["fits"] for c in result["cases"]].count(None) == 5
    code, human, _ = cli("eval", path.name, *args)
    assert code == 1
    assert untimed(human) == expected("eval-not-judged.txt", untimed(human))


def test_on_one_event_loop_cases_and_judges_share_the_evaluations_caps(tmp_path: Path) -> None:
    path = _folder(tmp_path, _SCRIPTED, _FAIR)
    code, out, _ = cli("eval", path, "--max-model-calls", "15", "--format", "json")
    assert code == 1
    result = json.loads(out)
    # A case that converged made its one call; one its call was refused made none.
    pipeline_calls = sum(c["stop_reason"] == "converged" for c in result["cases"])
    assert pipeline_calls < 10
    assert pipeline_calls + result["judge_usage"]["model_calls"] <= 15
    assert result.get("not_run") or result.get("not_judged")
    tokens = cli("eval", path, "--max-tokens", "400", "--format", "json")[1]
    spent = json.loads(tokens)
    used = sum(spent["usage"].values()) + spent["judge_usage"]["input_tokens"]
    assert used + spent["judge_usage"]["output_tokens"] <= 400
    assert spent.get("not_judged") or spent.get("not_run")


def test_a_cases_own_budget_does_not_cover_its_judging(tmp_path: Path) -> None:
    path = _folder(tmp_path, _SCRIPTED, _FAIR)
    code, out, err = cli("eval", path, "--case-max-model-calls", "1", "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["judge_usage"]["model_calls"] == 10
    assert "not_judged" not in result


def test_each_judge_call_is_a_chat_span_under_the_evaluation_with_its_case_and_metric(
    tmp_path: Path,
) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from converge_dsl.pipetest import EvalSettings, run_configurations
    from converge_dsl.runtime import OtelOptions

    exporter = InMemorySpanExporter()
    with FakeProviderServer() as server:
        server.reset(FakeReply(text='{"score": 1, "reason": "fine"}'))
        judge = f"{{adapter: openai, base_url: '{server.openai_base_url}', model: judge-1}}"
        evaluation = read_eval_file(_folder(tmp_path, judge))
        settings = EvalSettings(env={}, otel=OtelOptions(exporter=exporter, content=True))
        (result,) = run_configurations(evaluation, settings)
    assert result.passed
    spans = exporter.get_finished_spans()
    (outer,) = [s for s in spans if s.parent is None]
    assert outer.name == "evaluate judged.eval.yaml"
    assert outer.attributes is not None
    assert outer.attributes["converge_dsl.eval.cases"] == 10
    calls = [s for s in spans if s.parent is not None]
    assert len(calls) == 10
    assert {s.parent.span_id for s in calls if s.parent} == {outer.context.span_id}
    cases = set()
    for span in calls:
        attributes = dict(span.attributes or {})
        assert span.name == "chat judge-1"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "judge-1"
        assert attributes["gen_ai.usage.input_tokens"] == 10
        assert attributes["server.address"] == "127.0.0.1"
        assert attributes["converge_dsl.eval.metric"] == "fits"
        assert attributes["converge_dsl.suggestor.name"] == "judge:fits"
        assert "Ticket:" in str(attributes["gen_ai.input.messages"])  # --otel-content
        cases.add(attributes["converge_dsl.eval.case"])
    assert cases == {case.name for case in evaluation.cases}


def test_an_evaluation_not_traced_makes_no_span(tmp_path: Path) -> None:
    code, _, err = cli("eval", _folder(tmp_path, _SCRIPTED, _FAIR), "--otel-content")
    assert code == 3
    assert "--otel-content needs --otel" in err


def test_a_case_expecting_a_refusal_is_neither_judged_nor_scored_by_other_metrics(
    tmp_path: Path,
) -> None:
    # Before, the probe was judged (an eleventh judge call, a paid one with a real
    # model) and scored 0 by the regex and schema metrics, which it failed for having
    # no facts: its refusal counted against their means.
    path = _folder(tmp_path, _SCRIPTED, _FAIR)
    probe = '{"name": "probe", "inputs": {"nope": 1}, "expected": {"stop_reason": "usage_error"}}'
    with (tmp_path / "tickets.jsonl").open("a", encoding="utf-8") as cases:
        cases.write(probe + "\n")
    text = path.read_text(encoding="utf-8") + (
        "  - name: named\n    regex: {key: labels, field: /category, pattern: '^[a-z]+$'}\n"
        "    threshold: 1\n"
        "  - name: shaped\n    schema: {key: labels, schema: {type: object}}\n    threshold: 1\n"
        "  - name: refused\n    stop_reason: {equals: usage_error}\n"
    )
    path.write_text(text, encoding="utf-8")
    code, out, err = cli("eval", path, "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["judge_usage"]["model_calls"] == 10
    scored = result["cases"][-1]
    assert (scored["name"], scored["stop_reason"]) == ("probe", "usage_error")
    assert scored["scores"] == {
        "category": None,
        "fits": None,
        "named": None,
        "shaped": None,
        "refused": 1.0,
    }
    assert "reasons" not in scored
    assert "error" not in scored
    metrics = {m["name"]: (m["mean"], m["cases"], m["passed"]) for m in result["metrics"]}
    assert metrics["named"] == metrics["shaped"] == metrics["fits"] == (1.0, 10, True)
    assert metrics["refused"] == (1 / 11, 11, True)  # no threshold: it measures refusals
