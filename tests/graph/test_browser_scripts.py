"""The graph page in headless Chromium with scripts whose marks reach past their letters'
box (Thai) or whose characters draw as one (emoji sequences)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..runtime.test_report_browser_layout import THAI, drawn_unclipped, draws_thai
from .test_browser import _open, _page

BROWSER_WINDOW = (1280, 860)


@pytest.fixture(scope="module")
def triage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _page(
        tmp_path_factory.mktemp("graph-scripts"), "pipelines/support-triage.yaml", "t.html"
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_thai_is_drawn_whole_on_the_source_lines_and_in_the_details(
    browser: Any, triage: Path, artifacts: Path, width: int
) -> None:
    # Thai's stacked marks (ปื๋ over a tall letter, ฎู under a letter with a tail) were cut
    # at a source line's clip and at the bottom of the details' heading and values.
    if not draws_thai(browser):
        pytest.skip("no font here draws Thai (Debian's fonts-tlwg-garuda)")
    browser.set_window_size(width, 860)
    try:
        _open(browser, triage, "#node=suggestor:classify")
        places = ("#details pre.excerpt .line", "#details h3", "#details dd")
        for css in places:
            assert drawn_unclipped(browser, css, "#details", THAI), css
        assert drawn_unclipped(browser, "header h1", "header", THAI)
        browser.save_screenshot(str(artifacts / f"graph-thai-{width}.png"))
    finally:
        browser.set_window_size(*BROWSER_WINDOW)


def test_the_pages_cut_is_pythons(browser: Any, triage: Path) -> None:
    # names.js' shownCut (Intl.Segmenter) and Python's shown_cut cut the same cases alike.
    import json

    from ..test_page_assets import CUT_CASES

    _open(browser, triage)
    kept = browser.execute_script(  # (as JSON: a lone surrogate cannot come back as it is)
        "return JSON.stringify(JSON.parse(arguments[0]).map(function (c) {"
        " var text = c[0], at = Array.from(text).slice(0, c[1]).join('').length;"
        " return text.slice(0, shownCut(text, at)); }));",
        json.dumps([[text, at] for text, at, _ in CUT_CASES]),
    )
    kept = json.loads(kept)
    assert kept == [expected for _, _, expected in CUT_CASES]


_SEQUENCES = {
    "family": "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "flag": "\U0001f1fa\U0001f1f8",
    "keycap": "1\ufe0f\u20e3",
    "tone": "\U0001f44d\U0001f3fd",
}


@pytest.mark.parametrize("width", [1280, 390])
def test_a_label_cut_short_keeps_its_emoji_sequences_whole(
    browser: Any, tmp_path: Path, artifacts: Path, width: int
) -> None:
    # A name wider than its node was cut anywhere but between a surrogate pair's halves: a
    # family lost its girl and kept a joiner, a flag showed one letter, a keycap its digit
    # and selector, a thumb its skin tone as a swatch.
    from converge_dsl._page_assets import shown_cut
    from converge_dsl.graph import graph_pipeline, render

    from .test_browser import _PLAIN, _node, _renamed

    source = tmp_path / "emoji.yaml"
    source.write_text(_PLAIN, encoding="utf-8")
    browser.set_window_size(width, 860)
    try:
        for kind, sequence in _SEQUENCES.items():
            for wide in (3, 4, 5, 6):  # a "W" is wider than the layout's guess
                name = "W" * wide + sequence * 24
                graph = _renamed(graph_pipeline(source, inputs={}), {"delta": name})
                page = tmp_path / f"{kind}-{wide}.html"
                page.write_text(render(graph, "html"), "utf-8")
                _open(browser, page)
                label = _node(browser, "suggestor:" + name).find_element(
                    "css selector", "text.name"
                )
                text = label.get_attribute("textContent")
                assert text.endswith("\u2026"), text
                head = text[:-1]
                assert shown_cut(name, len(head)) == len(head), (kind, wide, head)
        label.screenshot(str(artifacts / f"graph-emoji-label-{width}.png"))
        browser.save_screenshot(str(artifacts / f"graph-emoji-labels-{width}.png"))
    finally:
        browser.set_window_size(*BROWSER_WINDOW)


_ARABIC_NAMES = {  # an Arabic name, then digits and a Latin suffix
    "alpha": "\u0645\u0644\u0627\u062d\u0638\u0627\u062a 42 notes",  # ملاحظات
    "delta": "\u0645\u062d\u0645\u062f 42 copy",  # محمد
}
# Where each of a node's name's letters is drawn (the left edge of each)
_LETTERS_AT = (
    "var t = document.querySelector('.node[data-id=\"' + arguments[0] + '\"] text.name');"
    "return Array.from(t.textContent).map(function (c, i) { return t.getExtentOfChar(i).x; });"
)


def test_a_label_in_arabic_with_digits_and_a_latin_suffix_reads_in_its_own_direction(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # Laid left to right as the drawing, "محمد 42 copy" showed as "42 محمد copy": the
    # digits left of the name they follow. Laid right to left, its first letter's way, it
    # reads from the right: the name, 42, then "copy" at the left; in its title the name is
    # isolated, so that ": rule" after it stays after it.
    from converge_dsl.graph import graph_pipeline, render

    from .test_browser import _PLAIN, _renamed

    source = tmp_path / "arabic.yaml"
    source.write_text(_PLAIN, encoding="utf-8")
    page = tmp_path / "arabic.html"
    graph = _renamed(graph_pipeline(source, inputs={}), _ARABIC_NAMES)
    page.write_text(render(graph, "html"), "utf-8")
    _open(browser, page)
    browser.find_element("id", "canvas").screenshot(str(artifacts / "graph-arabic-labels.png"))
    for node in ("key:" + _ARABIC_NAMES["alpha"], "suggestor:" + _ARABIC_NAMES["delta"]):
        name = node.partition(":")[2]
        at = browser.execute_script(_LETTERS_AT, node)
        arabic, digits, latin = at[0], at[name.index("42")], at[name.index(" ", -6) + 1]
        assert arabic > digits > latin, (name, at)
    title = browser.execute_script(
        "return document.querySelector('.node.kind-suggestor title').textContent"
    )
    assert title == "\u2068" + _ARABIC_NAMES["delta"] + "\u2069: rule"
    assert (
        browser.execute_script(
            "return document.querySelector('.node[data-id=\"key:beta\"] text.name')"
            ".getAttribute('direction')"
        )
        is None
    )  # (a Latin label as it was)
