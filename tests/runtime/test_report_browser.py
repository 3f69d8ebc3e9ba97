"""The run report in a real headless Chromium (Debian's `chromium` and `chromium-driver`).

Checks that the sections render without console errors, that a click on a
fact shows its source excerpt, that the search filters, that proposals a
human decided on a resumed run show with their decision, and that a report of
100,000 events loads and filters within a bound. Screenshots are saved under
the `artifacts` folder (tests/conftest.py). Skipped, saying why, when Chromium,
its driver or selenium is not installed.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run

from .conftest import steady_timings

ROOT = Path(__file__).resolve().parents[2]
LOAD_BOUND_S = 10.0  # generous: two shared cores; the page itself takes about one
BROWSER_WINDOW = (1400, 1600)  # tall: the screenshots show several sections


def _open(driver: Any, page: Path) -> float:
    """Load `page`; seconds until its script has rendered everything."""
    from selenium.webdriver.support.ui import WebDriverWait

    started = time.perf_counter()
    driver.get(page.as_uri())
    WebDriverWait(driver, LOAD_BOUND_S * 2).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )
    return time.perf_counter() - started


def _errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _count(driver: Any, section: str) -> str:
    return str(driver.find_element("css selector", f"#{section} .count").text)


def _search(driver: Any, text: str, section: str = "facts") -> float:
    """Type `text` in the search box; seconds until `section`'s list shows the filter."""
    from selenium.webdriver.support.ui import WebDriverWait

    box = driver.find_element("id", "search")
    box.clear()
    started = time.perf_counter()
    box.send_keys(text)
    WebDriverWait(driver, LOAD_BOUND_S).until(lambda d: " of " in _count(d, section))
    return time.perf_counter() - started


@pytest.fixture(scope="module")
def example_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    page = tmp_path_factory.mktemp("report") / "agent-review.html"
    code = run(
        ["run", str(ROOT / "pipelines" / "agent-review.yaml"), "--report", str(page)],
        io.StringIO(),
        io.StringIO(),
    )
    assert code == 0
    return page


def test_the_sections_render_without_console_errors(
    browser: Any, example_page: Path, artifacts: Path
) -> None:
    _open(browser, example_page)
    assert _errors(browser) == []
    assert browser.find_element("id", "title").text == "Run report: agent-review"
    assert _count(browser, "facts") == "6"
    assert _count(browser, "calls") == "7"
    assert int(_count(browser, "agents")) > 10
    assert browser.find_element("id", "stop").text == "converged"
    assert len(browser.find_elements("css selector", "#charts .chart")) == 5
    painted = browser.execute_script(
        "var c = document.getElementById('timeline'), d = c.getContext('2d')"
        ".getImageData(0, 0, c.width, c.height).data, n = 0;"
        "for (var i = 0; i < d.length; i += 4) if (d[i + 3] && d[i] < 200) n++; return n;"
    )
    assert painted > 100  # the bars are drawn
    browser.save_screenshot(str(artifacts / "report-example.png"))


@pytest.mark.parametrize("fragment", ["#fact=%E0%A4%A", "#fact=%", "#%zz"])
def test_an_address_that_does_not_decode_opens_no_fact_and_the_page_draws_whole(
    browser: Any, example_page: Path, fragment: str
) -> None:
    # A stray "%" in a link to a fact threw in the page's script: the gate, the model
    # calls, the agents and the budgets stayed empty and the search did nothing.
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get("about:blank")
    browser.get(example_page.as_uri() + fragment)
    WebDriverWait(browser, LOAD_BOUND_S).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )
    assert _errors(browser) == []
    assert _count(browser, "calls") == "7"
    assert len(browser.find_elements("css selector", "#charts .chart")) == 5
    assert "Click a fact" in browser.find_element("id", "fact-detail").text


def test_a_click_on_a_fact_shows_its_source_excerpt(
    browser: Any, example_page: Path, artifacts: Path
) -> None:
    _open(browser, example_page)
    rows = browser.find_elements("css selector", "#facts .row")
    reviewer = next(r for r in rows if "reviewer" in r.text)
    reviewer.click()
    detail = browser.find_element("id", "fact-detail").text
    assert "reviewer@agent-review" in detail
    assert "kind: agent" in detail  # the suggestor's YAML
    browser.save_screenshot(str(artifacts / "report-fact-clicked.png"))


def test_the_search_filters_every_list(browser: Any, example_page: Path) -> None:
    _open(browser, example_page)
    _search(browser, "nordics")
    assert _count(browser, "facts") == "2 of 6"
    assert all("nordics" in r.text for r in browser.find_elements("css selector", "#facts .row"))
    assert _count(browser, "calls") == "0 of 7"
    assert _errors(browser) == []


HITL_PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: approvals
promotion: {gated_keys: [strategies], min_confidence: 0.5}
seeds: [{id: a, content: x}]
suggestors:
  - name: plan
    kind: rule
    when: "true"
    emit:
      - {key: strategies, id: go-big, content: "go big"}
      - {key: strategies, id: go-small, content: "go small"}
      - {key: hypotheses, id: weak, content: "perhaps", confidence: 0.2}
"""


@pytest.fixture(scope="module")
def decided_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of a paused run resumed with `go-big` approved and `go-small` rejected."""
    folder = tmp_path_factory.mktemp("decided")
    pipeline, ckpt, page = folder / "approvals.yaml", folder / "ck", folder / "decided.html"
    pipeline.write_text(HITL_PIPELINE, encoding="utf-8")
    quiet = (io.StringIO(), io.StringIO())
    assert run(["run", str(pipeline), "--checkpoint", str(ckpt)], *quiet) == 6
    argv = ["run", str(pipeline), "--resume", str(ckpt), "--approve", "go-big"]
    assert run([*argv, "--reject", "go-small", "--report", str(page)], *quiet) == 0
    return page


def test_a_proposal_rejected_by_a_human_is_shown_apart_from_the_gate(
    browser: Any, decided_page: Path, artifacts: Path
) -> None:
    _open(browser, decided_page)
    assert _errors(browser) == []
    assert _count(browser, "approvals") == "2"
    rows = [r.text for r in browser.find_elements("css selector", "#approvals .row")]
    assert len(rows) == 2
    assert "go-big" in rows[0]
    assert "approved by a human" in rows[0]
    assert "go-small" in rows[1]
    assert "rejected by a human" in rows[1]
    assert "key 'strategies' is gated" in rows[1]
    # the gate's rejections are their own list, and the human's are not in it
    gate_rows = browser.find_elements("css selector", "#gate > div:first-child .row")
    assert len(gate_rows) == 1
    assert "weak" in gate_rows[0].text
    assert "below min_confidence" in gate_rows[0].text
    _search(browser, "rejected by", "approvals")
    assert _count(browser, "approvals") == "1 of 2"
    (found,) = browser.find_elements("css selector", "#approvals .row")
    assert "go-small" in found.text
    assert _errors(browser) == []
    browser.save_screenshot(str(artifacts / "report-human-decisions.png"))


def test_a_report_of_100k_events_loads_and_filters_within_a_bound(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    trace, page = tmp_path / "big.jsonl", tmp_path / "big.html"
    assert bench.synthetic_trace(trace, 100_000) >= 100_000
    assert run(["report", str(trace), "-o", str(page)], io.StringIO(), io.StringIO()) == 0
    loaded = _open(browser, page)
    assert loaded < LOAD_BOUND_S
    assert _errors(browser) == []
    assert int(_count(browser, "facts")) > 10_000
    assert int(_count(browser, "approvals")) > 100  # held for a human, then decided
    # virtualised: only the visible rows exist
    assert len(browser.find_elements("css selector", "#facts .row")) < 40
    assert _search(browser, "audit-701") < LOAD_BOUND_S / 2
    assert _count(browser, "facts") == "1 of " + _count_all(browser)
    browser.save_screenshot(str(artifacts / "report-100k-searched.png"))


def _count_all(driver: Any) -> str:
    return str(
        driver.execute_script(
            "return String(JSON.parse("
            "document.getElementById('report-data').textContent).facts.length)"
        )
    )


@pytest.fixture(scope="module")
def market_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The market-entry example's report, its clock readings the same on every machine
    (`steady_timings`): how its timeline names fit depended on how loaded the machine was."""
    from converge_dsl.runtime import render_report

    folder = tmp_path_factory.mktemp("market")
    page, trace = folder / "market-entry.html", folder / "market-entry.jsonl"
    argv = ["run", str(ROOT / "pipelines" / "market-entry.yaml"), "--trace", str(trace)]
    assert run(argv, io.StringIO(), io.StringIO()) == 0
    steady_timings(trace)
    page.write_text(render_report(trace), encoding="utf-8")
    return page


def _rgb(hex_colour: str) -> list[int]:
    return [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]


def test_the_timeline_draws_each_kind_in_the_graphs_colours_as_its_legend_says(
    browser: Any, market_page: Path, artifacts: Path
) -> None:
    from converge_dsl.runtime import SUGGESTOR_KINDS

    _open(browser, market_page)
    assert _errors(browser) == []
    legend = browser.find_elements("css selector", "#legend span")
    assert [item.text for item in legend] == [
        "seed execution",
        "llm execution",
        "rule execution",
        "model call",
        "failed",
    ]
    for item, kind in zip(legend, ("seed", "llm", "rule"), strict=False):
        swatch = item.find_element("tag name", "i").value_of_css_property("background-color")
        style = SUGGESTOR_KINDS.kind(kind).graph  # the one table the graph draws with
        assert swatch == "rgba({}, {}, {}, 1)".format(*_rgb(style.fill))
        painted = browser.execute_script(
            "var c = document.getElementById('timeline'), d = c.getContext('2d')"
            ".getImageData(0, 0, c.width, c.height).data, n = 0, k = arguments[0];"
            "for (var i = 0; i < d.length; i += 4)"
            " if (d[i] === k[0] && d[i + 1] === k[1] && d[i + 2] === k[2]) n++; return n;",
            _rgb(style.fill),
        )
        assert painted > 20, kind  # its bars are drawn in its fill
    # every execution is named, the short first and last ones too
    labels = json.loads(browser.find_element("id", "timeline").get_attribute("data-labels"))
    assert labels[0] == "target-market"
    assert "evaluator" in labels
    assert len(labels) == 5
    browser.save_screenshot(str(artifacts / "report-kinds.png"))


def test_the_header_and_the_cycles_card_count_the_same_cycles(
    browser: Any, market_page: Path
) -> None:
    _open(browser, market_page)
    stats = browser.find_element("id", "stats").text
    found = re.search(r"cycles (\d+)", stats)
    assert found is not None
    cycles = found.group(1)
    card = next(
        c for c in browser.find_elements("css selector", "#charts .chart") if "Cycles" in c.text
    )
    assert f"used {cycles} of 20" in card.text


def test_the_summarizer_calls_are_told_from_the_turns(browser: Any, example_page: Path) -> None:
    _open(browser, example_page)
    rows = [r.text for r in browser.find_elements("css selector", "#calls .row")]
    assert [r.split("\n")[2] for r in rows].count("summary") == 1
    assert sum(1 for r in rows if "\nturn " in r) == 6
    assert "summarizer call" in browser.find_element("id", "legend").text


@pytest.fixture(scope="module")
def long_text_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent-review report, its first fact's content one unbroken word of 20,000
    characters."""
    from converge_dsl.runtime import render_report

    folder = tmp_path_factory.mktemp("long")
    trace = folder / "t.jsonl"
    code = run(
        ["run", str(ROOT / "pipelines" / "agent-review.yaml"), "--trace", str(trace)],
        io.StringIO(),
        io.StringIO(),
    )
    assert code == 0
    lines = trace.read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(lines) if '"fact_promoted"' in line)
    event = json.loads(lines[first])
    event["content"] = "x" * 20_000
    event["id"] = "long"
    lines[first] = json.dumps(event)
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = folder / "long.html"
    page.write_text(render_report(trace), encoding="utf-8")
    return page


def _sideways(driver: Any, element_id: str) -> list[int]:
    return list(
        driver.execute_script(
            "var e = document.getElementById(arguments[0]) || document.documentElement;"
            " return [e.scrollWidth, e.clientWidth];",
            element_id,
        )
    )


def test_a_long_unbroken_fact_wraps_in_its_detail(
    browser: Any, long_text_page: Path, artifacts: Path
) -> None:
    # Its detail box scrolled sideways 20,000 characters' width to read it.
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get("about:blank")
    browser.get(long_text_page.as_uri() + "#fact=long")
    WebDriverWait(browser, LOAD_BOUND_S).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )
    assert "x" * 100 in browser.find_element("id", "fact-detail").text
    wide, view = _sideways(browser, "fact-detail")
    assert wide <= view
    assert _errors(browser) == []
    browser.save_screenshot(str(artifacts / "report-long-fact.png"))


def _pixels(driver: Any, css: str, content: str, overflow: str = "") -> bytes:
    """A screenshot of the elements at `css` in the open fact's pane once its content is
    `content` (and its field's overflow `overflow`, when given)."""
    driver.execute_script(
        "var dd = document.querySelectorAll('#fact-detail dd')[1];"
        " dd.textContent = arguments[0]; dd.style.overflow = arguments[1];",
        content,
        overflow,
    )
    return b"".join(e.screenshot_as_png for e in driver.find_elements("css selector", css))


def test_stacked_combining_marks_stay_in_their_field(
    browser: Any, long_text_page: Path, artifacts: Path
) -> None:
    # Forty combining marks on one letter (text from a model can hold them) drew over the
    # field's label and the fields above it, up to the pane's edge.
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get("about:blank")
    browser.get(long_text_page.as_uri() + "#fact=long")
    WebDriverWait(browser, LOAD_BOUND_S).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )
    above = "#fact-detail dt, #fact-detail dd:first-of-type"
    plain = _pixels(browser, above, "a marked")
    marked = _pixels(browser, above, "a" + "\u0301" * 40 + " marked")
    browser.execute_script("document.getElementById('fact-detail').scrollIntoView();")
    browser.save_screenshot(str(artifacts / "report-combining-marks.png"))
    assert marked == plain  # the labels and the field above drawn as without the marks
    # Ordinary accents, Vietnamese capitals with two marks stacked (clipped once: "Ẫ" as
    # "Â") among them, drawn whole: compared on the whole pane, as a screenshot of the
    # field alone is cut at the field's box, exactly where its clip cuts.
    accents = "\u01fa \u00c9 \u00c5 \u1ec6\u0301 \u01d8 caf\u00e9 Vi\u1ec7t"
    accents += " \u1eaan \u1ed6ng \u1eb4m \u1ea4y \u1ec2u"
    pane = "#fact-detail"
    assert _pixels(browser, pane, accents) == _pixels(browser, pane, accents, "visible")


def test_a_field_keeps_its_line_breaks(browser: Any, long_text_page: Path) -> None:
    # A fact's content of several lines (a model's answer) read as one paragraph.
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get("about:blank")
    browser.get(long_text_page.as_uri() + "#fact=long")
    WebDriverWait(browser, LOAD_BOUND_S).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )
    browser.execute_script(
        "document.querySelectorAll('#fact-detail dd')[1].textContent = arguments[0];",
        "first line\nsecond line",
    )
    field = browser.find_elements("css selector", "#fact-detail dd")[1]
    assert field.text == "first line\nsecond line"


def test_a_narrow_window_does_not_scroll_the_page_sideways(
    browser: Any, example_page: Path, artifacts: Path
) -> None:
    # At 600 pixels the lists' heads stood out of their sections (the page 930 pixels
    # wide) and the header's counts stood one word a line under the search box.
    size = browser.get_window_size()
    browser.set_window_size(600, 1000)
    try:
        _open(browser, example_page)
        wide, view = _sideways(browser, "")
        title, search = (browser.find_element("id", name).rect for name in ("title", "search"))
        stats = browser.find_element("id", "stats").rect
        browser.save_screenshot(str(artifacts / "report-narrow.png"))
    finally:
        browser.set_window_size(size["width"], size["height"])
    assert wide <= view
    assert stats["y"] >= max(title["y"] + title["height"], search["y"] + search["height"])


def test_a_run_that_failed_before_its_first_cycle_has_no_empty_timeline(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # The page drew an empty box over "0 executions, 0 model calls - the trace has no
    # clock readings: one slot per cycle", though the trace had them: nothing had run.
    from converge_dsl.runtime import render_report

    whole = tmp_path / "whole.jsonl"
    argv = ["run", str(ROOT / "pipelines" / "market-entry.yaml"), "--trace", str(whole)]
    assert run(argv, io.StringIO(), io.StringIO()) == 0
    started = json.loads(whole.read_text(encoding="utf-8").splitlines()[0])
    assert started["type"] == "run_started"
    assert started["timing"]["at"] is not None
    failed = {
        "seq": 1,
        "type": "run_finished",
        "timing": {"at": started["timing"]["at"] + 0.002, "duration_s": 0.002},
        "cycles": 0,
        "stop_reason": "error",
        "facts": 0,
        "error": "the model adapter failed",
        "span": None,
    }
    trace, page = tmp_path / "failed.jsonl", tmp_path / "failed.html"
    trace.write_text(json.dumps(started) + "\n" + json.dumps(failed) + "\n", encoding="utf-8")
    page.write_text(render_report(trace), encoding="utf-8")
    _open(browser, page)
    assert _errors(browser) == []
    browser.save_screenshot(str(artifacts / "report-failed-before-first-cycle.png"))
    assert browser.find_element("id", "tl-note").text == "no suggestor ran"
    assert not browser.find_element("id", "timeline").is_displayed()
    assert not browser.find_element("id", "legend").is_displayed()
    assert browser.find_element("css selector", "#timeline-section .empty").text == "none"
    assert browser.find_element("id", "stop-error").text == "the model adapter failed"


def test_a_trace_cut_before_any_execution_finished_does_not_say_none_ran(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # The note said "no suggestor ran, 7 model calls" over the agent steps of cycle 1.
    from converge_dsl.runtime import render_report

    whole = tmp_path / "whole.jsonl"
    argv = ["run", str(ROOT / "pipelines" / "agent-review.yaml"), "--trace", str(whole)]
    assert run(argv, io.StringIO(), io.StringIO()) == 0
    lines = whole.read_text(encoding="utf-8").splitlines(keepends=True)
    ends = ("suggestor_finished", "suggestor_failed")
    first_end = next(i for i, line in enumerate(lines) if json.loads(line)["type"] in ends)
    assert any(json.loads(line)["type"] == "model_call_finished" for line in lines[:first_end])
    trace, page = tmp_path / "cut.jsonl", tmp_path / "cut.html"
    trace.write_text("".join(lines[:first_end]), encoding="utf-8")
    page.write_text(render_report(trace), encoding="utf-8")
    _open(browser, page)
    assert _errors(browser) == []
    browser.save_screenshot(str(artifacts / "report-cut-in-cycle-1.png"))
    note = browser.find_element("id", "tl-note").text
    assert note.startswith("no suggestor finished, ")
    assert note.endswith(" model calls")
