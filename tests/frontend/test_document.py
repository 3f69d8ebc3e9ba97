"""`LoadedDocument.template_span`: a line of a template is found where it is in the file.

A scalar that folds its line breaks (plain, quoted, `>`) over several lines of
the file has value lines that are not the file's: an unknown name on the
second line of a folded prompt was shown on a blank line (`>` with an empty
line), or on the scalar's first line (a plain scalar). A `|` block is the same
when it holds a U+2028 or U+2029: the file's line ends there, the value's does not. A
double-quoted scalar's escapes (`\\L`, `\\x41`...) are one character of the value, several
of the file.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from converge_dsl._pyyaml import yaml
from converge_dsl.frontend import check_document, load_text

HEAD = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: spans
seeds: [{id: s, content: go}]
suggestors:
  - name: echo
    kind: rule
    dependencies: [seeds]
    emit:
      - key: seeds
        id: e
        content: """


@pytest.mark.parametrize(
    ("scalar", "line", "column"),
    [
        (">\n          one\n\n          two {{ faktz }}\n", 15, 18),
        (">-\n          one\n          two\n          three {{ faktz }}\n", 15, 20),
        ("one\n          two {{ faktz }}\n", 13, 18),
        ("'one\n\n          two {{ faktz }}'\n", 14, 18),
        ('"one\\n\n          two {{ faktz }}"\n', 13, 18),
        ("|\n          one\n          two {{ faktz }}\n", 14, 18),
        ("'{{ x }} {{ faktz }}'\n", 12, 30),
        # A `|` block's U+2028 and U+2029 end a line of the file, not of the value (Jinja's):
        # the name was shown on an earlier line.
        ("|\n          one\u2028          two {{ faktz }}\n", 14, 18),
        ("|\n          a\u2029\u2029          {{ x }}\n          two {{ faktz }}\n", 16, 18),
        ("|\n          {{ x }}\u2028\n          two {{ faktz }}\n", 15, 18),
    ],
)
def test_an_unknown_name_is_located_on_its_own_line(scalar: str, line: int, column: int) -> None:
    text = HEAD + scalar
    doc = load_text(text, "spans.yaml")
    found = [
        d for d in check_document(doc).diagnostics if d.code == "CD208" and "'faktz'" in d.message
    ]
    assert found, text
    span = found[0].span
    assert span is not None
    assert (span.line, span.column, span.end_column) == (line, column, column + len("faktz"))


def test_a_line_of_a_folded_template_spans_its_line_of_the_file() -> None:
    doc = load_text(HEAD + ">\n          one\n\n          two\n          three\n", "spans.yaml")
    path = ("suggestors", 0, "emit", 0, "content")
    span = doc.template_span(path, 2)  # the value is "one\ntwo three\n"
    assert (span.line, span.column, span.end_column) == (15, 11, 14)
    assert doc.template_span(path, 9).line == 12  # past the value: the scalar


# Every escape of a double-quoted YAML scalar, each one character of the value.
_ESCAPES = [f"\\{letter}" for letter in yaml.scanner.Scanner.ESCAPE_REPLACEMENTS] + [
    "\\x41",
    "\\u00e9",
    "\\U0001F600",
]
_SHAPES = [
    '"one {escape} two {{{{ faktz }}}} {{{{ x | nope }}}}"',
    '"one{escape}\n          two {{{{ faktz }}}} {{{{ x | nope }}}}"',
    '"{escape}{escape}\n\n          {{{{ faktz }}}}\n          {{{{ x | nope }}}}"',
]


@pytest.mark.parametrize("shape", _SHAPES, ids=["one-line", "folded", "two-lines"])
@pytest.mark.parametrize("escape", _ESCAPES)
def test_an_unknown_name_or_filter_after_an_escape_is_located_on_it(
    escape: str, shape: str
) -> None:
    """`\\L`, `\\N`, `\\P`, `\\_`... before the name in a double-quoted template moved
    CD208's and CD209's carets to the scalar's first line (or a line before), and `\\n` on
    one line of the file to the whole scalar: the caret is under the name."""
    text = HEAD + shape.format(escape=escape) + "\n"
    lines = text.split("\n")
    diagnostics = check_document(load_text(text, "spans.yaml")).diagnostics
    for code, name in (("CD208", "faktz"), ("CD209", "nope")):
        found = [d for d in diagnostics if d.code == code and repr(name) in d.message]
        assert found, (code, text)
        span = found[0].span
        assert span is not None
        assert span.line == span.end_line
        assert lines[span.line - 1][span.column - 1 : span.end_column - 1] == name


def test_the_names_of_a_long_template_are_aligned_with_the_file_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each `offset_span` of one scalar aligned its value with the source from the scalar's
    start: hover on the last line of a 3,000-line `|` prompt took over a minute. The
    alignment is made once and kept with the document: each line of the source is read
    once, however many names of the scalar are placed."""
    from converge_dsl.frontend import document as module

    written = [f"  line {i} {{{{ facts.k }}}} and {{{{ inputs.q }}}}" for i in range(40)]
    document = load_text("x: |\n" + "\n".join(written) + "\n", "p.yaml")
    text = document.data["x"]
    read: list[str] = []
    pieces = module._pieces

    def counted(source: str, *rest: Any) -> Any:
        read.append(source)
        return pieces(source, *rest)

    monkeypatch.setattr(module, "_pieces", counted)
    names = [m.span() for m in re.finditer(r"facts\.k|inputs\.q", text)]
    spans = [document.offset_span(("x",), text, start, end) for start, end in names]
    expected = []
    for number, line in enumerate(written, start=2):
        for name in ("facts.k", "inputs.q"):
            column = line.index(name) + 1
            expected.append((number, column, column + len(name)))
    assert [(s.line, s.column, s.end_column) for s in spans if s] == expected
    assert len(read) <= len(written) + 1  # was 1,640: each name read the lines before it
