"""The page of `eval --format html` in a real headless Chromium.

The shipped evaluation, after the prompt change docs/eval.md shows, against its
baseline: the metric cards (the failed one marked), the confusion matrix, the
regressions, the cases table and its filters, a case's whole result on a click, a failed
case's error. A document with metrics of kinds this page has never heard of: each still
gets its card with every field it carries. Screenshots are saved under the `artifacts`
folder (tests/conftest.py); the `browser` fixture skips, saying why, where Chromium, its
driver or selenium is not installed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.pipetest import render_eval_html

from .browser_pages import console_errors, open_page, section_count, type_search, visible_rows
from .conftest import ROOT, cli

BROWSER_WINDOW = (1400, 1500)


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
    open_page(browser, eval_page)
    assert console_errors(browser) == []
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
    worst = visible_rows(browser, "#worst tbody tr")
    assert [r.text.split()[0] for r in worst] == ["T-219", "T-228", "T-202", "T-205", "T-208"]
    changes = visible_rows(browser, "#baseline .row")
    assert len(changes) == 8
    assert changes[0].text.split() == ["T-202", "urgency", "1.000", "0.000", "regressed"]
    assert section_count(browser, "cases") == "52"
    assert 10 <= len(visible_rows(browser, "#cases .row")) < 52  # the rows in view only
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
        open_page(browser, eval_page)
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
    assert console_errors(browser) == []


def test_the_cases_filter_by_text_and_by_score_and_a_click_shows_a_case(
    browser: Any, eval_page: Path, artifacts: Path
) -> None:
    open_page(browser, eval_page)
    browser.find_element("id", "only-failing").click()
    assert section_count(browser, "cases") == "9 of 52"
    type_search(browser, "t-219")
    assert section_count(browser, "cases") == "1 of 52"
    (row,) = visible_rows(browser, "#cases .row")
    assert row.text.split()[:3] == ["T-219", "converged", "0.667"]
    assert [r.text.split()[:2] for r in visible_rows(browser, "#baseline .row")] == [
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

    visible_rows(browser, "#worst tbody tr")[2].send_keys(Keys.ENTER)  # focused: Enter
    assert pane.is_displayed()
    assert json.loads(browser.find_element("css selector", "#detail pre").text)["name"] == "T-202"
    browser.find_element("css selector", "#baseline input[data-filter=regressed]").click()
    assert visible_rows(browser, "#baseline .row") == []
    assert console_errors(browser) == []


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
    open_page(browser, page)
    assert console_errors(browser) == []
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
    (worst,) = visible_rows(browser, "#worst tbody tr")
    assert worst.text.split() == ["b", "0.750", "helpful"]
    heads = [h.text for h in browser.find_elements("css selector", "#cases .head span")]
    assert heads == ["case", "stop reason", "mean", "helpful", "latency", "seconds"]
    assert "small" in browser.find_element("id", "more").text
    assert "judge calls 2" in browser.find_element("id", "stats").text
    browser.save_screenshot(str(artifacts / "eval-any-metric.png"))


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
    open_page(browser, page)
    assert console_errors(browser) == []
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
    assert section_count(browser, "cases") == "13 of 14"
    rows = visible_rows(browser, "#cases .row")
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
        open_page(browser, page)
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
    assert console_errors(browser) == []


def test_a_refusal_that_ran_scores_0_and_is_a_failed_expectation(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    # No metric scores a case expecting its run to be refused: the page gave it a mean of
    # 1.000 (no worst case) and filed it under "stopped with an error".
    from converge_dsl.pipetest._eval_run import run_eval
    from converge_dsl.pipetest._eval_spec import read_eval_file

    from .test_eval_run import _PROBES, _probes

    ran = _PROBES.replace('{"nope": "x"}', '{"ticket": "charged twice"}')
    result = run_eval(read_eval_file(_probes(tmp_path, ran))).untimed()
    page = tmp_path / "unmet.html"
    page.write_text(render_eval_html(result.as_json()), encoding="utf-8")
    open_page(browser, page)
    assert console_errors(browser) == []
    assert browser.find_elements("id", "errors") == []
    unmet = browser.find_element("id", "unmet")
    said = "expected its run to be refused (usage_error); it stopped with converged"
    assert unmet.find_element("css selector", ".error-case").text == f"probe\n{said}"
    worst = browser.find_element("id", "worst").find_elements("css selector", "tbody tr")
    # below 1 on: why (it was empty, no metric scoring it)
    assert [row.text.split() for row in worst] == [["probe", "0.000", "failed", "expectation"]]
    rows = visible_rows(browser, "#cases .row")
    means = [row.find_elements("css selector", "span")[2].text for row in rows]
    assert means == ["1.000", "0.000"]
    # its sentence in the wide column, as an error's: the narrow one cut it and its header
    widths = browser.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#cases .row')[1].children,"
        " function (c) { return [c.className, c.scrollWidth <= c.clientWidth]; });"
    )
    assert [whole for kind, whole in widths if "c-w" in kind] == [True]
    browser.save_screenshot(str(artifacts / "eval-failed-expectation.png"))
