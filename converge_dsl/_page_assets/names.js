/* converge-dsl pages: a name or an id as the page's data holds it, and the search box's terms.
   Shared by the run report, the graph page and the eval and diff pages. The character class is
   written in by `page_asset` from Python's (`page_name`), so that the two cannot disagree.

   shownName(text)   `text` with each character `page_name` rewrites as "\u27e8U+202E\u27e9"
                     (a zero-width joiner between two emoji kept as it is: `joinsEmoji`,
                     the rule of `page_name`'s `_joins_emoji`, from the same list of emoji)
   rawName(shown)    the name `shown` is the shown form of (every "\u27e8U+XXXX\u27e9" is the one
                     character again): what an address names, so that it is read back alike
   searchTerms(text) what a search for the typed `text` looks for, lower case: the text, and
                     its shown form when that differs (a raw id pasted in finds its row)
   holds(hay, terms) whether `hay` (lower case) holds one of `terms` (all when there are none) */
var NAMED_CHARACTERS = /@NAMED@/g;
var EMOJI = @EMOJI@;
function isEmoji(code) {
  for (var i = 0; i < EMOJI.length; i++) if (code >= EMOJI[i][0] && code <= EMOJI[i][1]) return true;
  return false;
}
/* whether the joiner at `at` stands between two emoji (the one before it may be followed by U+FE0F) */
function joinsEmoji(text, at) {
  var end = at > 0 && text.charCodeAt(at - 1) === 0xfe0f ? at - 1 : at;
  if (end < 1 || at + 1 >= text.length) return false;
  var last = text.charCodeAt(end - 1);  /* the code point ending at `end`: a pair's low half, or one */
  if (last >= 0xdc00 && last <= 0xdfff && end >= 2) last = text.codePointAt(end - 2);
  return isEmoji(last) && isEmoji(text.codePointAt(at + 1));
}
function shownName(text) {
  return text.replace(NAMED_CHARACTERS, function (c, at) {
    if (c === "\u200d" && joinsEmoji(text, at)) return c;
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
