"""How the eval and diff pages show the text they are given, in a real headless Chromium.

Data that looks like markup shows as text; a right-to-left override shows as its escape,
and a name pasted raw in the filter finds its row. Screenshots are saved under the
`artifacts` folder (tests/conftest.py); the `browser` fixture skips, saying why, where
Chromium, its driver or selenium is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from converge_dsl.pipetest import render_eval_html

from .browser_pages import console_errors, open_page, section_count, visible_rows
from .conftest import cli

BROWSER_WINDOW = (1400, 1500)
HOSTILE = '</script><img src=x onerror="window.pwned=1"><b>bold</b>'


def test_a_case_name_pasted_raw_in_the_filter_finds_its_row(browser: Any, tmp_path: Path) -> None:
    # The rows show `r⟨U+202E⟩ev`; the name itself, pasted in, found nothing.
    cases = [{"name": n, "stop_reason": "converged"} for n in ("r\u202eev", "r\\u202eev", "zz")]
    document = {"evaluation": "e", "passed": True, "metrics": [], "cases": cases}
    page = tmp_path / "names.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    open_page(browser, page)
    browser.execute_script(
        "var s = document.getElementById('search'); s.value = arguments[0];"
        "s.dispatchEvent(new Event('input'));",
        "r\u202eev",
    )
    assert section_count(browser, "cases") == "1 of 3"
    names = [r.text.split()[0] for r in visible_rows(browser, "#cases .row")]
    assert names == ["r\u27e8U+202E\u27e9ev"]
    assert console_errors(browser) == []


def test_data_that_looks_like_markup_shows_as_text(browser: Any, tmp_path: Path) -> None:
    fact = {"id": HOSTILE, "content": HOSTILE, "data": {HOSTILE: 1}}
    a = {"stop_reason": "converged", "usage": {}, "facts": {"k": [fact]}}
    b = {"stop_reason": HOSTILE, "usage": {}, "facts": {"k": [{**fact, "data": {HOSTILE: 2}}]}}
    files = []
    for name, body in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(body), encoding="utf-8")
        files.append(tmp_path / name)
    page = tmp_path / "hostile.html"
    assert cli("diff", *files, "--format", "html", "-o", page)[0] == 1
    open_page(browser, page)
    assert console_errors(browser) == []
    assert browser.execute_script("return window.pwned === undefined")
    assert browser.find_elements("css selector", "main img, main b") == []
    text = browser.find_element("id", "differences").text
    assert f"changed k/{HOSTILE}" in text
    assert 'onerror="window.pwned=1"' in text


def test_a_right_to_left_override_shows_as_its_escape(browser: Any, tmp_path: Path) -> None:
    # In a case's name, as `⟨U+202E⟩`: a case named with the character and one named
    # with the six characters `\u202e` both showed `T-1 \u202e(at a.yaml:1:2)`.
    sneaky = "T-1 \u202e(at a.yaml:1:2)"
    cases = [
        {"name": name, "stop_reason": "converged", "scores": {"m": 1}}
        for name in (sneaky, "T-1 \\u202e(at a.yaml:1:2)")
    ]
    document = {"evaluation": sneaky, "passed": True, "metrics": [], "cases": cases}
    page = tmp_path / "bidi.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    open_page(browser, page)
    shown = [r.text.split("\n")[0] for r in visible_rows(browser, "#cases .row")]
    assert shown == ["T-1 \u27e8U+202E\u27e9(at a.yaml:1:2)", "T-1 \\u202e(at a.yaml:1:2)"]
    assert browser.find_element("id", "title").text == "Evaluation: T-1 \\u202e(at a.yaml:1:2)"
    assert console_errors(browser) == []
    # the pane's JSON shows the name as the table does
    visible_rows(browser, "#cases .row")[0].click()
    assert (
        '"name": "T-1 \u27e8U+202E\u27e9(at a.yaml:1:2)"'
        in browser.find_element("id", "detail").text
    )


# Names too long for their cell, written right to left, or mixed: an Arabic one, a Hebrew
# one, an Arabic one with a number and a Latin word in it; and a Latin one with Arabic in it
_LONG_NAMES = (
    "\u0645\u062d\u0645\u062f \u0639\u0628\u062f \u0627\u0644\u0644\u0647 "
    "\u0627\u0644\u0623\u062d\u0645\u062f \u0645\u0646 \u0645\u062f\u064a\u0646\u0629 "
    "\u0627\u0644\u0631\u064a\u0627\u0636",  # محمد عبد الله الأحمد من مدينة الرياض
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd \u05d6\u05d4 \u05e9\u05dd "
    "\u05d0\u05e8\u05d5\u05da \u05de\u05d0\u05d5\u05d3 \u05e9\u05e0\u05d7\u05ea\u05da",
    "\u0645\u062d\u0645\u062f 42 \u0639\u0628\u062f \u0627\u0644\u0644\u0647 ABC "
    "\u0627\u0644\u0623\u062d\u0645\u062f \u0645\u0646 \u0645\u062f\u064a\u0646\u0629",
    "Latin name then \u0639\u0631\u0628\u064a that is long enough to be cut",
)


# Where each of the elements `css` matches lays its text: its content box's, its first
# letter's and all of its text's left and right edges.
_WHERE_LAID = (
    "return Array.from(document.querySelectorAll(arguments[0])).map(function (cell) {"
    " var text = cell.firstChild, range = document.createRange();"
    " range.setStart(text, 0); range.setEnd(text, 1);"
    " var first = range.getBoundingClientRect(); range.selectNodeContents(cell);"
    " var all = range.getBoundingClientRect(), box = cell.getBoundingClientRect();"
    " var style = getComputedStyle(cell), pad = function (side) {"
    "  return parseFloat(style['padding' + side])"
    "   + parseFloat(style['border' + side + 'Width']); };"
    " return {text: cell.textContent, box: [box.left + pad('Left'), box.right - pad('Right')],"
    "  first: [first.left, first.right], all: [all.left, all.right]}; });"
)


def _laid(browser: Any, css: str) -> list[dict[str, Any]]:
    return list(browser.execute_script(_WHERE_LAID, css))


def _cut_where_it_reads_to(cell: dict[str, Any], rtl: bool) -> None:
    """`cell` is cut short, its first letter in view at the side it starts from and the
    rest past the other."""
    left, right = cell["box"]
    assert cell["all"][1] - cell["all"][0] > right - left, cell
    if rtl:
        assert right - 3 <= cell["first"][1] <= right + 0.5, cell
        assert cell["all"][0] < left, cell
    else:
        assert left - 0.5 <= cell["first"][0] <= left + 3, cell
        assert cell["all"][1] > right, cell


def test_a_cut_name_ends_with_its_ellipsis_where_it_reads_to(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # A list's cells are cut with "…" at their end; an Arabic or Hebrew name was laid left
    # to right: the "…" stood at the right, where such a name starts, and what showed was
    # its end (a mixed one, a piece of its middle). It is cut where it reads to: at the
    # left for a name written right to left, whatever numbers or Latin words are in it.
    metric = _LONG_NAMES[0]
    cases = [
        {"name": name, "stop_reason": "converged", "scores": {metric: 1}} for name in _LONG_NAMES
    ]
    document = {"evaluation": "e", "passed": True, "metrics": [], "cases": cases}
    page = tmp_path / "rtl.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    open_page(browser, page)
    cells = _laid(browser, "#cases .row span.c-case")
    cells.append(_laid(browser, "#cases .head span")[3])
    browser.find_element("id", "cases").screenshot(str(artifacts / "eval-rtl-cells.png"))
    assert [c["text"] for c in cells] == [*_LONG_NAMES, metric]
    for cell, rtl in zip(cells, (True, True, True, False, True), strict=True):
        _cut_where_it_reads_to(cell, rtl)
    assert console_errors(browser) == []


def test_every_line_cut_with_an_ellipsis_is_cut_where_it_reads_to(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # The list's cells were cut where they read to; a failed case's name, a confusion
    # matrix's labels (its columns' and its rows') and a short window's title were still
    # laid left to right: an Arabic or Hebrew one was cut at its start.
    names = [" ".join([name] * 4) for name in _LONG_NAMES]
    cases = [{"name": n, "stop_reason": "error", "error": "stopped"} for n in names]
    confusion = [{"expected": n, "found": n, "count": 1} for n in names]
    metric = {"name": "label", "mean": 1.0, "cases": 4, "passed": True, "confusion": confusion}
    document = {"evaluation": "e", "passed": False, "metrics": [metric], "cases": cases}
    page = tmp_path / "cuts.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    metrics = {"width": 844, "height": 390, "deviceScaleFactor": 1, "mobile": False}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        open_page(browser, page)
        # (no page's title starts right to left: each starts with what it is, "Evaluation:")
        browser.execute_script(
            "document.getElementById('title').textContent = arguments[0]", names[0]
        )
        cuts = {
            css: _laid(browser, css)
            for css in (
                ".error-case .name",
                ".matrix thead th:not(.corner)",
                ".matrix tbody th",
                "#title",
            )
        }
        browser.find_element("id", "confusion").screenshot(str(artifacts / "eval-rtl-matrix.png"))
        browser.find_element("id", "errors").screenshot(str(artifacts / "eval-rtl-errors.png"))
        browser.find_element("tag name", "header").screenshot(str(artifacts / "eval-rtl-title.png"))
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    sorted_names = sorted(names)
    assert [c["text"] for c in cuts[".error-case .name"]] == names
    assert [c["text"] for c in cuts[".matrix thead th:not(.corner)"]] == sorted_names
    assert [c["text"] for c in cuts[".matrix tbody th"]] == sorted_names
    for cells in cuts.values():
        for cell in cells:
            _cut_where_it_reads_to(cell, not cell["text"].startswith("Latin"))
    assert len(cuts["#title"]) == 1
    assert console_errors(browser) == []


def test_a_name_written_right_to_left_that_fits_stays_at_its_columns_edge(
    browser: Any, tmp_path: Path
) -> None:
    # Laid in its own direction, a short Hebrew name stood at the right of the list's column
    # of names, under a head at its left, and a failed case's at the right of its box.
    name = "\u05e9\u05dc\u05d5\u05dd"  # שלום
    cases = [{"name": n, "stop_reason": "error", "error": "stopped"} for n in (name, "short")]
    document = {"evaluation": "e", "passed": False, "metrics": [], "cases": cases}
    page = tmp_path / "fits.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    open_page(browser, page)
    laid = [
        *_laid(browser, "#cases .head span.c-case"),
        *_laid(browser, "#cases .row span.c-case"),
        *_laid(browser, ".error-case .name"),
    ]
    assert [c["text"] for c in laid] == ["case", name, "short", name, "short"]
    for cell in laid:
        assert cell["all"][1] - cell["all"][0] < cell["box"][1] - cell["box"][0], cell  # whole
        assert cell["box"][0] - 0.5 <= cell["all"][0] <= cell["box"][0] + 3, cell
    assert console_errors(browser) == []


# A Latin start, then a long stretch of Arabic: the line reads left to right
_LATIN_THEN_ARABIC = "Case 12 " + " ".join([_LONG_NAMES[0]] * 8)
_ARABIC_AT = len("Case 12 ")
# Where each of the elements `css` draws the first letter of its Arabic, its "…" and the last
# letter before it, and its content box
_ARABIC_LAID = (
    "var at = arguments[1];"
    "return Array.from(document.querySelectorAll(arguments[0])).map(function (box) {"
    " var range = document.createRange(), style = getComputedStyle(box), node = box.firstChild;"
    " function drawn(from, to) { range.setStart(node, from); range.setEnd(node, to);"
    "  var r = range.getBoundingClientRect(); return [r.left, r.right]; }"
    " var rect = box.getBoundingClientRect(), left = rect.left + parseFloat(style.paddingLeft);"
    " var ellipsis = node.data.lastIndexOf('\u2026');"
    " return {text: box.textContent, title: box.title, label: box.getAttribute('aria-label'),"
    "  letter: drawn(at, at + 1), ellipsis: ellipsis < 0 ? null : drawn(ellipsis, ellipsis + 1),"
    "  before: ellipsis < 1 ? null : drawn(ellipsis - 1, ellipsis),"
    "  box: [left, rect.right - parseFloat(style.paddingRight)]};"
    " });"
)


_TWO_FRAMES = (
    "return new Promise(function (r) {"
    " requestAnimationFrame(function () { requestAnimationFrame(r); }); })"
)


def _cut_at_its_end(browser: Any, css: str, at: int, whole: str = _LATIN_THEN_ARABIC) -> None:
    """The element at `css` that shows the start of `whole` shows its letter at `at` (the
    first written the other way), and "…" right after its last letter kept; whole in its
    title and its aria-label."""
    cells = [c for c in browser.execute_script(_ARABIC_LAID, css, at) if whole[:7] in c["text"]]
    assert len(cells) == 1, css
    for cell in cells:
        left, right = cell["box"]
        assert left - 0.5 <= cell["letter"][0], cell  # drawn in its box
        assert cell["letter"][1] <= right + 0.5, cell
        assert cell["text"][-2:] in ("\u2026\u200f", "\u2026\u200e"), cell  # cut
        assert whole in cell["title"], cell
        assert cell["title"].startswith(cell["text"][:-2]), cell
        assert cell["label"] == cell["title"], cell
        # the "…" beside the last letter kept, where it reads to
        (ellipsis_left, ellipsis_right), (before_left, before_right) = (
            cell["ellipsis"],
            cell["before"],
        )
        assert min(abs(ellipsis_right - before_left), abs(ellipsis_left - before_right)) < 1, cell


def test_a_latin_line_with_a_long_arabic_stretch_is_cut_where_it_overflows(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # A line that starts in Latin letters reads left to right, and the browser cut it where
    # it left its box as drawn: the Arabic stretch, drawn turned around, showed its end
    # there ("Case 12 الرياض…"), its start past the edge. It is cut as it reads: "Case 12 "
    # and the Arabic's start, then "…"; the right-to-left lines keep their cut.
    cases = [
        {"name": n, "stop_reason": "error", "error": "stopped", "scores": {"m": 1}}
        for n in (_LATIN_THEN_ARABIC, *_LONG_NAMES)
    ]
    confusion = [{"expected": _LATIN_THEN_ARABIC, "found": "x", "count": 1}]
    metric = {"name": "label", "mean": 1.0, "cases": 4, "passed": True, "confusion": confusion}
    document = {
        "evaluation": _LATIN_THEN_ARABIC,
        "passed": False,
        "metrics": [metric],
        "cases": cases,
    }
    page = tmp_path / "latin-arabic.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    open_page(browser, page)
    browser.find_element("id", "cases").screenshot(str(artifacts / "eval-latin-arabic-cells.png"))
    browser.find_element("id", "errors").screenshot(str(artifacts / "eval-latin-arabic-errors.png"))
    _cut_at_its_end(browser, "#cases .row span.c-case", _ARABIC_AT)
    _cut_at_its_end(browser, ".error-case .name", _ARABIC_AT)
    _cut_at_its_end(browser, ".matrix tbody th", _ARABIC_AT)
    cells = _laid(browser, "#cases .row span.c-case")[1:]
    for cell, rtl in zip(cells, (True, True, True, False), strict=True):
        _cut_where_it_reads_to(cell, rtl)  # (as before: each whole, cut by the browser)
    assert [c["text"] for c in cells] == list(_LONG_NAMES)
    # a short window cuts the title: again when the window's size changes
    metrics = {"width": 844, "height": 390, "deviceScaleFactor": 1, "mobile": False}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        browser.execute_script(_TWO_FRAMES)  # (the page refits on the window's next frame)
        browser.find_element("tag name", "header").screenshot(
            str(artifacts / "eval-latin-arabic-title.png")
        )
        _cut_at_its_end(browser, "#title", len("Evaluation: ") + _ARABIC_AT)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert console_errors(browser) == []


def test_a_line_starting_right_to_left_with_a_long_latin_stretch_is_cut_where_it_reads_to(
    browser: Any, tmp_path: Path
) -> None:
    # The same both ways: an Arabic start, then a long stretch of Latin, drawn turned around
    # in the line laid right to left, showed the stretch's end at the cut; it is cut as it
    # reads, the "…" right after the last Latin letter kept.
    arabic = "\u0645\u062d\u0645\u062f "  # محمد
    name = arabic + " ".join(["Latin words that go on"] * 6)
    cases = [{"name": name, "stop_reason": "converged", "scores": {"m": 1}}]
    document = {"evaluation": "e", "passed": True, "metrics": [], "cases": cases}
    page = tmp_path / "arabic-latin.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    open_page(browser, page)
    _cut_at_its_end(browser, "#cases .row span.c-case", len(arabic), name)
    assert console_errors(browser) == []


# The page's layouts so far (Chrome's count)
def _layouts(browser: Any) -> float:
    metrics = browser.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    return float(next(m["value"] for m in metrics if m["name"] == "LayoutCount"))


def test_a_lists_draw_lays_the_page_out_a_bounded_number_of_times(
    browser: Any, tmp_path: Path
) -> None:
    # Each line cut where it reads to was measured again right after the line before it was
    # cut: one draw of a list of 10,000 such cases laid the page out 26 times, not 2, and
    # took 2 to 3 times as long. Pure right-to-left lines were measured letter by letter.
    cases = [
        {"name": f"Row {i} " + _LONG_NAMES[0] * 3 if i % 2 else f"{_LONG_NAMES[0]} {i}"}
        for i in range(10_000)
    ]
    document = {"evaluation": "e", "passed": True, "metrics": [], "cases": cases}
    page = tmp_path / "many.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    open_page(browser, page)
    browser.execute_cdp_cmd("Performance.enable", {})
    try:
        before = _layouts(browser)
        browser.execute_script("document.querySelector('#cases .vlist').scrollTop = 123456")
        browser.execute_script(_TWO_FRAMES)
        laid = _layouts(browser) - before
    finally:
        browser.execute_cdp_cmd("Performance.disable", {})
    assert laid <= 4, laid
    cut = [c for c in _laid(browser, "#cases .row span.c-case") if c["text"].startswith("Row")]
    assert len(cut) > 10, cut
    assert all("\u2026" in c["text"] for c in cut), cut
    assert console_errors(browser) == []


# Counts, before the page's scripts run, the canvas measures of the lines cut where they read to
_COUNT_MEASURES = (
    "var measure = CanvasRenderingContext2D.prototype.measureText; window.measures = 0;"
    "CanvasRenderingContext2D.prototype.measureText = function () {"
    " window.measures++; return measure.apply(this, arguments); };"
)


def test_a_line_a_list_draws_again_is_not_measured_again(browser: Any, tmp_path: Path) -> None:
    # A list draws every row in view on each scroll, and each line cut where it reads to was
    # measured again (about 7 canvas measures a line): a scroll by a row and back measured
    # them all twice over. Its cut is kept by its text, its font and its room.
    cases = [{"name": f"Row {i} " + _LONG_NAMES[0] * 3} for i in range(200)]
    document = {"evaluation": "e", "passed": True, "metrics": [], "cases": cases}
    page = tmp_path / "again.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    added = browser.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument", {"source": _COUNT_MEASURES}
    )
    try:
        open_page(browser, page)
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", added)
    first = browser.execute_script("return window.measures")
    assert first > 0
    before = _laid(browser, "#cases .row span.c-case")
    for top in (24, 0):
        browser.execute_script(f"document.querySelector('#cases .vlist').scrollTop = {top}")
        browser.execute_script(_TWO_FRAMES)
    assert browser.execute_script("return window.measures") - first <= 10  # (a row scrolled in)
    assert _laid(browser, "#cases .row span.c-case") == before  # cut alike
    assert all("\u2026" in c["text"] for c in before), before
    assert console_errors(browser) == []


_SELECT_AND_COPY = (
    "var box = document.querySelector(arguments[0]), range = document.createRange();"
    "range.selectNodeContents(box.parentNode);"
    "getSelection().removeAllRanges(); getSelection().addRange(range);"
    "var data = new DataTransfer();"
    "box.dispatchEvent(new ClipboardEvent('copy', {clipboardData: data, bubbles: true}));"
    "return [box.textContent, box.getAttribute('aria-label'), data.getData('text/plain')];"
)


def test_a_cut_line_copied_or_read_aloud_is_whole(browser: Any, tmp_path: Path) -> None:
    # A line cut where it reads to held the cut text only: a copy of it, a screen reader and
    # a search in the page had "Case 12 …" and the start of its Arabic, not the name.
    cases = [{"name": _LATIN_THEN_ARABIC, "stop_reason": "converged", "scores": {"m": 1}}]
    document = {"evaluation": "e", "passed": True, "metrics": [], "cases": cases}
    page = tmp_path / "copy.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    open_page(browser, page)
    shown, label, copied = browser.execute_script(_SELECT_AND_COPY, "#cases .row span.c-case")
    assert "\u2026" in shown
    assert label == _LATIN_THEN_ARABIC
    assert _LATIN_THEN_ARABIC in copied, copied
    assert "\u2026" not in copied, copied
    assert console_errors(browser) == []


# Counts, before the page's scripts run, how often each list cell's style is read
_COUNT_STYLE_READS = (
    "var read = window.getComputedStyle; window.styleReads = new Map();"
    "window.getComputedStyle = function (box) {"
    " if (box.matches && box.matches('.row span'))"
    "  window.styleReads.set(box, (window.styleReads.get(box) || 0) + 1);"
    " return read.apply(this, arguments); };"
)


def test_a_lists_rows_are_fitted_once_as_the_page_loads(browser: Any, tmp_path: Path) -> None:
    # The list fitted its rows as it drew them, and the page's ready fitted them again.
    cases = [{"name": _LATIN_THEN_ARABIC, "stop_reason": "converged"}] * 20
    document = {"evaluation": "e", "passed": True, "metrics": [], "cases": cases}
    page = tmp_path / "once.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    script = {"source": _COUNT_STYLE_READS}
    added = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", script)
    try:
        open_page(browser, page)
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", added)
    reads = browser.execute_script("return Array.from(window.styleReads.values())")
    assert len(reads) >= 20, reads
    assert max(reads) == 1, reads
    assert console_errors(browser) == []
