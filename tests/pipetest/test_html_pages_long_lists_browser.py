"""The eval and diff pages' long lists in a real headless Chromium: 20,000 cases, 20,000
differing cases. The DOM holds the rows in view only, and every row is reached by the
search, the scroll bar and the keyboard. Screenshots are saved under the `artifacts`
folder (tests/conftest.py); the `browser` fixture skips, saying why, where Chromium, its
driver or selenium is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.pipetest import render_eval_html

from .browser_pages import LOAD_BOUND_S, console_errors, open_page, section_count, type_search
from .conftest import cli

BROWSER_WINDOW = (1400, 1500)

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

    open_page(browser, big_eval_page)
    _first_draw(browser, "eval page, 20,000 cases", capsys)
    assert console_errors(browser) == []
    assert section_count(browser, "cases") == str(BIG)
    assert 10 <= _rows_in_dom(browser, "#cases .row") <= ROW_BOUND
    assert 10 <= _rows_in_dom(browser, "#baseline .row") <= ROW_BOUND
    assert _rows_in_dom(browser, '#cases .row[tabindex="0"]') == 1  # Tab enters, arrows move
    browser.save_screenshot(str(artifacts / "eval-20000.png"))
    # the cases below 1 whose name starts "case-1": the last of them is at the list's end
    browser.find_element("id", "only-failing").click()
    type_search(browser, "case-1")
    matching = [
        c["name"]
        for c in map(_big_case, range(BIG))
        if c["name"].startswith("case-1") and min(c["scores"].values()) < 1
    ]
    assert section_count(browser, "cases") == f"{len(matching)} of {BIG}"
    last = _scroll_to_the_end(browser, "#cases .vlist", matching[-1])
    assert last.text.split()[0] == matching[-1]
    assert _rows_in_dom(browser, "#cases .row") <= ROW_BOUND
    # Enter on the focused row opens it; the arrow keys move the focus row by row
    last.send_keys(Keys.ENTER)
    assert _shown_case(browser) == matching[-1]
    browser.switch_to.active_element.send_keys(Keys.ARROW_UP, Keys.ENTER)
    assert _shown_case(browser) == matching[-2]
    browser.save_screenshot(str(artifacts / "eval-20000-filtered.png"))
    assert console_errors(browser) == []


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
    open_page(browser, page)
    _first_draw(browser, "diff page, 20,000 differing cases", capsys)
    assert console_errors(browser) == []
    lines = BIG * 2 + len(range(0, BIG, 3)) * 2  # a ticket's content and data; a signal's
    assert section_count(browser, "differences") == str(lines)
    assert 10 <= _rows_in_dom(browser, "#differences .row") <= ROW_BOUND
    browser.save_screenshot(str(artifacts / "diff-20000.png"))
    # the added facts of the cases whose name starts "T-1": the last is T-19998's
    browser.find_element("css selector", "input[data-filter=changed]").click()
    type_search(browser, "t-1")
    added = [i for i in range(10_000, BIG) if i % 3 == 0]
    assert section_count(browser, "differences") == f"{len(added) * 2} of {lines}"
    last = _scroll_to_the_end(browser, "#differences .vlist", f"T-{added[-1]:05d}")
    assert last.text.split()[:4] == [f"T-{added[-1]:05d}", "added", "signals/escalate", "/data"]
    assert _rows_in_dom(browser, "#differences .row") <= ROW_BOUND
    last.send_keys(Keys.ENTER)  # the whole fact, A beside B
    detail = browser.find_element("id", "detail")
    assert detail.find_element("tag name", "h3").text == f"case T-{added[-1]:05d}: signals/escalate"
    assert '"to": "ops"' in detail.text
    browser.save_screenshot(str(artifacts / "diff-20000-filtered.png"))
    assert console_errors(browser) == []
