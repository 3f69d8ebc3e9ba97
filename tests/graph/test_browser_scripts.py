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
