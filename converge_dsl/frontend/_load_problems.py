"""Located problems of loading: spans from YAML marks, and YAML errors worded for people."""

from __future__ import annotations

import re
from functools import cache

from converge_dsl import codes
from converge_dsl._pyyaml import yaml
from converge_dsl.diagnostics import Diagnostic, SourceSpan
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import _anchors


def node_span(file: str, node: yaml.nodes.Node) -> SourceSpan:
    start, end = node.start_mark, node.end_mark
    return SourceSpan(file, start.line + 1, start.column + 1, end.line + 1, end.column + 1)


def point(file: str, line: int, column: int) -> SourceSpan:
    return SourceSpan(file, line, column, line, column + 1)


def invalid(
    code: str, message: str, span: SourceSpan, *, hint: str | None = None
) -> PipelineInvalid:
    return PipelineInvalid([Diagnostic.at(code, message, span, hint=hint)])


def syntax_diagnostic(exc: yaml.MarkedYAMLError, file: str, text: str) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    span = point(file, mark.line + 1, mark.column + 1) if mark else point(file, 1, 1)
    problem = exc.problem or "syntax error"
    lines = text.splitlines()
    at = lines[span.line - 1][span.column - 1 : span.column] if span.line <= len(lines) else ""
    if at == "\t" or "'\\t'" in problem:
        return Diagnostic.at(
            codes.TAB_INDENT,
            "a tab character where YAML allows only spaces",
            span,
            hint="indent with spaces",
        )
    if exc.context and "single document" in exc.context:
        return Diagnostic.at(
            codes.MULTIPLE_DOCUMENTS,
            "more than one YAML document in the file",
            span,
            hint="remove the '---' separator; one file holds one pipeline",
        )
    if "maximum nesting depth" in problem:  # libyaml's own bound, far past the loader's
        return Diagnostic.at(
            codes.TOO_DEEP,
            f"nesting deeper than {_anchors.MAX_DEPTH} levels",
            span,
            hint="flatten the structure",
        )
    message = f"{exc.context}, {problem}" if exc.context else problem
    return Diagnostic.at(
        codes.YAML_SYNTAX,
        f"YAML syntax error: {message}",
        span,
        hint="check the indentation and quoting around this line",
    )


@cache
def _not_printable() -> re.Pattern[str]:
    """Characters outside YAML 1.2's c-printable production (compiled on the error path
    only: the class spans all of Unicode and costs milliseconds to compile)."""
    return re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


_NAMES = {0: "NUL", 0x1B: "ESC", 0x7F: "DEL"}


def character_diagnostic(exc: yaml.reader.ReaderError, file: str, text: str) -> Diagnostic:
    """A character the YAML reader refused, located where it is (not at 1:1)."""
    found = _not_printable().search(text)
    if found is None:  # pragma: no cover - the reader refuses only these characters
        return Diagnostic.at(codes.YAML_SYNTAX, str(exc), point(file, 1, 1))
    at = found.start()
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    code = ord(found.group())
    name = f"U+{code:04X}" + (f" ({_NAMES[code]})" if code in _NAMES else "")
    return Diagnostic.at(
        codes.FORBIDDEN_CHARACTER,
        f"the character {name} is not allowed in YAML",
        point(file, line, column),
        hint="remove it, or write it as an escape (like \\x07) in a double-quoted string",
    )
