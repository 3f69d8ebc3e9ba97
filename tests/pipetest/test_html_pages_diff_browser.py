"""The page of `diff --format html` in a real headless Chromium.

The diff of two runs and of two batch results files of the shipped examples, one prompt
changed (the changes of test_example_diffs.py): A beside B, filtered by text and by
change; a diff that leaves the usage out says so. Screenshots are saved under the
`artifacts` folder (tests/conftest.py); the `browser` fixture skips, saying why, where
Chromium, its driver or selenium is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .browser_pages import console_errors, open_page, section_count, type_search, visible_rows
from .conftest import cli
from .test_example_diffs import CHANGES, PromptChange, _copy, _run

BROWSER_WINDOW = (1400, 1500)


def _diff_page(change: PromptChange, folder: Path) -> Path:
    a, b = _copy(change, folder / "a"), _copy(change, folder / "b")
    b.write_text(b.read_text(encoding="utf-8").replace(change.old, change.new), encoding="utf-8")
    page = folder / "diff.html"
    argv = ["diff", _run(change, a), _run(change, b), "--format", "html", "-o", page]
    assert cli(*argv)[0] == 1
    return page


def _change(example: str) -> PromptChange:
    return next(c for c in CHANGES if c.example == example)


def test_the_diff_of_two_runs_sets_a_beside_b_and_filters(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    open_page(browser, _diff_page(_change("market-entry.yaml"), tmp_path))
    assert console_errors(browser) == []
    facts = [r.text for r in visible_rows(browser, "#differences tr.fact")]
    assert facts == [
        "removed competitors/competitor-nordhaul",
        "changed strategies/differentiate",
        "changed strategies/niche",
        "the run",
    ]
    niche = browser.find_elements("css selector", "#differences tbody tr")[6]
    cells = niche.find_elements("tag name", "td")
    assert [c.text for c in cells] == [
        "content",
        "Serve the segment the 3 incumbents ignore",
        "Serve the segment the 2 incumbents ignore",
    ]
    assert cells[1].find_element("css selector", "mark.del").text == "3"
    assert cells[2].find_element("css selector", "mark.ins").text == "2"
    browser.save_screenshot(str(artifacts / "diff-runs.png"))
    browser.find_element("css selector", "input[data-filter=changed]").click()
    facts = [r.text for r in visible_rows(browser, "#differences tr.fact")]
    assert facts == ["removed competitors/competitor-nordhaul", "the run"]
    type_search(browser, "nordhaul")
    assert section_count(browser, "differences") == "1 of 4"
    assert console_errors(browser) == []


def test_the_diff_of_two_batches_shows_the_cases_whose_facts_changed(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    open_page(browser, _diff_page(_change("support-triage/ticket.yaml"), tmp_path))
    assert console_errors(browser) == []
    cases = browser.find_elements("css selector", "#differences details.case")
    assert [c.get_attribute("data-case") for c in cases] == ["T-202", "T-209"]
    assert "urgency 3" in cases[0].text
    assert "urgency 2" in cases[0].text
    usage = browser.find_element("id", "usage").text
    assert "input_tokens" in usage
    assert "50 cases differ in their usage only" in usage
    assert "cases differ 2" in browser.find_element("id", "stats").text
    browser.save_screenshot(str(artifacts / "diff-batch.png"))
    type_search(browser, "T-209")
    shown = [c.get_attribute("data-case") for c in cases if c.is_displayed()]
    assert shown == ["T-209"]
    assert console_errors(browser) == []


def test_a_diff_that_leaves_the_usage_out_says_so(browser: Any, tmp_path: Path) -> None:
    files = []
    for side, tokens in (("a", 10), ("b", 12)):
        body = {"index": 0, "id": "x", "stop_reason": "converged", "facts": {},
                "usage": {"input_tokens": tokens}}  # fmt: skip
        (tmp_path / f"{side}.jsonl").write_text(json.dumps(body) + "\n", encoding="utf-8")
        files.append(tmp_path / f"{side}.jsonl")
    page = tmp_path / "diff.html"
    assert cli("diff", *files, "--ignore", "usage", "--format", "html", "-o", page)[0] == 0
    open_page(browser, page)
    assert console_errors(browser) == []
    assert browser.find_element("id", "verdict").text == "the same"
    assert "not compared usage" in browser.find_element("id", "stats").text
    assert browser.find_element("id", "usage").text.endswith("not compared (--ignore usage)")


# An Arabic fact's content, long enough to take lines, ending in a year and a full stop
_ARABIC = " ".join(
    ["\u0645\u062d\u0645\u062f \u0639\u0628\u062f \u0627\u0644\u0644\u0647 \u0645\u0646 "
     "\u0627\u0644\u0631\u064a\u0627\u0636"] * 8  # محمد عبد الله من الرياض
)  # fmt: skip
# Where each value of the diff's sides lays its first letter, its last four but one (a
# year), its last (a full stop), and its cell's content box. (A value's text is in several
# nodes, its common start and end and its marked middle: a place in it is found in them.)
_VALUES_LAID = (
    "return Array.from(document.querySelectorAll('#differences td.a pre, #differences td.b pre'))"
    ".map(function (pre) { var walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);"
    " var nodes = [], range = document.createRange(), n = pre.textContent.length;"
    " while (walker.nextNode()) nodes.push(walker.currentNode);"
    " var place = function (i, end) { for (var k = 0; k < nodes.length; k++) {"
    "  var size = nodes[k].data.length; if (i < size || (end && i === size)) return [nodes[k], i];"
    "  i -= size; } };"
    " var rect = function (a, b) { range.setStart.apply(range, place(a, false));"
    "  range.setEnd.apply(range, place(b, true)); var r = range.getBoundingClientRect();"
    "  return [r.left, r.right]; };"
    " var td = pre.parentNode.getBoundingClientRect(), style = getComputedStyle(pre.parentNode);"
    " return {text: pre.textContent, first: rect(0, 1), year: rect(n - 5, n - 1),"
    "  stop: rect(n - 1, n), column: pre.parentNode.className,"
    "  box: [td.left + parseFloat(style.paddingLeft), td.right - parseFloat(style.paddingRight)]};"
    " });"
)


def test_a_value_written_right_to_left_is_laid_right_to_left(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # An Arabic value was laid left to right as the page: its lines stood at the left of
    # its cell, and the year and full stop that end it showed at the right, "2024.", where
    # the value starts. Each value is laid in the direction of its first letter; A and B
    # stay in their columns, a Latin value at its cell's left.
    facts = []
    for year, latin in (("2024", "Latin then "), ("2025", "Latin now ")):
        content = {"id": "x", "content": f"{_ARABIC} {year}.", "data": {}}
        facts.append([content, {"id": "y", "content": latin + _ARABIC[:40], "data": {}}])
    files = []
    for name, body in (("a.json", facts[0]), ("b.json", facts[1])):
        run = {"stop_reason": "converged", "usage": {}, "facts": {"k": body}}
        (tmp_path / name).write_text(json.dumps(run), encoding="utf-8")
        files.append(tmp_path / name)
    page = tmp_path / "rtl.html"
    assert cli("diff", *files, "--format", "html", "-o", page)[0] == 1
    open_page(browser, page)
    browser.find_element("id", "differences").screenshot(str(artifacts / "diff-rtl-values.png"))
    values = browser.execute_script(_VALUES_LAID)
    assert [v["column"] for v in values] == ["a", "b", "a", "b"]
    heads = browser.execute_script(
        "return Array.from(document.querySelectorAll('#differences thead th'))"
        ".map(function (th) { return th.getBoundingClientRect().left; });"
    )
    for value in values:
        left, right = value["box"]
        column = heads[1] if value["column"] == "a" else heads[2]
        assert abs(left - column - 8) < 1, value  # under its head, as before
        if value["text"].startswith("Latin"):
            assert left - 0.5 <= value["first"][0] <= left + 3, value
        else:  # its start at the cell's right, its full stop at the left of its year
            assert right - 3 <= value["first"][1] <= right + 0.5, value
            assert value["stop"][1] <= value["year"][0] + 0.5, value
    assert console_errors(browser) == []
