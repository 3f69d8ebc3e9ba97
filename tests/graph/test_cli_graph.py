"""`converge-dsl graph`: every format of two pipelines compared with files in
tests/graph/expected/ (`UPDATE_EXPECTED=1` rewrites them: read the diff),
invalid pipelines, and the refusals of `-o FILE`.

`support-triage` (an example) has an llm, rules, a pack solver, a model, a pack
and a key with a schema; `dead-ends` has keys that can never hold a fact,
suggestors that can never fire and an unused model.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).parent / "expected"
DATA = "tests/graph/data"
PIPELINES = {
    "support-triage": "pipelines/support-triage.yaml",
    "dead-ends": f"{DATA}/dead-ends.yaml",
}
SUFFIX = {"mermaid": "mmd", "dot": "dot", "json": "json"}


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # relative paths in the outputs, as a user types them


def expect(name: str, actual: str) -> None:
    """`actual` equals the file `name` (`UPDATE_EXPECTED=1` rewrites it: read the diff)."""
    path = EXPECTED / name
    if os.environ.get("UPDATE_EXPECTED") == "1":
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("format", sorted(SUFFIX))
@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_each_text_format_matches_its_expected_file(name: str, format: str) -> None:
    code, out, err = _cli("graph", PIPELINES[name], "--format", format)
    assert (code, err) == (0, "")
    expect(f"{name}.{SUFFIX[format]}", out)


def test_mermaid_is_the_default() -> None:
    assert _cli("graph", PIPELINES["dead-ends"]) == _cli(
        "graph", PIPELINES["dead-ends"], "--format", "mermaid"
    )


def test_json_marks_what_can_never_hold_a_fact_or_fire() -> None:
    _, out, _ = _cli("graph", PIPELINES["dead-ends"], "--format", "json")
    graph = json.loads(out)
    assert graph["unreachable_keys"] == ["hypotheses", "strategies", "evaluations", "orphan"]
    assert graph["never_firing_suggestors"] == ["from-orphan", "from-hypotheses", "echo"]
    nodes = {node["id"]: node for node in graph["nodes"]}
    assert nodes["model:spare"]["reachable"] is False
    assert nodes["model:main"]["reachable"] is True
    assert nodes["key:scored"]["schema"]["required"] == ["score"]
    assert nodes["suggestor:score"]["source"] == {
        "file": f"{DATA}/dead-ends.yaml",
        "line": 25,
        "column": 5,
        "end_line": 31,
    }
    dead = {(e["from"], e["to"]) for e in graph["edges"] if not e["reachable"]}
    assert ("suggestor:echo", "key:evaluations") in dead
    assert ("key:seeds", "suggestor:score") not in dead


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_graphviz_reads_the_dot_output(name: str) -> None:
    _, out, _ = _cli("graph", PIPELINES[name], "--format", "dot")
    done = subprocess.run(
        ["dot", "-Tsvg"], input=out, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout


def test_html_is_one_self_contained_page() -> None:
    code, out, _ = _cli("graph", PIPELINES["support-triage"], "--format", "html")
    assert code == 0
    assert out.startswith("<!DOCTYPE html><!-- converge-dsl graph -->\n")
    assert out.rstrip().endswith("</html>")
    # Nothing is fetched at view time: no external script, stylesheet, image or font.
    for forbidden in ("<script src", "<link", "@import", "url(http", 'src="http', 'href="http'):
        assert forbidden not in out
    own = out.replace('xmlns="http://www.w3.org/2000/svg"', "").replace('http-equiv="', "")
    assert "http" not in own
    assert out.count('class="node ') == 12
    assert '"lines":["  - name: classify"' in out
    assert "</script>" not in out.split('id="graph-data">', 1)[1].split("</script>", 1)[0]


def test_the_same_pipeline_gives_the_same_bytes() -> None:
    for format in ("json", "html"):
        first = _cli("graph", PIPELINES["support-triage"], "--format", format)
        assert _cli("graph", PIPELINES["support-triage"], "--format", format) == first


def test_an_invalid_pipeline_is_reported_like_validate_and_exits_2() -> None:
    for format in ("mermaid", "html"):
        code, out, err = _cli("graph", f"{DATA}/invalid.yaml", "--format", format)
        assert (code, out) == (2, "")
        expect("invalid.stderr.txt", err)
    # under --format json as `validate --format json` reports it, on standard output
    code, out, err = _cli("graph", f"{DATA}/invalid.yaml", "--format", "json")
    assert (code, err) == (2, "")
    assert out == _cli("validate", f"{DATA}/invalid.yaml", "--format", "json")[1]


def test_a_missing_pipeline_is_a_located_error() -> None:
    code, out, err = _cli("graph", f"{DATA}/no-such.yaml")
    assert (code, out) == (2, "")
    assert "error[CD014]" in err
    assert "no-such.yaml" in err


def test_bad_options_are_usage_errors() -> None:
    code, _, err = _cli("graph", PIPELINES["dead-ends"], "--format", "png")
    assert code == 3
    assert "invalid choice: 'png'" in err
    code, _, err = _cli("graph", PIPELINES["dead-ends"], "--input", "nope=1")
    assert code == 3
    assert "unknown input 'nope'" in err


def test_output_file_is_written_and_can_be_rewritten(tmp_path: Path) -> None:
    target = tmp_path / "graph.html"
    for format in ("html", "mermaid", "json", "dot"):
        code, out, err = _cli(
            "graph", PIPELINES["dead-ends"], "--format", format, "-o", str(target)
        )
        assert (code, out, err) == (0, "", "")
        assert (
            target.read_text(encoding="utf-8")
            == _cli("graph", PIPELINES["dead-ends"], "--format", format)[1]
        )


def test_output_refuses_a_file_it_did_not_write(tmp_path: Path) -> None:
    target = tmp_path / "notes.md"
    target.write_text("# my notes\n", encoding="utf-8")
    code, out, err = _cli("graph", PIPELINES["dead-ends"], "-o", str(target))
    assert (code, out) == (3, "")
    assert "is not a graph written by converge-dsl; it is not overwritten" in err
    assert target.read_text(encoding="utf-8") == "# my notes\n"


def test_output_refuses_links_and_folders(tmp_path: Path) -> None:
    real = tmp_path / "real.mmd"
    real.write_text("", encoding="utf-8")
    link = tmp_path / "link.mmd"
    link.symlink_to(real)
    code, _, err = _cli("graph", PIPELINES["dead-ends"], "-o", str(link))
    assert code == 3
    assert "symbolic link" in err
    assert real.read_text(encoding="utf-8") == ""
    code, _, err = _cli("graph", PIPELINES["dead-ends"], "-o", str(tmp_path))
    assert code == 3
    assert "cannot write graph" in err
    code, _, err = _cli("graph", f"{DATA}/invalid.yaml", "-o", str(tmp_path / "new.mmd"))
    assert code == 2
    assert not (tmp_path / "new.mmd").exists()


def test_drawing_builds_no_model_and_reads_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPH_TEST_API_KEY", raising=False)
    pipeline = tmp_path / "remote.yaml"
    pipeline.write_text(
        """apiVersion: converge-dsl/v1
kind: Pipeline
name: remote
models:
  far:
    adapter: openai
    base_url: "http://127.0.0.1:9/v1"
    model: m
    accounts: [{name: main, api_key_env: GRAPH_TEST_API_KEY}]
seeds:
  - {id: q, content: "a question"}
suggestors:
  - name: ask
    kind: llm
    model: far
    dependencies: [seeds]
    target: hypotheses
    prompt: {user: "{{ fact('seeds', 'q').content }}"}
    output: {format: lines, id: "h-{{ index }}", confidence: 0.8}
""",
        encoding="utf-8",
    )
    code, out, err = _cli("graph", str(pipeline), "--format", "json")
    assert (code, err) == (0, "")
    nodes = {node["id"]: node for node in json.loads(out)["nodes"]}
    assert nodes["model:far"]["details"]["adapter"] == "openai"
    assert nodes["model:far"]["reachable"] is True
    code, _, err = _cli("run", str(pipeline))
    assert code != 0  # the same pipeline cannot run without its key: graph never read it
    assert "GRAPH_TEST_API_KEY, which is not set" in err


def test_the_command_offers_exactly_the_package_formats() -> None:
    from converge_dsl.cli._graph import FORMATS as OFFERED
    from converge_dsl.graph import FORMATS

    assert OFFERED == FORMATS
