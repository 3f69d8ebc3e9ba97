"""What the HTML pages of several packages share (the run report, graph, eval and diff pages).

`page_asset(name)` is the text of one of this folder's files, to be inlined in a
self-contained page: `vlist.js`, the virtualised list (only the rows in view
exist in the DOM), and `vlist.css`, its style. The files are written by hand;
nothing is vendored.

`CONTENT_SECURITY_POLICY` is the policy each page carries in a `<meta>`: its
inline style and script only, so nothing a page shows can fetch or run more.

`page_text(text)` is how every page shows text it did not write (names, facts,
model answers, messages, dataset cases, source lines): each control character
but newline and tab (C0, DEL, C1) and each bidi control (U+202A-U+202E,
U+2066-U+2069) as its escape (`\\x07`, `\\u202e`), the set the CLI's
`terminal_safe` escapes, so a right-to-left override cannot turn the rest of a
cell, a message or a location around (`(at ticket.yaml:24:5)` read
backwards). `page_data(value)` applies it to every string of a JSON value, keys
too; `page_json(value)` is the JSON text of a page's data element, `page_data`
applied and safe inside `<script>`; `html_text(text)` is `page_text` then
HTML-escaped, for text a page writes as markup (the graph's SVG and headings).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_FOLDER = Path(__file__).resolve().parent
# What every page may load: its own inline style and script, and data: images; nothing
# from the network or the disk (the run report's and the eval page's page.html say it too).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
)
_UNSHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# The same characters in JSON text: those above C0 as they are, C0 as json.dumps writes it,
# \u00XX, \b, \f or \r (an escaped backslash before b, f, r or u00 matches too: then the
# value is walked for nothing). Two searches: one with both alternatives is 3 times slower.
_UNSHOWN_RAW = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_UNSHOWN_ESCAPED = re.compile(r"\\(?:[bfr]|u00[01])")


def page_asset(name: str) -> str:
    """The text of the shared file `name` (a file of this package)."""
    return (_FOLDER / name).read_text(encoding="utf-8")


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def page_text(text: str) -> str:
    """`text` with its control and bidi characters as visible escapes (see the module)."""
    return _UNSHOWN.sub(_escaped, text) if _UNSHOWN.search(text) else text


def page_data(value: Any) -> Any:
    """`value` (JSON: mappings, lists, scalars) with `page_text` applied to every string."""
    if isinstance(value, str):
        return page_text(value)
    if isinstance(value, Mapping):
        return {page_text(str(k)): page_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [page_data(v) for v in value]
    return value


def page_json(value: Any) -> str:
    """`value` as the compact JSON text of a page's `<script type="application/json">`:
    `page_data` applied, and `<`, `>`, `&` written as JSON escapes, so that no
    `</script>` or `<!--` can end or confuse the element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if _UNSHOWN_RAW.search(text) or _UNSHOWN_ESCAPED.search(text):  # most pages: no walk
        text = json.dumps(page_data(value), ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def html_text(text: str) -> str:
    """`text` as page text (`page_text`), escaped for HTML content and attribute values."""
    return html.escape(page_text(text))
