"""The graph page's first view in headless Chromium: a graph fitted whole where that is
readable, else shown readable at its first node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .test_browser import _open, _page


def _chain_or_fan(folder: Path, shape: str, keys: int) -> Path:
    """A pipeline of `keys` keys: a chain (each rule reads the key before it) or a fan-out
    (every rule reads the first key), seeded at the first key `k0`."""
    lines = ["apiVersion: converge-dsl/v1", "kind: Pipeline", f"name: {shape}", "keys:"]
    lines += [f"  - {{name: k{i}}}" for i in range(keys)]
    lines += ["seeds:", "  - {id: s, key: k0, content: x}", "suggestors:"]
    lines += [
        f"  - {{name: r{i}, kind: rule, dependencies: [k{i if shape == 'chain' else 0}],"
        f" emit: [{{key: k{i + 1}, id: f{i}, content: x}}]}}"
        for i in range(keys - 1)
    ]
    source = folder / f"{shape}{keys}.yaml"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return _page(folder, str(source), f"{shape}{keys}.html")


def _in_view(browser: Any, selector: str) -> list[bool]:
    """Whether each node `selector` finds is wholly inside the drawing's box."""
    return list(
        browser.execute_script(
            "var c = document.getElementById('canvas').getBoundingClientRect();"
            "return Array.from(document.querySelectorAll(arguments[0])).map(function (n) {"
            " var b = n.getBoundingClientRect();"
            " return c.left <= b.left && b.right <= c.right && c.top <= b.top"
            " && b.bottom <= c.bottom; });",
            selector,
        )
    )


def _at_width(browser: Any, width: int) -> dict[str, int]:
    size: dict[str, int] = browser.get_window_size()
    browser.set_window_size(width, 844)
    return size


@pytest.mark.parametrize(
    ("pipeline", "width"),
    [
        ("pipelines/incident-triage.yaml", 390),
        ("pipelines/support-triage.yaml", 390),
        ("chain", 1280),
    ],
)
def test_a_graph_that_fits_readably_opens_whole(
    browser: Any, tmp_path: Path, artifacts: Path, pipeline: str, width: int
) -> None:
    # Every graph opened at a scale of 0.5 at least: the shipped incident-triage (8 nodes)
    # and support-triage (12) at 390 pixels and a chain of 15 at 1280 opened cut off.
    if pipeline == "chain":
        page = _chain_or_fan(tmp_path, "chain", 8)  # 8 keys, 7 rules
    else:
        page = _page(tmp_path, pipeline, f"{Path(pipeline).stem}.html")
    size = _at_width(browser, width)
    try:
        _open(browser, page)
        browser.save_screenshot(str(artifacts / f"graph-fit-{page.stem}-{width}.png"))
        shown = _in_view(browser, ".node")
    finally:
        browser.set_window_size(size["width"], size["height"])
    assert shown
    assert all(shown)


@pytest.mark.parametrize("shape", ["chain", "fan"])
def test_a_graph_of_500_nodes_opens_readable_at_its_first_node(
    browser: Any, tmp_path: Path, artifacts: Path, shape: str
) -> None:
    # A chain of 250 keys and 249 rules, fitted whole into the window, was a hairline: its
    # names a pixel tall. It opens at a readable scale, its first node in view; "fit" still
    # fits it whole. A fan-out opened at the drawing's top left, its first key (in the
    # middle of its column, 8,000 pixels down) out of view.
    _open(browser, _chain_or_fan(tmp_path, shape, 250))
    browser.save_screenshot(str(artifacts / f"graph-500-nodes-{shape}.png"))
    svg = browser.find_element("id", "graph")
    assert float(svg.get_attribute("data-scale")) >= 0.5
    assert _in_view(browser, '.node[data-id="key:k0"]') == [True]
    browser.find_element("id", "fit").click()
    assert float(svg.get_attribute("data-scale")) < 0.5
