/* converge-dsl pages: a name or an id as the page's data holds it, and the search box's terms.
   Shared by the run report, the graph page and the eval and diff pages. The character class is
   written in by `page_asset` from Python's (`page_name`), so that the two cannot disagree.

   shownName(text)   `text` with each character `page_name` rewrites as "\u27e8U+202E\u27e9"
                     (a zero-width joiner inside an emoji ZWJ sequence kept as it is, by
                     `page_name`'s rule, from the same table)
   rawName(shown)    the name `shown` is the shown form of (every "\u27e8U+XXXX\u27e9" is the one
                     character again): what an address names, so that it is read back alike
   searchTerms(text) what a search for the typed `text` looks for, lower case: the text, and
                     its shown form when that differs (a raw id pasted in finds its row)
   holds(hay, terms) whether `hay` (lower case) holds one of `terms` (all when there are none)
   shownCut(shown, at) the greatest place at or before `at` where the shown name `shown` may be
                     cut short: not inside a "\u27e8U+XXXX\u27e9", and between two grapheme
                     clusters (the browser's Intl.Segmenter), so that no emoji sequence, flag or
                     keycap is split nor a letter parted from its marks; Python's is `shown_cut`
                     (`at` and the place count UTF-16 units, as a string's indices do
                     here; Python's count code points: a character past U+FFFF is 2 here)
   fitLines(root, rows) cuts each line under `root` (or `root` itself) that page.css cuts
                     with an ellipsis (CUT_LINES) where the browser's cut hides the line's
                     start, as below (a list's rows left out when `rows` is false: the list
                     fits them as it draws them); again when the window's width changes */
var NAMED_CHARACTERS = /@NAMED@/g;
/* Unicode's emoji ZWJ sequences ("T" for any skin tone), written in by `page_asset` from
   `emoji_zwj.txt`; a run of characters joined by zero-width joiners (each maybe followed by
   U+FE0F or a skin tone) keeps its joiners only when it is one of them, as in `page_name`. */
var ZWJ_SEQUENCES = {};
@ZWJ_SEQUENCES@.split(" ").forEach(function (s) { ZWJ_SEQUENCES[s] = true; });
var ZWJ_RUN = /[^\u200d][\ufe0f\u{1f3fb}-\u{1f3ff}]?(?:\u200d[^\u200d][\ufe0f\u{1f3fb}-\u{1f3ff}]?)+/gu;
function isZwjSequence(run) {
  return ZWJ_SEQUENCES[run] === true || ZWJ_SEQUENCES[run.replace(/[\u{1f3fb}-\u{1f3ff}]/gu, "T")] === true;
}
function shownName(text) {
  var kept = {};
  if (text.indexOf("\u200d") >= 0) {
    text.replace(ZWJ_RUN, function (run, at) {
      if (isZwjSequence(run)) for (var i = 0; i < run.length; i++) if (run[i] === "\u200d") kept[at + i] = true;
      return run;
    });
  }
  return text.replace(NAMED_CHARACTERS, function (c, at) {
    if (kept[at]) return c;
    return "\u27e8U+" + ("000" + c.charCodeAt(0).toString(16).toUpperCase()).slice(-4) + "\u27e9";
  });
}
function rawName(shown) {
  return shown.replace(/\u27e8U\+([0-9A-F]{4})\u27e9/g, function (notation, hex) {
    return String.fromCharCode(parseInt(hex, 16));
  });
}
function searchTerms(text) {
  var typed = text.trim();
  if (!typed) return [];
  var plain = typed.toLowerCase(), shown = shownName(typed).toLowerCase();
  return shown === plain ? [plain] : [plain, shown];
}
function holds(hay, terms) {
  if (!terms.length) return true;
  for (var i = 0; i < terms.length; i++) if (hay.indexOf(terms[i]) >= 0) return true;
  return false;
}
var GRAPHEMES = typeof Intl === "object" && Intl.Segmenter ? new Intl.Segmenter("en", { granularity: "grapheme" }) : null;
function shownCut(shown, at) {
  if (at >= shown.length) return shown.length;
  var open = shown.lastIndexOf("\u27e8", at - 1);
  if (open !== -1 && shown.indexOf("\u27e9", open) >= at) at = open;
  if (!GRAPHEMES) {  /* (a browser without it: at least not between a surrogate pair's halves) */
    var code = shown.charCodeAt(at - 1);
    return code >= 0xd800 && code <= 0xdbff ? at - 1 : at;
  }
  var cut = 0;
  for (var segment of GRAPHEMES.segment(shown)) {
    if (segment.index > at) break;
    cut = segment.index;
  }
  return cut;
}

/* page.css lays a line cut with an ellipsis in the direction its first letter reads in, and
   the browser cuts it where it leaves its box, as it is drawn: a run written the other way
   ("Case 12 " then a long Arabic name) is drawn turned around, so what showed was the
   run's end, its start past the edge. Such a line (one text node holding letters of both
   directions, whose cut hides a letter of the start that fits) is cut where it leaves the
   box as it reads: the longest start that fits with "\u2026" (at a place shownCut allows),
   then U+200F or U+200E, the direction of the last letter kept, so that "\u2026" is drawn
   at the cut end of that letter's run, not beside its start. Both ways alike: a line that
   starts in Arabic and goes on in a long Latin stretch is cut where it reads to too, as
   that stretch would otherwise show its end. The whole line stays in its title and its
   aria-label, and a copy of it gives it whole. Every line is read first (one layout; the
   cut is measured on a canvas) and written after, so a list's draw lays the page out once
   whatever the number of lines; where a line is cut is kept by its text, font and room
   (CUT_AT), so the rows a list draws again as it scrolls are not measured again.
   CUT_LINES is page.css' list of those lines, both written in by `page_asset`. */
var CUT_LINES = "@CUT_LINES@";
var RIGHT_TO_LEFT = /[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc\u{10800}-\u{10fff}\u{1e800}-\u{1efff}]/u;
var LETTERS = /\p{L}/gu;
var CUT_WHOLE = new WeakMap(), cutMeasure = null, cutRange = null;
/* where a line is cut (or null) by its font and spacing, its room and its text: a list
   draws its rows anew on each scroll, most of them the rows it drew the frame before (a
   line that overflows is laid from its start whatever its alignment, and its direction
   is its text's: page.css); at most CUT_AT_MOST of them, whose keys hold at most
   CUT_AT_CHARS characters (a list of names 2,000 characters long held 10 MB) */
var CUT_AT = new Map(), CUT_AT_MOST = 4000, CUT_AT_CHARS = 1000000, cutAtChars = 0;
/* `rows` false: leave a list's rows, which the list fits as it draws them */
function fitLines(root, rows) {
  var boxes = root.matches && root.matches(CUT_LINES) ? [root] : root.querySelectorAll(CUT_LINES), cuts = [];
  for (var i = 0; i < boxes.length; i++) {
    if (rows === false && boxes[i].closest(".row")) continue;
    var at = startThatFits(boxes[i]);
    if (at !== null) cuts.push([boxes[i], at]);
  }
  cuts.forEach(function (c) { cutLine(c[0], c[1]); });
}
/* whether `text` holds a letter written the other way from its first */
function bothWays(text) {
  if (!RIGHT_TO_LEFT.test(text)) return false;
  var letters = text.match(LETTERS) || [], first = RIGHT_TO_LEFT.test(letters[0] || "");
  return letters.some(function (letter) { return RIGHT_TO_LEFT.test(letter) !== first; });
}
/* the start of `text` up to `at` with "\u2026" and the mark of its last letter's direction */
function cutText(text, at) {
  var kept = text.slice(0, at).replace(/\s+$/, ""), letters = kept.match(LETTERS);
  var mark = !letters ? "" : RIGHT_TO_LEFT.test(letters[letters.length - 1]) ? "\u200f" : "\u200e";
  return kept + "\u2026" + mark;
}
function lineRoom(box) {
  var style = getComputedStyle(box), rect = box.getBoundingClientRect();
  var left = rect.left + box.clientLeft + parseFloat(style.paddingLeft);
  return { left: left, right: rect.left + box.clientLeft + box.clientWidth - parseFloat(style.paddingRight), style: style };
}
/* where `box`'s line is to be cut, or null where it fits or the browser's cut shows its start */
function startThatFits(box) {
  var node = box.firstChild;
  if (!node || node.nodeType !== 3 || node.nextSibling || !bothWays(node.data)) return null;
  var room = lineRoom(box), style = room.style, roomWidth = room.right - room.left;
  if (style.textOverflow !== "ellipsis") return null;
  var font = [style.fontStyle, style.fontWeight, style.fontSize, style.fontFamily].join(" ");
  var key = [font, style.fontVariant, style.letterSpacing, style.wordSpacing, roomWidth, node.data].join("\n");
  var at = CUT_AT.get(key);
  if (at === undefined) {
    at = startThatFitsIn(node, room, font);
    if (CUT_AT.size >= CUT_AT_MOST || cutAtChars + key.length > CUT_AT_CHARS) { CUT_AT.clear(); cutAtChars = 0; }
    if (key.length <= CUT_AT_CHARS) { CUT_AT.set(key, at); cutAtChars += key.length; }
  }
  return at;
}
function startThatFitsIn(node, room, font) {
  var range = cutRange || (cutRange = document.createRange()), roomWidth = room.right - room.left;
  range.selectNodeContents(node);
  if (range.getBoundingClientRect().width <= roomWidth + 0.5) return null;
  if (!cutMeasure) cutMeasure = document.createElement("canvas").getContext("2d");
  cutMeasure.font = font;
  var text = node.data, at = shownCut(text, longestStartThatFits(text, roomWidth));
  /* whether the browser draws a piece of that start past the box (its pieces' union) */
  range.setStart(node, 0); range.setEnd(node, at);
  var drawn = range.getBoundingClientRect();
  return at > 0 && (drawn.left < room.left - 0.5 || drawn.right > room.right + 0.5) ? at : null;
}
/* the longest start of `text` that fits in `width` with "\u2026", measured on the canvas, by
   halving: a start's width is not monotonic in its length (Arabic joins, lam-alef is one
   glyph, a start may end on a surrogate pair's first half), so another order of measures
   stops at another edge; this order is the one the cuts shown have always come from
   (tests/pipetest/test_html_pages_cut_browser.py). shownCut then moves the cut back to
   where a line may be cut, never inside a grapheme cluster nor a surrogate pair. */
function longestStartThatFits(text, width) {
  var fits = 0, over = text.length;
  while (fits < over) {
    var mid = Math.ceil((fits + over) / 2);
    if (cutMeasure.measureText(cutText(text, mid)).width <= width) fits = mid; else over = mid - 1;
  }
  return fits;
}
function cutLine(box, at) {
  var was = CUT_WHOLE.get(box);
  if (!was || box.textContent !== was.shown) {  /* (a line the page wrote again since) */
    was = { whole: box.textContent }; CUT_WHOLE.set(box, was);
    if (!box.title) box.title = was.whole;
  }
  box.setAttribute("aria-label", was.whole);
  box.textContent = was.shown = cutText(was.whole, at);
}
/* the line `box` shows cut, or null */
function cutWhole(box) {
  var was = CUT_WHOLE.get(box);
  return was && box.textContent === was.shown ? was.whole : null;
}
/* a copy gives each cut line in it whole (one copied whole, not a piece of it), whatever
   its whitespace: the selection's text is read with each cut line it takes in (even in
   part) holding a mark of its own instead, which is then replaced by the whole line (the
   selection's text collapses a line's spaces, so the line cannot be looked for in it) */
document.addEventListener("copy", function (e) {
  var selection = getSelection(), ranges = [], cut = [];
  if (!e.clipboardData) return;
  for (var r = 0; r < selection.rangeCount; r++) ranges.push(selection.getRangeAt(r).cloneRange());
  document.querySelectorAll(CUT_LINES).forEach(function (box) {
    var whole = cutWhole(box), node = box.firstChild;
    if (whole !== null && node && ranges.some(function (range) { return takesIn(range, node); })) {
      cut.push({ node: node, whole: whole, shown: node.data, mark: "\ue000" + cut.length + "\ue001" });
    }
  });
  if (!cut.length) return;
  var anchor = [selection.anchorNode, selection.anchorOffset], focus = [selection.focusNode, selection.focusOffset];
  var points = ranges.map(function (range) {
    return [range.startContainer, range.startOffset, range.endContainer, range.endOffset];
  });
  var text;
  try {
    cut.forEach(function (c) { c.node.data = c.mark; });
    selection.removeAllRanges();
    points.forEach(function (p) {
      var range = document.createRange(), end = cut.find(function (c) { return c.node === p[2]; });
      range.setStart(p[0], cut.some(function (c) { return c.node === p[0]; }) ? 0 : p[1]);
      range.setEnd(p[2], end ? end.mark.length : p[3]);
      selection.addRange(range);
    });
    text = selection.toString();
  } finally {
    cut.forEach(function (c) { c.node.data = c.shown; });
    selection.removeAllRanges();
    if (points.length === 1) selection.setBaseAndExtent(anchor[0], anchor[1], focus[0], focus[1]);
    else points.forEach(function (p) {
      var range = document.createRange();
      range.setStart(p[0], p[1]); range.setEnd(p[2], p[3]); selection.addRange(range);
    });
  }
  cut.forEach(function (c) { text = text.split(c.mark).join(c.whole); });
  e.clipboardData.setData("text/plain", text);
  e.preventDefault();
});
/* whether `range` takes in a piece of the text `node` (a line's whole text: its end after
   the text's start, its start before the text's end) */
function takesIn(range, node) {
  var text = document.createRange();
  text.selectNodeContents(node);
  return range.compareBoundaryPoints(Range.START_TO_END, text) > 0 && range.compareBoundaryPoints(Range.END_TO_START, text) < 0;
}
var refitting = false;
window.addEventListener("resize", function () {
  if (refitting) return;
  refitting = true;
  requestAnimationFrame(function () {
    refitting = false;
    document.querySelectorAll(CUT_LINES).forEach(function (box) {  /* each line whole again, then cut to the new width */
      var whole = cutWhole(box);
      if (whole !== null) { box.textContent = whole; box.removeAttribute("aria-label"); }
      CUT_WHOLE.delete(box);
    });
    fitLines(document);
  });
});
