"""A fast, exact analysis of common templates and expressions, without importing jinja2.

Most templates in a pipeline (and most checks in a pack) are text with a few
`{{ name.attr | filter('x') }}` blocks, or expressions such as
`count('x') >= 2 and not has('y')` or `(plan.rows | length) == input.rows | length`.
For those, importing and running Jinja costs far more than everything else
`validate` does. This module tokenises with one small regular expression and
recognises a strict *subset* of Jinja's expression grammar by recursive
descent: whatever it accepts, Jinja accepts with the same free names, filters
and `inputs.X` reads. Anything else (statements, comments, `is` tests,
conditionals, subscripts, dict literals, escapes in strings, line breaks
inside a block...) returns None and goes to Jinja, which also words errors.

Accepted grammar (`or`/`and`/`not`/comparison/arithmetic levels flattened,
since precedence does not change which names are read)::

    expr    := ('not')* operand ((and | or) ('not')* operand | cmp operand | op operand)*
    operand := ('-' | '+')* primary ('.' NAME | call)* ('|' NAME call?)*
    primary := NAME | STRING | NUMBER | true | false | none | '(' expr ')' | '[' expr, ... ']'
    call    := '(' (expr ,)* (NAME '=' expr ,)* ')'      (no trailing comma, no repeated name)
"""

from __future__ import annotations

import re
from functools import lru_cache

Analysis = tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]

_TOKEN = re.compile(
    r"[ \t]+"
    r"|(?P<num>(?:0|[1-9][0-9]*)(?:\.[0-9]+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<str>'[^'\\{}\n]*'|\"[^\"\\{}\n]*\")"
    r"|(?P<op>==|!=|>=|<=|\*\*|//|[-+*/%~<>|.,()\[\]=])"
)
_BLOCK = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_CONSTANTS = frozenset({"true", "false", "none", "True", "False", "None"})
# Names Jinja gives a meaning in expressions; anything but the operators below is refused.
_RESERVED = frozenset({"and", "or", "not", "in", "is", "if", "else", "for", "recursive"})
_BINARY = frozenset({"==", "!=", ">=", "<=", ">", "<", "+", "-", "*", "/", "//", "%", "**", "~"})
_MAX_DEPTH = 32


class _Refused(Exception):
    """The text is outside the subset: Jinja must decide."""


class _Parser:
    __slots__ = ("filters", "inputs", "names", "pos", "tokens")

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.names: set[str] = set()
        self.filters: list[str] = []
        self.inputs: list[str] = []

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ("end", "")

    def take(self, value: str) -> bool:
        if self.peek()[1] == value and self.peek()[0] != "str":
            self.pos += 1
            return True
        return False

    def name(self) -> str:
        kind, value = self.peek()
        if kind != "name" or value in _RESERVED or value in _CONSTANTS:
            raise _Refused
        self.pos += 1
        return value

    def expr(self, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise _Refused
        negatable = True  # `not` may open the expression and follow `and` / `or` only
        while True:
            while negatable and self.take("not"):
                pass
            self.operand(depth)
            kind, value = self.peek()
            negatable = kind == "name" and value in ("and", "or")
            if negatable or (kind == "name" and value == "in"):
                self.pos += 1
            elif kind == "name" and value == "not":  # only as `not in`
                self.pos += 1
                if not self.take("in"):
                    raise _Refused
            elif kind == "op" and value in _BINARY:
                self.pos += 1
            else:
                return

    def operand(self, depth: int) -> None:
        while self.take("-") or self.take("+"):
            pass
        self.primary(depth)
        while True:
            if self.take("."):
                self.name()
            elif self.peek() == ("op", "("):
                self.call(depth)
            else:
                break
        while self.take("|"):
            self.filters.append(self.name())
            if self.peek() == ("op", "("):
                self.call(depth)

    def primary(self, depth: int) -> None:
        kind, value = self.peek()
        if kind in ("str", "num") or (kind == "name" and value in _CONSTANTS):
            self.pos += 1
        elif kind == "name":
            self.names.add(self.name())
            if value == "inputs" and self.peek() == ("op", ".") and self.pos + 1 < len(self.tokens):
                attribute = self.tokens[self.pos + 1]
                if attribute[0] == "name":
                    self.inputs.append(attribute[1])
        elif self.take("("):
            self.expr(depth + 1)
            if not self.take(")"):
                raise _Refused
        elif self.take("["):
            if not self.take("]"):
                self.expr(depth + 1)
                while self.take(","):
                    self.expr(depth + 1)
                if not self.take("]"):
                    raise _Refused
        else:
            raise _Refused

    def call(self, depth: int) -> None:
        self.take("(")
        if self.take(")"):
            return
        keywords: set[str] = set()
        while True:
            kind, _ = self.peek()
            after = self.tokens[self.pos + 1] if self.pos + 1 < len(self.tokens) else ("end", "")
            if kind == "name" and after == ("op", "="):
                keyword = self.name()
                if keyword in keywords:
                    raise _Refused
                keywords.add(keyword)
                self.pos += 1
            elif keywords:  # a positional argument after a keyword argument
                raise _Refused
            self.expr(depth + 1)
            if self.take(")"):
                return
            if not self.take(","):
                raise _Refused


@lru_cache(maxsize=4096)
def _expression(text: str) -> Analysis | None:
    """The analysis of one expression (or the inside of one `{{ }}` block)."""
    if "\n" in text:
        return None
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            return None
        kind = match.lastgroup
        if kind is not None:
            tokens.append((kind, match.group()))
        pos = match.end()
    parser = _Parser(tokens)
    try:
        parser.expr(0)
    except _Refused:
        return None
    if parser.pos != len(tokens):
        return None
    return frozenset(parser.names), tuple(parser.filters), tuple(parser.inputs)


def analyse(text: str, *, expression: bool) -> Analysis | None:
    """(free names, filters, `inputs.X` names) when `text` is in the subset, else None."""
    if expression:
        return _expression(text)
    if "{%" in text or "{#" in text:
        return None
    blocks = _BLOCK.findall(text)
    if "{{" in _BLOCK.sub("", text):
        return None
    names: set[str] = set()
    filters: list[str] = []
    inputs: list[str] = []
    for block in blocks:
        found = _expression(block)
        if found is None:
            return None
        names.update(found[0])
        filters.extend(found[1])
        inputs.extend(found[2])
    return frozenset(names), tuple(filters), tuple(inputs)
