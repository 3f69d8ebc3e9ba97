"""Benchmark: a page's script time over scroll frames of a 10,000-row virtual list.

Run `python bench/page_scroll.py [--rows N] [--frames F] [--runs R] [--baseline REV]`.
It writes the eval page (`eval --format html`) of `--rows` cases (default 10,000), half of
them a Latin start with a long Arabic stretch, which `names.js`' fitLines cuts where it
reads to, half an Arabic name with a number, and drives Debian's headless Chromium
(`chromium` and `chromedriver` on the PATH, selenium) through `--frames` scroll frames
(default 100) of the cases' list, at two steps: 96 pixels a frame (4 rows, a wheel's
notch: most rows drawn again) and 1,200 (50 rows: every row new). The page is written
four ways, its `names.js` as the revision `--baseline` held it (default bedee300, read
with `git show`), as the tree holds it, with fitLines switched off, and with a fitLines
that reads one line's box and cuts nothing (the layout any measure forces); they are opened
in turn, `--runs` times (default 5, each run in another order), and the best of each
counts: Chrome's ScriptDuration over the frames (its LayoutDuration beside it). One line
per step:

    step S px: script ms  baseline B  now N  off O  read R  (now/baseline X, now/off Y; ...)

Before the times, the baseline's page and the tree's each cut `--lines` lines of a mixed
corpus (default 3,000: Latin, Hebrew, Arabic with lam-alef, Phoenician and emoji past
U+FFFF, in boxes of their own widths and font sizes), and the cuts they draw are compared:

    cuts: L lines, C cut, D drawn otherwise by the tree than by the baseline

(the bench exits 1 where D is not 0, listing a few).

`--profile` prints, for the tree's page at the small step, the functions that took the
most of the frames' CPU (self time, Chrome's sampling profiler).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from converge_dsl._page_assets import page_asset
from converge_dsl.pipetest._html_pages import render_eval_html

ROOT = Path(__file__).resolve().parents[1]
NAMES_JS = "converge_dsl/_page_assets/names.js"
# محمد عبد الله الأحمد
ARABIC = (
    "\u0645\u062d\u0645\u062f \u0639\u0628\u062f \u0627\u0644\u0644\u0647 "
    "\u0627\u0644\u0623\u062d\u0645\u062f"
)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,860",
)
STEPS = (96, 1200)
# fitLines that reads one line's box and cuts nothing: the layout any measure forces
READ_ONLY = """
fitLines = function (root) {
  var line = root.querySelector(".row span");
  if (line) line.getBoundingClientRect();
};
"""
# Scrolls the cases' list by arguments[0] pixels a frame for arguments[1] frames, then
# waits one more frame. Each scroll is set in a task after the frame is drawn (a message
# to a channel), where the page is laid out already, so that setting it lays out nothing
# (set in a frame callback it laid out the list the scroll event had just drawn, as the
# script's time); the list draws on the scroll event of the next frame.
SCROLL = """
var done = arguments[arguments.length - 1], step = arguments[0], frames = arguments[1];
var box = document.querySelector('#cases .vlist'), n = 0, channel = new MessageChannel();
channel.port1.onmessage = function () {
  if (n++ === frames) { requestAnimationFrame(function () { done(box.scrollTop); }); return; }
  box.scrollTop = n * step;
  requestAnimationFrame(function () { channel.port2.postMessage(0); });
};
requestAnimationFrame(function () { channel.port2.postMessage(0); });
"""


# Pieces the mixed corpus's lines are made of (joined letters and ligatures, and characters
# past U+FFFF, whose starts' widths are not monotonic in their length)
PIECES = (
    "Row 7",
    "na\u00efve",
    "WWW",
    "\u05e9\u05dc\u05d5\u05dd \u05d3\u05d5\u05d3",
    "\u0639\u064a\u0646\u064a\u0627\u0627\u0644\u0644\u0647",
    "\u0644\u0627",
    ARABIC,
    "\U00010900\U00010901",
    "\U0001f600",
    "2026",
)
# Lays each of arguments[0] ([text, width px, font px]) in a failed case's name line and
# fits them: the text each shows
CUT_CORPUS = """
var host = document.createElement("div");
document.body.appendChild(host);
arguments[0].forEach(function (line) {
  var outer = document.createElement("div"), name = document.createElement("div");
  outer.className = "error-case"; name.className = "name"; name.textContent = line[0];
  name.style.width = line[1] + "px"; name.style.fontSize = line[2] + "px";
  outer.appendChild(name); host.appendChild(outer);
});
fitLines(host);
return Array.from(host.querySelectorAll(".name"), function (name) { return name.textContent; });
"""


def corpus(count: int) -> list[tuple[str, float, int]]:
    """`count` lines of mixed scripts, each with its box's width and its font size."""
    chance = random.Random(count)
    return [
        (
            " ".join(chance.choices(PIECES, k=chance.randint(3, 8))),
            chance.randint(50, 320) + chance.choice((0.0, 0.25, 0.5)),
            chance.choice((11, 12, 13, 14)),
        )
        for _ in range(count)
    ]


def cuts_differ(driver: Any, paths: dict[str, Path], count: int) -> bool:
    """Prints how many lines of the mixed corpus the tree cuts otherwise than the
    baseline; whether any."""
    lines = corpus(count)
    shown = {}
    for name in ("baseline", "now"):
        opened(driver, paths[name])
        shown[name] = driver.execute_script(CUT_CORPUS, [list(line) for line in lines])
    cut = sum("\u2026" in text for text in shown["now"])
    differ = [
        (line, old, new)
        for line, old, new in zip(lines, shown["baseline"], shown["now"], strict=True)
        if old != new
    ]
    print(f"cuts: {len(lines)} lines, {cut} cut, {len(differ)} drawn otherwise by the tree")
    for line, old, new in differ[:5]:
        print(f"  {line!r}: baseline {old!r}, tree {new!r}")
    return bool(differ)


def pages(folder: Path, rows: int, baseline: str) -> dict[str, Path]:
    """The eval page with `names.js` as `baseline` held it, as the tree holds it, and
    with fitLines switched off, by those names."""
    cases = [
        {
            "name": f"Row {i} {ARABIC} {ARABIC} {ARABIC}" if i % 2 else f"{ARABIC} {i}",
            "stop_reason": "converged",
            "scores": {"m": 1},
        }
        for i in range(rows)
    ]
    page = render_eval_html({"evaluation": "e", "passed": True, "metrics": [], "cases": cases})
    now = page_asset("names.js")
    assert page.count(now) == 1, "the page does not inline names.js as page_asset gives it"
    old = subprocess.run(
        ["git", "show", f"{baseline}:{NAMES_JS}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    texts = {
        "baseline": page.replace(now, page_asset("names.js", old)),
        "now": page,
        "off": page.replace(now, now + "\nfitLines = function () {};\n"),
        "read": page.replace(now, now + READ_ONLY),
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = folder / f"{name}.html"
        paths[name].write_text(text, encoding="utf-8")
    return paths


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in FLAGS:
        options.add_argument(flag)
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    found = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    found.set_script_timeout(300)  # (100 frames take minutes on a loaded machine)
    return found


def opened(driver: Any, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, 30).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1"
    )


def metrics(driver: Any) -> dict[str, float]:
    found = driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    return {m["name"]: float(m["value"]) for m in found}


def scrolled(driver: Any, page: Path, step: int, frames: int) -> tuple[float, float]:
    """The script and layout milliseconds of `frames` scroll frames of `step` pixels."""
    opened(driver, page)
    driver.execute_cdp_cmd("Performance.enable", {"timeDomain": "threadTicks"})
    try:
        before = metrics(driver)
        driver.execute_async_script(SCROLL, step, frames)
        after = metrics(driver)
    finally:
        driver.execute_cdp_cmd("Performance.disable", {})
    script = after["ScriptDuration"] - before["ScriptDuration"]
    layout = after["LayoutDuration"] - before["LayoutDuration"]
    return script * 1000, layout * 1000


def profile(driver: Any, page: Path, step: int, frames: int) -> None:
    """Prints the functions with the most self time over the frames."""
    opened(driver, page)
    driver.execute_cdp_cmd("Profiler.enable", {})
    driver.execute_cdp_cmd("Profiler.setSamplingInterval", {"interval": 100})
    driver.execute_cdp_cmd("Profiler.start", {})
    driver.execute_async_script(SCROLL, step, frames)
    found = driver.execute_cdp_cmd("Profiler.stop", {})["profile"]
    driver.execute_cdp_cmd("Profiler.disable", {})
    nodes = {n["id"]: n for n in found["nodes"]}
    ticks: Counter[str] = Counter()
    for sample in found["samples"]:
        frame = nodes[sample]["callFrame"]
        ticks[f"{frame['functionName'] or '(anonymous)'} :{frame['lineNumber'] + 1}"] += 1
    total = sum(n for name, n in ticks.items() if not name.startswith("(idle)"))
    for name, n in ticks.most_common(25):
        if not name.startswith("(idle)"):
            print(f"  {100 * n / total:5.1f}%  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", default="bedee300")
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = pages(Path(tmp), args.rows, args.baseline)
        driver = browser()
        try:
            differ = cuts_differ(driver, paths, args.lines)
            if args.profile:
                profile(driver, paths["now"], STEPS[0], args.frames)
            for step in STEPS:
                best: dict[str, tuple[float, float]] = {}
                for run in range(args.runs):
                    names = list(paths)
                    names = names[run % len(names) :] + names[: run % len(names)]
                    for name in names:
                        script, layout = scrolled(driver, paths[name], step, args.frames)
                        if name not in best or script < best[name][0]:
                            best[name] = (script, layout)
                b, n, o, r = (best[k][0] for k in ("baseline", "now", "off", "read"))
                laid = "  ".join(f"{k} {v[1]:.0f}" for k, v in best.items())
                print(
                    f"step {step} px: script ms  baseline {b:.0f}  now {n:.0f}  off {o:.0f}"
                    f"  read {r:.0f}  (now/baseline {n / b:.2f}, now/off {n / o:.2f};"
                    f" layout ms {laid})"
                )
        finally:
            driver.quit()
    print(f"(load {os.getloadavg()[0]:.1f}, {args.runs} runs, best of each)", file=sys.stderr)
    if differ:
        sys.exit(1)


if __name__ == "__main__":
    main()
