"""`converge-dsl eval`: aggregates, thresholds, and the comparison with a baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import DATA, cli

EVAL = DATA / "eval"


def test_the_evaluation_passes_its_thresholds_with_a_confusion_matrix() -> None:
    code, out, _ = cli("eval", EVAL / "classify.eval.yaml")
    assert code == 0, out
    assert "ok   category: 1.000 [0.722, 1.000] over 10 cases (threshold 0.9)" in out
    assert "  billing            0         4         0" in out
    assert out.splitlines()[-1] == "overall: 1.000 (threshold 0.9): passed"


def test_a_changed_prompt_regresses_exactly_three_known_cases(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    code, _, _ = cli("eval", EVAL / "classify.eval.yaml", "--format", "json", "-o", base)
    assert code == 0
    code, out, _ = cli("eval", EVAL / "classify-v2.eval.yaml", "--baseline", base)
    assert code == 1
    listed = out.split("against the baseline:\n", 1)[1].splitlines()
    assert listed == [
        "  regressed: double-charge / category: 1.000 -> 0.000",
        "  regressed: refund-failed / category: 1.000 -> 0.000",
        "  regressed: vat-number / category: 1.000 -> 0.000",
    ]
    code, out, _ = cli(
        "eval", EVAL / "classify-v2.eval.yaml", "--baseline", base, "--format", "json"
    )
    changes = json.loads(out)["changes"]
    assert [(c["case"], c["verdict"]) for c in changes] == [
        ("double-charge", "regressed"),
        ("refund-failed", "regressed"),
        ("vat-number", "regressed"),
    ]


def test_the_same_evaluation_against_its_own_baseline_shows_no_change(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    cli("eval", EVAL / "classify.eval.yaml", "--format", "json", "-o", base)
    code, out, _ = cli("eval", EVAL / "classify.eval.yaml", "--baseline", base)
    assert code == 0
    assert out.endswith("against the baseline:\n  no change\n")


def test_a_baseline_that_is_not_a_result_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    code, _, err = cli("eval", EVAL / "classify.eval.yaml", "--baseline", bad)
    assert code == 3
    assert "is not an evaluation result" in err


@pytest.mark.parametrize(
    ("document", "said"),
    [
        (
            '{"cases": [{"name": "vat-number", "scores": {"category": "high"}}]}',
            "/cases/0/scores/category is not a score",
        ),
        (
            '{"cases": [{"name": "vat-number", "scores": {"category": true}}]}',
            "/cases/0/scores/category is not a score",
        ),
        ('{"cases": ["vat-number"]}', "/cases/0 is not a case with a `name`"),
        ('{"cases": [{"name": "vat-number", "scores": [1]}]}', "/cases/0/scores is not an object"),
        ('{"configurations": [{"cases": []}, 5]}', "/configurations/1/cases is not a list"),
        (
            '{"cases": [{"name": "vat-number", "scores": {"category": 1%s}}]}' % ("0" * 400),
            "/cases/0/scores/category is not a score",
        ),
    ],
    ids=[
        "text-score",
        "boolean-score",
        "text-case",
        "list-scores",
        "bad-configuration",
        "huge-integer-score",
    ],
)
def test_a_baseline_edited_out_of_shape_is_refused_at_its_pointer(
    tmp_path: Path, document: str, said: str
) -> None:
    # These ended in a TypeError or AttributeError traceback once the cases had run (a
    # boolean score was read as 1).
    bad = tmp_path / "bad.json"
    bad.write_text(document)
    code, out, err = cli("eval", EVAL / "classify.eval.yaml", "--baseline", bad)
    assert (code, out) == (3, "")
    assert f"error[CD335]: baseline {bad} is not an evaluation result: {said}" in err


def test_a_baseline_whose_scores_are_null_compares_as_one_without_scores(
    tmp_path: Path,
) -> None:
    # `compare` reads `"scores": null` as no scores; the check before it refused it.
    base = tmp_path / "base.json"
    base.write_text(
        '{"cases": [{"name": "vat-number", "scores": null},'
        ' {"name": "login-loop", "scores": {"category": 1.0}}]}'
    )
    _, out, err = cli("eval", EVAL / "classify.eval.yaml", "--baseline", base)
    assert "CD335" not in err
    assert "against the baseline:" in out


def test_an_invalid_evaluation_file_exits_2_with_located_errors(tmp_path: Path) -> None:
    path = tmp_path / "x.eval.yaml"
    path.write_text("apiVersion: converge-dsl/v1\nkind: Evaluation\npipeline: p.yaml\n")
    code, _, err = cli("eval", path)
    assert code == 2
    assert "x.eval.yaml:1:1" in err or "x.eval.yaml:" in err


def test_junit_output_has_one_testcase_per_metric() -> None:
    from xml.etree import ElementTree as ET

    code, out, _ = cli("eval", EVAL / "classify-v2.eval.yaml", "--format", "junit")
    assert code == 1
    suite = ET.fromstring(out)
    names = [(c.get("name"), c.find("failure") is not None) for c in suite.iter("testcase")]
    assert names == [
        ("category", True),
        ("conforms", False),
        ("converged", False),
        ("tokens", False),
        ("cases", False),
        ("overall", False),
    ]


def test_an_output_that_is_a_file_the_evaluation_reads_is_refused_before_it_runs(
    tmp_path: Path,
) -> None:
    for path in EVAL.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    evaluation = tmp_path / "classify.eval.yaml"
    for name, what in (
        ("classify.eval.yaml", "the evaluation file"),
        ("tickets.jsonl", "its dataset"),
        ("classify.yaml", "its pipeline"),
    ):
        kept = (tmp_path / name).read_bytes()
        code, out, err = cli("eval", evaluation, "-o", tmp_path / name)
        assert (code, out) == (3, "")
        assert f"is {what}; it would be overwritten" in err
        assert "passed" not in err  # refused before any case ran
        assert (tmp_path / name).read_bytes() == kept
    code, _, err = cli("eval", evaluation, "-o", tmp_path / "no" / "report.txt")
    assert code == 3
    assert "cannot write evaluation report" in err


def _seat_fails(folder: Path, cases: str) -> None:
    """`e.eval.yaml` in `folder`: the classifier over `cases` (JSONL text), scored by its
    tokens, its script answering a ticket about a seat with what is no JSON."""
    import shutil

    for name in ("classify.yaml", "classify.script.yaml"):
        shutil.copy(EVAL / name, folder / name)
    script = folder / "classify.script.yaml"
    script.write_text(script.read_text().replace("""'[{"category": "account"}]'""", "'no JSON'"))
    (folder / "cases.jsonl").write_text(cases)
    (folder / "e.eval.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: Evaluation\npipeline: classify.yaml\n"
        "dataset: cases.jsonl\nmetrics:\n  - name: tokens\n    usage: {max_tokens: 10000}\n"
    )


def test_a_case_whose_run_stopped_with_an_error_is_shown_and_fails_the_evaluation(
    tmp_path: Path,
) -> None:
    # It scored what it could (usage: 1.000) and the evaluation passed, the error nowhere.
    _seat_fails(
        tmp_path,
        '{"name": "seat", "inputs": {"ticket": "Please add a seat"}}\n'
        '{"name": "twice", "inputs": {"ticket": "I was charged twice"}}\n',
    )
    code, out, _ = cli("eval", tmp_path / "e.eval.yaml")
    assert code == 1, out
    assert "errors: 1 case(s) stopped with an error:\n  seat: CD911: E_SCRIPT: " in out
    assert out.splitlines()[-1] == "overall: 1.000: FAILED (1 case(s) stopped with an error)"
    code, out, _ = cli("eval", tmp_path / "e.eval.yaml", "--format", "json")
    cases = {case["name"]: case for case in json.loads(out)["cases"]}
    assert cases["seat"]["error"].startswith("CD911: E_SCRIPT: model script")
    # and the diagnostic's own fields, which the HTML page shows as `run` prints them
    diagnostic = cases["seat"]["diagnostic"]
    assert diagnostic["code"] == "CD911"
    assert diagnostic["message"].startswith("E_SCRIPT: model script")
    assert Path(diagnostic["file"]).name == "classify.yaml"
    assert diagnostic["line"] == 18
    assert diagnostic["hint"]
    assert "diagnostic" not in cases["twice"]
    # JUnit says so too: a CI reading it saw every testcase pass.
    from xml.etree import ElementTree as ET

    code, out, _ = cli("eval", tmp_path / "e.eval.yaml", "--format", "junit")
    suite = ET.fromstring(out)
    failed = {c.get("name"): c.find("failure") for c in suite.iter("testcase")}
    assert (code, suite.get("failures"), suite.get("tests")) == (1, "1", "3")
    assert failed["tokens"] is None
    assert failed["overall"] is None
    assert failed["cases"] is not None
    assert failed["cases"].get("message") == "1 case(s) stopped with an error"
    assert "error" not in cases["twice"]


def test_a_baseline_of_another_evaluation_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    # Every score of both was listed as new or gone (300 lines for the shipped example)
    # and the command exited 0.
    base = tmp_path / "base.json"
    base.write_text(
        json.dumps(
            {"evaluation": "other.eval.yaml", "cases": [{"name": "x", "scores": {"bleu": 1}}]}
        )
    )
    code, out, err = cli("eval", EVAL / "classify.eval.yaml", "--baseline", base)
    assert (code, out) == (3, "")
    assert err.startswith(f"error[CD335]: baseline {base} shares no case and no metric with ")
    assert "(it is a result of other.eval.yaml): nothing would be compared" in err


def test_a_concurrency_below_one_is_refused() -> None:
    # It ran the cases one at a time, as if 1 had been given.
    for given in ("0", "-3"):
        code, out, err = cli("eval", EVAL / "classify.eval.yaml", "--concurrency", given)
        assert (code, out) == (3, "")
        assert err == (
            "error[CD333]: --concurrency must be above 0\n"
            "  hint: give --concurrency a number above 0, or leave it out\n"
        )


def test_a_wall_cap_that_is_not_a_number_is_refused() -> None:
    # `--case-max-wall-s nan` passed the check (nan <= 0 is false) and capped nothing.
    code, out, err = cli("eval", EVAL / "classify.eval.yaml", "--case-max-wall-s", "nan")
    assert (code, out) == (3, "")
    assert err.startswith("error[CD333]: --case-max-wall-s must be above 0\n")


def test_a_record_folder_that_cannot_be_made_is_refused_before_any_case_runs(
    tmp_path: Path,
) -> None:
    # Every case ran and failed on its own with CD336, and the evaluation printed them all.
    (tmp_path / "afile").write_text("not a folder\n")
    record = tmp_path / "afile" / "recorded"
    code, out, err = cli("eval", EVAL / "classify.eval.yaml", "--record", str(record))
    assert (code, out) == (3, "")
    assert err.startswith(f"error[CD336]: cannot make the folder '{record / 'cases'}' (--record)")


def test_the_datasets_control_and_bidi_characters_are_shown_escaped(tmp_path: Path) -> None:
    # A case's name and its run's error went to the terminal as they were: an escape
    # sequence recoloured it, a right-to-left override reversed the rest of the line.
    _seat_fails(
        tmp_path, '{"name": "seat\\u001b[31m\\u202e", "inputs": {"ticket": "Please add a seat"}}\n'
    )
    code, out, _ = cli("eval", tmp_path / "e.eval.yaml")
    assert code == 1, out
    assert "  seat\\x1b[31m\\u202e: CD911: " in out
    assert "\x1b" not in out
    assert "\u202e" not in out
