"""`graph --format html` in a real headless Chromium (Debian's `chromium`, driven by
Selenium through `chromedriver`): the page renders every node without console
errors, a click on a node (or Enter on a focused one, or a `#node=` address)
shows its YAML source excerpt, and pan and zoom move the drawing.

The `browser` and `artifacts` fixtures (tests/conftest.py) skip, saying why,
only where Chromium or chromedriver is not installed, and keep the screenshots
(`graph-*.png`) to look at.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]


def _page(folder: Path, pipeline: str, name: str) -> Path:
    out, err = io.StringIO(), io.StringIO()
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        code = run(["graph", pipeline, "--format", "html", "-o", str(folder / name)], out, err)
    finally:
        os.chdir(cwd)
    assert code == 0, err.getvalue()
    return folder / name


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("graph-pages")
    return {
        "triage": _page(folder, "pipelines/support-triage.yaml", "triage.html"),
        "dead": _page(folder, "tests/graph/data/dead-ends.yaml", "dead.html"),
    }


def _open(browser: Any, page: Path, fragment: str = "") -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get("about:blank")  # a new document, even when only the fragment differs
    browser.get(page.as_uri() + fragment)
    WebDriverWait(browser, 10).until(
        lambda b: b.find_element("tag name", "body").get_attribute("data-ready") == "true"
    )


def _errors(browser: Any) -> list[str]:
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def _node(browser: Any, node_id: str) -> Any:
    return browser.find_element("css selector", f'.node[data-id="{node_id}"]')


def test_every_node_renders_without_console_errors(
    browser: Any, pages: dict[str, Path], artifacts: Path
) -> None:
    _open(browser, pages["triage"])
    sizes = browser.execute_script(
        "return Array.from(document.querySelectorAll('.node')).map(function (n) {"
        " var b = n.getBBox(); return [n.getAttribute('data-id'), b.width, b.height]; });"
    )
    assert len(sizes) == 12
    assert all(width > 50 and height > 30 for _, width, height in sizes)
    assert len(browser.find_elements("css selector", ".edge")) == 11
    browser.save_screenshot(str(artifacts / "graph-support-triage.png"))
    assert _errors(browser) == []


def test_a_click_shows_the_yaml_source(
    browser: Any, pages: dict[str, Path], artifacts: Path
) -> None:
    _open(browser, pages["triage"])
    _node(browser, "suggestor:classify").click()
    details = browser.find_element("id", "details")
    assert details.find_element("tag name", "h3").text == "classify"
    where = details.find_element("css selector", ".where").text
    assert where == "pipelines/support-triage.yaml:48:5"
    excerpt = details.find_element("css selector", "pre.excerpt").text
    assert excerpt.splitlines()[0].split() == ["48", "-", "name:", "classify"]
    assert "target: tickets" in excerpt
    assert "name: escalate" not in excerpt
    assert "selected" in _node(browser, "suggestor:classify").get_attribute("class")
    assert browser.current_url.endswith("#node=suggestor%3Aclassify")
    browser.save_screenshot(str(artifacts / "graph-support-triage-classify.png"))
    _node(browser, "key:tickets").click()
    assert '"required": [' in details.find_element("css selector", "pre.schema").text
    browser.find_element("css selector", '.invariant[data-id="invariant:0"]').click()
    assert "every-ticket-scheduled" in details.find_element("css selector", "pre.excerpt").text
    assert _errors(browser) == []


def test_keyboard_and_address_select_a_node(browser: Any, pages: dict[str, Path]) -> None:
    from selenium.webdriver.common.keys import Keys

    _open(browser, pages["triage"], "#node=pack%3Aoptimization")
    details = browser.find_element("id", "details")
    assert details.find_element("tag name", "h3").text == "optimization"
    assert "optimization:" in details.find_element("css selector", "pre.excerpt").text
    _node(browser, "model:default").send_keys(Keys.ENTER)
    assert details.find_element("tag name", "h3").text == "default"
    assert "adapter: scripted" in details.find_element("css selector", "pre.excerpt").text


def test_an_address_that_does_not_decode_selects_nothing(
    browser: Any, pages: dict[str, Path]
) -> None:
    _open(browser, pages["triage"], "#node=%E0%A4%A")  # waits for data-ready: the script ran
    assert _errors(browser) == []
    assert browser.find_elements("css selector", ".node.selected") == []


def _transform(browser: Any) -> str:
    return str(browser.find_element("id", "viewport").get_attribute("transform"))


def test_pan_and_zoom_move_the_drawing(browser: Any, pages: dict[str, Path]) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    _open(browser, pages["triage"])
    svg = browser.find_element("id", "graph")
    fitted = float(svg.get_attribute("data-scale"))
    browser.find_element("id", "zoom-in").click()
    assert float(svg.get_attribute("data-scale")) == pytest.approx(fitted * 1.25, rel=1e-3)
    browser.execute_script(
        "arguments[0].dispatchEvent(new WheelEvent('wheel', {deltaY: 400, clientX: 300,"
        " clientY: 300, bubbles: true, cancelable: true}));",
        svg,
    )
    assert float(svg.get_attribute("data-scale")) < fitted
    before = _transform(browser)
    canvas = browser.find_element("id", "canvas")
    ActionChains(browser).move_to_element_with_offset(
        canvas, -300, -200
    ).click_and_hold().move_by_offset(120, 80).release().perform()
    assert _transform(browser) != before
    browser.find_element("id", "fit").click()
    assert float(svg.get_attribute("data-scale")) == pytest.approx(fitted, rel=1e-3)
    assert _errors(browser) == []


def test_dead_ends_are_marked(browser: Any, pages: dict[str, Path], artifacts: Path) -> None:
    _open(browser, pages["dead"])
    dead = {n.get_attribute("data-id") for n in browser.find_elements("css selector", ".node.dead")}
    assert dead == {
        "key:hypotheses",
        "key:strategies",
        "key:evaluations",
        "key:orphan",
        "suggestor:from-orphan",
        "suggestor:from-hypotheses",
        "suggestor:echo",
        "model:spare",
    }
    stroke = browser.execute_script(
        "return getComputedStyle(arguments[0].querySelector('.shape')).stroke;",
        _node(browser, "suggestor:echo"),
    )
    assert stroke == "rgb(220, 38, 38)"
    _node(browser, "suggestor:echo").click()
    tags = browser.find_element("css selector", "#details .tag.dead").text
    assert tags == "never fires"
    browser.save_screenshot(str(artifacts / "graph-dead-ends.png"))
    assert _errors(browser) == []


def test_search_marks_the_matching_nodes(browser: Any, pages: dict[str, Path]) -> None:
    from selenium.webdriver.common.keys import Keys

    _open(browser, pages["triage"])
    search = browser.find_element("id", "search")
    search.send_keys("sched")
    found = {
        n.get_attribute("data-id") for n in browser.find_elements("css selector", ".node.match")
    }
    assert found == {"key:schedule", "suggestor:schedule"}
    assert browser.find_element("id", "search-count").text == "2 nodes"
    opacity = browser.execute_script(
        "return getComputedStyle(arguments[0]).opacity;", _node(browser, "key:seeds")
    )
    assert float(opacity) < 0.5
    search.send_keys(Keys.ENTER)
    assert browser.find_element("css selector", "#details h3").text == "schedule"
    search.send_keys(Keys.ESCAPE)
    assert browser.find_elements("css selector", ".node.match") == []
    assert browser.find_element("id", "search-count").text == ""
    assert _errors(browser) == []


@pytest.fixture(scope="module")
def agent_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _page(tmp_path_factory.mktemp("agent-page"), "pipelines/agent-review.yaml", "a.html")


def test_long_source_lines_wrap_in_the_panel(
    browser: Any, agent_page: Path, artifacts: Path
) -> None:
    _open(browser, agent_page, "#node=suggestor:reviewer")
    pre = browser.find_element("css selector", "#details pre")
    width, scroll = browser.execute_script(
        "return [arguments[0].clientWidth, arguments[0].scrollWidth]", pre
    )
    assert scroll <= width + 1  # nothing cut, nothing to scroll sideways
    assert "expected_summary_bytes: 60, cost_floor_multiple: 2}" in pre.text  # whole
    lines = pre.find_elements("css selector", ".line")
    assert len(lines) == 20
    tall = [line for line in lines if line.size["height"] > 20]
    assert tall  # some lines wrap onto a second row
    browser.save_screenshot(str(artifacts / "graph-agent-source.png"))


def test_an_agents_parts_and_an_invariants_keys_are_drawn(
    browser: Any, agent_page: Path, artifacts: Path
) -> None:
    _open(browser, agent_page)
    assert _errors(browser) == []
    parts = browser.find_elements("css selector", '.node[data-id="suggestor:reviewer"] .part')
    assert [p.text for p in parts] == ["tools 3", "contributors 2"]
    informs = browser.find_elements(
        "css selector", '.edge.rel-informs[data-from="key:constraints"]'
    )
    assert len(informs) == 1
    assert len(browser.find_elements("css selector", ".edge.rel-summarizes")) == 1
    browser.find_element("css selector", ".invariant").click()
    near = {n.get_attribute("data-id") for n in browser.find_elements("css selector", ".node.near")}
    assert near == {"key:strategies", "key:evaluations"}
    browser.save_screenshot(str(artifacts / "graph-invariant-keys.png"))
    browser.find_element("css selector", ".invariant .key").click()
    assert browser.find_element("css selector", "#details h3").text == "strategies"


def test_the_page_loads_nothing_from_outside_it(browser: Any, pages: dict[str, Path]) -> None:
    """Its Content-Security-Policy refuses an image, a script or a fetch from any address
    (a loopback port nothing listens on: the request is refused before it is sent)."""
    _open(browser, pages["triage"])
    browser.get_log("browser")  # drop what opening logged
    refused = browser.execute_async_script(
        "var done = arguments[arguments.length - 1], seen = [];"
        "document.addEventListener('securitypolicyviolation', function (e) {"
        " seen.push(e.violatedDirective); });"
        "var img = document.createElement('img'); img.src = 'http://127.0.0.1:9/x.png';"
        "document.body.appendChild(img);"
        "var s = document.createElement('script'); s.src = 'http://127.0.0.1:9/x.js';"
        "document.body.appendChild(s);"
        "fetch('http://127.0.0.1:9/x').catch(function () {});"
        "setTimeout(function () { done(seen.sort()); }, 500);"
    )
    assert refused == ["connect-src", "img-src", "script-src-elem"]


def test_a_narrow_window_puts_the_panel_under_the_drawing(
    browser: Any, pages: dict[str, Path], artifacts: Path
) -> None:
    # At 400 pixels the 340-pixel panel stood beside the drawing, which kept 60 of them.
    size = browser.get_window_size()
    browser.set_window_size(400, 900)
    try:
        _open(browser, pages["triage"])
        canvas, panel = (browser.find_element("id", name).rect for name in ("canvas", "panel"))
        browser.save_screenshot(str(artifacts / "graph-narrow.png"))
    finally:
        browser.set_window_size(size["width"], size["height"])
    assert canvas["width"] >= 380
    assert canvas["height"] >= 260
    assert panel["y"] >= canvas["y"] + canvas["height"] - 1


def _long_names(folder: Path) -> Path:
    """A pipeline whose suggestors' names are long, one of wide letters."""
    lines = ["apiVersion: converge-dsl/v1", "kind: Pipeline", "name: long-names"]
    lines += [
        "keys:",
        "  - {name: k0}",
        "  - {name: k1}",
        "seeds:",
        "  - {id: s, key: k0, content: x}",
    ]
    lines.append("suggestors:")
    for i, name in enumerate(["y" * 200, "m" * 45, "w" * 30]):
        lines.append(
            f"  - {{name: n{i}-{name}, kind: rule, dependencies: [k0],"
            f" emit: [{{key: k1, id: f{i}, content: x}}]}}"
        )
    pipeline = folder / "long-names.yaml"
    pipeline.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return _page(folder, str(pipeline), "long-names.html")


def test_a_long_or_wide_name_fits_in_its_node(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # A 200-character name made its node 1,600 pixels wide, the whole drawing shrank to
    # fit it, and a name of wide letters ran out of its node on both sides.
    browser.get_log("browser")  # what the tests before this one left
    _open(browser, _long_names(tmp_path))
    assert _errors(browser) == []
    browser.save_screenshot(str(artifacts / "graph-long-names.png"))
    found = browser.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('.node'), function (n) {"
        " var t = n.querySelector('text.name');"
        " return [t.textContent, t.getComputedTextLength(),"
        " n.querySelector('.shape').getBBox().width, n.querySelector('title').textContent]; });"
    )
    for text, length, width, title in found:
        assert length <= width - 16, text
        assert title.split(":")[0].startswith(text.rstrip("\u2026"))  # the title names it whole
    shown = {title.split(":")[0]: text for text, _, _, title in found}
    assert shown["n0-" + "y" * 200].endswith("\u2026")
    assert max(width for _, _, width, _ in found) < 600


# Names a pipeline's YAML refuses, but the public graph model (`PipelineGraph`, `graph_of`
# on a pipeline compiled from Python) carries as given: a real U+202E, its escape's six
# characters, the notation typed, a zero-width space.
_HIDDEN = {
    "alpha": "tick\u202eets",
    "beta": "tick\\u202eets",
    "gamma": "tick\u27e8U+202E\u27e9ets",
    "delta": "z\u200bz",
}
_PLAIN = """apiVersion: converge-dsl/v1
kind: Pipeline
name: hidden
keys:
  - {name: alpha, description: one}
  - {name: beta, description: two}
  - {name: gamma, description: three}
seeds:
  - {id: s, key: alpha, content: x}
suggestors:
  - {name: delta, kind: rule, dependencies: [alpha], emit: [{key: beta, id: b, content: x}]}
  - {name: zz, kind: rule, dependencies: [beta], emit: [{key: gamma, id: c, content: x}]}
invariants:
  - {name: inv, class: semantic, check: "count('alpha') > 0 and count('gamma') >= 0"}
"""


def _renamed(value: Any, names: dict[str, str] = _HIDDEN) -> Any:
    """`value` (a graph) with each name in `names` renamed (names the pipeline's language
    refuses, so written into the graph once it is built)."""
    import dataclasses

    from converge_dsl._page_assets import Names

    if isinstance(value, Names):
        found = _renamed(value.names, names)
        return Names(found, value.empty, value.before, _renamed(value.after, names))
    if isinstance(value, str):
        for plain, hidden in names.items():
            value = value.replace(plain, hidden)
        return value
    if isinstance(value, tuple):
        return tuple(_renamed(item, names) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: _renamed(getattr(value, f.name), names) for f in dataclasses.fields(value)
        }
        return dataclasses.replace(value, **fields)  # type: ignore[type-var]
    return value


def test_names_with_hidden_characters_show_apart(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # The page wrote a name's hidden character as its escape (`\u202e`), as the key named
    # by those six characters shows, so the two keys had one id and a click on the first
    # showed the second; `z` U+200B `z` showed as `zz`. Names and ids show as `page_name`
    # writes them, as on the run report; `#node=` names the raw id.
    from converge_dsl.graph import graph_pipeline, render

    source = tmp_path / "hidden.yaml"
    source.write_text(_PLAIN, encoding="utf-8")
    page = tmp_path / "hidden.html"
    page.write_text(render(_renamed(graph_pipeline(source, inputs={})), "html"), "utf-8")
    browser.get_log("browser")  # what the tests before this one left
    _open(browser, page)
    assert _errors(browser) == []
    ids = [n.get_attribute("data-id") for n in browser.find_elements("css selector", ".node")]
    assert ids == [
        "key:tick\u27e8U+202E\u27e9ets",
        "key:tick\\u202eets",
        "key:tick\u27e8U+27E8\u27e9U+202E\u27e9ets",
        "suggestor:z\u27e8U+200B\u27e9z",
        "suggestor:zz",
    ]
    _node(browser, "key:tick\u27e8U+202E\u27e9ets").click()
    details = browser.find_element("id", "details")
    assert details.find_element("tag name", "h3").text == "tick\u27e8U+202E\u27e9ets"
    assert "description\none" in details.text
    assert "read by\nz\u27e8U+200B\u27e9z" in details.text
    browser.save_screenshot(str(artifacts / "graph-hidden-names.png"))
    address = browser.execute_script("return location.hash;")
    assert address == "#node=key%3Atick%E2%80%AEets"  # the raw id
    _open(browser, page, address)  # read back: the same node
    details = browser.find_element("id", "details")
    assert details.find_element("tag name", "h3").text == "tick\u27e8U+202E\u27e9ets"
    marks = browser.find_elements("css selector", ".invariant .key")
    assert [m.text for m in marks] == [
        "tick\u27e8U+202E\u27e9ets",
        "tick\u27e8U+27E8\u27e9U+202E\u27e9ets",
    ]
    browser.find_element("id", "search").send_keys("z\u200bz")  # a raw name pasted in
    found = [n.get_attribute("data-id") for n in browser.find_elements("css selector", ".match")]
    assert found == ["suggestor:z\u27e8U+200B\u27e9z"]
    assert _errors(browser) == []


def test_a_description_keeps_its_line_breaks(browser: Any, tmp_path: Path) -> None:
    # A description written as a YAML block of several lines read as one paragraph.
    from converge_dsl.graph import graph_pipeline, render

    source = tmp_path / "lines.yaml"
    text = _PLAIN.replace("{name: alpha, description: one}", '{name: alpha, description: "a\\nb"}')
    source.write_text(text, encoding="utf-8")
    page = tmp_path / "lines.html"
    page.write_text(render(graph_pipeline(source, inputs={}), "html"), "utf-8")
    _open(browser, page, "#node=key:alpha")
    assert browser.find_element("css selector", "#details dd").text == "a\nb"


def _open_long_names(browser: Any, folder: Path) -> None:
    """The page of a pipeline whose suggestor's name and the key it reads are 10,000
    characters long, that suggestor's details shown."""
    source = folder / "long.yaml"
    name, key = "s" + "u" * 9999, "k" + "e" * 9999
    text = _PLAIN.replace("name: delta,", f"name: {name},").replace("alpha", key)
    source.write_text(text, encoding="utf-8")
    _open(browser, _page(folder, str(source), "long.html"), f"#node=suggestor:{name}")


def test_a_name_of_10000_characters_leaves_its_details_in_view(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # Its heading filled the panel, 400 lines of it, and the details and the source were
    # thousands of pixels under it. The heading and each field show a few lines, scrolled.
    _open_long_names(browser, tmp_path)
    assert browser.find_element("css selector", "#details h3").text.startswith("suuu")
    where, bottom = browser.execute_script(
        "return [document.querySelector('#details .where').getBoundingClientRect().bottom,"
        " document.getElementById('panel').getBoundingClientRect().bottom];"
    )
    browser.save_screenshot(str(artifacts / "graph-long-name-details.png"))
    assert where <= bottom  # the source's location in view, under the name and the fields


def test_vietnamese_capitals_are_drawn_whole_in_the_details(
    browser: Any, pages: dict[str, Path], artifacts: Path
) -> None:
    # The clips against forty stacked marks cut the upper mark off a Vietnamese capital
    # with two ("Ẫ" showed as "Â") in the heading, the fields and their labels.
    # Then the scrolling heading and values cut the marks below the line (Ặ, Thai's ฐู,
    # Devanagari's क्षुद्र): they have a third of a line of padding under the last line.
    from ..runtime.test_report_browser_layout import (
        STACKED,
        VIETNAMESE,
        assert_room_for_marks,
        drawn_unclipped,
    )

    _open(browser, pages["triage"], "#node=key:tickets")
    for css in ("#details h3", "#details dd", "h1"):
        assert_room_for_marks(browser, css)
    for css in ("#details h3", "#details dt", "#details dd"):
        assert drawn_unclipped(browser, css, "#details", VIETNAMESE), css
        assert not drawn_unclipped(browser, css, "#details", STACKED), css  # still clipped
    browser.find_element("id", "details").screenshot(str(artifacts / "graph-viet-details.png"))
    # the room over a value's first line (its padding) shifted it under its label's
    tops = browser.execute_script(
        "return ['dt', 'dd'].map(function (tag) { var range = document.createRange();"
        " range.selectNodeContents(document.querySelector('#details ' + tag));"
        " return range.getBoundingClientRect().top; });"
    )
    assert tops[0] == tops[1]


def test_a_name_cut_to_fit_its_node_is_not_cut_inside_a_notation(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # A name wider than its node was cut with "…" anywhere: inside a hidden character's
    # `⟨U+200B⟩`, as `⟨U+20…`. The cut falls before the notation.
    from converge_dsl.graph import graph_pipeline, render

    source = tmp_path / "wide.yaml"
    source.write_text(_PLAIN, encoding="utf-8")
    cut = []
    for wide in range(1, 13, 2):  # a "W" is wider than the layout's guess
        name = "W" * wide + "\u200b" * ((48 - wide) // 9)
        page = tmp_path / f"wide-{wide}.html"
        graph = _renamed(graph_pipeline(source, inputs={}), {"delta": name})
        page.write_text(render(graph, "html"), "utf-8")
        _open(browser, page)
        shown = "W" * wide + "\u27e8U+200B\u27e9" * ((48 - wide) // 9)
        label = _node(browser, "suggestor:" + shown).find_element("css selector", "text.name").text
        browser.save_screenshot(str(artifacts / f"graph-cut-notation-{wide}.png"))
        if label != shown:
            assert label.endswith("\u2026")
            head = label[:-1]
            assert "\u27e8" not in head or head.rfind("\u27e8") < head.rfind("\u27e9"), label
            cut.append(label)
    assert cut  # some were cut to fit


def test_stacked_marks_on_a_source_line_stay_off_the_line_above(
    browser: Any, pages: dict[str, Path], artifacts: Path
) -> None:
    # A source line's clip reached half a line above it: forty marks stacked on one letter
    # drew over the lower half of the letters of the line above. The clip reaches a fifth
    # of a line over it, where a Vietnamese letter's two stacked marks draw.
    from ..runtime.test_report_browser_layout import assert_line_clips_are_bounded

    _open(browser, pages["triage"], "#node=suggestor:classify")
    assert_line_clips_are_bounded(browser, "#details pre.excerpt .line", "#details")
    browser.find_element("css selector", "#details pre").screenshot(
        str(artifacts / "graph-stacked-source-line.png")
    )


def test_a_long_name_and_field_end_on_whole_lines(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # The heading of a 10,000-character name held 5.67 of its lines, the field listing a
    # key of 10,000 characters 11.2: the box ended in the middle of a line of text.
    _open_long_names(browser, tmp_path)
    browser.find_element("id", "details").screenshot(str(artifacts / "graph-long-heading.png"))
    # (and their padding under the last line showed the top of the next line's letters)
    from ..runtime.test_report_browser_layout import lines_in_view

    lines = lines_in_view(browser, "#details h3, #details dd")
    assert len(lines) == 2  # the name and the key it reads
    assert lines == [pytest.approx(5, abs=0.02), pytest.approx(11, abs=0.02)]


@pytest.mark.parametrize("width", [390, 1280])
def test_a_long_pipeline_name_wraps_in_the_heading(
    browser: Any, tmp_path: Path, artifacts: Path, width: int
) -> None:
    # A pipeline's name of 200 letters ran out of the heading on one line: the page
    # scrolled sideways, 2,868 pixels wide; wrapped, it took nine lines at 390 pixels.
    source = tmp_path / "named.yaml"
    source.write_text(_PLAIN.replace("name: hidden", "name: p" + "n" * 200), encoding="utf-8")
    size = browser.get_window_size()
    browser.set_window_size(width, 844)
    try:
        _open(browser, _page(tmp_path, str(source), "named.html"))
        browser.save_screenshot(str(artifacts / f"graph-long-title-{width}.png"))
        wide, view, title = browser.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth,"
            " document.querySelector('h1').getBoundingClientRect().height];"
        )
    finally:
        browser.set_window_size(size["width"], size["height"])
    assert wide == view
    assert title <= 100  # three lines of it, the rest scrolled to (nine took 250 pixels)
    from ..runtime.test_report_browser_layout import VIETNAMESE, drawn_unclipped

    assert drawn_unclipped(browser, "h1", "header", VIETNAMESE)  # its marks whole


def test_the_details_heading_keeps_the_pages_margin_over_it(
    browser: Any, pages: dict[str, Path]
) -> None:
    # The room for marks (marks.css) set the heading's margin over the page's own: the
    # heading, and the details under it, stood 6 pixels higher.
    _open(browser, pages["triage"], "#node=key:tickets")
    over, padding = browser.execute_script(
        "var s = getComputedStyle(document.querySelector('#details h3'));"
        " return [parseFloat(s.marginTop), parseFloat(s.paddingTop)];"
    )
    assert (over, padding > 0) == (0, True)
