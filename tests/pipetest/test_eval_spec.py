"""Evaluation files: the strict loader, eval.v1.json, and the checks of their dataset."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.errors import PipelineInvalid
from converge_dsl.pipetest._eval_spec import read_eval_file

from .conftest import ROOT, cli, expected

_EVAL = """\
apiVersion: converge-dsl/v1
kind: Evaluation
pipeline: incident-triage.yaml
dataset: {dataset}
threshold: 0.8
metrics:
  - name: top cause
    exact: {{key: hypotheses, field: /id, expected: {expected}}}
    threshold: 0.9
  - name: causes
    set: {{key: hypotheses, expected: causes, measure: f1}}
  - name: converged
    stop_reason: {{equals: converged}}
  - name: pattern
    regex: {{key: hypotheses, field: /cause, pattern: "{pattern}"}}
"""


def _folder(tmp_path: Path, dataset: str, text: str, **fields: str) -> Path:
    for name in ("incident-triage.yaml", "incident-triage.script.yaml"):
        shutil.copy(ROOT / "pipelines" / name, tmp_path / name)
    (tmp_path / dataset).write_text(text, encoding="utf-8")
    values = {"dataset": dataset, "expected": "top", "pattern": "query|database"} | fields
    path = tmp_path / "incident.eval.yaml"
    path.write_text(_EVAL.format(**values), encoding="utf-8")
    return path


_JSONL = (
    '{"name": "checkout", "inputs": {"service": "checkout"},'
    ' "expected": {"top": "bad-deploy", "causes": ["bad-deploy", "db-saturation"]}}\n'
    '{"inputs": {"service": "search"}, "expected": {"top": "db-saturation"}}\n'
)


def test_a_jsonl_evaluation_loads_its_cases_and_metrics(tmp_path: Path) -> None:
    loaded = read_eval_file(_folder(tmp_path, "cases.jsonl", _JSONL))
    assert [c.name for c in loaded.cases] == ["checkout", "case-2"]
    assert loaded.cases[0].inputs == {"service": "checkout"}
    assert [(m.name, m.kind, m.threshold) for m in loaded.metrics] == [
        ("top cause", "exact", 0.9),
        ("causes", "set", None),
        ("converged", "stop_reason", None),
        ("pattern", "regex", None),
    ]
    assert loaded.threshold == 0.8


def test_a_csv_dataset_reads_input_and_expected_columns(tmp_path: Path) -> None:
    text = 'name,input.service,expected.top,expected.causes\nc1,checkout,bad-deploy,"[""a""]"\n'
    loaded = read_eval_file(_folder(tmp_path, "cases.csv", text))
    (case,) = loaded.cases
    assert (case.name, case.inputs, case.expected) == (
        "c1",
        {"service": "checkout"},
        {"top": "bad-deploy", "causes": ["a"]},
    )


def _codes(path: Path) -> list[tuple[str, int, str]]:
    with pytest.raises(PipelineInvalid) as caught:
        read_eval_file(path)
    return [(d.code, d.line, d.message) for d in caught.value.diagnostics]


def test_a_dataset_line_that_is_not_a_case_is_located_at_its_line(tmp_path: Path) -> None:
    text = _JSONL + "not json\n" + '{"inputs": [], "expected": {}}\n'
    found = _codes(_folder(tmp_path, "cases.jsonl", text))
    assert [(c, line) for c, line, _ in found] == [
        (codes.EVAL_BAD_CASE, 3),
        (codes.EVAL_BAD_CASE, 4),
    ]


def test_a_dataset_line_is_split_at_newlines_only(tmp_path: Path) -> None:
    """JSON allows U+2028, U+2029 and U+0085 raw inside a string: a case holding them
    is one line, as `run --cases` reads it, and the lines after it keep their numbers."""
    odd = '{"name": "odd", "inputs": {"service": "a\u2028b\u2029c\x85d"}}\n'
    text = _JSONL + odd + '{"inputs": {"servce": "x"}}\n'
    found = _codes(_folder(tmp_path, "cases.jsonl", text))
    assert [(c, line) for c, line, _ in found] == [(codes.EVAL_UNKNOWN_NAME, 4)]


def test_an_unknown_expected_name_and_a_bad_pattern_are_located_with_a_guess(
    tmp_path: Path,
) -> None:
    path = _folder(tmp_path, "cases.jsonl", _JSONL, expected="tpo", pattern="(?=x)")
    with pytest.raises(PipelineInvalid) as caught:
        read_eval_file(path)
    found = {d.code: d for d in caught.value.diagnostics}
    assert set(found) == {codes.EVAL_UNKNOWN_NAME, codes.EVAL_BAD_REGEX}
    assert found[codes.EVAL_UNKNOWN_NAME].hint == "did you mean 'top'?"
    assert found[codes.EVAL_UNKNOWN_NAME].line == 8
    assert found[codes.EVAL_BAD_REGEX].line == 15


def test_a_missing_dataset_and_a_dataset_of_another_format_are_refused(tmp_path: Path) -> None:
    path = _folder(tmp_path, "cases.jsonl", _JSONL)
    path.write_text(path.read_text().replace("cases.jsonl", "cases.jsnl"))
    assert [c for c, _, _ in _codes(path)] == [codes.EVAL_DATASET_MISSING]
    path.write_text(path.read_text().replace("cases.jsnl", "other.jsonl"))
    assert [c for c, _, _ in _codes(path)] == [codes.EVAL_DATASET_MISSING]


def test_a_schema_error_is_located_in_the_evaluation_file(tmp_path: Path) -> None:
    path = _folder(tmp_path, "cases.jsonl", _JSONL)
    path.write_text(path.read_text().replace("measure: f1", "measure: f2"))
    ((code, line, _),) = _codes(path)
    assert line == 11
    assert code.startswith("CD")


def test_two_metrics_of_one_name_are_refused(tmp_path: Path) -> None:
    path = _folder(tmp_path, "cases.jsonl", _JSONL)
    path.write_text(path.read_text().replace("name: causes", "name: pattern"))
    assert [c for c, _, _ in _codes(path)] == [codes.EVAL_DUPLICATE]


def test_the_schema_command_prints_the_eval_schema() -> None:
    code, out, _ = cli("schema", "eval")
    assert code == 0
    assert '"const": "Evaluation"' in out


def test_validate_checks_an_evaluation_file_named_or_found_in_a_folder(tmp_path: Path) -> None:
    path = _folder(tmp_path, "cases.jsonl", _JSONL)
    assert cli("validate", tmp_path)[0] == 0
    path.write_text(path.read_text().replace("cases.jsonl", "cases.jsnl"))
    for target in (path, tmp_path):
        code, out, _ = cli("validate", target)
        assert code == 2
        assert "error[CD800]: dataset 'cases.jsnl' is neither JSONL nor CSV" in out
        assert "incident.eval.yaml:4:10" in out


def test_judges_and_configurations_declare_models_as_the_pipeline_schema_does() -> None:
    import json

    schemas = ROOT / "schemas"
    pipeline = json.loads((schemas / "pipeline.v1.json").read_text())["$defs"]
    evaluation = json.loads((schemas / "eval.v1.json").read_text())["$defs"]
    names = ("model", "scriptedModel", "openaiModel", "anthropicModel", "replayModel")
    for name in (*names, "account", "modelLimits"):
        assert evaluation[name] == pipeline[name], name


@pytest.mark.parametrize(
    ("schema", "pointer", "message"),
    [
        (
            '{type: object, properties: {cause: {type: string, pattern: "(?=x)"}}}',
            "properties/cause/pattern",
            "the metric's schema cannot be used: the regex '(?=x)' cannot run in linear time",
        ),
        (
            "{type: 5}",
            "type",
            "the metric's schema cannot be used: it is not a JSON Schema: 5 is not valid",
        ),
    ],
)
def test_a_schema_metric_whose_schema_cannot_be_checked_is_located_in_it(
    tmp_path: Path, schema: str, pointer: str, message: str
) -> None:
    path = _folder(tmp_path, "cases.jsonl", _JSONL)
    path.write_text(
        path.read_text(encoding="utf-8")
        + f"  - name: shape\n    schema: {{key: hypotheses, schema: {schema}}}\n",
        encoding="utf-8",
    )
    with pytest.raises(PipelineInvalid) as caught:
        read_eval_file(path)
    (found,) = caught.value.diagnostics
    assert found.code == codes.EVAL_BAD_SCHEMA
    assert found.line == 17
    assert found.message.startswith(message), found.message
    assert "/".join(str(p) for p in found.path[-len(pointer.split("/")) :]) == pointer


def test_a_schema_metric_scores_with_one_validator_per_schema(tmp_path: Path) -> None:
    from converge_dsl.pipetest import _eval_metrics

    _eval_metrics._validator.cache_clear()
    schema = {"type": "object", "required": ["cause"]}
    assert _eval_metrics._conforms(schema, {"cause": "x"})
    assert not _eval_metrics._conforms(dict(reversed(list(schema.items()))), {})
    assert _eval_metrics._validator.cache_info().misses == 1


@pytest.mark.parametrize(
    ("dataset", "text"),
    [("cases.jsonl", ""), ("cases.jsonl", "\n  \n"), ("cases.csv", "name,input.service\n")],
)
def test_a_dataset_with_no_case_is_refused_at_the_dataset_line(
    tmp_path: Path, dataset: str, text: str
) -> None:
    # It passed every metric over 0 cases, and `eval` exited 0 having measured nothing.
    assert _codes(_folder(tmp_path, dataset, text)) == [
        (codes.EVAL_NO_CASES, 4, f"dataset {dataset!r} holds no case: nothing would be measured")
    ]


def test_eval_on_an_empty_dataset_prints_the_located_error_and_exits_2(tmp_path: Path) -> None:
    path = _folder(tmp_path, "cases.jsonl", "")
    code, out, err = cli("eval", str(path))
    assert code == 2, out + err
    assert "error[CD340]: dataset 'cases.jsonl' holds no case" in out + err
    assert "^^^^" in out + err


@pytest.mark.parametrize(
    ("name", "said", "hint"),
    [
        ("incident-triage.yaml", "a pipeline (kind: Pipeline)", "run it with `converge-dsl run "),
        ("incident-triage.script.yaml", "a model script (kind: ModelScript)", "a pipeline's model"),
    ],
)
def test_a_file_of_another_kind_is_one_usage_error_at_its_kind(
    tmp_path: Path, name: str, said: str, hint: str
) -> None:
    # A pipeline given to `eval` was ten schema errors: three keys missing, kind not
    # allowed, and every key of the pipeline unknown. Then one error, exit 2, where
    # `run` given an evaluation said its CD818 with exit 3: now both are usage errors.
    _folder(tmp_path, "cases.jsonl", _JSONL)
    with pytest.raises(PipelineInvalid) as caught:
        read_eval_file(tmp_path / name)
    (only,) = caught.value.diagnostics
    assert (only.code, only.message) == (
        codes.EVAL_NOT_EVALUATION,
        f"this is {said}, not an evaluation file",
    )
    assert caught.value.exit_code == 3
    assert only.line == next(
        n
        for n, line in enumerate((tmp_path / name).read_text().splitlines(), 1)
        if line.startswith("kind:")
    )
    assert (only.hint or "").startswith(hint)


def test_a_csv_header_naming_a_column_twice_is_refused_at_line_1(tmp_path: Path) -> None:
    # The later column's cells were read, the earlier ones dropped with no word (a JSONL
    # line giving a key twice is refused).
    text = "name,input.service,expected.top,input.service\nc1,checkout,bad-deploy,search\n"
    found = _codes(_folder(tmp_path, "cases.csv", text))
    assert found[:1] == [(codes.EVAL_BAD_CASE, 1, "the header names column 'input.service' twice")]


@pytest.mark.parametrize(
    ("row", "said"),
    [
        ('c2,"search,top\n', "unexpected end of data (a quoted cell is never closed)"),
        ('c2,"search"x,top\n', "',' expected after '\"'"),
    ],
    ids=["never-closed", "text-after-quote"],
)
def test_a_csv_row_quoted_wrong_is_refused_at_its_line(tmp_path: Path, row: str, said: str) -> None:
    # A quote never closed read the rest of the file into one cell: the case ran with
    # that text as its input, and the rows after it were gone.
    text = "name,input.service,expected.top\nc1,checkout,bad-deploy\n" + row
    found = _codes(_folder(tmp_path, "cases.csv", text))
    assert found[:1] == [(codes.EVAL_BAD_CASE, 3, f"the CSV cannot be read from here: {said}")]


def test_a_csv_quote_never_closed_is_located_where_it_opened(tmp_path: Path) -> None:
    # It was reported at the file's last line.
    text = 'name,input.service,expected.top\nc1,checkout,bad-deploy\n\nc2,"search,top\n'
    found = _codes(_folder(tmp_path, "cases.csv", text + "c3,a,b\nc4,c,d\n"))
    assert found[:1] == [
        (
            codes.EVAL_BAD_CASE,
            4,
            "the CSV cannot be read from here: unexpected end of data "
            "(a quoted cell is never closed)",
        )
    ]


def test_a_csv_header_with_empty_trailing_columns_names_the_empty_column(
    tmp_path: Path,
) -> None:
    # Excel's trailing empty columns were said to be "column '' twice".
    text = "name,input.service,expected.top,,\nc1,checkout,bad-deploy,,\n"
    found = _codes(_folder(tmp_path, "cases.csv", text))
    assert found[:1] == [
        (codes.EVAL_BAD_CASE, 1, "column '' is neither name, input.X nor expected.X")
    ]


@pytest.mark.parametrize("column", ["input.", "expected."])
def test_a_csv_header_column_naming_nothing_after_its_dot_is_refused_at_line_1(
    tmp_path: Path, column: str
) -> None:
    # `input.` was read as an input named '': "pipeline ... has no input ''".
    text = f"name,input.service,expected.top,{column}\nc1,checkout,bad-deploy,x\n"
    found = _codes(_folder(tmp_path, "cases.csv", text))
    assert found[:1] == [
        (codes.EVAL_BAD_CASE, 1, f"column {column!r} gives no name after the dot ({column}X)")
    ]


def test_a_csv_cell_over_the_csv_limit_is_located_at_its_row(tmp_path: Path) -> None:
    # csv raised `_csv.Error: field larger than field limit` through eval and validate,
    # a traceback; a CSV row's hint spoke of JSON objects.
    text = f"name,input.service,expected.top\nc1,checkout,bad-deploy\nc2,{'x' * 200_000},top\n"
    found = _codes(_folder(tmp_path, "cases.csv", text))
    assert found[:1] == [
        (
            codes.EVAL_BAD_CASE,
            3,
            "a cell is longer than 131,072 characters, the most a CSV cell is read with; give "
            "long inputs in a JSONL dataset",
        )
    ]
    code, out, err = cli("validate", str(tmp_path / "incident.eval.yaml"))
    assert code == 2
    assert "Traceback" not in out + err
    assert "hint: a case is a row with a cell for each column of the header" in out + err


def test_a_dataset_line_giving_a_key_twice_is_located_at_its_line(tmp_path: Path) -> None:
    # The last of the two was kept silently, where the run's other JSON inputs refuse it.
    twice = '{"inputs": {"service": "a", "service": "b"}}\n'
    found = _codes(_folder(tmp_path, "cases.jsonl", _JSONL + twice))
    assert [(c, line, m) for c, line, m in found if c == codes.EVAL_BAD_CASE] == [
        (codes.EVAL_BAD_CASE, 3, "line 3: the key 'service' is given twice in one object"),
    ]


def test_a_dataset_line_nested_too_deeply_is_located_at_its_line(tmp_path: Path) -> None:
    # A line deeper than the JSON decoder reads ended the command with "an input is nested
    # too deeply to be read", no file, no line; one of 100 levels was taken as a case.
    deep = '{"inputs": {"service": ' + "[" * 5000 + "]" * 5000 + "}}\n"
    deeper_than_cases = '{"inputs": {"service": ' + "[" * 100 + "]" * 100 + "}}\n"
    found = _codes(_folder(tmp_path, "cases.jsonl", _JSONL + deep + deeper_than_cases))
    assert [(c, line, m) for c, line, m in found if c == codes.EVAL_BAD_CASE] == [
        (codes.EVAL_BAD_CASE, 3, "line 3 nests deeper than 64 levels"),
        (codes.EVAL_BAD_CASE, 4, "line 4 nests deeper than 64 levels"),
    ]
    cell = "[" * 5000 + "]" * 5000  # a CSV cell is read as JSON when it parses: here, text
    csv = f"name,input.service,expected.top,expected.causes\nc1,{cell},a,[]\n"
    loaded = read_eval_file(_folder(tmp_path, "cases.csv", csv))
    assert loaded.cases[0].inputs == {"service": cell}


_UNKNOWN_INPUT = (
    '{"name": "a", "inputs": {"service": "checkout"}, "expected": {"top": "x", "causes": []}}\n'
    '{"name": "b", "expected": {"servce": 1},'
    ' "inputs": {"service": {"servce": 1}, "servce": "x"}}\n'
    '{"name": "c", "inputs": {"servce": "y", "region": "eu"}}\n'
)


@pytest.mark.parametrize(
    ("dataset", "text", "output"),
    [
        ("cases.jsonl", _UNKNOWN_INPUT, "eval-unknown-input.txt"),
        (
            "cases.csv",
            "name,expected.top,input.servce,expected.causes\nc1,a,x,[]\nc2,b,y,[]\n",
            "eval-unknown-csv.txt",
        ),
        (  # each caret on its whole cell, not on the first text that reads input.servce
            "cases.csv",
            'name,expected.top,expected.input.servce,input.servce_x,"input.servce",expected.causes'
            "\nc1,a,1,2,3,[]\n",
            "eval-unknown-csv-cells.txt",
        ),
    ],
)
def test_an_input_the_pipeline_does_not_declare_is_one_error_before_any_case_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dataset: str, text: str, output: str
) -> None:
    # Every case ran and failed alike ("CD338: unknown input 'servce'"), once a case.
    _folder(tmp_path, dataset, text)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("eval", "incident.eval.yaml")
    assert (code, out) == (2, "")
    assert err == expected(output, err)
    assert cli("validate", "incident.eval.yaml")[0] == 2


def test_only_the_undeclared_inputs_shown_are_given_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 100,000 lines each giving another unknown input built 100,000 hints ("did you
    # mean"), where at most 100 of a code are shown; then 101, one more than shown (the
    # first omitted is named by its place and count, never its hint).
    from converge_dsl.batch import _undeclared
    from converge_dsl.frontend import MAX_PER_CODE

    asked: list[str] = []

    def counting(word: str, candidates: object, otherwise: str) -> str:
        asked.append(word)
        return otherwise

    monkeypatch.setattr(_undeclared, "unknown_name_hint", counting)
    text = "".join(f'{{"name": "c{i}", "inputs": {{"k{i}": 1}}}}\n' for i in range(300))
    found = _codes(_folder(tmp_path, "cases.jsonl", text))
    assert len([m for _, _, m in found if "has no input" in m]) == 300
    assert asked == [f"k{i}" for i in range(MAX_PER_CODE)]


_REFUSED = '"expected": {"stop_reason": "usage_error", "top": "x", "causes": []}'


def test_a_case_expecting_refusal_may_give_inputs_the_pipeline_does_not_declare(
    tmp_path: Path,
) -> None:
    # Its case is meant to be refused: the check before any case runs leaves it be.
    text = '{"name": "probe", "inputs": {"bogus": 1}, ' + _REFUSED + "}\n"
    path = _folder(tmp_path, "cases.jsonl", text)
    path.write_text(path.read_text().replace("equals: converged", "equals: usage_error"))
    assert [c.name for c in read_eval_file(path).cases] == ["probe"]
    csv = "name,input.bogus,expected.stop_reason,expected.top,expected.causes\n"
    csv += "p,1,usage_error,x,[]\n"
    assert [c.name for c in read_eval_file(_folder(tmp_path, "cases.csv", csv)).cases] == ["p"]


def _unknown_inputs_of_refusals(tmp_path: Path, text: str) -> list[tuple[str, int, str]]:
    """The CD802s of undeclared inputs of an evaluation measuring refusals."""
    path = _folder(tmp_path, "cases.jsonl", text)
    path.write_text(path.read_text().replace("equals: converged", "equals: usage_error"))
    return [(c, line, m) for c, line, m in _codes(path) if "has no input" in m]


def _no_input(line: int, name: str, case: str) -> tuple[str, int, str]:
    message = f"pipeline 'incident-triage' has no input {name!r}, given by case {case!r}"
    return codes.EVAL_UNKNOWN_NAME, line, message


def test_a_typo_in_an_evaluation_of_refusals_is_reported(tmp_path: Path) -> None:
    # A `usage_error` metric turned the check off for every case: the typo 'servce' was
    # run, refused and scored as a refusal measured, and the evaluation passed.
    text = '{"name": "probe", "inputs": {"bogus": 1}}\n'
    text += '{"name": "normal", "inputs": {"servce": "x"}}\n'
    assert _unknown_inputs_of_refusals(tmp_path, text) == [
        _no_input(1, "bogus", "probe"),
        _no_input(2, "servce", "normal"),
    ]


def test_a_case_s_refusal_opt_in_covers_that_case_and_no_typo(tmp_path: Path) -> None:
    # Only the cases expecting `usage_error` may give unknown inputs, and not a typo.
    text = (
        '{"name": "probe", "inputs": {"bogus": 1, "servic": 2}, ' + _REFUSED + "}\n"
        '{"name": "normal", "inputs": {"service": "x", "bogus": 1}}\n'
        '{"name": "other", "inputs": {"region": "eu"}, ' + _REFUSED + "}\n"
    )
    assert _unknown_inputs_of_refusals(tmp_path, text) == [
        _no_input(1, "servic", "probe"),
        _no_input(2, "bogus", "normal"),
    ]


@pytest.mark.parametrize(
    ("dataset", "text"),
    [
        ("cases.jsonl", '{"name": "a", "inputs": {"servce": "x"}, "expected": {"top": "t"}}\n'),
        ("cases.csv", "name,input.servce,expected.top\na,x,t\n"),
    ],
)
def test_a_dataset_may_begin_with_a_byte_order_mark(
    tmp_path: Path, dataset: str, text: str
) -> None:
    """An editor's byte order mark is not part of the first line or header (as for `run
    --cases`): the first case is read, and a caret on its line is where it is without."""

    def found() -> list[tuple[str, int, int, str]]:
        with pytest.raises(PipelineInvalid) as caught:
            read_eval_file(tmp_path / "incident.eval.yaml")
        return [(d.code, d.line, d.column, d.message) for d in caught.value.diagnostics]

    _folder(tmp_path, dataset, text)
    plain = found()
    assert any("has no input 'servce'" in message for *_, message in plain)
    (tmp_path / dataset).write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert found() == plain
