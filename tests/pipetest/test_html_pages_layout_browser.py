"""The layout of the eval and diff pages in a real headless Chromium, at the sizes a reader
meets (a phone on its side). Screenshots are saved under the `artifacts` folder
(tests/conftest.py); the `browser` fixture skips, saying why, where Chromium, its driver or
selenium is not installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from converge_dsl.pipetest import render_eval_html

from ..runtime.test_report_browser_layout import _short_window_header


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
    from selenium.webdriver.support.ui import WebDriverWait

    document = _document(3)
    document["cases"][0]["name"] = "n" * 10_000
    page = tmp_path / "eval.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    browser.get("about:blank")
    browser.get(page.as_uri())
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )
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
    lines = browser.execute_script(
        "var h = document.querySelector('#detail h3'), style = getComputedStyle(h);"
        "var padding = parseFloat(style.paddingTop) + parseFloat(style.paddingBottom);"
        "return (h.getBoundingClientRect().height - padding) / parseFloat(style.lineHeight);"
    )
    assert lines == pytest.approx(round(lines), abs=0.02)


def test_vietnamese_capitals_are_drawn_whole_in_the_pane(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # The clips against forty stacked marks cut the upper mark off a Vietnamese capital
    # with two ("Ẫ" showed as "Â") in the pane's heading, the cards' fields and the cells.
    from selenium.webdriver.support.ui import WebDriverWait

    from ..runtime.test_report_browser_layout import STACKED, VIETNAMESE, drawn_unclipped

    page = tmp_path / "eval.html"
    page.write_text(render_eval_html(_document(3)), encoding="utf-8")
    browser.get("about:blank")
    browser.get(page.as_uri())
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )
    assert drawn_unclipped(browser, ".card dd", ".card", VIETNAMESE)
    browser.find_element("css selector", "#cases .row").click()
    assert drawn_unclipped(browser, ".pane h3", "#detail-pane", VIETNAMESE)
    browser.find_element("id", "detail-pane").screenshot(str(artifacts / "eval-viet-pane.png"))
    assert not drawn_unclipped(browser, ".pane h3", "#detail-pane", STACKED)  # still clipped


def test_stacked_marks_on_a_diagnostic_line_stay_off_the_line_above(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # Each line of a failed case's diagnostic was clipped half a line above it: forty marks
    # stacked on one letter drew over the lower half of the line above. The clip reaches
    # into the leading between the two lines only, where a Vietnamese capital's two stacked
    # marks draw.
    from selenium.webdriver.support.ui import WebDriverWait

    from ..runtime.test_report_browser_layout import (
        STACKED,
        VIETNAMESE,
        drawn_unclipped,
        in_stacking_font,
        marks_reach_the_line_above,
    )

    document = _document(2)
    diagnostic = {"code": "CD911", "message": "E", "file": "t.yaml", "line": 2, "column": 5}
    document["cases"][0].update(stop_reason="error", diagnostic={**diagnostic, "hint": "h"})
    page = tmp_path / "eval.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    browser.get("about:blank")
    browser.get(page.as_uri())
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )
    lines = "#errors pre.diag span"
    assert not marks_reach_the_line_above(browser, lines)
    browser.find_element("id", "errors").screenshot(str(artifacts / "eval-stacked-diagnostic.png"))
    in_stacking_font(browser, lines)
    assert drawn_unclipped(browser, lines, "#errors", VIETNAMESE)
    assert not drawn_unclipped(browser, lines, "#errors", STACKED)  # still clipped
