"""`converge-dsl explain`: every code explained from docs/errors.md, unknown codes refused."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.cli._explain import defined_codes, find, load, parse

ROOT = Path(__file__).resolve().parent.parent.parent
EXPECTED = Path(__file__).resolve().parent / "expected"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err, {})
    return code, out.getvalue(), err.getvalue()


def _expect(name: str, text: str) -> None:
    path = EXPECTED / name
    if os.environ.get("UPDATE_EXPECTED"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_every_defined_code_has_an_explanation_with_a_title_and_an_example() -> None:
    """The no-drift check: read the way the command reads, at run time."""
    explanations = load()
    for code, name in defined_codes().items():
        entry = explanations.get(code)
        assert entry is not None, f"{code} ({name}) has no section in docs/errors.md"
        assert entry.name == name, code
        assert entry.title, code
        assert entry.examples, f"{code} has no example"
        assert find(code) == entry


def test_every_example_fence_of_the_page_is_closed() -> None:
    page = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    fences = [line for line in page.splitlines() if line.startswith("```")]
    assert len(fences) % 2 == 0
    assert all(entry.text.count("```") % 2 == 0 for entry in load().values())


def test_every_explained_code_is_defined() -> None:
    assert sorted(set(load()) - set(defined_codes())) == []


def test_the_reader_takes_a_section_up_to_the_next_heading() -> None:
    page = (
        "# Codes\n\n## CD001\n\n**Bad thing** (`BAD`)\n\nWhy.\n\n```text\nerror[CD001]: x\n```\n"
        "\n## Adding a code\n\nnot part of CD001\n"
    )
    entry = parse(page)["CD001"]
    assert (entry.name, entry.title, entry.examples) == ("BAD", "Bad thing", ("error[CD001]: x\n",))
    assert "not part" not in entry.text
    assert parse("## CD002 — a title after the code\n\n**T** (`N`)\n")["CD002"].name == "N"
    assert "### More" in parse("## CD003\n\n**T** (`N`)\n\n### More\n\nx\n")["CD003"].text


def test_explain_prints_the_title_the_prose_and_the_example() -> None:
    code, out, err = _run("explain", "CD002")
    assert (code, err) == (0, "")
    _expect("explain_CD002.txt", out)


@pytest.mark.parametrize("word", ["cd2", "2", "002", "DUPLICATE_KEY", "duplicate_key", "CDOO2"])
def test_a_code_may_be_written_several_ways(word: str) -> None:
    assert _run("explain", word)[1] == _run("explain", "CD002")[1]


def test_json_gives_one_object_and_the_listing_every_code() -> None:
    code, out, _ = _run("explain", "CD901", "--format", "json")
    entry = json.loads(out)
    assert code == 0
    assert entry["name"] == "STOP_CYCLE_BUDGET"
    assert entry["examples"][0].startswith("error[CD901]: ")
    code, out, _ = _run("explain", "--format", "json")
    assert [e["code"] for e in json.loads(out)] == sorted(defined_codes())


def test_without_a_code_every_code_is_listed_with_its_title() -> None:
    code, out, _ = _run("explain")
    lines = out.splitlines()
    assert code == 0
    assert len(lines) == len(defined_codes())
    assert "CD002  A mapping has the same key twice" in lines


@pytest.mark.parametrize(
    ("word", "expected"),
    [("CD2O4x", "explain_unknown_code.txt"), ("UNKNOWN_MODL", "explain_unknown_name.txt")],
)
def test_an_unknown_code_is_a_usage_error_with_a_suggestion(word: str, expected: str) -> None:
    code, out, err = _run("explain", word)
    assert (code, out) == (3, "")
    _expect(expected, err)


def test_a_missing_page_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    import converge_dsl._resources as resources

    monkeypatch.setattr(resources, "errors_doc_path", lambda: Path("/nonexistent/errors.md"))
    code, _, err = _run("explain", "CD002")
    assert code == 1
    assert err.startswith(
        "error[CD360]: the error documentation is not available in this installation"
    )


def test_a_defined_code_without_a_section_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import converge_dsl.cli._explain as explain

    monkeypatch.setattr(explain, "load", lambda: {})
    code, _, err = _run("explain", "CD002")
    assert code == 1
    assert "CD002 (DUPLICATE_KEY) is defined but has no section" in err


def test_a_colour_terminal_gets_the_section_rendered_and_no_colour_the_plain_text() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for environ, coloured in (({}, True), ({"NO_COLOR": "1"}, False), ({"TERM": "dumb"}, False)):
        out = Terminal()
        assert run(["explain", "CD002"], out, io.StringIO(), environ) == 0
        assert ("\x1b[" in out.getvalue()) is coloured
        plain = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())  # same text, uncut, unwrapped
        assert plain == (EXPECTED / "explain_CD002.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("word", ["CD2O3", "cd2o3", "2O3"])
def test_a_letter_o_read_as_a_zero_is_said(word: str) -> None:
    code, out, err = _run("explain", word)
    assert (code, out.split(" ", 1)[0]) == (0, "CD203")
    assert err == f"note: read {word!r} as CD203 (a letter O for a zero)\n"


@pytest.mark.parametrize("word", ["CD203", "203", "UNKNOWN_CONTEXT_KEY"])
def test_a_code_written_as_it_is_needs_no_note(word: str) -> None:
    assert _run("explain", word)[2] == ""
