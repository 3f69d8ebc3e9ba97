"""`validate` loads scripted models' scripts as `run` does, located in the script file."""

from __future__ import annotations

from pathlib import Path

import pytest

from converge_dsl.validation import check_pipeline

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: p
models: {{default: {{adapter: scripted, script: {script}}}}}
seeds: [{{id: s, content: seed}}]
suggestors:
  - name: l
    kind: llm
    model: default
    dependencies: [seeds]
    target: competitors
    prompt: {{user: "{{{{ facts.seeds[0].content }}}}"}}
    output: {{format: text, id: x}}
"""
HEAD = "apiVersion: converge-dsl/v1\nkind: ModelScript\n"


def _check(tmp_path: Path, script: str, text: str | None) -> list[tuple[str, str, int, int]]:
    folder = tmp_path / "sub"
    folder.mkdir()
    if text is not None:
        (folder / script).write_text(text)
    (folder / "p.yaml").write_text(PIPELINE.format(script=script))
    checked = check_pipeline(folder / "p.yaml", display="sub/p.yaml")
    return [(d.code, d.file, d.line, d.column) for d in checked.errors]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HEAD + 'rules:\n  - {match: {regex: "([a-"}, reply: hi}\n', ("CD701", 4, 21)),
        (HEAD + 'rules:\n  - {match: {regex: "(a*)\\\\1*b"}, reply: hi}\n', ("CD703", 4, 21)),
        (HEAD + 'rules:\n  - {match: {regex: "(?=x)a"}, reply: hi}\n', ("CD703", 4, 21)),
        (HEAD + "rules: {match: 1}\n", ("CD102", 3, 8)),
        (HEAD + "default: {reply: no}\n", ("CD007", 3, 18)),
    ],
)
def test_a_broken_script_is_an_error_located_in_the_script(
    tmp_path: Path, text: str, expected: tuple[str, int, int]
) -> None:
    code, line, column = expected
    assert _check(tmp_path, "s.yaml", text) == [(code, "sub/s.yaml", line, column)]


def test_a_good_script_passes(tmp_path: Path) -> None:
    assert _check(tmp_path, "s.yaml", HEAD + "default: {reply: hello}\n") == []


def test_a_missing_script_or_a_folder_is_located_at_script(tmp_path: Path) -> None:
    assert _check(tmp_path, "nope.yaml", None) == [("CD210", "sub/p.yaml", 4, 47)]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "dirp").mkdir(parents=True)
    (tmp_path / "other" / "p.yaml").write_text(PIPELINE.format(script="dirp"))
    checked = check_pipeline(tmp_path / "other" / "p.yaml")
    (error,) = checked.errors
    assert error.message == "script file 'dirp' is a folder, not a file"


def test_the_pipeline_itself_as_its_script_is_refused(tmp_path: Path) -> None:
    found = _check(tmp_path, "p.yaml", None)
    assert ("CD103", "sub/p.yaml", 2, 7) in found  # kind: Pipeline is not a ModelScript


def test_validate_shows_the_script_line_in_human_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from converge_dsl.cli import run

    _check(tmp_path, "s.yaml", HEAD + 'rules:\n  - {match: {regex: "(?!a)b$"}, reply: hi}\n')
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert run(["validate", "sub/p.yaml"], out, io.StringIO()) == 2
    assert out.getvalue().splitlines()[1:5] == [
        " --> sub/s.yaml:4:21",
        "  |",
        '4 |   - {match: {regex: "(?!a)b$"}, reply: hi}',
        "  |                     ^^^^^^^^^",
    ]


def test_the_renderer_reads_each_named_file_once_and_skips_unreadable_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge_dsl.diagnostics import Diagnostic, Severity
    from converge_dsl.frontend import SourceTexts, render_human

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text("first\nsecond\n")
    (tmp_path / "bad.yaml").write_bytes(b"\xff\xfe")
    texts = SourceTexts({"given.yaml": "given\n"})
    assert (texts.get("given.yaml"), texts.get("a.yaml"), texts.get("bad.yaml")) == (
        "given\n",
        "first\nsecond\n",
        None,
    )
    (tmp_path / "a.yaml").write_text("changed\n")
    assert texts["a.yaml"] == "first\nsecond\n"  # read once
    assert (texts.get("missing.yaml"), sorted(texts)) == (None, ["a.yaml", "given.yaml"])

    def at(file: str) -> Diagnostic:
        return Diagnostic("CD001", Severity.ERROR, "m", file, 2, 1, 2, 7)

    rendered = render_human([at("a.yaml"), at("missing.yaml")], {"a.yaml": "one\ntwo\n"})
    assert "2 | two" in rendered
    assert rendered.count(" | ") == 2  # the missing file has no excerpt
