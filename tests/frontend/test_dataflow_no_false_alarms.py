"""The data-flow analysis raises no false alarm: every shipped example and valid pipeline.

The examples (`pipelines/`) are valid under `--strict` (exit 0, nothing printed but the
summary). Every other pipeline the repository holds outside the folders of invalid
examples (the tests' data, the docs' examples, the pipelines inside docs/*.md) gets no
data-flow finding (CD250-CD269, CD300) unless it is listed here with the finding it
was written to show.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.validation import check_pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(
    p
    for p in (ROOT / "pipelines").glob("*.yaml")
    if not p.name.endswith((".script.yaml", ".test.yaml"))
)
_SKIPPED = ("invalid", "edits", "dataflow")  # folders of mistakes, pack edits, the corpus
OTHERS = sorted(
    p
    for p in ROOT.joinpath("tests").rglob("*.yaml")
    if not set(p.relative_to(ROOT).parts) & set(_SKIPPED)
    and re.search(r"^kind: Pipeline$", p.read_text("utf-8"), re.M)
)
# The pipelines written to show a finding (a run that stops on it, a drawing of it).
EXPECTED = {
    "tests/e2e/data/stops/conflict.yaml": {"CD256"},  # the run's conflict, CD909
    "tests/e2e/data/stops/cycles.yaml": {"CD257"},  # the run's cycle budget, CD901
    "tests/e2e/data/stops/facts.yaml": {"CD257"},  # the run's fact budget, CD902
    "tests/e2e/data/template-error.yaml": {"CD252"},  # a template failing at run time
    "tests/compiler/data/fact-field-typo.yaml": {"CD251"},  # a key named by an input
    "tests/graph/data/dead-ends.yaml": {"CD300"},  # the graph's dead suggestors
    "tests/lsp/data/broken.yaml": {"CD300"},  # the editor's errors in several files
}
FLOW = re.compile(r"CD2[56]\d|CD300")


def _flow_codes(path: Path) -> set[str]:
    checked = check_pipeline(path, display=path.name)
    return {d.code for d in checked.diagnostics if FLOW.fullmatch(d.code)}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_are_valid_under_strict(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(path.parent)
    out, err = io.StringIO(), io.StringIO()
    code = run(["validate", "--strict", path.name], out, err)
    assert (code, out.getvalue(), err.getvalue()) == (0, "1 file valid\n", "")


def test_the_walk_sees_the_tests_pipelines() -> None:
    assert len(OTHERS) >= 25
    missing = [name for name in EXPECTED if ROOT / name not in OTHERS]
    assert missing == []


@pytest.mark.parametrize("path", OTHERS, ids=lambda p: str(p.relative_to(ROOT / "tests")))
def test_no_data_flow_finding_unless_expected(path: Path) -> None:
    name = path.relative_to(ROOT).as_posix()
    assert _flow_codes(path) == EXPECTED.get(name, set())


def _doc_pipelines() -> list[tuple[str, str]]:
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        blocks = re.findall(r"^```yaml\n(.*?)^```$", page.read_text("utf-8"), re.M | re.S)
        found += [(f"{page.name}#{i}", b) for i, b in enumerate(blocks) if "kind: Pipeline" in b]
    return found


@pytest.mark.parametrize(("where", "text"), _doc_pipelines(), ids=lambda v: v)
def test_the_docs_pipelines_have_no_data_flow_finding(
    where: str, text: str, tmp_path: Path
) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text, encoding="utf-8")
    assert _flow_codes(path) == set()
