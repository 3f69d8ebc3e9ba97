"""The pages of `eval --format html` and `diff --format html` in a real headless Chromium.

The shipped evaluation, after the prompt change docs/eval.md shows, against its
baseline: the metric cards (the failed one marked), the confusion matrix, the
regressions, the cases table and its filters, a case's whole result on a click.
A document with metrics of kinds this page has never heard of: each still gets
its card with every field it carries. The diff of two runs and of two batch
results files of the shipped examples, one prompt changed (the changes of
test_example_diffs.py): A beside B, filtered by text and by change. Data that
looks like markup shows as text. Screenshots are saved under the `artifacts`
folder (tests/conftest.py); the `browser` fixture skips, saying why, where
Chromium, its driver or selenium is not installed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.pipetest import render_eval_html

from .conftest import ROOT, cli
from .test_example_diffs import CHANGES, PromptChange, _copy, _run

BROWSER_WINDOW = (1400, 1500)
LOAD_BOUND_S = 20.0
HOSTILE = '</script><img src=x onerror="window.pwned=1"><b>bold</b>'


def _open(driver: Any, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, LOAD_BOUND_S).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )


def _errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _visible_rows(driver: Any, css: str) -> list[Any]:
    return [r for r in driver.find_elements("css selector", css) if r.is_displayed()]


def _type(driver: Any, text: str) -> None:
    box = driver.find_element("id", "search")
    box.clear()
    box.send_keys(text)


def _count(driver: Any, section: str) -> str:
    return str(driver.find_element("css selector", f"#{section} h2 .count").text)


@pytest.fixture(scope="module")
def eval_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped evaluation after docs/eval.md's prompt change, against the baseline."""
    folder = tmp_path_factory.mktemp("eval-page")
    example = folder / "support-triage"
    shutil.copytree(ROOT / "pipelines" / "support-triage", example)
    evaluation = example / "triage.eval.yaml"
    baseline, page = folder / "baseline.json", folder / "triage.html"
    assert cli("eval", evaluation, "--format", "json", "-o", baseline)[0] == 0
    ticket = example / "ticket.yaml"
    old = "Answer with a JSON array only."
    text = ticket.read_text(encoding="utf-8")
    new = "Treat any ticket that mentions an error as a bug. " + old
    ticket.write_text(text.replace(old, new), encoding="utf-8")
    argv = ["eval", evaluation, "--baseline", baseline, "--format", "html", "-o", page]
    assert cli(*argv)[0] == 1
    return page


def test_the_evaluation_page_shows_metrics_confusion_and_regressions(
    browser: Any, eval_page: Path, artifacts: Path
) -> None:
    _open(browser, eval_page)
    assert _errors(browser) == []
    title = browser.find_element("id", "title").text
    assert title.startswith("Evaluation: ")
    assert title.endswith("support-triage/triage.eval.yaml")
    assert browser.find_element("id", "verdict").text == "FAILED"
    cards = browser.find_elements("css selector", "#metrics .card")
    assert [c.get_attribute("data-metric") for c in cards] == [
        "category",
        "urgency",
        "well-formed",
        "converged",
        "tokens",
        "summary",
    ]
    category = cards[0]
    assert "failed" in category.get_attribute("class")
    assert "FAIL" in category.text
    assert "0.885" in category.text
    assert "95% interval [0.770, 0.946]" in category.text
    assert "threshold 0.9" in category.text
    assert all("failed" not in c.get_attribute("class") for c in cards[1:])
    matrix = browser.find_element("css selector", "#confusion .matrix[data-metric=category]")
    rows = [r.text.split() for r in matrix.find_elements("css selector", "tbody tr")]
    assert rows == [
        ["account", "16", "0", "0"],
        ["billing", "1", "12", "5"],
        ["bug", "0", "0", "18"],
    ]
    worst = _visible_rows(browser, "#worst tbody tr")
    assert [r.text.split()[0] for r in worst] == ["T-219", "T-228", "T-202", "T-205", "T-208"]
    changes = _visible_rows(browser, "#baseline .row")
    assert len(changes) == 8
    assert changes[0].text.split() == ["T-202", "urgency", "1.000", "0.000", "regressed"]
    assert _count(browser, "cases") == "52"
    assert 10 <= len(_visible_rows(browser, "#cases .row")) < 52  # the rows in view only
    browser.save_screenshot(str(artifacts / "eval-example.png"))


@pytest.mark.parametrize("width", [400, 1280])
def test_the_confusion_matrix_fits_a_narrow_window(
    browser: Any, eval_page: Path, artifacts: Path, width: int
) -> None:
    # At 400 px the shipped evaluation's matrix scrolled sideways: its corner label
    # "expected \ found" stayed on one line.
    size = browser.get_window_size()
    browser.set_window_size(width, 1000)
    try:
        _open(browser, eval_page)
        matrix = browser.find_element("css selector", "#confusion .matrix[data-metric=category]")
        inner = browser.execute_script(
            "return [arguments[0].scrollWidth, arguments[0].clientWidth]", matrix
        )
        browser.find_element("id", "confusion").screenshot(
            str(artifacts / f"eval-confusion-{width}.png")
        )
    finally:
        browser.set_window_size(size["width"], size["height"])
    assert inner[0] <= inner[1]
    assert _errors(browser) == []


def test_a_case_name_pasted_raw_in_the_filter_finds_its_row(browser: Any, tmp_path: Path) -> None:
    # The rows show `r⟨U+202E⟩ev`; the name itself, pasted in, found nothing.
    cases = [{"name": n, "stop_reason": "converged"} for n in ("r\u202eev", "r\\u202eev", "zz")]
    document = {"evaluation": "e", "passed": True, "metrics": [], "cases": cases}
    page = tmp_path / "names.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    _open(browser, page)
    browser.execute_script(
        "var s = document.getElementById('search'); s.value = arguments[0];"
        "s.dispatchEvent(new Event('input'));",
        "r\u202eev",
    )
    assert _count(browser, "cases") == "1 of 3"
    names = [r.text.split()[0] for r in _visible_rows(browser, "#cases .row")]
    assert names == ["r\u27e8U+202E\u27e9ev"]
    assert _errors(browser) == []


def test_the_cases_filter_by_text_and_by_score_and_a_click_shows_a_case(
    browser: Any, eval_page: Path, artifacts: Path
) -> None:
    _open(browser, eval_page)
    browser.find_element("id", "only-failing").click()
    assert _count(browser, "cases") == "9 of 52"
    _type(browser, "t-219")
    assert _count(browser, "cases") == "1 of 52"
    (row,) = _visible_rows(browser, "#cases .row")
    assert row.text.split()[:3] == ["T-219", "converged", "0.667"]
    assert [r.text.split()[:2] for r in _visible_rows(browser, "#baseline .row")] == [
        ["T-219", "category"],
        ["T-219", "urgency"],
    ]
    row.click()
    pane = browser.find_element("id", "detail-pane")
    assert pane.is_displayed()
    assert json.loads(browser.find_element("css selector", "#detail pre").text)["name"] == "T-219"
    browser.save_screenshot(str(artifacts / "eval-filtered.png"))
    browser.find_element("id", "close-pane").click()
    assert not pane.is_displayed()
    from selenium.webdriver.common.keys import Keys

    _visible_rows(browser, "#worst tbody tr")[2].send_keys(Keys.ENTER)  # focused: Enter
    assert pane.is_displayed()
    assert json.loads(browser.find_element("css selector", "#detail pre").text)["name"] == "T-202"
    browser.find_element("css selector", "#baseline input[data-filter=regressed]").click()
    assert _visible_rows(browser, "#baseline .row") == []
    assert _errors(browser) == []


def test_metrics_of_any_kind_get_a_card_with_every_field_they_carry(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    """Metrics and fields this page knows nothing of (a judge, a latency bound, model
    configurations): drawn all the same."""
    document = {
        "evaluation": "kinds.eval.yaml",
        "passed": True,
        "overall": 0.93,
        "threshold": None,
        "seconds": 1.5,
        "usage": {"input_tokens": 10, "output_tokens": 4, "judge_calls": 2},
        "metrics": [
            {"name": "helpful", "kind": "judge", "mean": 0.875, "cases": 2, "interval": None,
             "threshold": 0.8, "passed": True, "confusion": [], "rubric": "Is it helpful?",
             "verdicts": {"yes": 1, "partly": 1}},
            {"name": "latency", "kind": "latency", "mean": 1.8, "cases": 2, "interval": None,
             "threshold": None, "passed": True, "confusion": [], "p95_s": 2.4, "max_s": 2.5},
        ],
        "cases": [
            {"name": "a", "stop_reason": "converged", "scores": {"helpful": 1.0, "latency": 1.1},
             "seconds": 1.1, "judge": {"verdict": "yes"}},
            {"name": "b", "stop_reason": "converged", "scores": {"helpful": 0.75, "latency": 2.5},
             "seconds": 2.5, "judge": {"verdict": "partly"}},
        ],
        "models": [{"name": "small", "model": "scripted"}],
    }  # fmt: skip
    page = tmp_path / "kinds.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    _open(browser, page)
    assert _errors(browser) == []
    judge, latency = browser.find_elements("css selector", "#metrics .card")
    assert "judge" in judge.text
    assert "Is it helpful?" in judge.text
    assert '{"yes":1,"partly":1}' in judge.text
    assert "1.800" in latency.text
    assert "p95_s" in latency.text
    assert "2.4" in latency.text
    assert len(judge.find_elements("tag name", "svg")) == 1  # a score's bar from 0 to 1
    assert latency.find_elements("tag name", "svg") == []  # seconds: no such bar
    # seconds are shown, not averaged with the scores
    (worst,) = _visible_rows(browser, "#worst tbody tr")
    assert worst.text.split() == ["b", "0.750", "helpful"]
    heads = [h.text for h in browser.find_elements("css selector", "#cases .head span")]
    assert heads == ["case", "stop reason", "mean", "helpful", "latency", "seconds"]
    assert "small" in browser.find_element("id", "more").text
    assert "judge calls 2" in browser.find_element("id", "stats").text
    browser.save_screenshot(str(artifacts / "eval-any-metric.png"))


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
    _open(browser, _diff_page(_change("market-entry.yaml"), tmp_path))
    assert _errors(browser) == []
    facts = [r.text for r in _visible_rows(browser, "#differences tr.fact")]
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
    facts = [r.text for r in _visible_rows(browser, "#differences tr.fact")]
    assert facts == ["removed competitors/competitor-nordhaul", "the run"]
    _type(browser, "nordhaul")
    assert _count(browser, "differences") == "1 of 4"
    assert _errors(browser) == []


def test_the_diff_of_two_batches_shows_the_cases_whose_facts_changed(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    _open(browser, _diff_page(_change("support-triage/ticket.yaml"), tmp_path))
    assert _errors(browser) == []
    cases = browser.find_elements("css selector", "#differences details.case")
    assert [c.get_attribute("data-case") for c in cases] == ["T-202", "T-209"]
    assert "urgency 3" in cases[0].text
    assert "urgency 2" in cases[0].text
    usage = browser.find_element("id", "usage").text
    assert "input_tokens" in usage
    assert "50 cases differ in their usage only" in usage
    assert "cases differ 2" in browser.find_element("id", "stats").text
    browser.save_screenshot(str(artifacts / "diff-batch.png"))
    _type(browser, "T-209")
    shown = [c.get_attribute("data-case") for c in cases if c.is_displayed()]
    assert shown == ["T-209"]
    assert _errors(browser) == []


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
    _open(browser, page)
    assert _errors(browser) == []
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
    _open(browser, page)
    shown = [r.text.split("\n")[0] for r in _visible_rows(browser, "#cases .row")]
    assert shown == ["T-1 \u27e8U+202E\u27e9(at a.yaml:1:2)", "T-1 \\u202e(at a.yaml:1:2)"]
    assert browser.find_element("id", "title").text == "Evaluation: T-1 \\u202e(at a.yaml:1:2)"
    assert _errors(browser) == []
    # the pane's JSON shows the name as the table does
    _visible_rows(browser, "#cases .row")[0].click()
    assert (
        '"name": "T-1 \u27e8U+202E\u27e9(at a.yaml:1:2)"'
        in browser.find_element("id", "detail").text
    )


def _errored(i: int, **more: Any) -> dict[str, Any]:
    diagnostic = {
        "code": "CD911",
        "message": f"E_PROVIDER: the provider failed on case {i} " + "x" * 400,
        "file": "ticket.yaml",
        "line": 24,
        "column": 5,
        "hint": "retry later or fail over to another account",
    }
    error = f"CD911: {diagnostic['message']} (at ticket.yaml:24:5)"
    case = {"name": f"T-{i}", "stop_reason": "error", "scores": {"m": 0}, "error": error}
    return {**case, "diagnostic": diagnostic, **more}


def test_a_failed_case_s_error_reads_as_the_cli_prints_it(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    ok = {"name": "T-ok", "stop_reason": "converged", "scores": {"m": 1}}
    old = {
        "name": "T-old",
        "stop_reason": "error",
        "scores": {"m": 0},
        "error": "CD911: E (at a.yaml:1:2)",
    }
    cases = [ok, old, *(_errored(i) for i in range(12))]
    document = {"evaluation": "e", "passed": False, "metrics": [], "cases": cases}
    page = tmp_path / "errors.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    _open(browser, page)
    assert _errors(browser) == []
    errors = browser.find_element("id", "errors")
    assert "13 case(s) stopped with an error" in errors.text
    shown = errors.find_elements("css selector", ".error-case")
    assert len(shown) == 10  # the first ten, the others a click away in the table
    assert "... and 3 more" in errors.text
    assert shown[0].text == "T-old\nCD911: E (at a.yaml:1:2)"  # a document without `diagnostic`
    lines = shown[1].text.splitlines()
    assert lines[0] == "T-0"
    assert lines[1].startswith("error[CD911]: E_PROVIDER: the provider failed on case 0 xxx")
    assert lines[-2:] == [
        " --> ticket.yaml:24:5",
        "  = hint: retry later or fail over to another account",
    ]
    browser.save_screenshot(str(artifacts / "eval-errors.png"))
    # the table: the error its own wide column, the rows one line each
    browser.find_element("id", "only-errors").click()
    assert _count(browser, "cases") == "13 of 14"
    rows = _visible_rows(browser, "#cases .row")
    cell = rows[1].find_elements("css selector", "span")[-1]
    assert cell.text.startswith("CD911: E_PROVIDER: the provider failed on case 0")
    assert cell.size["width"] > 300
    assert {r.size["height"] for r in rows} == {24}
    # a click: the pane leads with the same block, whole
    rows[1].click()
    pane = browser.find_element("id", "detail")
    assert "= hint: retry later or fail over to another account" in pane.text
    assert pane.find_element("css selector", "pre.diag").is_displayed()
    browser.save_screenshot(str(artifacts / "eval-error-pane.png"))


def test_a_long_confusion_label_keeps_the_matrix_inside_its_section(
    browser: Any, tmp_path: Path
) -> None:
    # A category of a dataset 2,000 characters long made the matrix as wide: the page
    # scrolled sideways, every section with it.
    long = "x" * 2_000
    confusion = [
        {"expected": long, "found": "bug", "count": 1},
        {"expected": "bug", "found": long, "count": 2},
    ]
    metric = {"name": "category", "mean": 0.5, "cases": 3, "confusion": confusion}
    document = {"evaluation": "e", "passed": False, "metrics": [metric], "cases": []}
    page = tmp_path / "wide.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    size = browser.get_window_size()
    browser.set_window_size(600, 1000)
    try:
        _open(browser, page)
        wide, view = browser.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        section = browser.find_element("id", "confusion")
        inner = browser.execute_script(
            "return [arguments[0].scrollWidth, arguments[0].clientWidth]", section
        )
        heads = browser.execute_script(
            "return Array.prototype.map.call(document.querySelectorAll('.matrix th'),"
            " function (th) { return [th.title, th.getBoundingClientRect().height]; });"
        )
    finally:
        browser.set_window_size(size["width"], size["height"])
    assert wide <= view
    assert inner[0] <= inner[1]
    # and on one line, whole in its title: it wrapped to a row and a column 80 lines tall
    assert long in [title for title, _ in heads]
    assert max(height for _, height in heads) < 40
    assert _errors(browser) == []


# -- long lists: 20,000 cases, 20,000 differing cases --------------------------------------

BIG = 20_000
ROW_BOUND = 60  # the rows one virtualised list may hold in the DOM, however long it is
METRICS = ("category", "urgency", "summary")


def _big_case(i: int) -> dict[str, Any]:
    scores = {m: 0 if (i + j) % 7 == 0 else 1 for j, m in enumerate(METRICS)}
    return {"name": f"case-{i:05d}", "stop_reason": "converged", "scores": scores}


def _first_draw(driver: Any, what: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Prints how long after the navigation began the page was drawn (no bound: a figure)."""
    drawn = driver.find_element("tag name", "body").get_attribute("data-drawn-ms")
    paint = driver.execute_script(
        "var p = performance.getEntriesByName('first-contentful-paint')[0];"
        "return p ? Math.round(p.startTime) : null;"
    )
    with capsys.disabled():
        print(f"\n{what}: drawn {drawn} ms after the navigation began (first paint {paint} ms)")


def _rows_in_dom(driver: Any, css: str) -> int:
    return int(driver.execute_script(f"return document.querySelectorAll({css!r}).length"))


def _scroll_to_the_end(driver: Any, css: str, last: str) -> Any:
    """Scrolls the list `css` to its end; its last row once it shows `last` (a row read
    while the list redraws is gone: read again)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_script(f"var b = document.querySelector({css!r}); b.scrollTop = b.scrollHeight;")
    WebDriverWait(driver, LOAD_BOUND_S, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: d.find_elements("css selector", f"{css} .row")[-1].text.startswith(last)
    )
    return driver.find_elements("css selector", f"{css} .row")[-1]


@pytest.fixture(scope="module")
def big_eval_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cases = [_big_case(i) for i in range(BIG)]
    metrics = [
        {"name": m, "mean": 0.857, "cases": BIG, "interval": [0.85, 0.86], "threshold": 0.8,
         "passed": True, "confusion": []}
        for m in METRICS
    ]  # fmt: skip
    changes = [
        {"case": c["name"], "metric": "category", "before": 1, "after": 0, "verdict": "regressed"}
        for c in cases[::4]
    ]
    document = {
        "evaluation": "big.eval.yaml", "passed": True, "overall": 0.857, "threshold": None,
        "seconds": 1.0, "usage": {}, "metrics": metrics, "cases": cases, "changes": changes,
    }  # fmt: skip
    page = tmp_path_factory.mktemp("big-eval") / "big.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    return page


def test_an_evaluation_of_20000_cases_keeps_a_bounded_dom_and_reaches_every_case(
    browser: Any, big_eval_page: Path, artifacts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from selenium.webdriver.common.keys import Keys

    _open(browser, big_eval_page)
    _first_draw(browser, "eval page, 20,000 cases", capsys)
    assert _errors(browser) == []
    assert _count(browser, "cases") == str(BIG)
    assert 10 <= _rows_in_dom(browser, "#cases .row") <= ROW_BOUND
    assert 10 <= _rows_in_dom(browser, "#baseline .row") <= ROW_BOUND
    assert _rows_in_dom(browser, '#cases .row[tabindex="0"]') == 1  # Tab enters, arrows move
    browser.save_screenshot(str(artifacts / "eval-20000.png"))
    # the cases below 1 whose name starts "case-1": the last of them is at the list's end
    browser.find_element("id", "only-failing").click()
    _type(browser, "case-1")
    matching = [
        c["name"]
        for c in map(_big_case, range(BIG))
        if c["name"].startswith("case-1") and min(c["scores"].values()) < 1
    ]
    assert _count(browser, "cases") == f"{len(matching)} of {BIG}"
    last = _scroll_to_the_end(browser, "#cases .vlist", matching[-1])
    assert last.text.split()[0] == matching[-1]
    assert _rows_in_dom(browser, "#cases .row") <= ROW_BOUND
    # Enter on the focused row opens it; the arrow keys move the focus row by row
    last.send_keys(Keys.ENTER)
    assert _shown_case(browser) == matching[-1]
    browser.switch_to.active_element.send_keys(Keys.ARROW_UP, Keys.ENTER)
    assert _shown_case(browser) == matching[-2]
    browser.save_screenshot(str(artifacts / "eval-20000-filtered.png"))
    assert _errors(browser) == []


def _shown_case(driver: Any) -> str:
    """The name of the case the detail pane shows."""
    return str(json.loads(driver.find_element("css selector", "#detail pre").text)["name"])


def _big_results(folder: Path, side: str) -> Path:
    """A results file of BIG cases: each case's ticket changes between A and B, and every
    third case of B has a signal A has not."""
    path = folder / f"{side}.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i in range(BIG):
            urgency = 2 if side == "a" else 3
            facts: dict[str, Any] = {
                "tickets": [
                    {"id": "ticket", "content": f"urgency {urgency}", "data": {"urgency": urgency}}
                ]
            }
            if side == "b" and i % 3 == 0:
                signal = {"id": "escalate", "content": "escalate", "data": {"to": "ops"}}
                facts["signals"] = [signal]
            body = {"index": i, "id": f"T-{i:05d}", "stop_reason": "converged", "facts": facts}
            out.write(json.dumps(body) + "\n")
    return path


def test_a_diff_of_20000_differing_cases_keeps_a_bounded_dom_and_reaches_every_case(
    browser: Any, tmp_path: Path, artifacts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from selenium.webdriver.common.keys import Keys

    page = tmp_path / "diff.html"
    a, b = _big_results(tmp_path, "a"), _big_results(tmp_path, "b")
    assert cli("diff", a, b, "--format", "html", "-o", page)[0] == 1
    _open(browser, page)
    _first_draw(browser, "diff page, 20,000 differing cases", capsys)
    assert _errors(browser) == []
    lines = BIG * 2 + len(range(0, BIG, 3)) * 2  # a ticket's content and data; a signal's
    assert _count(browser, "differences") == str(lines)
    assert 10 <= _rows_in_dom(browser, "#differences .row") <= ROW_BOUND
    browser.save_screenshot(str(artifacts / "diff-20000.png"))
    # the added facts of the cases whose name starts "T-1": the last is T-19998's
    browser.find_element("css selector", "input[data-filter=changed]").click()
    _type(browser, "t-1")
    added = [i for i in range(10_000, BIG) if i % 3 == 0]
    assert _count(browser, "differences") == f"{len(added) * 2} of {lines}"
    last = _scroll_to_the_end(browser, "#differences .vlist", f"T-{added[-1]:05d}")
    assert last.text.split()[:4] == [f"T-{added[-1]:05d}", "added", "signals/escalate", "/data"]
    assert _rows_in_dom(browser, "#differences .row") <= ROW_BOUND
    last.send_keys(Keys.ENTER)  # the whole fact, A beside B
    detail = browser.find_element("id", "detail")
    assert detail.find_element("tag name", "h3").text == f"case T-{added[-1]:05d}: signals/escalate"
    assert '"to": "ops"' in detail.text
    browser.save_screenshot(str(artifacts / "diff-20000-filtered.png"))
    assert _errors(browser) == []


def test_a_diff_that_leaves_the_usage_out_says_so(browser: Any, tmp_path: Path) -> None:
    files = []
    for side, tokens in (("a", 10), ("b", 12)):
        body = {"index": 0, "id": "x", "stop_reason": "converged", "facts": {},
                "usage": {"input_tokens": tokens}}  # fmt: skip
        (tmp_path / f"{side}.jsonl").write_text(json.dumps(body) + "\n", encoding="utf-8")
        files.append(tmp_path / f"{side}.jsonl")
    page = tmp_path / "diff.html"
    assert cli("diff", *files, "--ignore", "usage", "--format", "html", "-o", page)[0] == 0
    _open(browser, page)
    assert _errors(browser) == []
    assert browser.find_element("id", "verdict").text == "the same"
    assert "not compared usage" in browser.find_element("id", "stats").text
    assert browser.find_element("id", "usage").text.endswith("not compared (--ignore usage)")
