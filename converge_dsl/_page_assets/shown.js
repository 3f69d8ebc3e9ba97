/* converge-dsl pages: the visible form of text, as `page_text` (converge_dsl._escapes) writes
   it into a page's data, and back. A control or bidi character shows as \xNN or \uNNNN, a run
   of backslashes right before one, or before text that reads as an escape, doubled; so the
   visible form reads back one way.

   pageShown(raw)     the visible form of `raw` (what the page's data holds for it)
   pageRaw(shown)     the text whose visible form is `shown`
   pageAddressed(hash, name, known)
                      the visible form `#name=VALUE` in the address names, or null: VALUE
                      is percent-encoded, the raw text first (the form the pages write, the
                      `pageAddress` of it), else the visible form; `known(shown)` says
                      whether the page holds that one. A VALUE that does not decode is null.
   pageAddress(name, shown)
                      the address of the item shown as `shown`: "#name=" and its raw text,
                      percent-encoded (null for a text URLs cannot carry: a lone surrogate) */
var PAGE_UNSHOWN = "[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069]";
var PAGE_ESCAPE_TEXT = "x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}";
var PAGE_SHOWN = new RegExp("(?<!\\\\)\\\\+(?=" + PAGE_UNSHOWN + "|" + PAGE_ESCAPE_TEXT + ")|" + PAGE_UNSHOWN, "g");
var PAGE_RUN = new RegExp("(\\\\+)(" + PAGE_ESCAPE_TEXT + ")?", "g");
function pageShown(raw) {
  return raw.replace(PAGE_SHOWN, function (m) {
    if (m.charAt(0) === "\\") return m + m;
    var code = m.charCodeAt(0);
    return code < 0x100 ? "\\x" + ("0" + code.toString(16)).slice(-2) : "\\u" + ("000" + code.toString(16)).slice(-4);
  });
}
function pageRaw(shown) {
  return shown.replace(PAGE_RUN, function (m, run, escape) {
    if (!escape) return run;
    var half = run.slice(0, run.length >> 1);
    return run.length % 2 ? half + String.fromCharCode(parseInt(escape.slice(1), 16)) : half + escape;
  });
}
function pageAddressed(hash, name, known) {
  var head = "#" + name + "=";
  if (hash.indexOf(head) !== 0) return null;
  var text;
  try { text = decodeURIComponent(hash.slice(head.length)); } catch (e) { return null; }
  var shown = pageShown(text);
  return known(shown) ? shown : known(text) ? text : null;
}
function pageAddress(name, shown) {
  try { return "#" + name + "=" + encodeURIComponent(pageRaw(shown)); } catch (e) { return null; } /* a lone surrogate */
}
