"""The run report's names in a real headless Chromium: ids holding hidden characters (and
the text of their escapes) shown apart and found by the search, the pages' `shownName`
against `page_name`, and the title naming the pipeline."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run

from .test_report_browser import LOAD_BOUND_S, ROOT, _count, _errors, _open


@pytest.fixture(scope="module")
def two_ids_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The market-entry report, its first two facts' ids made `r` U+202E `ev` and
    `r\\u202eev` (six characters in the middle)."""
    from converge_dsl.runtime import render_report

    folder = tmp_path_factory.mktemp("two-ids")
    trace, page = folder / "two-ids.jsonl", folder / "two-ids.html"
    argv = ["run", str(ROOT / "pipelines" / "market-entry.yaml"), "--trace", str(trace)]
    assert run(argv, io.StringIO(), io.StringIO()) == 0
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    facts = [e for e in events if e["type"] == "fact_promoted"]
    facts[0]["id"], facts[1]["id"] = "r\u202eev", "r\\u202eev"
    facts[2]["id"] = "r\u27e8U+202E\u27e9ev"  # the notation's text, typed
    trace.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    page.write_text(render_report(trace), encoding="utf-8")
    return page


@pytest.mark.parametrize(
    ("fragment", "shown"),
    [
        ("#fact=r%E2%80%AEev", "r\u27e8U+202E\u27e9ev"),
        ("#fact=r%5Cu202eev", "r\\u202eev"),
        ("#fact=r%E2%9F%A8U%2B202E%E2%9F%A9ev", "r\u27e8U+27E8\u27e9U+202E\u27e9ev"),
    ],
)
def test_an_id_with_a_hidden_character_and_one_with_its_escape_text_show_apart(
    browser: Any, two_ids_page: Path, artifacts: Path, fragment: str, shown: str
) -> None:
    # Both rows showed `r\u202eev`, and a link to either opened the same one.
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get("about:blank")
    browser.get(two_ids_page.as_uri() + fragment)
    WebDriverWait(browser, LOAD_BOUND_S).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )
    assert _errors(browser) == []
    ids = [r.text for r in browser.find_elements("css selector", "#facts .row span:nth-child(2)")]
    assert ids[:3] == ["r\u27e8U+202E\u27e9ev", "r\\u202eev", "r\u27e8U+27E8\u27e9U+202E\u27e9ev"]
    detail = browser.find_element("id", "fact-detail").text
    assert f" / {shown}\n" in detail  # the link names the raw id and opens its own fact
    browser.save_screenshot(str(artifacts / "report-two-ids.png"))


def _search_by_script(driver: Any, text: str) -> None:
    """Put `text` in the search box as a paste would (any character), then wait for the
    facts' count to say a filter."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_script(
        "var s = document.getElementById('search'); s.value = arguments[0];"
        "s.dispatchEvent(new Event('input'));",
        text,
    )
    WebDriverWait(driver, LOAD_BOUND_S).until(lambda d: " of " in _count(d, "facts"))


def test_a_raw_id_pasted_in_the_search_finds_its_row(browser: Any, two_ids_page: Path) -> None:
    # The rows show `r⟨U+202E⟩ev`; a search for the raw id, as a link names it, found nothing.
    _open(browser, two_ids_page)
    _search_by_script(browser, "r\u202eev")
    ids = [r.text for r in browser.find_elements("css selector", "#facts .row span:nth-child(2)")]
    assert ids == ["r\u27e8U+202E\u27e9ev"]
    assert _errors(browser) == []


def test_the_pages_shown_name_rewrites_what_page_name_does(
    browser: Any, two_ids_page: Path
) -> None:
    # One class of characters, written into names.js from Python's.
    from converge_dsl._page_assets import page_name

    _open(browser, two_ids_page)
    script = (
        "var out = [];"
        "for (var c = 0; c < 0x10000; c++) {"
        "  if (c >= 0xd800 && c < 0xe000) continue;"
        "  var s = String.fromCharCode(c); if (shownName(s) !== s) out.push(c); }"
        "return out;"
    )
    in_js = browser.execute_script(script)
    in_python = [
        c for c in range(0x10000) if not 0xD800 <= c < 0xE000 and page_name(chr(c)) != chr(c)
    ]
    assert in_js == in_python
    assert browser.execute_script("return shownName('a\\u202eb');") == page_name("a\u202eb")


def test_the_pages_shown_name_keeps_a_joiner_between_emoji_as_page_name_does(
    browser: Any, two_ids_page: Path
) -> None:
    # One rule, on both sides: a family showed as three faces and two ⟨U+200D⟩; then
    # `🍕‍🍕` looked as `🍕🍕` does.
    from ..test_page_assets import ZWJ_CASES

    _open(browser, two_ids_page)
    # As ASCII JSON: WebDriver's own JSON cannot carry the cases' lone surrogates.
    texts = json.dumps([text for text, _ in ZWJ_CASES])
    shown = browser.execute_script(
        "return JSON.stringify(JSON.parse(arguments[0]).map(shownName));", texts
    )
    assert json.loads(shown) == [shown for _, shown in ZWJ_CASES]


def _edited_report(folder: Path, name: str, file: str | None = None) -> Path:
    """The report of a run of the shipped support-triage pipeline whose trace was edited:
    the pipeline its facts name renamed `name`, each span's file `file` when given."""
    from converge_dsl.runtime import render_report

    trace = folder / "t.jsonl"
    pipeline = str(ROOT / "pipelines" / "support-triage.yaml")
    assert run(["run", pipeline, "--trace", str(trace)], io.StringIO(), io.StringIO()) == 0
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    for event in events:
        if file is not None and isinstance(event.get("span"), dict):
            event["span"]["file"] = file
        if isinstance(event.get("source"), str):
            event["source"] = event["source"].replace("@support-triage", "@" + name)
    trace.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    page = folder / "edited.html"
    page.write_text(render_report(trace), encoding="utf-8")
    return page


def test_the_title_names_the_pipeline_the_run_s_facts_name(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # The title was the last part of the first suggestor's file (`pipe.yaml` for
    # `a/b/pipe.yaml`), whatever the run, and a hidden character in it showed raw. It is
    # the pipeline's name, as the graph page's title and the CLI's `suggestor@pipeline`
    # name it, shown as names are (`page_name`).
    _open(browser, _edited_report(tmp_path, "team/tri\u200bage", "moved/elsewhere/pipe.yaml"))
    shown = "team/tri\u27e8U+200B\u27e9age"
    assert browser.find_element("id", "title").text == "Run report: " + shown
    assert browser.title == "converge-dsl report: " + shown
    browser.find_element("tag name", "header").screenshot(str(artifacts / "report-title.png"))
    assert _errors(browser) == []


def test_a_long_title_leaves_the_figures_room_beside_it(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # A pipeline's name of 200 letters took the header's width: the figures beside it were
    # squeezed into a column under the search box, which hid two of them.
    page = _edited_report(tmp_path, "p" + "n" * 200)
    size = browser.get_window_size()
    browser.set_window_size(1280, 800)
    try:
        _open(browser, page)
        browser.find_element("tag name", "header").screenshot(
            str(artifacts / "report-long-title-header.png")
        )
        hidden = browser.execute_script(
            "var search = document.getElementById('search').getBoundingClientRect();"
            "return Array.prototype.filter.call(document.querySelectorAll('#stats .stat'),"
            " function (s) { var r = s.getBoundingClientRect();"
            "  return r.right > search.left && r.left < search.right"
            "   && r.bottom > search.top && r.top < search.bottom; }).length;"
        )
    finally:
        browser.set_window_size(size["width"], size["height"])
    assert hidden == 0
