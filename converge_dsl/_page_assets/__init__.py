"""What the HTML pages of several packages share (the run report, graph, eval and diff pages).

`page_asset(name)` is the text of one of this folder's files, to be inlined in a
self-contained page: `vlist.js`, the virtualised list (only the rows in view
exist in the DOM), and `vlist.css`, its style; `shown.js`, `page_text`'s visible
form in a page's script and back, and a link's `#name=ID` read and written with
it. The files are written by hand; nothing is vendored.

`CONTENT_SECURITY_POLICY` is the policy each page carries in a `<meta>`: its
inline style and script only, so nothing a page shows can fetch or run more.

`page_text(text)` is how every page shows text it did not write (names, facts,
model answers, messages, dataset cases, source lines): each control character
but newline and tab (C0, DEL, C1) and each bidi control (U+202A-U+202E,
U+2066-U+2069) as its escape (`\\x07`, `\\u202e`), and a run of backslashes
before one or before text that reads as an escape doubled (`\\\\u202e`, the six
characters), as the CLI's `terminal_safe` shows them (`converge_dsl._escapes`):
a right-to-left override cannot turn the rest of a cell, a message or a location
around (`(at ticket.yaml:24:5)` read backwards), and two ids that differ only by
a character and its escape's text show apart. `page_json(value)` is the JSON
text of a page's data element, `page_text` applied to each string of the value,
keys too, and safe inside `<script>`; `html_text(text)` is `page_text` then
HTML-escaped, for text a page writes as markup (the graph's SVG and headings).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from converge_dsl._escapes import ESCAPE_TEXT, SHOWN_ESCAPED, escaped

_FOLDER = Path(__file__).resolve().parent
# What every page may load: its own inline style and script, and data: images; nothing
# from the network or the disk (the run report's and the eval page's page.html say it too).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
)
_UNSHOWN = re.compile(SHOWN_ESCAPED)
# The same in JSON text (`json.dumps`, ensure_ascii off): characters above C0 as they are,
# C0 as `\u00XX`, `\b`, `\f` or `\r` (newline and tab, `\n` and `\t`, are kept), a backslash
# as `\\`. Every backslash is matched, with what follows it when that is a C0 escape or a
# run of backslashes (taken whole), so that the `b` of `\\b` is not taken for a `\b`; `la`
# says when the run stands before what `SHOWN_ESCAPED` doubles it for. The pattern starts
# with one character class, which the regex engine scans for 2 to 3 times faster than it
# tries alternatives at each character (a 4 MB report's data: 41 against 94 ms).
_ABOVE_C0 = "[\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
_UNSHOWN_JSON = re.compile(
    rf"[\\\x7f-\x9f\u202a-\u202e\u2066-\u2069](?:(?<=\\)(?:(?P<run>\\(?:\\\\)*+)"
    rf"(?:(?={ESCAPE_TEXT}|{_ABOVE_C0}|\\(?:u00[01][0-9a-f]|[bfr]))(?P<la>))?"
    r"|(?P<c0>u00[01][0-9a-f]|[bfr])))?"
)
_JSON_SHORT = {"b": "08", "f": "0c", "r": "0d"}
# Whether a JSON text may hold one: most pages hold none, and a search is cheaper than a sub.
_UNSHOWN_RAW = re.compile(_ABOVE_C0)
_UNSHOWN_ESCAPED = re.compile(r"\\(?:[bfr]|u00[01]|\\[xu])")


def page_asset(name: str) -> str:
    """The text of the shared file `name` (a file of this package)."""
    return (_FOLDER / name).read_text(encoding="utf-8")


def page_text(text: str) -> str:
    """`text` with its control and bidi characters as visible escapes (see the module)."""
    return _UNSHOWN.sub(escaped, text) if _UNSHOWN.search(text) else text


def page_json(value: Any) -> str:
    """`value` as the compact JSON text of a page's `<script type="application/json">`:
    `page_text` applied to each of its strings, keys too (rewritten in the JSON
    text, one pass: a walk of the value and a second encoding cost three times as
    much), and `<`, `>`, `&` written as JSON escapes, so that no `</script>` or `<!--`
    can end or confuse the element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if _UNSHOWN_RAW.search(text) or _UNSHOWN_ESCAPED.search(text):
        text = _UNSHOWN_JSON.sub(_json_escaped, text)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _json_escaped(found: re.Match[str]) -> str:
    """The JSON text of `page_text`'s form of what `found` matched (a JSON backslash,
    then the escape; a run of backslashes doubled before what reads as an escape), or
    the JSON text as it is. Told apart by the last group matched: most matches are a
    JSON escape of a quote or a newline, which match none."""
    last = found.lastgroup
    if last is None:
        text = found.group()
        return text if text[0] == "\\" else "\\" + escaped(found)  # above C0: as it is
    if last == "run":
        return found.group()
    if last == "la":
        return found.group() * 2
    escape = found.group("c0")
    return "\\\\x" + (escape[3:] if escape.startswith("u") else _JSON_SHORT[escape])


def html_text(text: str) -> str:
    """`text` as page text (`page_text`), escaped for HTML content and attribute values."""
    return html.escape(page_text(text))
