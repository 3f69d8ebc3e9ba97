"""What the HTML pages of several packages share (the run report, batch, graph, eval, diff pages).

`page_asset(name)` is the text of one of this folder's files, to be inlined in a
self-contained page: `page.css`, the style every page but the graph's starts
from (palette, type, the page's grid and its cards), `marks.css`, the room every page
leaves the marks of text it did not write (inlined after a page's own style),
`vlist.js`, the virtualised list (only the rows in view exist in the DOM), `vlist.css`,
its style, and `names.js`, the pages' `shownName` (`page_name` in the page, its
class of characters written in from this module's) and the search box's terms
(the typed text, and its shown form: a raw id pasted in finds its row). The
files are written by hand; nothing is vendored.

`CONTENT_SECURITY_POLICY` is the policy each page carries in a `<meta>`: its
inline style and script only, so nothing a page shows can fetch or run more.

`page_text(text)` is how every page shows text it did not write (facts,
model answers, messages, dataset cases, source lines): each control character
but newline and tab (C0, DEL, C1) and each bidi control (U+202A-U+202E,
U+2066-U+2069) as its escape (`\\x07`, `\\u202e`), the set the CLI's
`terminal_safe` escapes, so a right-to-left override cannot turn the rest of a
cell, a message or a location around (`(at ticket.yaml:24:5)` read
backwards). `page_json(value)` is the JSON text of a page's data element,
`page_text` applied to each string of the value, keys too, and safe inside
`<script>`; `html_text(text)` is `page_text` then HTML-escaped, for text a page
writes as markup (the graph's SVG and headings).

`page_name(text)` is how the run report, the batch page, the eval and diff
pages show a name or an id (a suggestor's name, a fact's key and id, a case's
id or name), what a reader tells apart and links to, on one line: each of
those characters, newline and tab, and the characters that show as nothing
(U+00AD, U+061C, U+200B-U+200F, U+2028, U+2029, U+2060-U+2064, U+FEFF: an id
`z\\u200bz` is not `zz`) as `⟨U+202E⟩`, a notation no YAML, JSON or Python
escape is, so that an id holding the real character and one holding the six
characters `\\u202e` (how YAML and JSON write it) are two ids on the page too.
`⟨` (U+27E8) itself is written `⟨U+27E8⟩`, so every `⟨` of a shown name starts
a notation, and an id holding the text `r⟨U+202E⟩ev` does not show as the one
holding the real character. A zero-width joiner is kept as it is inside one
of Unicode's emoji ZWJ sequences (a family, 👨‍👩‍👧), which shows as one picture;
elsewhere (`🍕⟨U+200D⟩🍕`, which would look as `🍕🍕` does) it is `⟨U+200D⟩`
(the page's `names.js` follows the same rule, from the same table). A link to a fact
(`#fact=`) names its raw id, which the page writes the same way before it
compares. `names_shown(rows, fields)`
is a table's rows with the names in `fields` so rewritten; `html_name(text)` is
`page_name` then HTML-escaped, for a name a page writes as markup (the graph's
node ids and labels). `Names(names)` is a text that names things, marked as
such by whoever writes it (the graph's "reads: a, b", an agent's tools), which a
page shows with `Names.shown()`. Source excerpts and
messages keep `page_text`'s escapes: there `\\u202e` reads as what the file
says. `shown_cut(shown, at)` is where a shown name may be cut short (a graph
node's label): not inside a notation nor a grapheme cluster (`_cut`).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from converge_dsl._escapes import UNSHOWN, escaped

from ._cut import shown_cut as shown_cut

_FOLDER = Path(__file__).resolve().parent
# What every page may load: its own inline style and script, and data: images; nothing
# from the network or the disk (the run report's and the eval page's page.html say it too).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
)
_UNSHOWN = re.compile(UNSHOWN)
# The lines every page cuts short with an ellipsis, laid in the direction they read in
# (`page.css`), and cut where they read to when the browser's cut hides their start
# (`names.js`' fitLines): one list, written into both.
_CUT_LINES = ".row span,.vlist .head span,.error-case .name,#title,.matrix th"
# What `page_name` rewrites, as ranges of code points: one list, which both the Python
# pattern and the pages' JavaScript one (`names.js`, `shownName`) are made from.
# `page_text`'s (`UNSHOWN`), and what a one-line name should not show raw either: newline
# and tab, and the characters that show as nothing (soft hyphen, Arabic letter mark, the
# zero-width ones, LRM and RLM, line and paragraph separators, word joiner, BOM).
_NAMED_RANGES: tuple[tuple[int, int], ...] = (
    (0x00, 0x1F),
    (0x7F, 0x9F),
    (0xAD, 0xAD),
    (0x061C, 0x061C),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2069),
    (0x27E8, 0x27E8),  # the notation's own opening bracket: every ⟨ shown starts one
    (0xFEFF, 0xFEFF),
)
# A character class both languages read alike (`\\uXXXX` escapes only).
_NAMED_CLASS = "[" + "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in _NAMED_RANGES) + "]"
_NAMED = re.compile(_NAMED_CLASS)
_ZWJ = "\u200d"
# A run of characters joined by zero-width joiners, each maybe followed by U+FE0F or a
# skin tone: its joiners are kept only when the run is one of Unicode's emoji ZWJ
# sequences (`emoji_zwj.txt`, from bench/emoji_zwj_table.py), which a font draws as
# one picture; `names.js` matches the same runs (`ZWJ_RUN`).
_ZWJ_RUN = re.compile(
    "[^\u200d][\ufe0f\U0001f3fb-\U0001f3ff]?(?:\u200d[^\u200d][\ufe0f\U0001f3fb-\U0001f3ff]?)+"
)
_TONE = re.compile("[\U0001f3fb-\U0001f3ff]")
# The same characters in JSON text (`json.dumps`, ensure_ascii off): those above C0 as they
# are, C0 as `\u00XX`, `\b`, `\f` or `\r` (newline and tab, `\n` and `\t`, are kept).
# Every backslash is matched, with what follows it when that is a C0 escape or a second
# backslash (so that the `b` of `\\b` is not taken for a `\b`). The pattern starts with
# one character class, which the regex engine scans for 2 to 3 times faster than it tries
# alternatives at each character (a 4 MB report's data: 41 against 94 ms).
_UNSHOWN_JSON = re.compile(
    r"[\\\x7f-\x9f\u202a-\u202e\u2066-\u2069](?:(?<=\\)(\\|u00[01][0-9a-f]|[bfr]))?"
)
_JSON_SHORT = {"b": "08", "f": "0c", "r": "0d"}
# Whether a JSON text may hold one: most pages hold none, and a search is cheaper than a sub.
_UNSHOWN_RAW = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_UNSHOWN_ESCAPED = re.compile(r"\\(?:[bfr]|u00[01])")


def page_asset(name: str, text: str | None = None) -> str:
    """The text of the shared file `name` (a file of this package); `page.css` and
    `names.js` with the lines cut with an ellipsis (`_CUT_LINES`) written in, `names.js`
    with the class of characters `page_name` rewrites, as a JavaScript pattern, and
    emoji ZWJ sequences a page shows whole, as a JSON string (one space between two).
    `text`, when given, is the file's text as another version of it held it (a
    benchmark's baseline), written in alike."""
    if text is None:
        text = (_FOLDER / name).read_text(encoding="utf-8")
    if name == "page.css":
        return text.replace("@CUT_LINES@", _CUT_LINES)
    if name != "names.js":
        return text
    text = text.replace("@CUT_LINES@", _CUT_LINES)
    sequences = json.dumps(" ".join(sorted(_zwj_sequences())), ensure_ascii=False)
    return text.replace("@NAMED@", _NAMED_CLASS).replace("@ZWJ_SEQUENCES@", sequences)


@cache
def _zwj_sequences() -> frozenset[str]:
    """The lines of `emoji_zwj.txt`: emoji ZWJ sequences, `T` for any skin tone."""
    lines = (_FOLDER / "emoji_zwj.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(line for line in lines if line and not line.startswith("#"))


def page_text(text: str) -> str:
    """`text` with its control and bidi characters as visible escapes (see the module)."""
    return _UNSHOWN.sub(escaped, text) if _UNSHOWN.search(text) else text


def page_name(text: str) -> str:
    """`text`, a name or an id, with its control and bidi characters, newline, tab,
    the characters that show as nothing and `⟨` as `⟨U+XXXX⟩` (see the module).

    Only names and ids are so written: messages, contents and excerpts keep
    `page_text`'s escapes, so a message naming the id `r` U+202E `ev` spells it
    `r\\u202eev`, the shown form of another id (the one holding those six
    characters). Tell ids apart by their columns, not by a message's text."""
    if not _NAMED.search(text):
        return text
    if _ZWJ not in text:
        return _NAMED.sub(_named, text)
    kept = {
        at
        for run in _ZWJ_RUN.finditer(text)
        if _is_zwj_sequence(run.group())
        for at in range(run.start(), run.end())
        if text[at] == _ZWJ
    }
    return _NAMED.sub(lambda found: _ZWJ if found.start() in kept else _named(found), text)


def _is_zwj_sequence(run: str) -> bool:
    sequences = _zwj_sequences()
    return run in sequences or _TONE.sub("T", run) in sequences


class Names(str):
    """A text that names things (a graph node's "reads: a, b", an agent's tools): the
    names joined by ", " (`empty` when there are none), between `before` and `after`.

    It is that text wherever text is read (JSON, a hover, a terminal); `shown()` is it
    as a page shows it, each name as `page_name` writes it, so a page need not know
    which of the texts it is given name things."""

    names: tuple[str, ...]
    empty: str
    before: str
    after: str

    def __new__(
        cls, names: Iterable[str], empty: str = "none", before: str = "", after: str = ""
    ) -> Names:
        found = tuple(names)
        self = super().__new__(cls, before + (", ".join(found) or empty) + after)
        self.names, self.empty, self.before, self.after = found, empty, before, after
        return self

    def __reduce__(self) -> tuple[type[Names], tuple[tuple[str, ...], str, str, str]]:
        # (a copy or a pickle made from the joined text alone would split it into letters)
        return (Names, (self.names, self.empty, self.before, self.after))

    def shown(self) -> str:
        """The text with each name as `page_name` shows it (the rest kept as it is)."""
        joined = ", ".join(page_name(name) for name in self.names)
        return self.before + (joined or self.empty) + self.after


def names_shown(rows: Any, fields: tuple[int | str, ...]) -> Any:
    """`rows`, a list of rows (lists or mappings), with the string in each of `fields`
    of each row as `page_name` shows it: the list itself when no name changes (one
    search), else a new list in which only a row whose name changes is a copy. A row,
    or a field, of another shape is left as it is."""
    if not isinstance(rows, list):
        return rows
    if not _NAMED.search("".join(_fields(rows, fields))):
        return rows
    shown = list(rows)
    for number, row in enumerate(rows):
        names = {f: row[f] for f in fields if _has_name(row, f)}
        changed = {f: page_name(n) for f, n in names.items() if _NAMED.search(n)}
        if changed:
            if isinstance(row, list):
                copy = list(row)
                for field, name in changed.items():
                    copy[int(field)] = name
                shown[number] = copy
            else:
                shown[number] = {**row, **changed}
    return shown


def _has_name(row: Any, field: int | str) -> bool:
    if isinstance(row, list) and isinstance(field, int):
        return field < len(row) and isinstance(row[field], str)
    return isinstance(row, Mapping) and isinstance(row.get(field), str)


def _fields(rows: list[Any], fields: tuple[int | str, ...]) -> list[str]:
    return [row[f] for row in rows for f in fields if _has_name(row, f)]


def _named(found: re.Match[str]) -> str:
    return f"\u27e8U+{ord(found.group()):04X}\u27e9"


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
    """The JSON text of `page_text`'s escape of the character `found` matched (a JSON
    backslash, then the escape), or JSON's own escape as it is."""
    escape = found.group(1)
    if not found.group().startswith("\\"):  # a character above C0, as it is
        return "\\" + escaped(found)
    if escape is None or escape == "\\":
        return found.group()
    return "\\\\x" + (escape[3:] if escape.startswith("u") else _JSON_SHORT[escape])


def html_text(text: str) -> str:
    """`text` as page text (`page_text`), escaped for HTML content and attribute values."""
    return html.escape(page_text(text))


def html_name(text: str) -> str:
    """`text`, a name or an id, as `page_name` shows it, escaped for HTML content and
    attribute values."""
    return html.escape(page_name(text))
