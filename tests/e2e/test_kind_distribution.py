"""A suggestor kind from another distribution needs no change to the core (§16).

`tests/data/kind_distribution` is a distribution of its own: the module
`counter_kind` (the kind `counter`: its schema branch, a check, a builder and a
graph style) and the entry point `converge_dsl.kinds: counter`. The fixture
installs it with pip into a temporary folder and puts that on `sys.path`, so
`importlib.metadata` sees its entry point; `validate` (its errors located),
`run`, `graph`, `plan`, the report and `schema pipeline` then handle the kind.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.frontend import _kinds

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = ROOT / "tests" / "data" / "kind_distribution"

COUNTING = textwrap.dedent(
    """\
    apiVersion: converge-dsl/v1
    kind: Pipeline
    name: counting
    keys: [{name: numbers}]
    suggestors:
      - {name: count, kind: counter, target: numbers, to: 3, label: "number {{ n }}"}
      - name: done
        kind: rule
        dependencies: [numbers]
        when: "count('numbers') >= 3"
        emit: [{key: evaluations, id: done, content: "counted {{ count('numbers') }}"}]
    """
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the test distribution is installed into (pip, no download)."""
    target = tmp_path_factory.mktemp("kind-distribution")
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"),
            *("--no-build-isolation", "--no-index", "--target", str(target), str(DISTRIBUTION)),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return target


@pytest.fixture
def counter_kind(installed: Path) -> Iterator[Path]:
    """The distribution on `sys.path` for this test (and off it after)."""
    sys.path.insert(0, str(installed))
    _kinds.forget_installed_kinds()
    try:
        yield installed
    finally:
        sys.path.remove(str(installed))
        sys.modules.pop("counter_kind", None)
        _kinds.forget_installed_kinds()


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


def _pipeline(tmp_path: Path, text: str = COUNTING) -> Path:
    path = tmp_path / "counting.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_without_the_distribution_the_kind_is_a_located_error(tmp_path: Path) -> None:
    code, out, _ = _cli("validate", str(_pipeline(tmp_path)), "--format", "json")
    found = json.loads(out)
    assert code == 2
    assert [(d["code"], d["line"], d["path"]) for d in found] == [
        ("CD103", 6, "suggestors[0].kind")
    ]
    assert found[0]["hint"] == "allowed: seed, rule, llm, tool, agent, pack"


@pytest.mark.usefixtures("counter_kind")
def test_validate_accepts_the_kind_and_locates_its_errors(tmp_path: Path) -> None:
    assert _cli("validate", str(_pipeline(tmp_path)))[0] == 0
    broken = COUNTING.replace("to: 3, label", "to: 3, lable")
    code, out, _ = _cli("validate", str(_pipeline(tmp_path, broken)), "--format", "json")
    found = json.loads(out)
    assert code == 2
    assert [(d["code"], d["line"], d["path"]) for d in found] == [
        ("CD100", 6, "suggestors[0].lable")
    ]
    assert "did you mean 'label'" in found[0]["hint"]
    empty = COUNTING.replace("to: 3", "from: 5, to: 3")
    code, out, _ = _cli("validate", str(_pipeline(tmp_path, empty)), "--format", "json")
    found = json.loads(out)
    assert [(d["code"], d["line"], d["path"]) for d in found] == [
        ("COUNTER01", 6, "suggestors[0].to")
    ]
    misspelt = COUNTING.replace("kind: counter", "kind: countr")
    code, out, _ = _cli("validate", str(_pipeline(tmp_path, misspelt)), "--format", "json")
    (typo,) = json.loads(out)
    assert (typo["code"], typo["hint"]) == ("CD103", "did you mean 'counter'?")


@pytest.mark.usefixtures("counter_kind")
def test_a_kind_whose_entry_point_fails_is_reported_where_it_is_named(tmp_path: Path) -> None:
    broken = COUNTING.replace("kind: counter", "kind: broken")
    code, out, _ = _cli("validate", str(_pipeline(tmp_path, broken)), "--format", "json")
    (found,) = json.loads(out)
    assert code == 2
    assert (found["code"], found["line"], found["path"]) == ("CD240", 6, "suggestors[0].kind")
    assert "broken = counter_kind:NO_SUCH_KIND fails to load (AttributeError" in found["message"]


@pytest.mark.usefixtures("counter_kind")
def test_a_template_of_the_kind_is_checked_with_its_own_names(tmp_path: Path) -> None:
    wrong = COUNTING.replace("number {{ n }}", "number {{ m }}")
    code, out, _ = _cli("validate", str(_pipeline(tmp_path, wrong)), "--format", "json")
    found = json.loads(out)
    assert code == 2
    assert [(d["line"], d["path"]) for d in found] == [(6, "suggestors[0].label")]


@pytest.mark.usefixtures("counter_kind")
def test_run_runs_the_kind_and_the_report_shows_it(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    code, out, err = _cli(
        "run", str(_pipeline(tmp_path)), "--format", "json", "--report", str(report)
    )
    assert code == 0, err
    facts = json.loads(out)["facts"]
    assert [f["content"] for f in facts["numbers"]] == ["number 1", "number 2", "number 3"]
    assert [f["content"] for f in facts["evaluations"]] == ["counted 3"]
    assert "count" in report.read_text(encoding="utf-8")


@pytest.mark.usefixtures("counter_kind")
def test_graph_draws_the_kind_in_its_own_style(tmp_path: Path) -> None:
    code, out, _ = _cli("graph", str(_pipeline(tmp_path)), "--format", "mermaid")
    assert code == 0
    assert "classDef counter fill:#fee2e2,stroke:#b91c1c,color:#7f1d1d" in out
    assert '{{"count<br/>' in out  # its hexagon
    code, out, _ = _cli("graph", str(_pipeline(tmp_path)), "--format", "dot")
    assert 'fillcolor="#fee2e2"' in out
    code, out, _ = _cli("graph", str(_pipeline(tmp_path)), "--format", "html")
    assert ".kind-suggestor.style-counter:not(.dead) .shape { fill: #fee2e2;" in out


@pytest.mark.usefixtures("counter_kind")
def test_plan_handles_the_kind(tmp_path: Path) -> None:
    """The agent example with a counter added: plan reads past the counter to the agent."""
    example = (ROOT / "pipelines" / "agent-review.yaml").read_text(encoding="utf-8")
    script = ROOT / "pipelines" / "agent-review.script.yaml"
    (tmp_path / script.name).write_bytes(script.read_bytes())
    counter = "suggestors:\n  - {name: count, kind: counter, target: signals, to: 2}\n"
    path = _pipeline(tmp_path, example.replace("suggestors:\n", counter, 1))
    code, out, err = _cli("plan", str(path))
    assert code == 0, err
    assert "reviewer" in out


def test_schema_pipeline_is_composed_with_the_installed_kind(counter_kind: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(counter_kind)])}
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", "schema", "pipeline"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    schema = json.loads(done.stdout)
    suggestor = schema["$defs"]["suggestor"]
    assert suggestor["properties"]["kind"]["enum"][-1] == "counter"
    assert schema["$defs"]["counterSuggestor"]["required"] == ["name", "kind", "target", "to"]
