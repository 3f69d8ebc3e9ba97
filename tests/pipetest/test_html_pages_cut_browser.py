"""Where names.js' fitLines cuts a line, in a real headless Chromium: where the search it
has always used cut it, over a generated corpus of lines in mixed scripts; what it keeps of
the cuts it found; and a copy of a cut line, whole whatever its whitespace. The `browser`
fixture skips, saying why, where Chromium, its driver or selenium is not installed.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from converge_dsl.pipetest import render_eval_html

from .browser_pages import console_errors, open_page

BROWSER_WINDOW = (1400, 900)

# Pieces of names in mixed scripts: Latin (with a mark), Hebrew, Arabic (joined letters,
# lam-alef), Phoenician and an emoji past U+FFFF (surrogate pairs), digits, a flag
_PIECES = (
    "WWW",
    "na\u00efve",
    "e\u0301t\u00e9",
    "Case 12",
    "42",
    "\u05e9\u05dc\u05d5\u05dd",  # שלום
    "\u05d3\u05d5\u05d3",  # דוד
    "\u0639\u064a\u0646\u064a\u0627\u0627\u0644\u0644\u0647",  # عينياالله
    "\u0645\u062d\u0645\u062f",  # محمد
    "\u0633\u0644\u0627\u0645",  # سلام
    "\u0644\u0627\u0644\u0627",  # لالا
    "\U00010900\U00010901",  # 𐤀𐤁
    "\U0001f600",
    "\U0001f1eb\U0001f1f7",
)
# Lines from the review that the search from the measured edge cut elsewhere
_REVIEWED = (
    (
        "WWW\u05e9\u05dc\u05d5\u05ddna\u00efve\u0639\u064a\u0646\u064a\u0627\u0627\u0644\u0644\u0647"
        "\U0001f600 \u0645\u062d\u0645\u062f \u0633\u0644\u0627\u0645 WWW",
        120.0,
        11,
    ),
    (
        "na\u00efve \u05e9\u05dc\u05d5\u05dd \u05d3\u05d5\u05d3 42 \U00010900\U00010901 "
        "\u0645\u062d\u0645\u062f \u0633\u0644\u0627\u0645",
        150.5,
        14,
    ),
)


def _mixed_lines(count: int) -> list[tuple[str, float, int]]:
    """`count` lines of 3 to 9 pieces, each in a box of its own width and font size."""
    chance = random.Random(20261207)
    lines = list(_REVIEWED)
    while len(lines) < count:
        pieces = chance.choices(_PIECES, k=chance.randint(3, 9))
        text = "".join(p + chance.choice(("", " ", " ")) for p in pieces)
        width = chance.randint(60, 300) + chance.choice((0.0, 0.5, 0.25))
        lines.append((text, width, chance.choice((11, 12, 13, 14, 16))))
    return lines


# Lays each of arguments[0] ([text, width, font size]) in a failed case's name line, finds
# where the search names.js always had (bedee300, copied here) cuts it, and fits them: for
# each, the text shown, the text that search shows, and whether the shown cut parts a
# surrogate pair or a grapheme cluster.
_CUT_AS_BEFORE = """
function before(box) {
  var node = box.firstChild;
  if (!node || node.nodeType !== 3 || node.nextSibling || !bothWays(node.data)) return null;
  var room = lineRoom(box), range = document.createRange(), style = room.style,
      roomWidth = room.right - room.left;
  if (style.textOverflow !== "ellipsis") return null;
  range.selectNodeContents(node);
  if (range.getBoundingClientRect().width <= roomWidth + 0.5) return null;
  var measure = document.createElement("canvas").getContext("2d");
  measure.font = [style.fontStyle, style.fontWeight, style.fontSize, style.fontFamily].join(" ");
  var text = node.data, fits = 0, over = text.length;
  while (fits < over) {
    var mid = Math.ceil((fits + over) / 2);
    if (measure.measureText(cutText(text, mid)).width <= roomWidth) fits = mid; else over = mid - 1;
  }
  var at = shownCut(text, fits);
  range.setStart(node, 0); range.setEnd(node, at);
  var drawn = range.getBoundingClientRect();
  return at > 0 && (drawn.left < room.left - 0.5 || drawn.right > room.right + 0.5) ? at : null;
}
var host = document.createElement("div");
document.querySelector("main").appendChild(host);
var boxes = arguments[0].map(function (line) {
  var wrap = document.createElement("div"), box = document.createElement("div");
  wrap.className = "error-case"; box.className = "name";
  box.style.width = line[1] + "px"; box.style.fontSize = line[2] + "px";
  box.textContent = line[0]; wrap.appendChild(box); host.appendChild(wrap);
  return box;
});
var expected = boxes.map(before);
fitLines(host);
var clusters = new Intl.Segmenter("en", {granularity: "grapheme"});
return boxes.map(function (box, i) {
  var text = box.title || box.textContent;
  var kept = box.textContent.replace(/\\u2026[\\u200e\\u200f]$/, "");
  var ends = Array.from(clusters.segment(text), function (s) { return s.index; });
  ends.push(text.length);
  return [box.textContent, expected[i] === null ? text : cutText(text, expected[i]),
          box.textContent !== text && (ends.indexOf(kept.length) < 0 || !text.startsWith(kept))];
});
"""


def test_each_mixed_line_is_cut_where_the_search_it_always_had_cut_it(
    browser: Any, tmp_path: Path
) -> None:
    # A search that began from where the measured widths put the edge, then halved, cut
    # about 1.7% of these lines elsewhere: a start's width is not monotonic in its length
    # (Arabic joins, lam-alef, a start ending on a surrogate pair's first half), so another
    # order of measures stops at another edge. The shown cut is the halving search's, at a
    # place where a line may be cut.
    document = {"evaluation": "e", "passed": True, "metrics": [], "cases": []}
    page = tmp_path / "mixed.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    open_page(browser, page)
    lines = _mixed_lines(3000)
    laid = browser.execute_script(_CUT_AS_BEFORE, [list(line) for line in lines])
    cut = [shown for shown, _, _ in laid if "\u2026" in shown]
    assert len(cut) > 400, len(cut)  # (the corpus is cut often enough to tell)
    differ = [
        (line, shown, old)
        for line, (shown, old, _) in zip(lines, laid, strict=True)
        if shown != old
    ]
    assert differ == [], (len(differ), differ[:5])
    parted = [line for line, (_, _, split) in zip(lines, laid, strict=True) if split]
    assert parted == [], parted[:5]
    assert console_errors(browser) == []


# Fits arguments[0] lines of arguments[1] characters each, every one its own, in a failed
# case's name line 200 pixels wide; then the count of the cuts kept and their keys' length
_FIT_LONG_LINES = """
var host = document.createElement("div"), count = arguments[0], size = arguments[1];
var stretch = "Latin words \\u0645\\u062d\\u0645\\u062f \\u0633\\u0644\\u0627\\u0645 ";
document.querySelector("main").appendChild(host);
for (var i = 0; i < count; i++) {
  var wrap = document.createElement("div"), box = document.createElement("div");
  wrap.className = "error-case"; box.className = "name"; box.style.width = "200px";
  box.textContent = ("Row " + i + " " + stretch.repeat(size / stretch.length + 1)).slice(0, size);
  wrap.appendChild(box); host.appendChild(wrap);
}
fitLines(host);
var chars = 0;
CUT_AT.forEach(function (at, key) { chars += key.length; });
return [CUT_AT.size, chars, host.querySelectorAll(".name[aria-label]").length];
"""


def test_the_cuts_kept_hold_at_most_a_million_characters(browser: Any, tmp_path: Path) -> None:
    # The cuts kept were bounded by their count only (4,000), each key a copy of its line:
    # a list of names 2,000 characters long held 10.8 MB of them, against 1.8 MB before.
    document = {"evaluation": "e", "passed": True, "metrics": [], "cases": []}
    page = tmp_path / "long.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    open_page(browser, page)
    kept, chars, cut = browser.execute_script(_FIT_LONG_LINES, 300, 4000)
    assert cut == 300  # (each line cut)
    assert 0 < kept < 300, kept
    assert chars <= 1_000_000, chars
    assert console_errors(browser) == []


# Selects from arguments[1] (a node and an offset in it: "start" for the start of the
# element arguments[0]'s text, "middle" for its middle) to the end of the list, copies, and
# gives the text copied, the selection's text after the copy and the line shown
_COPY_FROM = """
var box = document.querySelector(arguments[0]), text = box.firstChild;
var range = document.createRange(), list = box.closest(".vlist") || box.parentNode.parentNode;
range.setStart(text, arguments[1] === "middle" ? Math.floor(text.length / 2) : 0);
range.setEnd(list, list.childNodes.length);
getSelection().removeAllRanges(); getSelection().addRange(range);
var before = getSelection().toString(), data = new DataTransfer();
box.dispatchEvent(new ClipboardEvent("copy", {clipboardData: data, bubbles: true}));
return [data.getData("text/plain"), getSelection().toString() === before, box.textContent];
"""


def test_a_cut_line_with_two_spaces_in_a_row_is_copied_whole(browser: Any, tmp_path: Path) -> None:
    # The copy looked for the cut line's text in the selection's text, which collapses two
    # spaces in a row: the line was not found, and it was copied cut.
    arabic = " ".join(["\u0645\u062d\u0645\u062f  \u0639\u0628\u062f\u0627\u0644\u0644\u0647"] * 6)
    name = "Case  12   " + arabic
    cases = [
        {"name": n, "stop_reason": "converged", "scores": {"m": 1}}
        for n in (name, "plain  second  case", "Row 2  " + arabic)
    ]
    document = {"evaluation": "e", "passed": True, "metrics": [], "cases": cases}
    page = tmp_path / "copy-spaces.html"
    page.write_text(render_eval_html(document), encoding="utf-8")
    open_page(browser, page)
    for start in ("start", "middle"):
        copied, kept, shown = browser.execute_script(_COPY_FROM, "#cases .row span.c-case", start)
        assert "\u2026" in shown  # (still cut)
        assert copied.startswith(name), (start, copied)
        assert "Row 2  " + arabic in copied, (start, copied)
        assert "\u2026" not in copied, (start, copied)
        assert "plain second case" in copied  # (a line not cut is as the browser copies it)
        assert kept  # (the selection as it was)
    assert console_errors(browser) == []
