"""Diagnostics as data: what is wrong, where, and how to fix it.

A `Diagnostic` is a plain immutable record. Checks *yield* diagnostics rather
than raise them, so that every problem is reported; `best_first` orders them
so the one most worth reading comes first. Rendering (human excerpt with a
caret, JSON, GitHub annotations, SARIF) lives in `converge_dsl.frontend`.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TYPE_CHECKING

from converge_dsl._escapes import escaped, written
from converge_dsl._record import Record

if TYPE_CHECKING:
    import re


class Severity(StrEnum):
    """How much a finding matters: an error fails validation, a warning fails it under
    `--strict`, a note (where an analysis stops short) never does."""

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


# Every command imports this module: its records are `Record`s (docs/architecture.md §5).
class SourceSpan(Record):
    """A region of a source file. Lines and columns are 1-based; `end_*` is exclusive."""

    _fields = ("file", "line", "column", "end_line", "end_column")
    __slots__ = _fields

    def __init__(self, file: str, line: int, column: int, end_line: int, end_column: int) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.end_line = end_line
        self.end_column = end_column

    def __str__(self) -> str:
        return location(self.file, self.line, self.column)


# What a file name may hold that would break its location's line or drive a terminal:
# C0 (newline and tab too), DEL, C1, the Unicode line and paragraph separators, bidi.
_NOT_ONE_LINE = "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(found: re.Match[str]) -> str:
    return _NAMED_ESCAPES.get(found.group()) or escaped(found)


def one_line(name: str) -> str:
    """A file's `name` as a human location shows it (`FILE:LINE:COLUMN`, `--> ...`):
    newline, carriage return and tab as `\\n`, `\\r`, `\\t`, every other control,
    line-separator or bidi character as `\\xNN` / `\\uNNNN`, so one diagnostic's
    location stays one line and cannot drive the terminal. Machine output (JSON's
    `file`, SARIF) keeps the real name."""
    import re

    return re.sub(_NOT_ONE_LINE, _escaped, name)


def location(file: str, line: int, column: int) -> str:
    """`FILE:LINE:COLUMN` as a human reads it: the name on one line (`one_line`)."""
    return f"{one_line(file)}:{line}:{column}"


JsonPath = tuple[str | int, ...]


def format_path(path: JsonPath) -> str:
    """Render a JSON path the way users read it: `suggestors[2].prompt.user`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "<root>"


class Diagnostic(Record):
    """One finding. `code` is stable (`CD001`...) and documented in docs/errors.md.

    `excerpt` is false for a finding in a file that may not be quoted (one that
    did not load as a YAML document of ours): renderers then show where, never what.
    """

    _fields = (
        "code",
        "severity",
        "message",
        "file",
        "line",
        "column",
        "end_line",
        "end_column",
        "path",
        "hint",
        "excerpt",
    )
    __slots__ = _fields

    def __init__(  # noqa: PLR0917 (positional, as the fields are ordered)
        self,
        code: str,
        severity: Severity,
        message: str,
        file: str,
        line: int,
        column: int,
        end_line: int,
        end_column: int,
        path: JsonPath = (),
        hint: str | None = None,
        excerpt: bool = True,
    ) -> None:
        self.code = code
        self.severity = severity
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.end_line = end_line
        self.end_column = end_column
        self.path = path
        self.hint = hint
        self.excerpt = excerpt

    @classmethod
    def at(
        cls,
        code: str,
        message: str,
        span: SourceSpan,
        *,
        path: JsonPath = (),
        hint: str | None = None,
        severity: Severity = Severity.ERROR,
    ) -> Diagnostic:
        return cls(
            code=code,
            severity=severity,
            message=message,
            file=span.file,
            line=span.line,
            column=span.column,
            end_line=span.end_line,
            end_column=span.end_column,
            path=path,
            hint=hint,
        )

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    @property
    def is_note(self) -> bool:
        return self.severity is Severity.NOTE

    @property
    def span(self) -> SourceSpan:
        return SourceSpan(self.file, self.line, self.column, self.end_line, self.end_column)

    def as_json(self) -> dict[str, object]:
        """The JSON shape promised by `validate --format json`."""
        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "path": format_path(self.path),
            "hint": self.hint,
        }


def best_first(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Errors, then warnings, then notes, each by file and position (stable for equal keys)."""
    return sorted(
        diagnostics,
        key=lambda d: (_RANK[d.severity], d.file, d.line, d.column, d.code),
    )


_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.NOTE: 2}


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to `word`, if one is close enough to be a likely typo."""
    import difflib  # only when a name is unknown

    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def suggestion(guess: str, *, unprintable: bool = False) -> str:
    """`did you mean 'guess'?`, the name quoted as every message quotes a name
    (`converge_dsl._escapes.written`: `'a\\x27b'`, `'a\\x0ab'`, never Python's repr;
    with `unprintable`, each character `str.isprintable` refuses escaped too)."""
    return f"did you mean '{written(guess, unprintable=unprintable)}'?"


def unknown_name_hint(word: str, candidates: Iterable[str], otherwise: str) -> str:
    """The hint for an unknown name: `did you mean 'x'?` (`suggestion`) when `word` is a
    likely typo of a candidate, else `otherwise` (what the known names are, say)."""
    guess = did_you_mean(word, candidates)
    return suggestion(guess) if guess else otherwise
