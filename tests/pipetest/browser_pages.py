"""What the browser tests of the eval and diff pages share: a page opened and drawn, the
console's errors, the rows in view, the search box, a section's count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

LOAD_BOUND_S = 20.0


def open_page(driver: Any, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, LOAD_BOUND_S).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )


def console_errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def visible_rows(driver: Any, css: str) -> list[Any]:
    return [r for r in driver.find_elements("css selector", css) if r.is_displayed()]


def type_search(driver: Any, text: str) -> None:
    box = driver.find_element("id", "search")
    box.clear()
    box.send_keys(text)


def section_count(driver: Any, section: str) -> str:
    return str(driver.find_element("css selector", f"#{section} h2 .count").text)
