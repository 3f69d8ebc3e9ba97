"""The layout of the eval and diff pages in a real headless Chromium, at the sizes a reader
meets (a phone on its side). Screenshots are saved under the `artifacts` folder
(tests/conftest.py); the `browser` fixture skips, saying why, where Chromium, its driver or
selenium is not installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.pipetest import render_eval_html

from ..runtime.test_report_browser_layout import (
    _short_window_header,
    assert_room_for_marks,
    lines_in_view,
)


def _open(browser: Any, page: Path) -> None:
    """Load `page` afresh and wait for its script to have drawn it."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get("about:blank")
    browser.get(page.as_uri())
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )


@contextlib.contextmanager
def _window(browser: Any, width: int, height: int, scale: float = 1) -> Iterator[None]:
    """The page's window `width` x `height` (a phone's under 500 pixels wide), its pixels
    `scale` device pixels each (a zoom of 125% is 1.25), meanwhile."""
    metrics = {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": width < 500}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        yield
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def _document(cases: int) -> dict[str, Any]:
    return {
        "evaluation": "pipelines/support-triage/triage.eval.yaml",
        "passed": True,
        "cases": [
            {"name": f"case-{i}", "passed": True, "scores": {"label": 1.0}} for i in range(cases)
        ],
        "metrics": [{"name": "label", "kind": "exact", "mean": 1.0, "passed": True}],
        "summary": {"cases": cases, "overall": 0.99, "threshold": 0.9},
        "usage": {"time_s": 0.17, "input_tokens": 2773, "output_tokens": 502},
    }


@pytest.mark.parametrize(("width", "height"), [(400, 400), (844, 390)])
def test_the_header_takes_little_of_a_short_window(
    browser: Any, tmp_path: Path, artifacts: Path, width: int, height: int
) -> None:
    # The sticky header took 172 of a 400-pixel-tall window's pixels: a title on two lines,
    # the verdict and the filter, three lines of figures.
    page = tmp_path / "eval.html"
    page.write_text(render_eval_html(_document(60)), encoding="utf-8")
    shot = artifacts / f"eval-header-{width}x{height}.png"
    found = _short_window_header(browser, page, width, height, shot)
    assert found["top"] == 0
    assert found["height"] <= 0.17 * height, found
    assert found["search"]
    assert found["last"]
    assert found["title"]


def test_a_case_name_of_10000_characters_leaves_its_result_in_view(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # The pane's heading ran out of the pane on one line (clipped), and a name wrapped
    # would have pushed the case's result thousands of pixels down: a few lines of it
    # show, wrapped anywhere, the rest scrolled to.
    document = _document(3)
    document["cases"][0]["name"] = "n" * 10_000
    page = tmp_path / "eval.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    _open(browser, page)
    browser.find_element("css selector", "#cases .row").click()
    wide, room, result, bottom = browser.execute_script(
        "var h = document.querySelector('#detail h3');"
        "return [h.scrollWidth, h.clientWidth,"
        " document.querySelector('#detail pre').getBoundingClientRect().top,"
        " document.getElementById('detail-pane').getBoundingClientRect().bottom];"
    )
    browser.save_screenshot(str(artifacts / "eval-long-case-name.png"))
    assert wide <= room  # wrapped, not cut at the pane's edge
    assert result < bottom  # the case's result starts in view
    # The heading's box ended in the middle of a line (4.55 of them): it holds whole lines.
    assert lines_in_view(browser, "#detail h3") == [pytest.approx(4, abs=0.02)]


def test_vietnamese_capitals_are_drawn_whole_in_the_pane(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # The clips against forty stacked marks cut the upper mark off a Vietnamese capital
    # with two ("Ẫ" showed as "Â") in the pane's heading, the cards' fields and the cells.
    from ..runtime.test_report_browser_layout import STACKED, VIETNAMESE, drawn_unclipped

    page = tmp_path / "eval.html"
    page.write_text(render_eval_html(_document(3)), encoding="utf-8")
    _open(browser, page)
    assert drawn_unclipped(browser, ".card dd", ".card", VIETNAMESE)
    browser.find_element("css selector", "#cases .row").click()
    assert drawn_unclipped(browser, ".pane h3", "#detail-pane", VIETNAMESE)
    browser.find_element("id", "detail-pane").screenshot(str(artifacts / "eval-viet-pane.png"))
    assert not drawn_unclipped(browser, ".pane h3", "#detail-pane", STACKED)  # still clipped


def test_stacked_marks_on_a_diagnostic_line_stay_off_the_line_above(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # Each line of a failed case's diagnostic was clipped half a line above it: forty marks
    # stacked on one letter drew over the lower half of the letters of the line above. The
    # clip reaches a fifth of a line over it, where a Vietnamese letter's two stacked
    # marks draw.
    from ..runtime.test_report_browser_layout import assert_line_clips_are_bounded

    document = _document(2)
    diagnostic = {"code": "CD911", "message": "E", "file": "t.yaml", "line": 2, "column": 5}
    document["cases"][0].update(stop_reason="error", diagnostic={**diagnostic, "hint": "h"})
    page = tmp_path / "eval.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    _open(browser, page)
    assert_line_clips_are_bounded(browser, "#errors pre.diag span", "#errors")
    browser.find_element("id", "errors").screenshot(str(artifacts / "eval-stacked-diagnostic.png"))


def _hostile() -> dict[str, Any]:
    """An evaluation with long words everywhere: a path of 300 letters, a metric's name of
    100, a failed case's name of 10,000."""
    metric = "metric-" + "m" * 100
    document = _document(3)
    document["evaluation"] = "evals/" + "e" * 300 + ".eval.yaml"
    document["metrics"].append({"name": metric, "kind": "exact", "mean": 0.5, "passed": False})
    diagnostic = {"code": "CD911", "message": "E", "file": "t.yaml", "line": 2, "column": 5}
    for case in document["cases"]:
        case["scores"][metric] = 0.5
    document["cases"][0].update(name="n" * 10_000, stop_reason="error", diagnostic=diagnostic)
    return document


@pytest.mark.parametrize(("width", "height"), [(390, 844), (1280, 800)])
def test_long_words_keep_the_evaluation_page_in_its_window(
    browser: Any, tmp_path: Path, artifacts: Path, width: int, height: int
) -> None:
    # A metric's name of 100 letters among a case's worst stretched the table and the page
    # sideways (1,452 pixels at 1,280); a failed case's name of 10,000 characters stood
    # 7,000 pixels tall in the errors; a title of 300 letters, ten lines, made the sticky
    # header 377 of a phone's 844 pixels.
    page = tmp_path / "eval.html"
    page.write_text(render_eval_html(_hostile()), encoding="utf-8")
    with _window(browser, width, height):
        _open(browser, page)
        browser.save_screenshot(str(artifacts / f"eval-long-words-{width}.png"))
        found = browser.execute_script(
            "var page = document.documentElement;"
            "var name = document.querySelector('.error-case .name');"
            "var line = parseFloat(getComputedStyle(name).lineHeight);"
            "return {wide: page.scrollWidth - page.clientWidth,"
            " name: name.getBoundingClientRect().height / line,"
            " header: document.querySelector('header').getBoundingClientRect().height};"
        )
    assert found["wide"] == 0
    assert found["name"] == pytest.approx(1, abs=0.05)  # one line, cut with an ellipsis
    assert found["header"] <= 0.25 * height, found


def test_a_long_value_on_a_side_of_the_diff_shows_a_few_lines_on_a_phone(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # A fact's content of 10,000 characters stood 56,000 pixels tall, and the first
    # column (230 pixels) left A and B 40 pixels each at 390: three letters a line.
    from converge_dsl.pipetest import render_diff_html

    field = {"what": "content", "a": "x" * 10_000, "b": None}
    fact = {"key": "k", "id": "i", "change": "removed", "fields": [field]}
    document = {"same": False, "facts": [fact], "stop_reason": None, "usage": []}
    page = tmp_path / "diff.html"
    page.write_text(render_diff_html(document, "run", "a.json", "b.json"), encoding="utf-8")
    with _window(browser, 390, 844):
        _open(browser, page)
        browser.save_screenshot(str(artifacts / "diff-long-value-390.png"))
        height, width = browser.execute_script(
            "var cell = document.querySelector('.side td.a');"
            "return [cell.getBoundingClientRect().height, cell.getBoundingClientRect().width];"
        )
        # its room for Thai's marks above and below (they were cut), level with its label
        # (it sat 4 pixels lower: the room above was padding with no margin to take it back)
        assert_room_for_marks(browser, ".side td pre")
        tops = browser.execute_script(
            "return ['td:first-child', 'td.a pre'].map(function (css) {"
            " var r = document.createRange();"
            " r.selectNodeContents(document.querySelector('.side tr:not(.fact) ' + css));"
            " return r.getClientRects()[0].top; });"
        )
    assert height < 300
    assert width > 100
    assert abs(tops[0] - tops[1]) <= 1, tops


def _open_with_a_case_named(browser: Any, folder: Path, name: str) -> None:
    """The eval page of three cases, the first named `name`, opened."""
    document = _document(3)
    document["cases"][0]["name"] = name
    page = folder / "eval.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    _open(browser, page)


# Where Thai was cut on the eval page, what holds it, and what each is tested with (words
# that fit a list's cell: unclipped, no "…" is drawn). The pane's heading, a scrolling box,
# had room over its first line and none under its last (ฎู, ญู were cut); a row's cells
# (the virtualised list of the eval, diff and report pages), clipped at their own box to
# be cut with "…", cut Thai's tone marks over a vowel (ที่ read as ที) and under a letter.
_THAI_PLACES = {
    "pane": (".pane h3", "#detail-pane", "document.querySelector('#cases .row').click();"),
    "rows": (
        "#cases .row span.c-case",
        "#cases .vlist",
        "document.getElementById('cases').scrollIntoView();",
    ),
}


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("place", list(_THAI_PLACES))
def test_thai_is_drawn_whole_in_the_eval_page(
    browser: Any, tmp_path: Path, artifacts: Path, width: int, place: str
) -> None:
    from ..runtime.test_report_browser_layout import THAI, drawn_unclipped, draws_thai

    css, around, action = _THAI_PLACES[place]
    short = "\u0e1b\u0e37\u0e4b \u0e0e\u0e39 \u0e17\u0e35\u0e48"  # ปื๋ ฎู ที่
    with _window(browser, width, 844):
        _open_with_a_case_named(browser, tmp_path, THAI)
        browser.execute_script(action)
        assert_room_for_marks(browser, css)
        browser.save_screenshot(str(artifacts / f"eval-thai-{place}-{width}.png"))
        if draws_thai(browser):
            assert drawn_unclipped(browser, css, around, THAI if place == "pane" else short)


@pytest.mark.parametrize("width", [1280, 390])
def test_metric_names_show_their_hidden_characters(
    browser: Any, tmp_path: Path, artifacts: Path, width: int
) -> None:
    # "acc" and "acc" followed by a zero-width space were two cards, two columns alike.
    document = _document(2)
    document["metrics"] = [
        {"name": name, "mean": 1.0, "passed": True} for name in ("acc", "acc\u200b")
    ]
    for case in document["cases"]:
        case["scores"] = {"acc": 1.0, "acc\u200b": 0.5}
    page = tmp_path / "eval.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    with _window(browser, width, 844):
        _open(browser, page)
        cards, heads, cells = browser.execute_script(
            "function texts(css) { return Array.from(document.querySelectorAll(css),"
            " function (e) { return e.textContent; }); }"
            "return [texts('.card .name'), texts('#cases .head span'),"
            " texts('#cases .row span')];"
        )
        browser.save_screenshot(str(artifacts / f"eval-metric-names-{width}.png"))
    assert cards == ["acc", "acc\u27e8U+200B\u27e9"]
    assert heads[3:5] == cards
    assert cells[3:5] == ["1", "0.5"]  # each column still finds its scores


def _a_metric_of_400_characters(
    folder: Path, first: str, score: float, evaluation: str | None = None
) -> Path:
    """The eval page of two cases, the first named `first`, each scoring `score` on a
    metric whose name is 400 characters long (of the evaluation `evaluation`, if given)."""
    document = _document(2)
    if evaluation is not None:
        document["evaluation"] = evaluation
    document["metrics"][0]["name"] = "m" * 400
    document["cases"][0]["name"] = first
    for case in document["cases"]:
        case["scores"] = {"m" * 400: score}
    page = folder / "eval.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    return page


@pytest.mark.parametrize("width", [1280, 390])
def test_a_metric_name_of_400_characters_shows_a_few_lines(
    browser: Any, tmp_path: Path, artifacts: Path, width: int
) -> None:
    # Its card's name ran to 19 lines at 1280 pixels (24 at 390), and every card of its row
    # stood as tall: three lines of it show, the rest scrolled to.
    page = _a_metric_of_400_characters(tmp_path, "case-0", 1.0)
    with _window(browser, width, 844):
        _open(browser, page)
        browser.save_screenshot(str(artifacts / f"eval-long-metric-{width}.png"))
        (lines,) = lines_in_view(browser, ".card .name")
        scrolls = browser.execute_script(
            "var n = document.querySelector('.card .name'); return n.scrollHeight > n.clientHeight;"
        )
        assert_room_for_marks(browser, ".card .name")
    assert lines == pytest.approx(3, abs=0.05)
    assert scrolls


@pytest.mark.parametrize("width", [1280, 390])
def test_a_facts_id_of_3000_characters_shows_a_few_lines_over_its_differences(
    browser: Any, tmp_path: Path, artifacts: Path, width: int
) -> None:
    # The fact's row (its change, key and id) stood 80 lines tall on a phone, its
    # differences screens under it: three lines of it show, the rest scrolled to.
    from converge_dsl.pipetest import render_diff_html

    field = {"what": "content", "a": "x", "b": "y"}
    fact = {"key": "k", "id": "i" * 3000, "change": "changed", "fields": [field]}
    document = {"same": False, "facts": [fact], "stop_reason": None, "usage": []}
    page = tmp_path / "diff.html"
    page.write_text(render_diff_html(document, "run", "a.json", "b.json"), encoding="utf-8")
    with _window(browser, width, 844):
        _open(browser, page)
        browser.save_screenshot(str(artifacts / f"diff-long-fact-id-{width}.png"))
        ems = browser.execute_script(
            "var row = document.querySelector('.side tr.fact');"
            "return row.getBoundingClientRect().height"
            " / parseFloat(getComputedStyle(row.firstChild).fontSize);"
        )
        assert ems < 7  # three lines (1.45 em each), its padding and room for marks
        assert_room_for_marks(browser, ".side .fact-name")


def test_the_pane_takes_a_phones_width(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    # At 390 pixels the pane of a case's result was 45% of the window, 175 pixels: its
    # JSON wrapped at 20 characters a line beside the half of the page it hid.
    page = tmp_path / "eval.html"
    page.write_text(render_eval_html(_document(3)), encoding="utf-8")
    with _window(browser, 390, 844):
        _open(browser, page)
        browser.execute_script("document.querySelector('#cases .row').click();")
        width = browser.execute_script(
            "return document.getElementById('detail-pane').getBoundingClientRect().width;"
        )
        browser.save_screenshot(str(artifacts / "eval-pane-390.png"))
    assert width >= 0.9 * 390


@pytest.mark.parametrize("width", [1280, 390])
def test_the_close_button_leaves_the_headings_scrollbar_free(
    browser: Any, tmp_path: Path, artifacts: Path, width: int
) -> None:
    # A case's name of 2,000 Thai characters: the heading scrolls, and at 1,280 pixels the
    # pane's close button stood over the top of its scrollbar (a click there closed the pane).
    name = "\u0e17\u0e14\u0e2a\u0e2d\u0e1a \u0e1b\u0e37\u0e4b " * 200
    with _window(browser, width, 844):
        _open_with_a_case_named(browser, tmp_path, name)
        browser.execute_script("document.querySelector('#cases .row').click();")
        heading, button = browser.execute_script(
            "var h=document.querySelector('#detail-pane h3'),"
            " b=document.querySelector('#detail-pane button'),"
            " r=h.getBoundingClientRect(), s=getComputedStyle(h);"
            " var right=r.right-parseFloat(s.borderRightWidth);"
            " var bar=[right-Math.max(h.offsetWidth-h.clientWidth, 8), r.top, right, r.bottom];"
            " var c=b.getBoundingClientRect(); return [bar, [c.left, c.top, c.right, c.bottom]];"
        )
        browser.save_screenshot(str(artifacts / f"eval-pane-button-{width}.png"))
    # (a phone's scrollbar is drawn over the box's edge, a few pixels wide, when it scrolls)
    apart = button[2] <= heading[0] or button[0] >= heading[2] or button[3] <= heading[1]
    assert apart, (heading, button)


@pytest.mark.parametrize("width", [1280, 390])
def test_the_pane_heading_keeps_its_place_under_the_room_for_marks(
    browser: Any, tmp_path: Path, width: int
) -> None:
    # The room for marks (marks.css) set the heading's margin over the page's own: its text
    # and the result under it stood a third of a line higher than the page had them.
    with _window(browser, width, 844):
        _open_with_a_case_named(browser, tmp_path, "case")
        browser.execute_script("document.querySelector('#cases .row').click();")
        gap, em = browser.execute_script(
            "var p=document.getElementById('detail-pane'), h=p.querySelector('h3');"
            " var top=p.getBoundingClientRect().top+p.clientTop"
            " +parseFloat(getComputedStyle(p).paddingTop);"
            " var text=h.getBoundingClientRect().top+parseFloat(getComputedStyle(h).paddingTop);"
            " return [text-top, parseFloat(getComputedStyle(h).fontSize)];"
        )
    assert abs(gap - 0.35 * em) < 0.5, (gap, em)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_worst_cases_long_names_show_a_few_lines(
    browser: Any, tmp_path: Path, artifacts: Path, width: int
) -> None:
    # A metric's name of 400 characters, which a case was below 1 on, ran to 20 lines in the
    # worst cases' table on a phone (and the case's name of 1,000 as many): three show.
    page = _a_metric_of_400_characters(tmp_path, "c" * 1000, 0.5)
    with _window(browser, width, 844):
        _open(browser, page)
        browser.execute_script("document.getElementById('worst').scrollIntoView();")
        browser.save_screenshot(str(artifacts / f"eval-worst-long-{width}.png"))
        lines = browser.execute_script(
            "return [...document.querySelectorAll('#worst tbody td:not(.num)')].map(function (d) {"
            " var n = d.firstElementChild || d;"
            " return n.clientHeight / parseFloat(getComputedStyle(n).lineHeight); });"
        )
        assert all(count < 3.6 for count in lines), lines
        assert_room_for_marks(browser, "#worst td .few")


# The boxes that show a few lines of a long text, the rest scrolled to, and how many: the
# title and a metric's card (three), a worst case's names (three), the pane's heading (four);
# the diff's fact name (three) and a value on a side (twelve).
_FEW_LINES = {".card .name": 3, "#worst td .few": 3, "header h1": 3, "#detail-pane h3": 4}
_FEW_LINES_DIFF = {".side .fact-name": 3, ".side td pre": 12}


@pytest.mark.parametrize("scale", [1, 1.25, 1.5])
def test_a_few_lines_show_nothing_of_the_next(
    browser: Any, tmp_path: Path, artifacts: Path, scale: float
) -> None:
    # Each showed the top of the next line's letters in its padding under its last line
    # (its room for marks), at every zoom: a third of a line more than the lines it shows.
    from converge_dsl.pipetest import render_diff_html

    eval_page = _a_metric_of_400_characters(tmp_path, "c" * 1000, 0.5, "p" * 600)
    field = {"what": "content", "a": "x" * 10_000, "b": "y"}
    fact = {"key": "k", "id": "i" * 3000, "change": "changed", "fields": [field]}
    document = {"same": False, "facts": [fact], "stop_reason": None, "usage": []}
    diff_page = tmp_path / "diff.html"
    diff_page.write_text(render_diff_html(document, "run", "a.json", "b.json"), encoding="utf-8")
    found = {}
    with _window(browser, 1280, 900, scale):
        _open(browser, eval_page)
        browser.execute_script("document.querySelector('#cases .row').click();")
        for css in _FEW_LINES:
            found[css] = lines_in_view(browser, css)
        browser.save_screenshot(str(artifacts / f"eval-few-lines-{scale}.png"))
        _open(browser, diff_page)
        for css in _FEW_LINES_DIFF:
            found[css] = lines_in_view(browser, css)
        browser.save_screenshot(str(artifacts / f"diff-few-lines-{scale}.png"))
    expected = {**_FEW_LINES, **_FEW_LINES_DIFF}
    for css, lines in found.items():
        assert lines, css
        assert lines == [pytest.approx(expected[css], abs=0.02)] * len(lines), (css, lines)


# Marks over and under the letters that a list's head cut at its box: a Vietnamese capital's
# two, Thai's vowel and tone mark stacked on a tall letter and its vowel under a letter with
# a tail, Arabic's harakat (a shadda under a fatha, a kasra)
_HEAD_MARKS = {
    "vietnamese": "\u1eaan \u1ef4",  # Ẫn Ỵ
    "thai": "\u0e1b\u0e37\u0e4b \u0e0e\u0e39",  # ปื๋ ฎู
    "arabic": "\u0628\u0650\u0633\u0652\u0645\u0650 \u0645\u064f\u0651\u062f\u064d",  # بِسْمِ مُّدٍ
}


@pytest.mark.parametrize("script", list(_HEAD_MARKS))
def test_a_lists_head_draws_the_marks_of_its_names_whole(
    browser: Any, tmp_path: Path, artifacts: Path, script: str
) -> None:
    # A list's head cells were clipped at their box (overflow: hidden, for the "…"): the
    # marks over and under a metric's name in its column's head were cut.
    from ..runtime.test_report_browser_layout import drawn_unclipped, draws_thai

    page = tmp_path / "eval.html"
    page.write_text(render_eval_html(_document(3)), encoding="utf-8")
    _open(browser, page)
    browser.execute_script("document.getElementById('cases').scrollIntoView();")
    heights = browser.execute_script(
        "return [document.querySelector('#cases .head').offsetHeight,"
        " document.querySelector('#cases .row').offsetHeight];"
    )
    if script != "thai" or draws_thai(browser):
        assert drawn_unclipped(browser, "#cases .head span", "#cases .vlist", _HEAD_MARKS[script])
    browser.find_element("css selector", "#cases .vlist").screenshot(
        str(artifacts / f"eval-head-marks-{script}.png")
    )
    assert heights == [28, 24]  # the head and the rows as tall as they were
