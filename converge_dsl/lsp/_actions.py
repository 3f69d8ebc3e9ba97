"""Code actions from `validate`'s own diagnostics: each hint that says what to write.

- "did you mean 'X'?": replace the diagnostic's text (a name) with X;
- an unknown context key (CD203): "declare key 'K'" adds it under `keys:`;
- "add 'K' to dependencies" (or a finding that a suggestor reads a key it
  does not depend on): adds K to that suggestor's `dependencies`;
- a missing or stale lock (CD500, CD501): "run converge-dsl lock", a command
  the server runs (`LOCK_COMMAND`).

The edits are text edits at the source map's spans, so every other byte of
the file (comments, anchors, quoting, order) stays as it was; a line an edit
adds ends with the file's own line break (`Lines.newline`: CR, CRLF or LF).
"""

from __future__ import annotations

import re
from typing import Any

from lsprotocol import types as lsp

from converge_dsl import codes
from converge_dsl.diagnostics import JsonPath
from converge_dsl.frontend import LoadedDocument
from converge_dsl.frontend.document import value_at
from converge_dsl.lsp._lookup import Subject
from converge_dsl.lsp._positions import Lines, last_line

LOCK_COMMAND = "converge-dsl.lock"
_GUESS = re.compile(r"did you mean '([^']+)'\?")
_ADD_DEPENDENCY = re.compile(r"add '([a-z][a-z0-9_]*)' to (?:its |the )?`?dependencies")
_READS = re.compile(r"reads '([a-z][a-z0-9_]*)'")
_UNKNOWN_KEY = re.compile(r"unknown context key '([a-z][a-z0-9_]*)'")
_NAME = re.compile(r"^[\w.-]+$")


def actions(subject: Subject, diagnostics: list[lsp.Diagnostic]) -> list[lsp.CodeAction]:
    """The quick fixes for `diagnostics` (those of the request's range) in the subject's file."""
    analysis = subject.analysis
    document = analysis.document if analysis is not None else None
    found: list[lsp.CodeAction] = []
    for diagnostic in diagnostics:
        data: dict[str, Any] = diagnostic.data if isinstance(diagnostic.data, dict) else {}
        hint = str(data.get("hint") or "")
        code = str(diagnostic.code or "")
        guess = _GUESS.search(hint)
        if guess is not None:
            found.extend(_replace(subject, diagnostic, guess.group(1)))
        unknown = _UNKNOWN_KEY.search(diagnostic.message)
        if document is not None and code == codes.UNKNOWN_CONTEXT_KEY and unknown:
            found.append(_declare(subject, document, diagnostic, unknown.group(1)))
        key = _ADD_DEPENDENCY.search(hint) or (
            _READS.search(diagnostic.message) if "dependencies" in hint else None
        )
        path = _path_of(data)
        if document is not None and key is not None and path[:1] == ("suggestors",):
            found.extend(_add_dependency(subject, document, diagnostic, path[:2], key.group(1)))
        if code in (codes.LOCK_MISSING, codes.LOCK_STALE):
            found.append(_lock(subject, diagnostic))
    return found


def _edit(
    subject: Subject, title: str, diagnostic: lsp.Diagnostic, edits: list[lsp.TextEdit]
) -> lsp.CodeAction:
    uri = subject.server.uri(subject.path)
    return lsp.CodeAction(
        title=title,
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        edit=lsp.WorkspaceEdit(changes={uri: edits}),
        is_preferred=True,
    )


def _path_of(data: dict[str, Any]) -> tuple[Any, ...]:
    """The JSON path a diagnostic's `data` carries back from the editor; () when the editor
    sends something else there (the quick fixes that need it are then left out)."""
    path = data.get("path")
    return tuple(path) if isinstance(path, list) else ()


def _replace(subject: Subject, diagnostic: lsp.Diagnostic, guess: str) -> list[lsp.CodeAction]:
    """Replace the name the diagnostic points at with `guess`; only when both are one name."""
    start, end = diagnostic.range.start, diagnostic.range.end
    line = subject.lines.editor_line(start.line)
    if start.line != end.line:
        return []
    written = line[start.character : end.character]
    quoted = written[:1] in ("'", '"') and written[-1:] == written[:1] and len(written) > 1
    inner = written[1:-1] if quoted else written
    if not _NAME.match(inner) or not _NAME.match(guess) or inner == guess:
        return []  # a guess with a character written as an escape (`\x27`) is not offered
    replacement = f"{written[0]}{guess}{written[0]}" if quoted else guess
    edit = lsp.TextEdit(diagnostic.range, replacement)
    return [_edit(subject, f"Replace '{inner}' with '{guess}'", diagnostic, [edit])]


def _insert(lines: Lines, line: int, column: int, text: str) -> lsp.TextEdit:
    position = lines.position(line, column)
    return lsp.TextEdit(lsp.Range(position, position), text)


def _append_to_list(
    subject: Subject, document: LoadedDocument, path: JsonPath, item: str
) -> lsp.TextEdit:
    """An edit that appends `item` (YAML text of one item) to the list at `path`."""
    lines = subject.lines
    location = document.source_map.locate(path)
    span = location.span
    items = value_at(document.data, path) or []
    flow = lines.line(span.line)[span.column - 1 : span.column] == "["
    if flow:
        close = span.end_column - 1  # the `]`
        return _insert(lines, span.end_line, close, (", " if items else "") + item)
    last = document.source_map.span((*path, len(items) - 1))
    dash = lines.line(last.line)[: last.column - 1].rstrip()
    indent = len(dash) - 1 if dash.endswith("-") else last.column - 1
    end = last_line(document, document.source_map.span((*path, len(items) - 1)))
    return _insert(lines, end + 1, 1, " " * indent + "- " + item + lines.newline)


def _declare(
    subject: Subject, document: LoadedDocument, diagnostic: lsp.Diagnostic, key: str
) -> lsp.CodeAction:
    if isinstance(value_at(document.data, ("keys",)), list) and document.data["keys"]:
        edit = _append_to_list(subject, document, ("keys",), f"{{name: {key}}}")
    else:
        anchor = next(
            (name for name in ("models", "budget", "seeds", "suggestors") if name in document.data),
            None,
        )
        line = document.source_map.key_span((anchor,)).line if anchor else 1
        brk = subject.lines.newline
        edit = _insert(subject.lines, line, 1, f"keys:{brk}  - name: {key}{brk}")
    return _edit(subject, f"Declare key '{key}'", diagnostic, [edit])


def _add_dependency(
    subject: Subject,
    document: LoadedDocument,
    diagnostic: lsp.Diagnostic,
    suggestor: JsonPath,
    key: str,
) -> list[lsp.CodeAction]:
    raw = value_at(document.data, suggestor)
    if not isinstance(raw, dict):
        return []
    title = f"Add '{key}' to dependencies"
    deps = raw.get("dependencies")
    if isinstance(deps, list) and key in deps:
        return []
    if isinstance(deps, list) and deps:
        edit = _append_to_list(subject, document, (*suggestor, "dependencies"), key)
    elif isinstance(deps, list):  # `dependencies: []`
        span = document.source_map.span((*suggestor, "dependencies"))
        edit = lsp.TextEdit(subject.lines.range(span), f"[{key}]")
    else:
        name = document.source_map.key_span((*suggestor, "name"))
        indent = " " * (name.column - 1)
        line = f"{indent}dependencies: [{key}]{subject.lines.newline}"
        edit = _insert(subject.lines, name.line + 1, 1, line)
    return [_edit(subject, title, diagnostic, [edit])]


def _lock(subject: Subject, diagnostic: lsp.Diagnostic) -> lsp.CodeAction:
    return lsp.CodeAction(
        title="Run converge-dsl lock",
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        command=lsp.Command(
            title="Run converge-dsl lock",
            command=LOCK_COMMAND,
            arguments=[subject.server.uri(subject.path)],
        ),
    )


def run_lock(path: str, root: str) -> str:
    """`converge-dsl lock PATH` in a subprocess (the command line's own); its output."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", "lock", path],
        cwd=root,
        stdin=subprocess.DEVNULL,  # the server's own input is the editor's messages
        capture_output=True,
        text=True,
        check=False,
    )
    return (done.stdout + done.stderr).strip()
