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
                     here; Python's count code points: a character past U+FFFF is 2 here) */
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
