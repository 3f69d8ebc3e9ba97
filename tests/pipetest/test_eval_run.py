"""Running an evaluation: each case's pipeline models recorded into its own cassette and
replayed offline (`eval --record DIR`, `--replay DIR`), on every executor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

from .conftest import DATA, cli, expected

EVAL = DATA / "eval"

_JUDGED = """\
apiVersion: converge-dsl/v1
kind: Evaluation
pipeline: classify.yaml
dataset: tickets.jsonl
judges:
  grader: {adapter: openai, base_url: 'URL', model: judge-1}
metrics:
  - name: category
    exact: {key: labels, field: /category, expected: category}
  - name: fits
    judge:
      model: grader
      rubric: "Label: {{ run.facts.labels[0].data.category }}"
"""


def _served(tmp_path: Path, url: str, judge: str) -> Path:
    """The classify evaluation whose pipeline model is the server at `url`, its judge
    the one at `judge`."""
    for name in ("classify.yaml", "tickets.jsonl"):
        shutil.copy(EVAL / name, tmp_path / name)
    pipeline = tmp_path / "classify.yaml"
    remote = f"{{adapter: openai, base_url: '{url}', model: m-1}}"
    text = pipeline.read_text().replace("{adapter: scripted, script: classify.script.yaml}", remote)
    pipeline.write_text(text)
    path = tmp_path / "judged.eval.yaml"
    path.write_text(_JUDGED.replace("URL", judge))
    return path


@pytest.mark.parametrize("executor", ["local", "process"])
def test_an_evaluation_over_a_server_records_and_replays_offline_byte_identically(
    tmp_path: Path, executor: str
) -> None:
    tapes = tmp_path / "tapes"
    with FakeProviderServer() as server, FakeProviderServer() as judge:
        server.reset(FakeReply(text='[{"category": "billing"}]'))
        judge.reset(FakeReply(text='{"score": 1, "reason": "fine"}'))
        path = _served(tmp_path, server.openai_base_url, judge.openai_base_url)
        args = ("--format", "json", "--no-timings", "--executor", executor, "--concurrency", "2")
        code, recorded, err = cli("eval", path, "--record", tapes, *args)
        assert (len(server.requests), len(judge.requests)) == (10, 10)
    assert code == 0, err
    document = json.loads(recorded)
    assert document["metrics"][0]["mean"] == 0.4  # 4 of the 10 tickets are billing
    assert document["judge_usage"]["model_calls"] == 10
    names = sorted(p.name for p in (tapes / "cases").iterdir())
    assert names == sorted(f"{c['name']}.jsonl" for c in document["cases"])
    assert len((tapes / "judges.jsonl").read_text().splitlines()) == 10
    # The server is gone: every answer, the pipeline's and the judge's, comes from DIR.
    code, replayed, err = cli("eval", path, "--replay", tapes, *args)
    assert (code, err) == (0, "")
    assert replayed == recorded
    again = cli("eval", path, "--replay", tapes, "--format", "json", "--no-timings")[1]
    assert again == recorded  # and on the local executor


def test_a_case_missing_from_the_cassette_folder_is_a_located_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with FakeProviderServer() as server, FakeProviderServer() as judge:
        server.reset(FakeReply(text='[{"category": "bug"}]'))
        judge.reset(FakeReply(text='{"score": 1, "reason": "fine"}'))
        path = _served(tmp_path, server.openai_base_url, judge.openai_base_url)
        assert cli("eval", path.name, "--record", "tapes")[0] == 0
    (tmp_path / "tapes" / "cases" / "vat-number.jsonl").unlink()
    code, out, err = cli("eval", path.name, "--replay", "tapes")
    assert (code, out) == (2, "")
    assert f"error[{codes.CASE_CASSETTE_MISSING}]: case 'vat-number' has no cassette" in err
    assert err == expected("eval-cassette-missing.txt", err)


def test_each_configuration_records_its_cases_into_a_folder_of_its_own(tmp_path: Path) -> None:
    for name in ("classify.yaml", "classify.script.yaml", "tickets.jsonl"):
        shutil.copy(EVAL / name, tmp_path / name)
    path = tmp_path / "two.eval.yaml"
    path.write_text(
        (EVAL / "classify.eval.yaml").read_text()
        + "configurations:\n"
        + "  - name: shipped\n"
        + "  - name: all-bugs\n"
        + "    models: {default: {adapter: scripted, script: classify.script.yaml}}\n"
    )
    tapes = tmp_path / "tapes"
    recorded = cli("eval", path, "--record", tapes, "--format", "json", "--no-timings")[1]
    assert sorted(p.name for p in (tapes / "cases").iterdir()) == ["all-bugs", "shipped"]
    assert len(list((tapes / "cases" / "all-bugs").iterdir())) == 10
    (tmp_path / "classify.script.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\ndefault: {reply: '[]'}\n"
    )
    replayed = cli("eval", path, "--replay", tapes, "--format", "json", "--no-timings")[1]
    assert replayed == recorded


def test_record_and_replay_take_folders(tmp_path: Path) -> None:
    for name in ("classify.yaml", "classify.script.yaml", "tickets.jsonl", "classify.eval.yaml"):
        shutil.copy(EVAL / name, tmp_path / name)
    path = tmp_path / "classify.eval.yaml"
    afile = tmp_path / "a.jsonl"
    afile.write_text("")
    code, _, err = cli("eval", path, "--replay", afile)
    assert code == 3
    assert "--replay: " in err
    assert "is not a folder of cassettes" in err
    code, _, err = cli("eval", path, "--record", afile)
    assert code == 3
    assert "is not a folder" in err


def test_on_ray_the_cases_record_per_case_and_the_judges_get_what_the_cases_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ray = pytest.importorskip("ray", reason="the `ray` extra is not installed")
    monkeypatch.chdir(tmp_path)
    for name in ("classify.yaml", "classify.script.yaml", "tickets.jsonl"):
        shutil.copy(EVAL / name, tmp_path / name)
    (tmp_path / "judge.script.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\n"
        'default: {reply: \'{"score": 1, "reason": "fine"}\'}\n'
    )
    judge = "{adapter: scripted, script: judge.script.yaml}"
    Path("judged.eval.yaml").write_text(
        _JUDGED.replace("{adapter: openai, base_url: 'URL', model: judge-1}", judge)
    )
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        args = ("--executor", "ray", "--format", "json", "--no-timings")
        code, recorded, err = cli("eval", "judged.eval.yaml", "--record", "tapes", *args)
        capped = cli("eval", "judged.eval.yaml", "--max-model-calls", "15", *args)
    finally:
        ray.shutdown()
    assert code == 0, err
    assert len(list((tmp_path / "tapes" / "cases").iterdir())) == 10
    replayed = cli(
        "eval", "judged.eval.yaml", "--replay", "tapes", "--format", "json", "--no-timings"
    )
    assert replayed[1] == recorded
    assert capped[0] == 1
    result = json.loads(capped[1])
    assert result["judge_usage"]["model_calls"] == 5
    assert len(result["not_judged"]) == 5


def test_a_ctrl_c_while_judging_cases_run_elsewhere_is_one_clean_interruption(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio
    import signal

    from converge_dsl.pipetest import EvalSettings, read_eval_file, run_configurations
    from converge_dsl.pipetest._eval_judge import Judges

    judged: list[str] = []
    closed: list[bool] = []

    async def verdicts(self: Judges, case: object, run: object) -> dict[str, object]:
        async def judge(n: int) -> None:
            await asyncio.sleep(0)
            if len(judged) == 2 and n == 1:
                signal.raise_signal(signal.SIGINT)  # what a Ctrl-C does while a judge works
            await asyncio.sleep(0.001)

        judged.append(str(case))
        await asyncio.gather(*(judge(n) for n in range(3)))
        return {}

    async def aclose(self: Judges) -> None:
        closed.append(True)

    monkeypatch.setattr(Judges, "verdicts", verdicts)
    monkeypatch.setattr(Judges, "aclose", aclose)
    evaluation = read_eval_file(EVAL / "classify.eval.yaml")
    settings = EvalSettings(concurrency=2, executor="process")
    with pytest.raises(KeyboardInterrupt):
        run_configurations(evaluation, settings)
    assert len(judged) == 2
    assert closed == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_case_s_run_error_names_its_place_on_one_line() -> None:
    from converge_dsl.pipetest._eval_run import _run_error

    body = {
        "stop_reason": "error",
        "diagnostics": [
            {"severity": "error", "code": "CD911", "message": "E", "file": "c\nx.yaml"}
            | {"line": 18, "column": 5}
        ],
    }
    error, diagnostic = _run_error(body)
    assert error == "CD911: E (at c\\nx.yaml:18:5)"
    assert diagnostic == {"code": "CD911", "message": "E", "file": "c\nx.yaml"} | {
        "line": 18,
        "column": 5,
    }
    assert _run_error({"stop_reason": "error"}) == ("the run stopped with an error", None)
    assert _run_error({"stop_reason": "converged", "diagnostics": []}) == (None, None)


def test_a_case_whose_run_never_started_fails_the_evaluation_naming_why(tmp_path: Path) -> None:
    # A case missing a required input stopped with `usage_error`: it scored 0 with no
    # word of why, and an evaluation without thresholds passed. (An input the pipeline
    # lacks is refused before any case runs, CD802.)
    for name in ("classify.yaml", "classify.script.yaml"):
        shutil.copy(EVAL / name, tmp_path / name)
    pipeline = tmp_path / "classify.yaml"
    pipeline.write_text(pipeline.read_text().replace("text}", "text, required: true}"))
    (tmp_path / "cases.jsonl").write_text('{"name": "a", "inputs": {}}\n')
    (tmp_path / "e.eval.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: Evaluation\npipeline: classify.yaml\n"
        "dataset: cases.jsonl\nmetrics:\n  - name: converged\n"
        "    stop_reason: {equals: converged}\n"
    )
    code, out, _ = cli("eval", tmp_path / "e.eval.yaml")
    assert code == 1
    assert "errors: 1 case(s) stopped with an error:\n  a: CD338: input 'ticket' is required" in out
    assert out.endswith("overall: 0.000: FAILED (1 case(s) stopped with an error)\n")


def test_a_refusal_the_evaluation_measures_is_not_an_error(tmp_path: Path) -> None:
    # An evaluation of input refusal: its stop_reason metric asks for usage_error, so a
    # case stopping so scores 1 and is not an error (it failed the evaluation).
    for name in ("classify.yaml", "classify.script.yaml"):
        shutil.copy(EVAL / name, tmp_path / name)
    refused = '"expected": {"stop_reason": "usage_error"}'
    (tmp_path / "cases.jsonl").write_text(
        '{"name": "a", "inputs": {"nope": "x"}, ' + refused + "}\n"
    )
    (tmp_path / "e.eval.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: Evaluation\npipeline: classify.yaml\n"
        "dataset: cases.jsonl\nmetrics:\n  - name: refused\n"
        "    stop_reason: {equals: usage_error}\n"
    )
    code, out, _ = cli("eval", tmp_path / "e.eval.yaml")
    assert (code, "errors:" in out) == (0, False), out
    assert out.endswith("overall: 1.000: passed\n")
    from converge_dsl.pipetest._eval_run import _run_error

    assert _run_error({"stop_reason": "invalid"}, {"invalid"}) == (None, None)
    assert _run_error({"stop_reason": "invalid"}, {"usage_error"})[0] is not None


_PROBES = (
    '{"name": "ok", "inputs": {"ticket": "charged twice"}, "expected": {"category": "billing"}}\n'
    '{"name": "probe", "inputs": {"nope": "x"}, "expected": {"stop_reason": "usage_error"}}\n'
)


def _probes(tmp_path: Path, cases: str) -> Path:
    """The classify evaluation over `cases`, measuring its category and that it converged."""
    for name in ("classify.yaml", "classify.script.yaml"):
        shutil.copy(EVAL / name, tmp_path / name)
    (tmp_path / "cases.jsonl").write_text(cases)
    path = tmp_path / "e.eval.yaml"
    path.write_text(
        "apiVersion: converge-dsl/v1\nkind: Evaluation\npipeline: classify.yaml\n"
        "dataset: cases.jsonl\nmetrics:\n"
        "  - name: category\n    exact: {key: labels, field: /category, expected: category}\n"
        "  - name: converged\n    stop_reason: {equals: converged}\n    threshold: 1\n"
    )
    return path


def test_a_case_expecting_a_refusal_that_gets_it_passes(tmp_path: Path) -> None:
    # Without a `stop_reason: {equals: usage_error}` metric, the probe's refusal was a
    # run error ("CD338: unknown input 'nope'") and failed the evaluation; the
    # `converged` metric scored it 0 too.
    code, out, _ = cli("eval", _probes(tmp_path, _PROBES), "--format", "json")
    assert code == 0, out
    result = json.loads(out)
    probe = result["cases"][1]
    assert (probe["stop_reason"], "error" in probe) == ("usage_error", False)
    assert probe["scores"] == {"category": None, "converged": None}
    assert (result["passed"], result["overall"]) == (True, 1.0)


def test_a_case_expecting_a_refusal_is_refused_on_the_process_executor_too(
    tmp_path: Path,
) -> None:
    # `run_cases` refuses an undeclared input before any case runs (as `run --cases`
    # does): the probe giving one on purpose is refused alone, not the evaluation.
    args = ("--format", "json", "--executor", "process")
    code, out, err = cli("eval", _probes(tmp_path, _PROBES), *args)
    assert code == 0, err
    probe = json.loads(out)["cases"][1]
    assert (probe["stop_reason"], "error" in probe) == ("usage_error", False)


def test_a_case_expecting_a_refusal_that_runs_fails_the_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It converged, no metric scored it, and the evaluation passed. Then it was filed
    # under "errors: 1 case(s) stopped with an error" with a mean of 1 (no worst case):
    # its run stopped with no error; it failed what it expected, and scores 0.
    cases = _PROBES.replace('{"nope": "x"}', '{"ticket": "charged twice"}')
    _probes(tmp_path, cases)
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("eval", "e.eval.yaml", "--no-timings")
    assert code == 1
    assert out == expected("eval-refusal-that-ran.txt", out)
    code, out, _ = cli("eval", "e.eval.yaml", "--format", "json")
    probe = json.loads(out)["cases"][1]
    said = "expected its run to be refused (usage_error); it stopped with converged"
    assert (probe["failed_expectation"], "error" in probe) == (said, False)
    # The overall read 1.000 with its one failure a case scoring 0: each metric's
    # mean counts it as a 0 there (1 of 2 cases), in the text, the JSON and the page.
    assert json.loads(out)["overall"] == 0.5
    code, out, _ = cli("eval", "e.eval.yaml", "--format", "html")
    assert '"overall":0.5,' in out
    code, out, _ = cli("eval", "e.eval.yaml", "--format", "junit")
    assert 'message="1 case(s) failed their expectation"' in out


def test_a_failed_expectation_a_metric_scored_counts_once_in_the_overall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The `usage_error` metric scores the probe that converged (0) and the case refused
    # (1): its mean is 0.500 over 2 cases, and so is the overall. The probe's 0 was
    # counted again as a case no metric scored: 0.333.
    cases = (
        '{"name": "probe", "inputs": {"ticket": "charged twice"}, '
        '"expected": {"stop_reason": "usage_error"}}\n'
        '{"name": "real", "inputs": {"nope": "x"}, "expected": {"stop_reason": "usage_error"}}\n'
    )
    path = _probes(tmp_path, cases)
    path.write_text(
        "apiVersion: converge-dsl/v1\nkind: Evaluation\npipeline: classify.yaml\n"
        "dataset: cases.jsonl\nmetrics:\n"
        "  - name: refused\n    stop_reason: {equals: usage_error}\n"
    )
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("eval", "e.eval.yaml", "--no-timings")
    assert code == 1
    assert "  ok   refused: 0.500 [0.095, 0.905] over 2 cases\n" in out
    assert out.endswith("overall: 0.500: FAILED (1 case(s) failed their expectation)\n")
    code, out, _ = cli("eval", "e.eval.yaml", "--format", "json")
    assert json.loads(out)["overall"] == 0.5
    code, out, _ = cli("eval", "e.eval.yaml", "--format", "html")
    assert '"overall":0.5,' in out


def test_a_case_expecting_a_refusal_whose_run_failed_scores_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its run stopped with an error, not refused: every metric null, a mean of 1, and
    # not among the worst cases; it failed what it expected, and scores 0.
    _probes(tmp_path, _PROBES.replace('{"nope": "x"}', '{"ticket": "charged twice"}'))
    (tmp_path / "classify.script.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules: []\n"
    )
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("eval", "e.eval.yaml", "--no-timings")
    assert code == 1
    assert "worst cases:\n  ok: 0.000 (category, converged)\n  probe: 0.000" in out
    code, out, _ = cli("eval", "e.eval.yaml", "--format", "json")
    probe = json.loads(out)["cases"][1]
    said = "expected its run to be refused (usage_error); it stopped with error"
    assert (probe["failed_expectation"], "error" in probe) == (said, True)


def test_a_probe_refused_without_a_run_is_refused_in_its_runs_words(tmp_path: Path) -> None:
    # Refused without a run (on the process executor, or with models or a budget of its
    # own), a probe said `unknown input "it's"`: Python's quoting, no hint; its run
    # (the local executor) said it with a hint, and every message quotes as `written`.
    import converge_dsl
    from converge_dsl.errors import UsageError
    from converge_dsl.pipetest._eval_run import EvalSettings, _cases
    from converge_dsl.pipetest._eval_spec import read_eval_file

    evaluation = read_eval_file(_probes(tmp_path, _PROBES.replace('"nope"', '"it\'s"')))
    cases = _cases(evaluation, evaluation.configurations[0], EvalSettings(executor="process"))
    problem = cases[1].problem
    assert isinstance(problem, UsageError)
    with pytest.raises(UsageError) as caught:
        converge_dsl.load(tmp_path / "classify.yaml").run({"it's": "x"})
    ran = caught.value
    assert (problem.code, problem.message, problem.hint) == (ran.code, ran.message, ran.hint)
    assert (ran.message, ran.hint) == ("unknown input 'it\\x27s'", "declared inputs: ticket")
