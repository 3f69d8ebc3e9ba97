"""The batch page (`--report R.html` under `--cases`) in a real headless Chromium.

It is styled as the other pages are and reads on a narrow screen: the shared
style and the viewport meta, a table that never scrolls the page sideways.
Screenshots are saved under the `artifacts` folder (tests/conftest.py).
Skipped, saying why, when Chromium, its driver or selenium is not installed.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run as cli

from .conftest import ECHO, write_cases

BROWSER_WINDOW = (1280, 900)


@pytest.fixture(scope="module")
def batch_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("batch-page")
    long = "a-case-id-long-enough-to-be-wrapped-in-its-column-" * 3
    cases = [{"id": long if i == 1 else f"w{i}", "word": "a"} for i in range(4)]
    page = folder / "R.html"
    argv = ["run", str(ECHO), "--cases", str(write_cases(folder / "cases.jsonl", cases))]
    argv += ["--out", str(folder / "r.jsonl"), "--report", str(page)]
    assert cli(argv, io.StringIO(), io.StringIO()) == 0
    return page


def test_the_batch_page_has_the_viewport_meta_of_the_other_pages(batch_page: Path) -> None:
    text = batch_page.read_text(encoding="utf-8")
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text


def test_the_batch_page_carries_the_policy_of_the_other_pages(batch_page: Path) -> None:
    import html

    from converge_dsl._page_assets import CONTENT_SECURITY_POLICY

    text = batch_page.read_text(encoding="utf-8")
    meta = f'content="{html.escape(CONTENT_SECURITY_POLICY)}"'
    assert f'<meta http-equiv="Content-Security-Policy" {meta}>' in text


@pytest.mark.parametrize("width", [400, 1280])
def test_the_batch_page_is_styled_as_the_other_pages_at_any_width(
    browser: Any, batch_page: Path, artifacts: Path, width: int
) -> None:
    # The page had no style at all: serif type, a table with no lines, its long ids
    # stretching it, unlike every other page the tool writes.
    browser.set_window_size(width, 900)
    browser.get(batch_page.as_uri())
    browser.save_screenshot(str(artifacts / f"batch-page-{width}.png"))
    found = browser.execute_script(
        "var body = getComputedStyle(document.body), page = document.documentElement;"
        "return {font: body.fontFamily, background: body.backgroundColor,"
        " header: getComputedStyle(document.querySelector('header')).backgroundColor,"
        " sideways: page.scrollWidth - page.clientWidth,"
        " rows: document.querySelectorAll('tbody tr').length};"
    )
    assert found["font"].startswith("system-ui")
    assert found["background"] == "rgb(247, 248, 250)"  # the pages' --bg
    assert found["header"] == "rgb(29, 35, 48)"  # the pages' dark header
    assert found["sideways"] == 0
    assert found["rows"] == 4


def _open_batch(browser: Any, folder: Path, cases: list[dict[str, Any]]) -> None:
    """The batch page of the echo pipeline run on `cases`, in a window 1,280 pixels wide."""
    page = folder / "R.html"
    argv = ["run", str(ECHO), "--cases", str(write_cases(folder / "cases.jsonl", cases))]
    argv += ["--out", str(folder / "r.jsonl"), "--report", str(page)]
    assert cli(argv, io.StringIO(), io.StringIO()) == 0
    browser.set_window_size(1280, 900)
    browser.get(page.as_uri())


def test_a_case_id_of_10000_characters_keeps_its_row_short(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # Its row was 10,000 characters wrapped, screens tall, the next cases far under it.
    cases = [{"id": "i" * 10_000, "word": "a"}, {"id": "next", "word": "b"}]
    _open_batch(browser, tmp_path, cases)
    browser.save_screenshot(str(artifacts / "batch-page-long-id.png"))
    first, next_top, view = browser.execute_script(
        "var rows = document.querySelectorAll('tbody tr');"
        "return [rows[0].getBoundingClientRect().height, rows[1].getBoundingClientRect().top,"
        " innerHeight];"
    )
    assert first < 150
    assert next_top < view  # the next case in view
    # The id's box ended in the middle of a line (4.55 of them): it holds whole lines.
    # (and its padding under the last showed the top of the next line's letters)
    from ..runtime.test_report_browser_layout import lines_in_view

    assert lines_in_view(browser, ".id") == [pytest.approx(4, abs=0.02)]


def test_a_case_id_s_marks_are_clipped_as_on_the_other_pages(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # The cells were clipped at their box, with no margin as the other pages' cells have:
    # the upper mark of a Vietnamese capital with two ("Ẫ" showed as "Â") was cut off.
    # Then a scrolling id cut the marks below its last line (Thai's ฐู).
    from ..runtime.test_report_browser_layout import (
        STACKED,
        VIETNAMESE,
        assert_room_for_marks,
        drawn_unclipped,
    )

    _open_batch(browser, tmp_path, [{"id": "w0", "word": "a"}, {"id": "w1", "word": "b"}])
    assert_room_for_marks(browser, "td .id")
    # and beside its letters (Thai's marks past a letter's width were cut at its sides)
    sides = browser.execute_script(
        "var s = getComputedStyle(document.querySelector('td .id'));"
        "return [parseFloat(s.paddingLeft), parseFloat(s.paddingRight)].map(function (p) {"
        " return p / parseFloat(s.fontSize); });"
    )
    assert min(sides) >= 0.35 - 0.01, sides
    for cells in ("td .id", "td:nth-child(3)"):
        assert drawn_unclipped(browser, cells, "table", VIETNAMESE), cells
        assert not drawn_unclipped(browser, cells, "table", STACKED), cells  # still clipped
    browser.find_element("tag name", "table").screenshot(str(artifacts / "batch-page-marks.png"))
