"""The pytest plugin: *.test.yaml one item per case, *.eval.yaml one item; the fixture.

Each test runs pytest in a subprocess in a folder of its own (the plugin is
the installed `pytest11` entry point, as users get it).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

PIPELINES = ROOT / "pipelines"


def _pytest(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *argv],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _copy_example(folder: Path, name: str) -> None:
    for suffix in (".yaml", ".script.yaml", ".test.yaml"):
        shutil.copy(PIPELINES / f"{name}{suffix}", folder / f"{name}{suffix}")


def _example_named(folder: Path, *names: str) -> None:
    """The incident-triage example in `folder`, its three cases named `names` (YAML)."""
    _copy_example(folder, "incident-triage")
    test_file = folder / "incident-triage.test.yaml"
    text = test_file.read_text()
    for old, new in zip(
        (
            "a bad deploy is rolled back first",
            "the paging service names the signals and the rollback",
            "without the bad-deploy hypothesis there is no rollback",
        ),
        names,
        strict=True,
    ):
        text = text.replace(old, new)
    test_file.write_text(text)


def test_each_case_is_an_item_named_after_the_file_and_case(tmp_path: Path) -> None:
    _copy_example(tmp_path, "incident-triage")
    done = _pytest(tmp_path, "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "incident-triage.test.yaml::a bad deploy is rolled back first PASSED" in done.stdout
    assert "3 passed" in done.stdout


def test_a_case_name_with_control_characters_is_an_item_named_escaped(tmp_path: Path) -> None:
    # pytest printed the case's name as it was: an ESC in it drove the terminal.
    _copy_example(tmp_path, "incident-triage")
    test_file = tmp_path / "incident-triage.test.yaml"
    text = test_file.read_text()
    test_file.write_text(text.replace("a bad deploy is rolled back first", '"bad \\e[31mred"'))
    done = _pytest(tmp_path, "-v", "-rA", "--color=no")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\x1b" not in done.stdout
    assert "incident-triage.test.yaml::bad \\x1b\\x5b31mred PASSED" in done.stdout


def test_case_names_are_items_on_one_line_each_and_never_alike(tmp_path: Path) -> None:
    # Newline and tab were kept (a name could print a PASSED line of its own), and
    # "dup\e" (an ESC) and 'dup\x1b' (its escape's text) were items of one name.
    _example_named(tmp_path, '"x PASSED\\nfake::y\\tz"', '"dup\\e"', "'dup\\x1b'")
    done = _pytest(tmp_path, "--collect-only", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    names = [line.split("::", 1)[1] for line in done.stdout.splitlines() if "::" in line]
    assert names == ["x PASSED\\nfake\\x3a:y\\tz", "dup\\x1b", "dup\\\\x1b"]


def test_a_case_name_holding_double_colons_can_be_selected_by_its_node_id(
    tmp_path: Path,
) -> None:
    # `pytest 'file.test.yaml::a::b'` read "b" as an item inside an item "a": "not found".
    _example_named(tmp_path, '"std::vector"', '"a:::b"', '"std\\\\x3a:vector"')
    _each_selected_alone(tmp_path, "std\\x3a:vector", "a\\x3a\\x3a:b", "std\\\\x3a:vector")


def _each_selected_alone(tmp_path: Path, *names: str) -> None:
    """The items of `tmp_path` are named `names`, each selected alone by its node id."""
    listed = _pytest(tmp_path, "--collect-only", "-q")
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    assert [node.split("::", 1)[1] for node in ids] == list(names)
    for node in ids:
        done = _pytest(tmp_path, "-q", "--color=no", node)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.splitlines()[-1].startswith("1 passed"), done.stdout


def test_a_case_whose_name_another_s_extends_with_brackets_is_selected_alone(
    tmp_path: Path,
) -> None:
    # pytest reads `NAME[...]` as a parametrization of NAME: the node id of 'a::b'
    # selected 'a::b[c]' too.
    _example_named(tmp_path, '"a::b"', '"a::b[c]"', '"x[1]"')
    _each_selected_alone(tmp_path, "a\\x3a:b", "a\\x3a:b\\x5bc]", "x\\x5b1]")


def test_a_case_is_selected_by_its_own_name_with_k(tmp_path: Path) -> None:
    # Its item's name is escaped (`a\\x3a:b`): `-k 'a::b'` selected no test.
    _example_named(tmp_path, '"a::b"', '"a::b (more)"', '"other"')
    done = _pytest(tmp_path, "--collect-only", "-q", "-k", "a::b")
    ids = [line.split("::", 1)[1] for line in done.stdout.splitlines() if "::" in line]
    assert ids == ["a\\x3a:b", "a\\x3a:b (more)"], done.stdout + done.stderr


def test_an_invalid_test_file_is_a_collection_error_with_its_diagnostics(tmp_path: Path) -> None:
    _copy_example(tmp_path, "incident-triage")
    test_file = tmp_path / "incident-triage.test.yaml"
    test_file.write_text(
        test_file.read_text().replace("invariants: [constrained]", "invariants: [x]")
    )
    done = _pytest(tmp_path)
    assert done.returncode == 2
    assert "error[CD231]: pipeline 'incident-triage' has no invariant 'x'" in done.stdout
    assert "Traceback" not in done.stdout


def test_collection_can_be_turned_off_with_the_ini_option(tmp_path: Path) -> None:
    _copy_example(tmp_path, "incident-triage")
    (tmp_path / "pytest.ini").write_text("[pytest]\nconverge_dsl_tests = false\n")
    assert _pytest(tmp_path).returncode == 5  # no tests collected


def test_this_repository_does_not_collect_the_examples_twice() -> None:
    done = _pytest(ROOT, "--collect-only", "-q", "pipelines")
    assert done.returncode == 5, done.stdout


def test_the_pipeline_tester_fixture(tmp_path: Path) -> None:
    _copy_example(tmp_path, "incident-triage")
    (tmp_path / "test_triage.py").write_text(
        """
def test_scripted_and_expected(pipeline_tester):
    pipeline = pipeline_tester.load("incident-triage.yaml")
    model = pipeline_tester.scripted(
        [{"match": {"suggestor": "hypothesise"},
          "reply": '[{"id": "bad-deploy", "cause": "a slow query", "likelihood": 0.9}]'}],
        name="analyst",
    )
    result = pipeline_tester.run(
        pipeline,
        {"service": "search"},
        models={"analyst": model},
        expect={"stop_reason": "converged", "invariants": ["constrained"],
                "facts": [{"key": "constraints", "id": "rollback-first", "contains": "search"}]},
    )
    assert result.usage.model_calls == 1
    pipeline_tester.check(result, {"counts": {"hypotheses": 1}})


def test_a_broken_expectation_fails_with_the_diff(pipeline_tester):
    pipeline = pipeline_tester.load("incident-triage.yaml")
    result = pipeline_tester.run(pipeline, models={"analyst": pipeline_tester.script(
        "incident-triage.script.yaml", name="analyst")})
    pipeline_tester.check(result, {"counts": {"hypotheses": 7}})


def test_a_misspelt_expectation_fails_before_anything_is_checked(pipeline_tester):
    pipeline = pipeline_tester.load("incident-triage.yaml")
    result = pipeline_tester.run(pipeline, models={"analyst": pipeline_tester.script(
        "incident-triage.script.yaml", name="analyst")})
    pipeline_tester.check(result, {"count": {"hypotheses": 1}})
"""
    )
    done = _pytest(tmp_path, "test_triage.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 failed, 1 passed" in done.stdout
    assert "`expect` is not written as a test file writes it:" in done.stdout
    assert "did you mean 'counts'" in done.stdout
    assert "counts.hypotheses: count of 'hypotheses' differs" in done.stdout
    assert "expected: 7" in done.stdout


def test_the_plugin_costs_nothing_until_a_test_file_is_collected() -> None:
    code = (
        "import sys, converge_dsl.pipetest.pytest_plugin\n"
        "print(sorted(m for m in sys.modules if m.startswith('converge_dsl')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = ast.literal_eval(done.stdout)
    assert "converge_dsl.pipetest.pytest_plugin" in loaded
    assert [m for m in loaded if m.startswith(("converge_dsl.batch", "converge_dsl.engine"))] == []


def test_another_tools_file_of_the_name_is_not_collected(tmp_path: Path) -> None:
    _copy_example(tmp_path, "incident-triage")
    (tmp_path / "docker-compose.test.yaml").write_text("services:\n  web: {image: nginx}\n")
    done = _pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
    named = _pytest(tmp_path, "docker-compose.test.yaml")  # named: read, and reported
    assert named.returncode == 2
    assert "docker-compose.test.yaml:1:1" in named.stdout


def test_an_evaluation_file_is_one_item_that_fails_with_its_table(tmp_path: Path) -> None:
    shutil.copytree(PIPELINES / "support-triage", tmp_path / "triage")
    done = _pytest(tmp_path, "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "triage.eval.yaml::thresholds PASSED" in done.stdout
    pipeline = tmp_path / "triage" / "ticket.yaml"
    changed = "Treat any ticket that mentions an error as a bug. Answer with a JSON array only."
    pipeline.write_text(pipeline.read_text().replace("Answer with a JSON array only.", changed))
    done = _pytest(tmp_path, "-v")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "triage.eval.yaml::thresholds FAILED" in done.stdout
    assert "FAIL category: 0.885 [0.770, 0.946] over 52 cases (threshold 0.9)" in done.stdout


def test_an_evaluation_fails_when_one_of_its_configurations_misses_a_threshold(
    tmp_path: Path,
) -> None:
    from .test_eval_configurations import _folder

    folder = tmp_path / "compared"
    folder.mkdir()
    _folder(folder)
    done = _pytest(tmp_path, "-v")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "compared.eval.yaml::thresholds FAILED" in done.stdout
    assert "  category        1.000    0.300!" in done.stdout
