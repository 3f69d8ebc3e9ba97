"""Diagnostics rendered for people and for machines.

- `render_human`: compiler-style text with the source line and a caret
  underline; colour (through rich, imported only then) when `color` is true.
  A source line longer than `EXCERPT_WIDTH` is cut to a window around the
  caret, with `…` where text was cut. Control characters (C0 other than
  newline/tab, DEL, C1, so ESC and NUL) and bidi controls are shown escaped
  (`\x1b`, `\u202e`, see `terminal_safe`), so no text reaches the terminal raw;
  the excerpt escapes every character a reader would not see as itself too (a
  tag character, a zero-width space: `_escapes.HIDDEN`, `\U000e0061`, `\u200b`),
  so it shows what the file holds, cut to `EXCERPT_WIDTH` columns shown, and its
  caret counts the columns a terminal shows (a CJK character two); so
  does every other part printed (message, hint, location, a count line:
  `_escapes.shown`, here where a diagnostic is rendered, whoever wrote its text);
  the file name of the `-->` line has its newlines and tabs escaped too (`\n`,
  `diagnostics.one_line`), so a location is always one line.
  The excerpt comes from the text the caller gives for a file, else from the
  file itself (`SourceTexts`: read once, on first use; unreadable, no excerpt),
  its lines counted as the file's reader counted them (`source_lines`).
  A diagnostic whose `excerpt` is false is shown without one (its file may not
  be quoted).
- `render_json`: a list of objects with exactly the keys of `Diagnostic.as_json`
  (plus `omitted` on the entry that counts the diagnostics a cap left out).
- `render_github`: GitHub Actions workflow commands (`::error file=...`), the
  message and hint escaped as `render_human`'s (`_escapes.shown`); `file=` is the
  real name, which GitHub matches against the repository's files.
- JSON and SARIF are data: every text as the diagnostic holds it, nothing escaped.
- `render_sarif` (in `_sarif`): a SARIF 2.1.0 log.

Every renderer takes the `Omitted` records of `cap` (`_cap`) and prints them
after the diagnostics shown, so a capped output says how many more there are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from converge_dsl._escapes import HIDDEN, UNSHOWN, escaped, shown
from converge_dsl._reading import ReadRefused, read_text
from converge_dsl.diagnostics import Diagnostic, location
from converge_dsl.frontend._cap import Omitted

Segment = tuple[str, str]  # (text, rich style); plain output ignores the style


class SourceTexts(Mapping[str, str]):
    """The text of each file a diagnostic names: `known` texts first, else read from disk.

    A file is read on first use and at most once; one that cannot be read
    (missing, a folder, not UTF-8) has no text, so its diagnostics get no excerpt.
    """

    def __init__(self, known: Mapping[str, str] | None = None) -> None:
        self._texts: dict[str, str | None] = dict(known or {})
        self._lines: dict[str, list[str]] = {}

    def __getitem__(self, file: str) -> str:
        if file not in self._texts:
            try:
                self._texts[file] = read_text(Path(file), "source file") if file else None
            except (OSError, UnicodeDecodeError, ValueError, ReadRefused):
                self._texts[file] = None
        text = self._texts[file]
        if text is None:
            raise KeyError(file)
        return text

    def __iter__(self) -> Iterator[str]:
        return (file for file, text in self._texts.items() if text is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def lines(self, file: str) -> list[str]:
        """The lines of `file` (empty when it has no text), split once per file."""
        found = self._lines.get(file)
        if found is None:
            found = self._lines[file] = source_lines(file, self[file]) if file in self else []
        return found


# Files whose readers count a line per `\n` alone (`_files.jsonl_lines`): JSON Lines (`run
# --cases`, an evaluation's dataset), JSON, CSV (read from a `StringIO`, as `csv` does).
_ONE_LINE_PER_NEWLINE = (".jsonl", ".ndjson", ".json", ".csv")
# What PyYAML's marks count as a line break, so a YAML file's line numbers: not the form
# feed, vertical tab and `\x1c`-`\x1e` that `str.splitlines` splits on too.
_YAML_BREAK = "\r\n|[\n\r\x85\u2028\u2029]"


def source_lines(file: str, text: str) -> list[str]:
    """The lines of `text`, the text of `file`, as its reader numbered them: a JSON Lines,
    JSON or CSV file's at `\n` only (a U+2028 inside a JSON string is no line break), any
    other's (a pipeline, a pack: YAML) at YAML's line breaks. No empty line after a last
    break."""
    if file.lower().endswith(_ONE_LINE_PER_NEWLINE):
        from converge_dsl._files import jsonl_lines

        return jsonl_lines(text)
    lines = re.split(_YAML_BREAK, text)
    if lines[-1] == "":
        lines.pop()
    return lines


EXCERPT_WIDTH = 120


def terminal_safe(text: str) -> str:
    """`text` with control and bidi characters escaped visibly (ESC -> `\\x1b`).

    Newline and tab are kept; everything else a terminal would act on (C0,
    DEL, C1, U+202A-U+202E, U+2066-U+2069) becomes its escape, so untrusted
    text cannot move the cursor, retitle the window or reorder what is shown.
    """
    return re.sub(UNSHOWN, escaped, text)  # compiled on first use: `re` caches it


def _excerpt(line: str, start: int, end: int) -> tuple[str, int, int]:
    """The shown part of source `line` marked from index `start` to `end` (0-based, exclusive).

    Returns the text (each `HIDDEN` character escaped, `_units`, so a line cannot show
    other text than its file holds; cut to `EXCERPT_WIDTH` columns shown around
    the mark, at a character's or an escape's edge, with `…` where cut), the caret's
    offset in it and the underline width, both in the columns a terminal gives them
    (`_columns`: a CJK character or an emoji two, a combining mark none).
    """
    stop = max(end, start)
    margin = 4 * EXCERPT_WIDTH  # a shown column or more for most characters: room to cut in
    first = max(0, start - margin)
    head = _units(line[first:start])
    marked = _units(line[start:stop][:margin])
    last = min(len(line), stop + margin)
    tail = _units(line[stop:last])
    widths = [sum(width for _, width in part) for part in (head, marked, tail)]
    cut_left = cut_right = False
    if first or last < len(line) or stop - start > margin or sum(widths) > EXCERPT_WIDTH:
        room = min(widths[0], max(EXCERPT_WIDTH // 3, EXCERPT_WIDTH - widths[1] - widths[2]))
        kept = _taken(head[::-1], room)[::-1]
        cut_left = first > 0 or len(kept) < len(head)
        room = EXCERPT_WIDTH - sum(width for _, width in kept)
        shown_marked = _taken(marked, room) or marked[:1]
        room -= sum(width for _, width in shown_marked)
        shown_tail = _taken(tail, room)
        cut_right = (
            last < len(line) or len(shown_tail) < len(tail) or len(shown_marked) < len(marked)
        )
        head, marked, tail = kept, shown_marked, shown_tail
    before = ("…" if cut_left else "") + "".join(text for text, _ in head)
    mark = "".join(text for text, _ in marked)
    after = "".join(text for text, _ in tail) + ("…" if cut_right else "")
    return before + mark + after, _columns(before), max(1, _columns(mark))


def _units(text: str) -> list[tuple[str, int]]:
    """Each character of `text` (a `HIDDEN` flag whole) as shown, and its columns."""
    if text.isascii() and re.search(HIDDEN, text) is None:
        return [(char, 1) for char in text]
    return [
        (shown, _columns(shown))
        for shown in (
            escaped(found) if found["hidden"] else found.group()
            for found in re.finditer(f"(?P<hidden>{HIDDEN})|.", text, re.DOTALL)
        )
    ]


def _taken(units: list[tuple[str, int]], room: int) -> list[tuple[str, int]]:
    """The first of `units` that fit in `room` columns."""
    used = 0
    for count, (_, width) in enumerate(units):
        used += width
        if used > room:
            return units[:count]
    return units


def _columns(text: str) -> int:
    """The columns a terminal shows `text` in (rich's `cell_len`: graphemes, East Asian
    widths); one a character for ASCII, without importing rich."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


_COLOURS = {"error": "bold red", "warning": "bold yellow", "note": "bold cyan"}


def _segments(diagnostic: Diagnostic, sources: SourceTexts) -> list[list[Segment]]:
    colour = _COLOURS[diagnostic.severity.value]
    lines: list[list[Segment]] = [
        [
            (f"{diagnostic.severity.value}[{diagnostic.code}]", colour),
            (f": {shown(diagnostic.message)}", "bold"),
        ]
    ]
    text_lines = sources.lines(diagnostic.file) if diagnostic.excerpt else []
    number = str(diagnostic.line)
    pad = " " * len(number)
    where = shown(location(diagnostic.file, diagnostic.line, diagnostic.column))
    lines.append([(f"{pad}--> ", "blue"), (where, "")])
    if 1 <= diagnostic.line <= len(text_lines):
        line = text_lines[diagnostic.line - 1].replace("\t", " ")
        start = min(max(diagnostic.column, 1), len(line) + 1)
        end = diagnostic.end_column if diagnostic.end_line == diagnostic.line else len(line) + 1
        excerpt, caret, width = _excerpt(line, start - 1, min(end, len(line) + 1) - 1)
        lines.append([(f"{pad} |", "blue")])
        lines.append([(f"{number} | ", "blue"), (excerpt, "")])
        lines.append([(f"{pad} | ", "blue"), (" " * caret + "^" * width, colour)])
    if diagnostic.hint:
        lines.append([(f"{pad} = ", "blue"), ("hint: ", "bold"), (shown(diagnostic.hint), "")])
    return lines


def render_human(
    diagnostics: Sequence[Diagnostic],
    sources: Mapping[str, str],
    color: bool = False,
    omitted: Sequence[Omitted] = (),
) -> str:
    """Each diagnostic with its source excerpt; blocks separated by a blank line.

    `sources` maps file names to their text; a file it lacks is read lazily
    (see `SourceTexts`). `omitted` (from `cap`) ends the text with one
    `... and N more CODE errors` line per code.
    """
    texts = SourceTexts(sources)
    blocks = [_segments(d, texts) for d in diagnostics]
    if omitted:
        blocks.append([[(shown(o.message), "bold")] for o in omitted])
    if not color:
        return "\n\n".join(
            "\n".join("".join(text for text, _ in line).rstrip() for line in block)
            for block in blocks
        ) + ("\n" if blocks else "")
    import io

    from rich.console import Console
    from rich.text import Text

    out = io.StringIO()
    console = Console(
        file=out,
        force_terminal=True,
        color_system="standard",
        width=10_000,
        highlight=False,
        soft_wrap=True,
    )
    for index, block in enumerate(blocks):
        if index:
            console.print()
        for line in block:
            console.print(Text.assemble(*line))
    return out.getvalue()


def summary_line(diagnostics: Sequence[Diagnostic], files: int) -> str:
    """`2 errors, 1 warning in 3 files` (or `3 files valid`, `3 files valid, 1 note`);
    counts above 9,999 get commas.

    `diagnostics` is every finding, shown or omitted by `cap`.
    """
    errors = sum(1 for d in diagnostics if d.is_error)
    notes = sum(1 for d in diagnostics if d.is_note)
    warnings = len(diagnostics) - errors - notes
    where = f"{files} file" + ("" if files == 1 else "s")
    counted = [
        f"{_count(number)} {word}" + ("" if number == 1 else "s")
        for number, word in ((errors, "error"), (warnings, "warning"), (notes, "note"))
        if number
    ]
    if not errors and not warnings:
        return f"{where} valid" + "".join(f", {part}" for part in counted) + "\n"
    return f"{', '.join(counted)} in {where}\n"


def _count(number: int) -> str:
    return f"{number:,}" if number > 9999 else str(number)


def render_json(diagnostics: Sequence[Diagnostic], omitted: Sequence[Omitted] = ()) -> str:
    """A JSON list: each diagnostic's `as_json`, then one entry per `Omitted` record.

    An omitted entry has the keys of the first diagnostic it stands for, its
    message saying how many more, and `omitted`: that count.
    """
    entries = [d.as_json() for d in diagnostics] + [o.as_json() for o in omitted]
    return json.dumps(entries, indent=2, ensure_ascii=False) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(diagnostics: Sequence[Diagnostic], omitted: Sequence[Omitted] = ()) -> str:
    """One workflow command per diagnostic, then one per `Omitted` record (its count)."""
    lines = []
    for d in [*diagnostics, *(_as_diagnostic(o) for o in omitted)]:
        properties = ",".join(
            [
                f"file={_escape_property(d.file)}",
                f"line={d.line}",
                f"col={d.column}",
                f"endLine={d.end_line}",
                f"endColumn={d.end_column}",
                f"title={d.code}",
            ]
        )
        message = d.message + (f" (hint: {d.hint})" if d.hint else "")
        level = "notice" if d.is_note else d.severity.value  # GitHub's word for a note
        lines.append(f"::{level} {properties}::{_escape_data(shown(message))}")
    return "".join(line + "\n" for line in lines)


def _as_diagnostic(omitted: Omitted) -> Diagnostic:
    return omitted.first._replace(message=omitted.message, hint=None)
