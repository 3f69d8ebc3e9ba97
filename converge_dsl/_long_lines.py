"""`cut_line`: one source line as an excerpt shows it, however long the line is;
`cut_lines`: an excerpt's lines; `head_and_tail`: a long text quoted by its two ends.

A pipeline may be written on one long line (JSON is YAML): every excerpt of
it (a graph page's node, a trace's suggestor) would otherwise hold the whole
line, its size growing with the nodes times the line's length.
"""

from __future__ import annotations

from collections.abc import Sequence

# The characters of one source line an excerpt keeps.
EXCERPT_LINE_CHARS = 400


def cut_line(line: str, column: int) -> str:
    """`line` if it is short; else `EXCERPT_LINE_CHARS` characters of it, from a little
    before `column` (1-based, where the excerpt's subject starts), each `…` that marks
    a cut among them: cutting a cut line again changes nothing."""
    if len(line) <= EXCERPT_LINE_CHARS:
        return line
    left = max(0, min(column - 1 - EXCERPT_LINE_CHARS // 10, len(line) - EXCERPT_LINE_CHARS))
    right = left + EXCERPT_LINE_CHARS
    head = "\u2026" if left else ""
    tail = "\u2026" if right < len(line) else ""
    return head + line[left + len(head) : right - len(tail)] + tail


def cut_lines(lines: Sequence[str], column: int) -> list[str]:
    """An excerpt's `lines`, each cut (`cut_line`): its first around `column`, where its
    subject starts, the others from their start."""
    return [cut_line(line, column if index == 0 else 1) for index, line in enumerate(lines)]


def head_and_tail(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters; else its start and its end, `limit`
    characters of it in all (rounded down to even), and between them what was cut and the
    whole's length: `start\u2026 [N of M characters cut] \u2026end`. The end is kept
    because it is where a tool marks its own cut and a traceback names its error."""
    if len(text) <= limit:
        return text
    keep = max(1, limit // 2)
    size = len(text)
    note = f"[{size - 2 * keep} of {size} characters cut]"
    return f"{text[:keep]}\u2026 {note} \u2026{text[size - keep :]}"
