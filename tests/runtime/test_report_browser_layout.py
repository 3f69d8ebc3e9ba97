"""The run report's layout in a real headless Chromium, at the widths a reader meets.

A list's head scrolls sideways with its rows and stays over its columns; the
timeline's names never overlap, whatever the width. Screenshots are saved
under the `artifacts` folder (tests/conftest.py). Skipped, saying why, when
Chromium, its driver or selenium is not installed.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run

from .conftest import steady_timings

ROOT = Path(__file__).resolve().parents[2]
BROWSER_WINDOW = (1280, 1000)
STEPS = 12


def _long_pipeline(steps: int) -> str:
    """A chain of `steps` rules with long names, keys, ids and contents."""
    key = "stage_number_{:02d}_with_a_long_descriptive_key_name"
    lines = ["apiVersion: converge-dsl/v1", "kind: Pipeline", "name: long", "keys:"]
    lines += [f"  - {{name: {key.format(i)}}}" for i in range(steps + 1)]
    lines += ["seeds:", f"  - {{id: seed, key: {key.format(0)}, content: start}}", "suggestors:"]
    for i in range(steps):
        lines.append(
            f"  - {{name: suggestor-{i:02d}-that-has-a-really-long-descriptive-name, kind: rule,"
            f" dependencies: [{key.format(i)}], emit: [{{key: {key.format(i + 1)},"
            f" id: 'fact-{i:02d}-with-a-long-identifier-that-goes-on-and-on',"
            f" content: 'step {i}, a content long enough to be cut in its column'}}]}}"
        )
    lines.append(
        f"  - {{name: short, kind: rule, dependencies: [{key.format(0)}],"
        f" emit: [{{key: {key.format(1)}, id: other, content: x}}]}}"
    )
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def long_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of the long chain, its clock readings made the same on every machine
    (`steady_timings`)."""
    from converge_dsl.runtime import render_report

    folder = tmp_path_factory.mktemp("long-pipeline")
    pipeline, trace = folder / "long.yaml", folder / "long.jsonl"
    pipeline.write_text(_long_pipeline(STEPS), encoding="utf-8")
    quiet = (io.StringIO(), io.StringIO())
    assert run(["run", str(pipeline), "--trace", str(trace)], *quiet) == 0
    steady_timings(trace)
    page = folder / "long.html"
    page.write_text(render_report(trace), encoding="utf-8")
    return page


def _open(driver: Any, page: Path, width: int) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.set_window_size(width, 1000)
    driver.get("about:blank")
    driver.get(page.as_uri())
    WebDriverWait(driver, 20).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )


@pytest.mark.parametrize("width", [320, 600, 899, 1280])
def test_a_lists_head_scrolls_sideways_with_its_columns(
    browser: Any, long_page: Path, artifacts: Path, width: int
) -> None:
    # Under 900 pixels the facts' rows scrolled sideways under a head that stayed put:
    # "key" and "id" over the content and suggestor columns, "suggestor" never shown.
    _open(browser, long_page, width)
    found = browser.execute_script(
        "var box = document.querySelector('#facts .vlist');"
        "box.scrollLeft = box.scrollWidth; box.scrollTop = 3 * 24;"
        "box.dispatchEvent(new Event('scroll'));"
        "var head = document.querySelector('#facts .head'), row = box.querySelector('.row');"
        "function edges(e) { return Array.prototype.map.call(e.children, function (s) {"
        "  var r = s.getBoundingClientRect();"
        "  return [Math.round(r.left), Math.round(r.right)]; }); }"
        "var b = box.getBoundingClientRect(), h = head.getBoundingClientRect();"
        "return {head: edges(head), row: edges(row), top: h.top - b.top,"
        " last: head.lastChild.getBoundingClientRect().right <= b.right + 1,"
        " texts: Array.prototype.map.call(head.children, function (s) { return s.textContent; })};"
    )
    browser.save_screenshot(str(artifacts / f"report-list-head-{width}.png"))
    assert found["texts"] == ["key", "id", "confidence", "content", "suggestor"]
    assert found["head"] == found["row"]  # each head over its column
    assert found["last"]  # scrolled to the end, the last head is in view
    assert abs(found["top"]) <= 1  # and the head stays at the top of the box


@pytest.mark.parametrize("width", [400, 1280])
def test_the_timelines_names_never_overlap(
    browser: Any, long_page: Path, artifacts: Path, width: int
) -> None:
    # A name drawn before its bar ran over the name drawn after the bar before it.
    # And the first draw was not redone when the sections below brought a vertical
    # scrollbar: drawn 15 pixels wider than its box, the last names were cut at the edge.
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    _open(browser, long_page, width)
    timeline = browser.find_element("id", "timeline")
    box = browser.execute_script("return document.getElementById('timeline').clientWidth;")
    # The redraw comes at the next animation frame; it must come.
    with contextlib.suppress(TimeoutException):
        WebDriverWait(browser, 5).until(lambda _: timeline.get_attribute("data-width") == str(box))
    assert timeline.get_attribute("data-width") == str(box)
    browser.save_screenshot(str(artifacts / f"report-timeline-{width}.png"))
    boxes = json.loads(timeline.get_attribute("data-label-boxes"))
    assert len(boxes) >= STEPS
    assert all(left >= 0 and right <= box for _, left, right in boxes), (box, boxes)
    by_lane: dict[int, list[tuple[float, float]]] = {}
    for lane, left, right in boxes:
        by_lane.setdefault(lane, []).append((left, right))
    for spans in by_lane.values():
        spans.sort()
        for (_, right), (left, _) in itertools.pairwise(spans):
            assert right <= left


def _drawn_at(browser: Any, width: int) -> list[list[float]]:
    """The timeline's name boxes once it is redrawn for a window `width` pixels wide: its
    drawn width (`data-width`) its box's, and both still so two animation frames later (a
    scroll bar coming or going changes the box once more, and the drawing after it)."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_window_size(width, 1000)
    timeline = browser.find_element("id", "timeline")
    settled = (
        "var t = arguments[0], done = arguments[arguments.length - 1];"
        "var drawn = t.getAttribute('data-width');"
        "function same() { return drawn === String(t.clientWidth)"
        " && t.getAttribute('data-width') === drawn; }"
        "if (!same()) { done(null); return; }"
        "requestAnimationFrame(function () { requestAnimationFrame(function () {"
        " done(same() ? t.getAttribute('data-label-boxes') : null); }); });"
    )
    boxes = WebDriverWait(browser, 5).until(lambda b: b.execute_async_script(settled, timeline))
    return list(json.loads(boxes))


@pytest.mark.parametrize(("first", "then"), [(1280, 400), (400, 1280)])
def test_the_timelines_lanes_follow_the_width_it_is_drawn_at(
    browser: Any, long_page: Path, artifacts: Path, first: int, then: int
) -> None:
    # Lanes were assigned once, for the width the page opened at: narrowed, the room a
    # short bar kept for its name after it was too little and names were cut; widened,
    # that room (at the narrow scale) spread the bars over lanes no name needed.
    _open(browser, long_page, then)
    fresh = _drawn_at(browser, then)
    _open(browser, long_page, first)
    resized = _drawn_at(browser, then)
    browser.save_screenshot(str(artifacts / f"report-timeline-{first}-to-{then}.png"))
    assert resized == fresh


def _short_window_header(
    browser: Any, page: Path, width: int, height: int, shot: Path
) -> dict[str, Any]:
    """How the sticky header of `page` sits in a `width` x `height` viewport, scrolled
    down (a screenshot of it saved at `shot`)."""
    from selenium.webdriver.support.ui import WebDriverWait

    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        browser.get("about:blank")
        browser.get(page.as_uri())
        WebDriverWait(browser, 20).until(
            lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
        )
        found = dict(
            browser.execute_script(
                "window.scrollTo(0, 600);"
                "var h = document.querySelector('header').getBoundingClientRect();"
                "var s = document.getElementById('search').getBoundingClientRect();"
                "var stats = document.getElementById('stats');"
                "var title = document.getElementById('title');"
                "stats.scrollLeft = stats.scrollWidth;"
                "var last = stats.lastChild.getBoundingClientRect();"
                "var box = stats.getBoundingClientRect();"
                "return {top: h.top, height: h.height,"
                " search: s.top >= h.top && s.bottom <= h.bottom && s.right <= innerWidth,"
                " last: last.right <= box.right + 1 && last.left >= box.left,"
                " title: title.title === title.textContent && title.title !== ''};"
            )
        )
        browser.save_screenshot(str(shot))
        return found
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.mark.parametrize(("width", "height"), [(400, 400), (667, 375), (844, 390)])
def test_the_header_takes_little_of_a_short_window(
    browser: Any, long_page: Path, artifacts: Path, width: int, height: int
) -> None:
    # The sticky header took 126 of a 400-pixel-tall window's pixels (a phone on its side):
    # the title, the search box and three lines of figures. It keeps all three, on fewer lines.
    shot = artifacts / f"report-header-{width}x{height}.png"
    found = _short_window_header(browser, long_page, width, height, shot)
    assert found["top"] == 0  # still sticky
    assert found["height"] <= 0.17 * height, found
    assert found["search"]  # the search box whole, in the header
    assert found["last"]  # the last figure can be scrolled into view
    assert found["title"]  # the title whole in its title attribute, where it is cut


# Capitals with two marks stacked over them, and letters with a mark below the line
VIETNAMESE = "Kế hoạch: Ẫn Ỗng Ẵm Ấy Ểu Ở Ặc Ậy Ợi Ỵ ậ ỵ ợ"
STACKED = "a" + "\u0301" * 40 + " marked"  # forty marks, over the lines above
# Thai with the marks that reach furthest over its letters (a vowel and a tone mark stacked
# on a tall letter: ปื๋, ฟิ้, a third of a line over the letters' box in Garuda) and under them
# (a vowel under a letter with a tail: ฎู, ญู, two fifths of a line under it)
THAI = "ที่นั่ง กรุ๊ป ผู้ใหญ่ ปื๋ ฟิ้ ฎู ญู ฐู"


def draws_thai(browser: Any) -> bool:
    """Whether a font here draws Thai (Debian's fonts-tlwg-garuda): without one, its letters
    are boxes on the line, with no mark over or under them, and `THAI` tests nothing."""
    return bool(
        browser.execute_script(
            "var c = document.createElement('canvas').getContext('2d'); c.font = '20px sans-serif';"
            "return c.measureText('\u0e0e\u0e39').actualBoundingBoxDescent > 6;"
        )
    )


def drawn_unclipped(browser: Any, css: str, around: str, text: str) -> bool:
    """Whether the elements at `css`, once they hold `text`, are drawn as they would be
    unclipped, in a screenshot of the larger box `around` (a screenshot of an element
    alone is cut at its own box, exactly where its clip cuts, so it cannot tell)."""

    def shot(overflow: str) -> bytes:
        browser.execute_script(
            "var text = arguments[1], overflow = arguments[2];"
            "document.querySelectorAll(arguments[0]).forEach(function (e) {"
            " e.textContent = text; e.style.overflow = overflow; });",
            css,
            text,
            overflow,
        )
        return bytes(browser.find_element("css selector", around).screenshot_as_png)

    return shot("") == shot("visible")


# A font that stacks combining marks (the pages' monospace here, DejaVu Sans Mono, draws
# them side by side) with the metrics of the monospace fonts the pages name (DejaVu Sans
# Mono's, Menlo's).
STACKING_FONT = "'DejaVu Sans', sans-serif"


def in_stacking_font(browser: Any, css: str) -> None:
    """The elements at `css` drawn in `STACKING_FONT`."""
    browser.execute_script(
        "var font = arguments[1];"
        "document.querySelectorAll(arguments[0]).forEach(function (e) {"
        " e.style.fontFamily = font; });",
        css,
        STACKING_FONT,
    )


def marks_reach_the_line_above(browser: Any, css: str) -> bool:
    """Whether forty marks stacked on the second of the lines at `css` change a pixel of
    the first line's letters, from its font's ascent down to half its descent (lower, on
    the tips of g, j, p, q and y and in the leading, the upper mark of a Vietnamese
    letter with two, `ế`, draws too, clipped or not)."""

    def letters(second: str) -> str:
        clip = browser.execute_script(
            "var lines = document.querySelectorAll(arguments[0]);"
            "lines[0].textContent = 'the line above'; lines[1].textContent = arguments[1];"
            "var base = lines[0].appendChild(document.createElement('span'));"
            "base.style.display = 'inline-block';"
            "var range = document.createRange(); range.selectNodeContents(lines[0]);"
            "var r = range.getBoundingClientRect(), baseline = base.getBoundingClientRect().bottom;"
            "base.remove();"
            "return {x: r.left + scrollX, y: r.top + scrollY, width: r.width,"
            " height: (baseline + r.bottom) / 2 - r.top, scale: 1};",
            css,
            second,
        )
        return str(browser.execute_cdp_cmd("Page.captureScreenshot", {"clip": clip})["data"])

    in_stacking_font(browser, css)
    return letters("a marked") != letters(STACKED)


def room_for_marks(browser: Any, css: str) -> list[float]:
    """The least room, in em, each element at `css` leaves the marks of its text above its
    first line and below its last: its padding (a scrolling box clips at it), and where
    it does not scroll its clip margin past that. Thai's stacked marks (ฟิ้) and
    Devanagari's below the line (क्षुद्र) need a third of a line; a test cannot draw them
    where no font has them."""
    return list(
        browser.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0])).map(function (e) {"
            " var s = getComputedStyle(e), size = parseFloat(s.fontSize);"
            " var room = Math.min(parseFloat(s.paddingTop), parseFloat(s.paddingBottom))"
            "  + (/auto|scroll/.test(s.overflowY) ? 0 : parseFloat(s.overflowClipMargin) || 0);"
            " return room / size; });",
            css,
        )
    )


def assert_room_for_marks(browser: Any, css: str) -> None:
    room = room_for_marks(browser, css)
    assert room, css
    assert min(room) >= 0.35 - 0.01, (css, room)


def lines_in_view(browser: Any, css: str) -> list[float]:
    """How many lines each box at `css` that scrolls shows, scrolled to its top: from its
    first line's top (under its padding, the room for marks) down to its box's bottom, in
    its lines' height. A box that shows a few whole lines ends where the next one starts:
    its padding under them showed the top of the next line's letters."""
    # (a box learns it scrolls from its scroll timeline, a frame after it is laid out)
    return list(
        browser.execute_async_script(
            "var css = arguments[0], done = arguments[1];"
            "requestAnimationFrame(function () { requestAnimationFrame(function () {"
            " var boxes = Array.from(document.querySelectorAll(css)).filter(function (e) {"
            "  return e.scrollHeight > e.clientHeight; });"
            " done(boxes.map(function (e) {"
            " var s = getComputedStyle(e); e.scrollTop = 0;"
            " var inner = e.getBoundingClientRect().height - parseFloat(s.borderTopWidth)"
            "  - parseFloat(s.borderBottomWidth) - (e.offsetHeight - e.clientHeight"
            "  - parseFloat(s.borderTopWidth) - parseFloat(s.borderBottomWidth));"
            " return (inner - parseFloat(s.paddingTop)) / parseFloat(s.lineHeight); })); }); });",
            css,
        )
    )


def assert_line_clips_are_bounded(browser: Any, lines: str, around: str) -> None:
    """Forty marks stacked on a letter of one of the lines at `lines` leave the letters of
    the line above alone and are still clipped; a Vietnamese capital's two marks are drawn
    whole (in the box `around`). The lines are drawn in `STACKING_FONT`."""
    assert not marks_reach_the_line_above(browser, lines)
    assert_room_for_marks(browser, lines)
    in_stacking_font(browser, lines)
    assert drawn_unclipped(browser, lines, around, VIETNAMESE)
    assert not drawn_unclipped(browser, lines, around, STACKED)  # still clipped


def test_a_vietnamese_title_is_drawn_whole(browser: Any, long_page: Path, artifacts: Path) -> None:
    # The title's clip (against forty stacked marks) cut the upper mark off a Vietnamese
    # capital with two: "Ẫ" showed as "Â"; then its scrolling box cut the marks below the
    # line (Ặ, ỵ, Thai's ฐู, Devanagari's क्षुद्र).
    _open(browser, long_page, 1400)
    assert_room_for_marks(browser, "header h1")
    assert drawn_unclipped(browser, "header h1", "header", VIETNAMESE)
    browser.find_element("tag name", "header").screenshot(str(artifacts / "report-viet-title.png"))
    assert not drawn_unclipped(browser, "header h1", "header", STACKED)  # still clipped


def test_a_vietnamese_title_is_drawn_whole_in_a_short_window(
    browser: Any, long_page: Path, artifacts: Path
) -> None:
    # In a window under 520 pixels tall the title is one line cut with "…", whose clip
    # cut the upper mark off a Vietnamese capital with two ("Ẫ" showed as "Â").
    metrics = {"width": 740, "height": 360, "deviceScaleFactor": 1, "mobile": False}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        _open(browser, long_page, 740)
        assert drawn_unclipped(browser, "#title", "header", VIETNAMESE)
        browser.find_element("tag name", "header").screenshot(
            str(artifacts / "report-viet-short-title.png")
        )
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.mark.parametrize("width", [1280, 390])
def test_thai_is_drawn_whole_in_a_facts_fields(
    browser: Any, long_page: Path, artifacts: Path, width: int
) -> None:
    # A fact's field (its id, its content) was clipped at its box, with room over its
    # first line only: Thai's vowels under a letter with a tail (ฎู) were cut.
    _open(browser, long_page, width)
    browser.execute_script("document.querySelector('#facts .row').click();")
    assert_room_for_marks(browser, ".detail dd")
    if draws_thai(browser):
        assert drawn_unclipped(browser, ".detail dd", ".detail", THAI)
    browser.find_element("css selector", ".detail").screenshot(
        str(artifacts / f"report-thai-fact-{width}.png")
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_the_fact_pane_is_no_taller_for_its_room_for_marks(
    browser: Any, long_page: Path, width: int
) -> None:
    # The last field's room under it (marks.css) was added under its list's own margin:
    # the pane of a fact stood 5 pixels taller than the page had it.
    _open(browser, long_page, width)
    browser.execute_script("document.querySelector('#facts .row').click();")
    under, own = browser.execute_script(
        "var p=document.querySelector('.detail'), l=p.querySelector('dl'),"
        " d=l.querySelector('dd:last-child'), s=getComputedStyle(d);"
        " var text=d.getBoundingClientRect().bottom-parseFloat(s.paddingBottom);"
        " var end=p.getBoundingClientRect().top+p.clientTop+p.scrollHeight;"
        " return [end-text, parseFloat(getComputedStyle(l).marginBottom)"
        " +parseFloat(getComputedStyle(p).paddingBottom)];"
    )
    assert abs(under - own) < 1, (under, own)
