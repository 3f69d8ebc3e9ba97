"""Compile-time checks of templates and expressions, located in the YAML file.

`template_problems` parses one template (or expression) in the shared
sandboxed environment (`converge_dsl.sandbox`) and reports syntax errors,
unknown names, unknown filters, undeclared `inputs.NAME` and calls of the
context functions with arguments they do not take (`fact('K')`). Jinja only knows
the line *within* the template; `LoadedDocument.template_span` maps it onto the file: block
scalars (`|`, `>`) start on the line after their key, quoted and plain
scalars on the key's line. jinja2 is imported only when a string actually
contains template syntax.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from converge_dsl import codes
from converge_dsl._escapes import quoted
from converge_dsl.diagnostics import (
    Diagnostic,
    JsonPath,
    Severity,
    SourceSpan,
    did_you_mean,
    suggestion,
)
from converge_dsl.frontend._dataflow import CALLED_AS, misfit_calls
from converge_dsl.frontend._fastjinja import analyse
from converge_dsl.frontend._jinja_parse import free_names, known_tests, parse
from converge_dsl.frontend.document import LoadedDocument
from converge_dsl.sandbox import ALLOWED_FILTERS

_MARKERS = ("{{", "{%", "{#")
_GLOBALS = frozenset({"range"})  # the sandbox's globals (`converge_dsl.sandbox.GLOBALS`)


def needs_parse(text: str, *, expression: bool) -> bool:
    """False when `text` is plain text that no template engine would change."""
    return expression or any(marker in text for marker in _MARKERS)


Analysis = tuple[
    tuple[str, int | None] | None, frozenset[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]
]


@lru_cache(maxsize=4096)
def _analyse(text: str, expression: bool) -> Analysis:
    """(syntax error, free names, filters used, input names read, tests used) of one template."""
    quick = analyse(text, expression=expression)
    if quick is not None:
        return None, quick[0] - _GLOBALS, quick[1], quick[2], ()
    from jinja2 import nodes

    ast, error = parse(text, expression)
    if ast is None or error is not None:
        return error, frozenset(), (), (), ()
    free = free_names(ast) - _GLOBALS
    filters = tuple(node.name for node in ast.find_all(nodes.Filter))
    tests = tuple(node.name for node in ast.find_all(nodes.Test))
    inputs: list[str] = []
    for node in ast.find_all(nodes.Getattr):
        if isinstance(node.node, nodes.Name) and node.node.name == "inputs":
            inputs.append(node.attr)
    for item in ast.find_all(nodes.Getitem):
        if (
            isinstance(item.node, nodes.Name)
            and item.node.name == "inputs"
            and isinstance(item.arg, nodes.Const)
            and isinstance(item.arg.value, str)
        ):
            inputs.append(item.arg.value)
    return None, free, filters, tuple(inputs), tests


def names_read(text: str, *, expression: bool) -> frozenset[str]:
    """The free names `text` reads (none when it does not compile)."""
    if not needs_parse(text, expression=expression):
        return frozenset()
    return _analyse(text, expression)[1]


def expression_error(text: str) -> str | None:
    """None when `text` compiles as a sandbox expression, else the compiler's message.

    Exactly `converge_dsl.sandbox.compile_expression`'s verdict; jinja2 is
    imported only when the fast path cannot answer (outside its subset, or a
    filter the sandbox does not offer).
    """
    quick = analyse(text, expression=True)
    if quick is not None and ALLOWED_FILTERS.issuperset(quick[1]):
        return None
    from converge_dsl.sandbox import TemplateCompileError, compile_expression

    try:
        compile_expression(text)
    except TemplateCompileError as exc:
        return exc.message
    return None


def template_problems(
    doc: LoadedDocument,
    path: JsonPath,
    text: str,
    *,
    expression: bool,
    names: frozenset[str],
    inputs: frozenset[str] | None,
) -> Iterator[Diagnostic]:
    """Diagnostics for one template or expression at `path`; `names` are the names it may read.

    `inputs` are the declared inputs; None when they are not known (a pack on its own).
    """
    if not needs_parse(text, expression=expression):
        return
    error, free, filters, read_inputs, tests = _analyse(text, expression)
    what = "expression" if expression else "template"
    if expression and _looks_like_template(text):
        yield Diagnostic.at(
            codes.EXPRESSION_SYNTAX,
            f"{path[-1]!s} is a bare expression, not a template",
            doc.template_span(path, error[1] if error else None),
            path=path,
            hint=_bare_hint(text),
        )
        return
    if error is not None:
        message, lineno = error
        code = codes.EXPRESSION_SYNTAX if expression else codes.TEMPLATE_SYNTAX
        yield Diagnostic.at(
            code,
            f"{what} does not compile: {message}",
            doc.template_span(path, lineno),
            path=path,
            hint="check the {{ }} / {% %} pairs and the expression syntax",
        )
        return
    yield from _call_problems(doc, path, text, what, expression=expression, names=names)
    if _LITERAL_INDEX.search(text) is not None:
        yield from _index_problems(doc, path, text, what, expression=expression)
    if (
        free <= names
        and ALLOWED_FILTERS.issuperset(filters)
        and not tests
        and (not read_inputs or inputs is None or inputs.issuperset(read_inputs))
    ):
        return  # the common case: nothing to report
    yield from _name_problems(
        doc,
        path,
        text,
        what,
        names=names,
        inputs=inputs,
        found=(free, filters, read_inputs, tests),
    )


def _call_problems(
    doc: LoadedDocument,
    path: JsonPath,
    text: str,
    what: str,
    *,
    expression: bool,
    names: frozenset[str],
) -> Iterator[Diagnostic]:
    """A call of a context function (`fact('K')`) whose arguments do not fit it (CD286)."""
    for name, problem in misfit_calls(text, expression):
        if name in names:
            yield Diagnostic.at(
                codes.HELPER_ARGUMENTS,
                f"{what} calls {problem}",
                _find(doc, path, text, name),
                path=path,
                hint=f"call it as {CALLED_AS[name]}",
            )


# A number, boolean or none literal followed by `[` (the tree decides).
_LITERAL_INDEX = re.compile(r"(?:\d|\b(?:true|false|none|True|False|None))\s*\)*\s*\[")


def _index_problems(
    doc: LoadedDocument, path: JsonPath, text: str, what: str, *, expression: bool
) -> Iterator[Diagnostic]:
    """An item of a number, boolean or none literal (`2[0]`, `1[0:1]`): such a value has
    no items, so the lookup is always undefined and fails the run where it is used
    (CD287, a warning: `| default(...)` or `is defined` may still read it)."""
    from jinja2 import nodes

    ast, error = parse(text, expression)
    if ast is None or error is not None:
        return
    for node in ast.find_all(nodes.Getitem):
        value = node.node.value if isinstance(node.node, nodes.Const) else ""
        if value is None or isinstance(value, int | float):
            yield Diagnostic.at(
                codes.LITERAL_INDEX,
                f"{what} takes an item of the literal {_literal_text(value)}, which has no "
                "items: its value is always undefined",
                doc.template_span(path, node.lineno),
                path=path,
                hint="take items of a list, a mapping or a text; or drop the '[...]'",
                severity=Severity.WARNING,
            )


def _literal_text(value: object) -> str:
    """A literal as a template writes it."""
    return (
        "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    )


def _looks_like_template(text: str) -> bool:
    """An expression written as a template: `when: "{{ count('x') > 0 }}"`."""
    stripped = text.strip()
    return (stripped.startswith("{{") and stripped.endswith("}}")) or "{%" in stripped


def _bare_hint(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("{{") and stripped.endswith("}}") and "{{" not in stripped[2:-2]:
        return f'drop the {{{{ }}}}: "{stripped[2:-2].strip()}"'
    return "drop the {{ }} and {% %}: write one expression, e.g. \"count('seeds') > 0\""


def _name_problems(
    doc: LoadedDocument,
    path: JsonPath,
    text: str,
    what: str,
    *,
    names: frozenset[str],
    inputs: frozenset[str] | None,
    found: tuple[frozenset[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]],
) -> Iterator[Diagnostic]:
    """Unknown names, filters, tests and inputs of a template; `found` is what it reads.

    (free names, filters used, input names, tests used)
    """
    free, filters, read_inputs, tests = found

    def unknown(
        code: str, message: str, name: str, known: frozenset[str], fallback: str
    ) -> Diagnostic:
        guess = did_you_mean(name, known)
        return Diagnostic.at(
            code,
            message,
            _find(doc, path, text, name),
            path=path,
            hint=suggestion(guess) if guess else fallback or f"known: {_list(known)}",
        )

    for name in sorted(free - names):
        as_input = inputs is not None and name in inputs and "inputs" in names
        yield unknown(
            codes.UNKNOWN_NAME,
            f"{what} reads unknown name {quoted(name)}",
            name,
            frozenset() if as_input else names,
            f"{quoted(name)} is an input: read it as 'inputs.{name}'"
            if as_input
            else f"known names: {', '.join(sorted(names))}",
        )
    for name in sorted(set(filters) - ALLOWED_FILTERS):
        yield unknown(
            codes.UNKNOWN_FILTER,
            f"{what} uses unknown filter {quoted(name)}",
            name,
            ALLOWED_FILTERS,
            "see docs/errors.md for the allowed filters",
        )
    known = known_tests() if tests else frozenset()
    for name in sorted(set(tests) - known):
        message = f"{what} uses unknown test {quoted(name)}"
        yield unknown(codes.UNKNOWN_TEST, message, name, known, "")
    if "inputs" in names and inputs is not None:
        for name in sorted(set(read_inputs) - inputs):
            yield unknown(
                codes.UNKNOWN_INPUT,
                f"{what} reads undeclared input {quoted(name)}",
                name,
                inputs,
                f"declare it under 'inputs:' ({name}: {{description: ...}})",
            )


def _list(words: frozenset[str]) -> str:
    return ", ".join(sorted(words))


def _find(doc: LoadedDocument, path: JsonPath, text: str, word: str) -> SourceSpan:
    """The span of the first whole-word `word` in the template (one not after a `.` first),
    mapped onto the file."""
    start = _first_words(text).get(word)
    if start is None and re.fullmatch(r"\w+", word) is None:
        match = re.search(rf"(?<![\w.]){re.escape(word)}\b", text) or re.search(
            rf"\b{re.escape(word)}\b", text
        )
        start = None if match is None else match.start()
    if start is None:
        return doc.template_span(path, None)
    lineno = text.count("\n", 0, start) + 1
    return doc.template_span(path, lineno, word)


@lru_cache(maxsize=64)
def _first_words(text: str) -> dict[str, int]:
    """Where each whole word of `text` is first written, not after a `.` if it is so
    anywhere: found in one pass (a template may hold thousands of unknown names)."""
    first: dict[str, int] = {}
    after_dot: dict[str, int] = {}
    for match in re.finditer(r"\w+", text):
        start = match.start()
        found = after_dot if start and text[start - 1] == "." else first
        found.setdefault(match.group(), start)
    return after_dot | first
