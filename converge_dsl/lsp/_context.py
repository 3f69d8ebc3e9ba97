"""What the cursor is in: a mapping key being typed, or a value (and its text up to the cursor).

A text being typed rarely loads: `    dep` on a line of its own is not YAML yet.
`context_at` asks the front end's own loader, never a second parser: it marks
the cursor with a word (`MARK`) and loads the text with the cursor's line
completed a few ways (as it is; as a key `WORD: 0`; with its open brackets and
quotes closed), and reads the marked node's JSON path from the first that
loads. When none does (the text is broken elsewhere), the last good document
answers by position.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from typing import Any

from converge_dsl.diagnostics import JsonPath
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import LoadedDocument
from converge_dsl.frontend.document import value_at
from converge_dsl.lsp._positions import Lines, Point, last_line, path_at

MARK = "zzconvergedslcursor"
_CLOSERS = {"[": "]", "{": "}"}


class Context:
    """Where the cursor is: `path` (with `on_key`, the key being typed there), the
    scalar's text before the cursor (`prefix`) and the document that says so."""

    __slots__ = ("data", "document", "on_key", "path", "prefix")

    def __init__(
        self, path: JsonPath, on_key: bool, prefix: str, data: Any, document: LoadedDocument
    ) -> None:
        self.path = path
        self.on_key = on_key
        self.prefix = prefix
        self.data = data
        self.document = document

    @property
    def parent(self) -> JsonPath:
        """The mapping a key is typed in; the path itself for a value."""
        return self.path[:-1] if self.on_key else self.path

    def siblings(self) -> set[str]:
        """The keys already in the mapping a key is typed in (the typed one left out)."""
        mapping = value_at(self.data, self.parent)
        if not isinstance(mapping, dict):
            return set()
        return {k for k in mapping if MARK not in k}


def context_at(text: str, point: Point, fallback: LoadedDocument | None) -> Context | None:
    """The cursor's context in `text` (1-based `point`); `fallback` is the last good document."""
    from converge_dsl.frontend import load_text

    lines = Lines(text)
    line, column = point
    current = lines.line(line)
    before, after = current[: column - 1], current[column - 1 :]
    window = _window(lines, line, fallback) if fallback is not None else None
    whole = Window((), 1, len(lines.lines))
    for part in (window, whole) if window is not None else (whole,):
        for patched in _patches(before, after):
            chosen = lines.lines[part.first - 1 : part.last]
            chosen[line - part.first] = patched
            try:
                document = load_text("\n".join(chosen), "cursor")
            except PipelineInvalid:
                continue
            found = _marked(document.data, ())
            if found is not None:
                path, on_key, prefix = found
                data = part.wrap(document.data)
                return Context(part.outer(path), on_key, prefix, data, document)
    if fallback is None:
        return None
    hit = path_at(fallback, point)
    prefix = _word_before(before)
    if not hit.on_key and hit.span is not None and hit.span.line == line:
        prefix = before[hit.span.column - 1 :].lstrip("'\"")  # the scalar's text so far
    return Context(hit.path, hit.on_key, prefix, fallback.data, fallback)


class Window:
    """The lines of one entry of a top-level section (`suggestors[41]`, `models.fast`),
    `first` to `last`, and the path of that entry: what the cursor's line is loaded with, so
    a completion in a 10,000-line pipeline loads a dozen lines."""

    __slots__ = ("first", "last", "prefix")

    def __init__(self, prefix: JsonPath, first: int, last: int) -> None:
        self.prefix = prefix
        self.first = first
        self.last = last

    def outer(self, path: JsonPath) -> JsonPath:
        """A path in the window's text as a path in the whole document."""
        if not self.prefix:
            return path
        return (*self.prefix, *path[1:])

    def wrap(self, data: Any) -> Any:
        """The window's data placed at its path (what the schema's branches read)."""
        if not self.prefix:
            return data
        section, step = self.prefix
        entry = data[0] if isinstance(data, list) and data else (data or {}).get(step)
        if isinstance(step, int):
            return {section: [None] * step + [entry]}
        return {section: {step: entry}}


_SMALL = 400  # lines: below this, the whole text is loaded


def _window(lines: Lines, line: int, good: LoadedDocument) -> Window | None:
    """The entry of a top-level list or mapping holding `line`, from the last good document.

    Its start is above the cursor, where the text has not changed since; its end
    moves by as many lines as the text gained or lost (the edit is at the cursor).
    """
    if len(lines.lines) < _SMALL or not isinstance(good.data, dict):
        return None
    source_map = good.source_map
    grown = len(lines.lines) - len(Lines(good.text).lines)
    for section, value in good.data.items():
        if not isinstance(value, dict | list) or not value:
            continue
        span = source_map.span((section,))
        if not span.line <= line <= last_line(good, span) + grown:
            continue
        steps: list[str | int] = list(value) if isinstance(value, dict) else list(range(len(value)))
        starts = [source_map.locate((section, s)) for s in steps]
        firsts = [(loc.key_span or loc.span).line for loc in starts]
        index = bisect_right(firsts, line) - 1
        if index < 0:
            return None
        end = firsts[index + 1] - 1 if index + 1 < len(firsts) else last_line(good, span)
        last = end + grown
        if last < line or last > len(lines.lines):
            return None
        return Window((section, steps[index]), firsts[index], last)
    return None


def _patches(before: str, after: str) -> Iterator[str]:
    """The cursor's line completed: a word alone on its line is a key being typed (else
    it would continue the scalar above); after `- ` it is first read as an item."""
    stripped = before.strip()
    alone = not after.strip() and (not stripped or stripped.replace("_", "").isalnum())
    if alone:
        yield before + MARK + ": 0"
    yield before + MARK + after
    if stripped.startswith("-") and stripped.removeprefix("-").strip().isidentifier():
        yield before + MARK + ": 0"
    yield before + MARK + _closing(before)
    yield before + MARK + '"' + _closing(before + '"')


def _closing(text: str) -> str:
    """What closes the quotes and flow brackets left open in `text`."""
    stack: list[str] = []
    quote: str | None = None
    for char in text:
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
        elif stack and char == stack[-1]:
            stack.pop()
    return (quote or "") + "".join(reversed(stack))


def _marked(data: Any, path: JsonPath) -> tuple[JsonPath, bool, str] | None:
    """(path, on a key, the text before the mark) of the node holding `MARK`."""
    if isinstance(data, dict):
        for key, value in data.items():
            if MARK in key:
                return (*path, key), True, key.split(MARK, 1)[0]
            found = _marked(value, (*path, key))
            if found is not None:
                return found
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found = _marked(value, (*path, index))
            if found is not None:
                return found
    elif isinstance(data, str) and MARK in data:
        return path, False, data.split(MARK, 1)[0]
    return None


def _word_before(text: str) -> str:
    index = len(text)
    while index > 0 and (text[index - 1].isalnum() or text[index - 1] in "_-"):
        index -= 1
    return text[index:]
