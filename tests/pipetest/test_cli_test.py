"""`converge-dsl test`: exit codes, located diffs and diagnostics compared with files in data/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import DATA, ROOT, cli, expected, untimed

pytestmark = pytest.mark.usefixtures("at_root")


def test_the_examples_pass_with_exit_0() -> None:
    code, out, err = cli("test", "pipelines")
    assert (code, err) == (0, "")
    assert untimed(out).endswith(" passed, 0 failed in Ns\n")
    assert "PASS pipelines/support-triage.test.yaml::no urgent ticket, no escalation" in out


def test_a_failing_case_prints_a_located_diff_and_exits_1() -> None:
    code, out, err = cli("test", "tests/pipetest/data/failing.test.yaml")
    assert (code, err) == (1, "")
    assert untimed(out) == expected("failing.expected", untimed(out))


@pytest.mark.parametrize("name", ["names", "schema", "inline", "tools"])
def test_an_invalid_test_file_is_reported_like_a_pipeline_with_exit_2(name: str) -> None:
    code, out, err = cli("test", f"tests/pipetest/data/{name}.test.yaml")
    assert (code, out) == (2, "")
    assert err == expected(f"{name}.expected", err)


def test_an_invalid_pipeline_is_reported_at_the_pipeline(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("apiVersion: converge-dsl/v1\nkind: Pipeline\n")
    (tmp_path / "p.test.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: p.yaml\n"
        "cases: [{name: c, expect: {}}]\n"
    )
    code, out, err = cli("test", tmp_path)
    assert (code, out) == (2, "")
    assert "p.yaml:" in err
    assert "error[CD101]" in err


@pytest.mark.parametrize("format", ["human", "json", "junit"])
def test_a_test_naming_an_evaluation_as_its_pipeline_is_a_usage_error_as_run_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, format: str
) -> None:
    # `test` exited 2 with the CD818 that `run` gives that same file with exit 3.
    shutil.copyfile(DATA / "eval" / "classify.eval.yaml", tmp_path / "classify.eval.yaml")
    (tmp_path / "c.test.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: classify.eval.yaml\n"
        "cases: [{name: c, expect: {stop_reason: converged}}]\n"
    )
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("test", "c.test.yaml", "--format", format)
    assert code == cli("run", "classify.eval.yaml")[0] == 3
    if format == "human":
        assert (out, err) == ("", expected("evaluation-as-pipeline.expected", err))
    elif format == "json":
        assert [d["code"] for d in json.loads(out)] == ["CD818"]


def test_usage_errors_exit_3(tmp_path: Path) -> None:
    code, _, err = cli("test", tmp_path / "missing")
    assert code == 3
    assert "no such file or folder" in err
    code, _, err = cli("test", tmp_path)
    assert code == 3
    assert "no test files found" in err
    code, _, err = cli("test", "pipelines/support-triage.yaml")
    assert code == 3
    assert "is not a test file" in err
    assert "its tests are in support-triage.test.yaml" in err
    code, _, err = cli("test", "pipelines", "--format", "xml")
    assert code == 3
    assert "invalid choice" in err


def test_json_output_names_each_failure_with_its_line() -> None:
    code, out, _ = cli("test", "tests/pipetest/data/failing.test.yaml", "--format", "json")
    assert code == 1
    report = json.loads(out)
    assert {k: report["summary"][k] for k in ("passed", "failed", "errors")} == {
        "passed": 1,
        "failed": 2,
        "errors": 0,
    }
    first = report["cases"][0]
    assert (first["case"], first["status"], first["line"]) == (
        "every expectation broken",
        "failed",
        6,
    )
    counts = next(f for f in first["failures"] if f["path"] == "cases[0].expect.counts.tickets")
    assert counts["code"] == "CD960"
    assert (counts["file"], counts["line"], counts["expected"]) == (
        "tests/pipetest/data/failing.test.yaml",
        15,
        "5",
    )


def test_junit_output_validates_against_the_junit_xml_schema() -> None:
    import xmlschema

    schema = xmlschema.XMLSchema(str(ROOT / "tests" / "data" / "junit" / "junit-10.xsd"))
    code, out, _ = cli(
        "test", "pipelines", "tests/pipetest/data/failing.test.yaml", "--format", "junit"
    )
    assert code == 1
    schema.validate(out)  # raises on any violation
    tree = schema.to_dict(out)
    suites = {s["@name"]: s for s in tree["testsuite"]}
    failing = suites["tests/pipetest/data/failing.test.yaml"]
    assert (failing["@tests"], failing["@failures"], failing["@errors"]) == ("3", "2", "0")
    case = failing["testcase"][0]
    assert case["failure"][0]["@message"].startswith(
        "tests/pipetest/data/failing.test.yaml:8:20: cases[0].expect.stop_reason"
    )


def test_junit_output_of_a_broken_document_would_fail_validation() -> None:
    import xmlschema

    schema = xmlschema.XMLSchema(str(ROOT / "tests" / "data" / "junit" / "junit-10.xsd"))
    assert not schema.is_valid("<testsuites><testsuite name='x'/></testsuites>")


def test_update_rewrites_snapshots_and_keeps_comments(tmp_path: Path) -> None:
    shutil.copy(DATA / "failing.test.yaml", tmp_path / "failing.test.yaml")
    text = (tmp_path / "failing.test.yaml").read_text()
    text = text.replace("../../../pipelines/", str(ROOT / "pipelines") + "/")
    (tmp_path / "failing.test.yaml").write_text(text)
    code, out, err = cli("test", "--update", tmp_path / "failing.test.yaml")
    assert code == 1  # the expectations that are not snapshots still fail
    assert "updated 4 snapshot value(s)" in err
    after = (tmp_path / "failing.test.yaml").read_text()
    assert "# A test file whose every expectation is broken" in after
    assert "counts: {tickets: 4}  # a comment --update keeps" in after
    assert "stop_reason: converged\n      facts:" in after
    assert "ticket-T-104: 'T-104: billing, urgency 2'" in after
    assert "absent: [{key: signals, id: escalate}]" in after
    assert "count of 'tickets'" not in out
    assert "fact tickets/ticket-T-999" in out
    again, _, err = cli("test", "--update", tmp_path / "failing.test.yaml")
    assert again == 1
    assert "updated" not in err


def test_a_case_that_cannot_run_is_an_error_located_at_the_case(tmp_path: Path) -> None:
    assert cli("init", tmp_path, "--name", "app")[0] == 0
    pipeline = tmp_path / "app.yaml"
    text = pipeline.read_text()
    old = "    default: The checkout page is down for every customer\n"
    assert old in text
    pipeline.write_text(text.replace(old, "    required: true\n"))
    test_file = tmp_path / "app.test.yaml"
    test_file.write_text(test_file.read_text().replace("cases:\n", "inputs: {}\ncases:\n"))
    code, out, _ = cli("test", tmp_path)
    assert code == 1
    assert "ERROR " in out
    assert "error[CD961]: case 'an outage is flagged as urgent' could not run: " in out
    assert "input 'request' is required" in out
    assert untimed(out).endswith("2 passed, 0 failed, 1 error in Ns\n")
    assert "= hint: add `request: VALUE` under the case's `inputs:`" in out
    code, xml, _ = cli("test", tmp_path, "--format", "junit")
    assert code == 1
    assert '<error type="CD961"' in xml


def test_a_case_that_cannot_run_keeps_its_errors_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A model without its API key: the case's error read `model 'remote': ...`, its
    # E_CONFIG gone, once codes left error messages.
    import shutil

    monkeypatch.delenv("CONVERGE_TEST_UNSET_API_KEY", raising=False)
    shutil.copy(ROOT / "tests" / "e2e" / "data" / "stops" / "no-key.yaml", tmp_path / "p.yaml")
    (tmp_path / "p.test.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: p.yaml\n"
        "cases:\n  - name: one\n    expect: {stop_reason: converged}\n"
    )
    code, out, _ = cli("test", tmp_path)
    assert code == 1
    assert "error[CD961]: case 'one' could not run: E_CONFIG: model 'remote': " in out
    code, out, _ = cli("test", tmp_path, "--format", "json")
    assert "E_CONFIG: model 'remote': " in out


def _hostile_case(tmp_path: Path, name: str) -> Path:
    """A failing test file of the `init` project whose one case is called `name`."""
    assert cli("init", tmp_path, "--name", "app")[0] == 0
    test_file = tmp_path / "app.test.yaml"
    test_file.write_text(
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: app.yaml\n"
        f"cases:\n  - name: {json.dumps(name)}\n    expect: {{stop_reason: cancelled}}\n"
    )
    return test_file


def test_junit_output_holds_no_character_xml_cannot_in_names(tmp_path: Path) -> None:
    import xmlschema

    schema = xmlschema.XMLSchema(str(ROOT / "tests" / "data" / "junit" / "junit-10.xsd"))
    test_file = _hostile_case(tmp_path, "<b>&amp; ]]> \x1b[31mred\x1b[0m \x01 {{ x }}")
    code, out, _ = cli("test", test_file, "--format", "junit")
    assert code == 1
    schema.validate(out)  # raises on a character XML 1.0 cannot hold
    case = schema.to_dict(out)["testsuite"][0]["testcase"][0]
    assert case["@name"] == "<b>&amp; ]]> \\x1b[31mred\\x1b[0m \\x01 {{ x }}"


def test_human_output_escapes_control_characters_in_case_names(tmp_path: Path) -> None:
    test_file = _hostile_case(tmp_path, "a \x1b]0;title\x07 b")
    code, out, _ = cli("test", test_file)
    assert code == 1
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "::a \\x1b]0;title\\x07 b (" in out


def test_update_writes_through_a_symbolic_link_and_keeps_the_mode(tmp_path: Path) -> None:
    import os
    import stat

    assert cli("init", tmp_path, "--name", "app")[0] == 0
    real = tmp_path / "app.test.yaml"
    real.write_text(real.read_text().replace("stop_reason: converged", "stop_reason: cancelled"))
    real.chmod(0o640)
    link = tmp_path / "link.test.yaml"
    link.symlink_to(real.name)
    code, _, err = cli("test", "--update", link)
    assert code == 0
    assert "updated 2 snapshot value(s)" in err
    assert link.is_symlink()
    assert "stop_reason: cancelled" not in real.read_text()
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [
        ".converge-dsl",  # what init wrote: no temporary file is left beside them
        ".helix",
        ".pre-commit-config.yaml",
        ".vscode",
    ]


def test_update_of_a_file_that_cannot_be_written_says_so_and_keeps_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The OSError of the rename escaped: "error[CD361]: cannot use '.app.test.yaml.<pid>.
    # <random>.tmp': Operation not permitted" (an immutable file, a read-only disk), and
    # no case's result was printed.
    import errno

    from converge_dsl.pipetest import _update

    def refused(path: Path, data: bytes, **_: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(path.parent / ".x.tmp"))

    monkeypatch.setattr(_update, "replace_file", refused)
    assert cli("init", tmp_path, "--name", "app")[0] == 0
    test_file = tmp_path / "app.test.yaml"
    text = test_file.read_text().replace("stop_reason: converged", "stop_reason: cancelled")
    test_file.write_text(text)
    code, out, err = cli("test", "--update", test_file)
    assert code == 1  # its snapshot failures stay
    assert err == (
        f"error[CD336]: cannot update the snapshots of {test_file}: Read-only file system\n"
        "  hint: the file is as it was and its snapshot failures stay; make it writable "
        "and run --update again, or edit the values by hand\n"
    )
    assert "stop reason differs from the expectation" in out
    assert untimed(out).endswith("1 passed, 2 failed in Ns\n")
    assert test_file.read_text() == text


def test_update_leaves_a_value_shared_through_an_anchor_and_says_so(tmp_path: Path) -> None:
    assert cli("init", tmp_path, "--name", "app")[0] == 0
    test_file = tmp_path / "app.test.yaml"
    text = (
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: app.yaml\ncases:\n"
        "  - name: a\n    inputs: {request: Please update my billing address}\n"
        "    expect: &shared\n      snapshot:\n        summaries: {summary: x}\n"
        "  - name: b\n    expect: *shared\n"
        "  - name: c\n    expect:\n      stop_reason: cancelled  # kept\n"
    )
    test_file.write_text(text)
    code, out, err = cli("test", "--update", test_file)
    assert code == 1  # a and b still fail: no one value suits both
    assert "updated 1 snapshot value(s)" in err
    assert err.count("the value is shared through a YAML anchor") == 2
    assert "app.test.yaml:9:20: cases[0].expect.snapshot.summaries" in err
    assert "FAIL " in out
    assert test_file.read_text() == text.replace("cancelled  # kept", "converged  # kept")


def test_invalid_test_files_are_counted_in_the_summary(tmp_path: Path) -> None:
    (tmp_path / "empty.test.yaml").write_text("")
    (tmp_path / "broken.test.yaml").write_text("kind: PipelineTest\na: [")
    code, out, err = cli("test", tmp_path / "empty.test.yaml", tmp_path / "broken.test.yaml")
    assert (code, out) == (2, "")
    assert err.endswith("\n2 errors in 2 files\n")


def _one_case_test(folder: Path, pipeline: str) -> Path:
    """A test file in `folder` of one case of `pipeline` (a path relative to it)."""
    test_file = folder / "t.test.yaml"
    test_file.write_text(
        f"apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: {pipeline}\n"
        "cases: [{name: a, expect: {stop_reason: converged}}]\n"
    )
    return test_file


def test_a_pipeline_that_is_a_folder_is_named_as_a_folder(tmp_path: Path) -> None:
    # It was "pipeline file 'app' is not there", of a folder that is there.
    (tmp_path / "app").mkdir()
    code, _, err = cli("test", _one_case_test(tmp_path, "app"))
    assert code == 2
    assert "error[CD230]: pipeline file 'app' is a folder, not a file\n" in err
    assert "hint: name the pipeline file itself; paths are relative to the test file" in err


def test_a_missing_pipeline_in_a_folder_that_cannot_be_listed_is_still_not_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Listing the folder for a guess raised PermissionError: "error[CD361]: cannot use".
    (tmp_path / "locked").mkdir()
    listed = Path.iterdir

    def iterdir(self: Path) -> object:
        if self.name == "locked":
            raise PermissionError(13, "Permission denied", str(self))
        return listed(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    code, _, err = cli("test", _one_case_test(tmp_path, "locked/app.yaml"))
    assert code == 2
    assert "error[CD230]: pipeline file 'locked/app.yaml' is not there\n" in err


def test_a_path_that_is_neither_file_nor_folder_is_named_as_such(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo.test.yaml"
    os.mkfifo(fifo)
    code, out, err = cli("test", fifo)
    assert (code, out) == (3, "")
    assert "is not a regular file or a folder" in err


def test_quiet_drops_the_update_note(tmp_path: Path) -> None:
    assert cli("init", tmp_path, "--name", "app")[0] == 0
    test_file = tmp_path / "app.test.yaml"
    text = test_file.read_text().replace("stop_reason: converged", "stop_reason: cancelled")
    test_file.write_text(text)
    code, _, err = cli("test", "-q", "--update", test_file)
    assert (code, err) == (0, "")
    assert "stop_reason: cancelled" not in test_file.read_text()


def test_json_output_is_utf8_when_a_file_name_is_not(tmp_path: Path) -> None:
    import os

    assert cli("init", tmp_path, "--name", "app")[0] == 0
    odd = tmp_path / os.fsdecode(b"odd\xff.test.yaml")
    odd.write_text(
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: app.yaml\n"
        "cases: [{name: c, expect: {stop_reason: converged}}]\n"
    )
    code, out, _ = cli("test", odd, "--format", "json")
    assert code == 0
    out.encode("utf-8")  # no lone surrogate left to write
    assert json.loads(out)["cases"][0]["file"].endswith("odd\ufffd.test.yaml")


@pytest.mark.parametrize(
    "text",
    [
        "services:\n  web: {image: nginx}\n",  # docker-compose.test.yaml
        "apiVersion: tekton.dev/v1\nkind: PipelineTest\n",  # another tool's kind of that name
        "",
    ],
)
def test_a_folder_scan_skips_other_tools_files_of_the_name(tmp_path: Path, text: str) -> None:
    assert cli("init", tmp_path, "--name", "app")[0] == 0
    other = tmp_path / "docker-compose.test.yaml"
    other.write_text(text)
    code, out, err = cli("test", tmp_path)
    assert (code, err) == (0, "")
    assert "docker-compose" not in out
    code, _, err = cli("test", other)  # named directly: read, and reported
    assert code == 2
    assert "docker-compose.test.yaml:1:1" in err


def test_a_folder_scan_keeps_a_broken_test_file_that_says_it_is_one(tmp_path: Path) -> None:
    (tmp_path / "a.test.yaml").write_text("kind: PipelineTest\ncases: [\n")
    (tmp_path / "b.test.yaml").write_text('{"apiVersion": "converge-dsl/v1", "kind": "x"}\n')
    code, out, err = cli("test", tmp_path)
    assert (code, out) == (2, "")
    assert "a.test.yaml:" in err
    assert "b.test.yaml:" in err


def test_files_a_test_names_follow_the_pipelines_root_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONVERGE_DSL_ALLOW_ROOTS")
    assert cli("init", tmp_path / "app", "--name", "app")[0] == 0
    secret = tmp_path / "secret.yaml"
    secret.write_text("the first line of a file outside the test's folder\n")
    test_file = tmp_path / "app" / "x.test.yaml"
    test_file.write_text(
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: ../secret.yaml\n"
        "models: {default: {script: ../secret.yaml}}\ncases: [{name: c, expect: {}}]\n"
    )
    code, out, err = cli("test", test_file)
    assert (code, out) == (2, "")
    assert err.count("error[CD220]: ") == 2
    assert "pipeline '../secret.yaml' is outside the test file's folder; it is not read" in err
    assert "the first line of a file outside" not in err
    assert "--allow-root DIR" in err
    code, out, err = cli("test", test_file, "--allow-root", tmp_path)
    assert "CD220" not in err  # allowed: read, and reported as the pipeline it is not


def test_update_keeps_crlf_line_ends_and_a_byte_order_mark(tmp_path: Path) -> None:
    assert cli("init", tmp_path, "--name", "app")[0] == 0
    test_file = tmp_path / "app.test.yaml"
    text = test_file.read_text().replace("stop_reason: converged", "stop_reason: cancelled")
    before = b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode()
    test_file.write_bytes(before)
    code, _, err = cli("test", "--update", test_file)
    assert code == 0, err
    after = test_file.read_bytes()
    assert after == before.replace(b"stop_reason: cancelled", b"stop_reason: converged")


def test_junit_output_reports_an_invalid_test_file(tmp_path: Path) -> None:
    import xmlschema

    schema = xmlschema.XMLSchema(str(ROOT / "tests" / "data" / "junit" / "junit-10.xsd"))
    code, out, err = cli("test", "tests/pipetest/data/names.test.yaml", "--format", "junit")
    assert code == 2
    assert "error[CD231]" in err
    schema.validate(out)
    suite = schema.to_dict(out)["testsuite"][0]
    assert (suite["@name"], suite["@errors"]) == ("tests/pipetest/data/names.test.yaml", "1")
    error = suite["testcase"][0]["error"][0]
    assert error["@message"].startswith("tests/pipetest/data/names.test.yaml:")
    assert "error[CD231]" in error["$"]
