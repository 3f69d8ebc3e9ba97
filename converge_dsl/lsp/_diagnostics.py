"""`validate`'s diagnostics in the protocol's words, and the files they belong to.

The message is validate's, with its hint on a second line (`hint: ...`); the
code, the severity and the range (`line`, `column`, `end_line`, `end_column`)
are the diagnostic's own. `data` carries the hint, the JSON path and the code
for the code actions. Like every renderer, only the first `MAX_PER_CODE` of a
code are shown and the rest counted in one entry (`frontend.cap`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from lsprotocol import types as lsp

from converge_dsl.diagnostics import Diagnostic, Severity, SourceSpan
from converge_dsl.lsp._positions import Lines

SOURCE = "converge-dsl"


def to_lsp(diagnostic: Diagnostic, lines: Lines, message: str | None = None) -> lsp.Diagnostic:
    """One diagnostic, located with `lines` (the text of its file)."""
    span = SourceSpan(
        diagnostic.file,
        diagnostic.line,
        diagnostic.column,
        diagnostic.end_line,
        diagnostic.end_column,
    )
    text = message or diagnostic.message
    if diagnostic.hint and message is None:
        text += f"\nhint: {diagnostic.hint}"
    return lsp.Diagnostic(
        range=lines.range(span),
        message=text,
        severity=(
            lsp.DiagnosticSeverity.Error
            if diagnostic.severity == Severity.ERROR
            else lsp.DiagnosticSeverity.Warning
        ),
        code=diagnostic.code,
        source=SOURCE,
        data={
            "code": diagnostic.code,
            "hint": diagnostic.hint if message is None else None,
            "path": list(diagnostic.path),
        },
    )


def by_file(
    diagnostics: Iterable[Diagnostic], lines_of: Callable[[str], Lines]
) -> dict[str, list[lsp.Diagnostic]]:
    """The diagnostics grouped by their `file`, capped per code as `validate` shows them.
    Each file's lines are read once (`lines_of` splits its whole text)."""
    from converge_dsl.frontend import cap

    shown, omitted = cap(diagnostics)
    read: dict[str, Lines] = {}

    def lines(file: str) -> Lines:
        if file not in read:
            read[file] = lines_of(file)
        return read[file]

    grouped: dict[str, list[lsp.Diagnostic]] = {}
    for diagnostic in shown:
        grouped.setdefault(diagnostic.file, []).append(to_lsp(diagnostic, lines(diagnostic.file)))
    for more in omitted:
        first = more.first
        grouped.setdefault(first.file, []).append(
            to_lsp(first, lines(first.file), message=more.message)
        )
    return grouped
