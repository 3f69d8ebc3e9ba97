"""An open document: the editor's text as lines, changed in place by each `didChange`.

`Document.apply(change)` takes one content change: a whole text, or a range
(0-based lines, UTF-16 columns) and the text put in its place. A range change
converts its two positions on the lines they name only and replaces those
lines, so it costs in proportion to the change and the lines it touches, not
to the document (a 2 MB pipeline is 65,000 lines); `text` joins the lines when
it is read, once a version. Lines end as the protocol ends them (`\\n`,
`\\r\\n` or `\\r`); the last line has no line break (it is empty after a final
one).

A change's positions are read as the protocol's reference text document
(vscode-languageserver-textdocument) reads them, so a client a little off
still edits what its user sees: a line past the last is the end of the text,
a column past a line's end is that line's end (before its line break), and a
range whose end is before its start is the same range, its ends swapped. A
column inside a surrogate pair, which that reading would split into two lone
halves, is after the pair.

Every text taken in (the opened one, each change's) has its lone UTF-16
surrogates (an editor may send one, escaped in JSON) as U+FFFD: one UTF-16 unit
for another, so positions stay, and the text encodes as UTF-8 for the checks.

`kind` is the file's kind (`_analysis.file_kind`) as last read, kept across
changes that touch no line naming `kind` or `apiVersion` (the only lines the
kind reads); None when it is to be read again.
"""

from __future__ import annotations

import re

from lsprotocol import types as lsp

from converge_dsl._json_text import without_lone_surrogates
from converge_dsl.frontend.document import OTHER_BREAKS
from converge_dsl.lsp._positions import code_point_column

_LINE_BREAK = re.compile("(\r\n|\r|\n)")
# Where `str.splitlines` ends a line and the protocol does not.
_NOT_BREAKS = "\x0b\x0c\x1c\x1d\x1e" + OTHER_BREAKS
# The words of the lines a file's kind is read from.
_KIND_WORDS = ("kind", "apiVersion")


class Document:
    """The text of one open document and its version (see the module's docstring)."""

    __slots__ = ("_lines", "_text", "kind", "version")

    def __init__(self, text: str, version: int | None = None) -> None:
        self.version = version
        self.kind: str | None = None
        self._text: str | None = None
        self._lines = split_lines(without_lone_surrogates(text))

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = "".join(self._lines)
        return self._text

    def apply(self, change: lsp.TextDocumentContentChangeEvent) -> None:
        """Apply one content change of a `didChange` (they apply in order)."""
        new = without_lone_surrogates(change.text)
        self._text = None
        if not isinstance(change, lsp.TextDocumentContentChangePartial):
            self._lines = split_lines(new)
            self.kind = None
            return
        start, end = change.range.start, change.range.end
        if (end.line, end.character) < (start.line, start.character):
            start, end = end, start
        first, start_column = self._place(start)
        last, end_column = self._place(end)
        lines = self._lines
        segment = lines[first][:start_column] + new + lines[last][end_column:]
        if first > 0 and segment[:1] == "\n" and lines[first - 1][-1] == "\r":
            first -= 1  # the line before ends with `\r`: with this `\n`, one line break
            segment = lines[first] + segment
        touched = lines[first : last + 1]
        replaced = split_lines(segment)
        if last + 1 < len(lines):
            replaced.pop()  # the segment ends with a line break: the next line starts after it
        lines[first : last + 1] = replaced
        if self.kind is not None and any(
            word in part for word in _KIND_WORDS for part in (segment, *touched)
        ):
            self.kind = None

    def _place(self, position: lsp.Position) -> tuple[int, int]:
        """The line index and code-point column of an editor's position (module docstring)."""
        if position.line >= len(self._lines):
            last = len(self._lines) - 1
            return last, len(self._lines[last])
        content = self._lines[position.line].rstrip("\r\n")
        return position.line, code_point_column(content, position.character) - 1


def split_lines(text: str) -> list[str]:
    """`text` as its lines, each with its line break (`\\n`, `\\r\\n` or `\\r`), and a last
    line without one."""
    if any(mark in text for mark in _NOT_BREAKS):
        parts = _LINE_BREAK.split(text)
        lines = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2)]
        lines.append(parts[-1])
        return lines
    lines = text.splitlines(keepends=True)
    if not lines or lines[-1][-1] in "\r\n":
        lines.append("")
    return lines
