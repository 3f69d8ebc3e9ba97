"""A fast, exact analysis of common templates and expressions, without importing jinja2.

Most templates in a pipeline (and most checks in a pack) are text with a few
`{{ name.attr | filter('x') }}` blocks, or expressions such as
`count('x') >= 2 and not has('y')`, `facts.tickets[0].data.category == 'billing'`
or `{'queue': 'billing', 'ticket': facts.tickets[0].id}`. For those, importing
and running Jinja costs far more than everything else `validate` does. This
module tokenises with one small regular expression and recognises a strict
*subset* of Jinja's expression grammar by recursive descent, level by level as
Jinja's parser does: whatever it accepts, Jinja accepts with the same free
names, filters and `inputs.X` / `inputs['X']` reads, and the same tree shape
(`_mininodes`, read by the data-field checks). Anything else (statements,
comments, `is` tests, conditionals, slices, escapes in strings, line breaks
inside a block, braces inside a `{{ }}` block, an attribute, item or call of a
literal, which Jinja folds while it compiles, `%` after a literal...) returns None and goes to
Jinja, which also words errors.

Accepted grammar (Jinja's levels; `cmp` is ==, !=, <, <=, >, >=, in, not in)::

    or      := not (('and' | 'or') not)*   (Jinja's or and and levels, flattened)
    not     := 'not' not | compare         compare := math (cmp math)*
    math    := concat (('+' | '-') concat)*      concat := math2 ('~' math2)*
    math2   := pow (('*' | '/' | '//' | '%') pow)*  pow := unary ('**' unary)*
               (Jinja's four arithmetic levels and nodes: Add, Sub, Concat, Mul, Div...)
    unary   := ('-' | '+') unary | primary postfix*, then ('|' NAME call?)* unless after a sign
    postfix := '.' NAME | '[' or ']' | call
    primary := NAME | STRING | NUMBER | true | false | none | '(' or ')'
             | '[' (or (',' or)*)? ']' | '{' (or ':' or (',' or ':' or)*)? '}'
    call    := '(' (or ,)* (NAME '=' or ,)* ')'      (no trailing comma, no repeated name)
"""

from __future__ import annotations

import re
from functools import lru_cache

from converge_dsl.frontend import _mininodes as n

Analysis = tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]
Parsed = tuple[tuple[int, n.Node], ...]

_TOKEN = re.compile(
    r"[ \t]+"
    r"|(?P<num>(?:0|[1-9][0-9]*)(?:\.[0-9]+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<str>'[^'\\{}\n]*'|\"[^\"\\{}\n]*\")"
    r"|(?P<op>==|!=|>=|<=|\*\*|//|[-+*/%~<>|.,()\[\]{}:=])"
)
BLOCK = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)  # a `{{ }}` block: what `parsed` reads
_CONSTANTS = {"true": True, "false": False, "none": None, "True": True, "False": False}
_CONSTANTS["None"] = None
# Names Jinja gives a meaning in expressions; anything but the operators below is refused.
_RESERVED = frozenset({"and", "or", "not", "in", "is", "if", "else", "for", "recursive"})
_COMPARE = {"==": "eq", "!=": "ne", ">=": "gteq", "<=": "lteq", ">": "gt", "<": "lt"}
# Jinja's arithmetic levels, loosest first; None is the concatenation level (`~`).
_LEVELS: tuple[dict[str, type[n.BinExpr]] | None, ...] = (
    {"+": n.Add, "-": n.Sub},
    None,
    {"*": n.Mul, "/": n.Div, "//": n.FloorDiv, "%": n.Mod},
    {"**": n.Pow},
)
_MAX_DEPTH = 32


class _Refused(Exception):
    """The text is outside the subset: Jinja must decide."""


class _Parser:
    __slots__ = ("depth", "filters", "inputs", "kinds", "names", "pos", "slots", "values")

    def __init__(self, kinds: list[str], values: list[str]) -> None:
        self.kinds = [*kinds, "end", "end"]  # two sentinels: look-ahead never runs off the end
        self.values = [*values, "", ""]
        self.pos = 0
        self.depth = 0
        self.slots = 0  # literals seen so far: the skeleton holds placeholders (see `_skeleton`)
        self.names: set[str] = set()
        self.filters: list[str] = []
        self.inputs: list[str | n.Slot] = []

    def take(self, value: str) -> bool:
        # A string token keeps its quotes, so it never equals an operator or a word.
        if self.values[self.pos] == value:
            self.pos += 1
            return True
        return False

    def expect(self, value: str) -> None:
        if not self.take(value):
            raise _Refused

    def name(self) -> str:
        value = self.values[self.pos]
        if self.kinds[self.pos] != "name" or value in _RESERVED or value in _CONSTANTS:
            raise _Refused
        self.pos += 1
        return value

    def expr(self) -> n.Node:
        """`or` and `and` levels as one: the walk reads their operands only."""
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Refused
        parts = [self.negation()]
        while self.values[self.pos] in ("and", "or") and self.kinds[self.pos] == "name":
            self.pos += 1
            parts.append(self.negation())
        self.depth -= 1
        return parts[0] if len(parts) == 1 else n.Op(parts)

    def negation(self) -> n.Node:
        if self.take("not"):
            return n.Not(self.negation())
        return self.compare()

    def compare(self) -> n.Node:
        first = self.arithmetic()
        ops: list[n.Node] = []
        while True:
            value = self.values[self.pos]
            if value in _COMPARE:
                self.pos += 1
                op = _COMPARE[value]
            elif value == "in":
                self.pos += 1
                op = "in"
            elif value == "not" and self.values[self.pos + 1] == "in":
                self.pos += 2
                op = "notin"
            else:
                break
            ops.append(n.Operand(op, self.arithmetic()))
        return n.Compare(first, ops) if ops else first

    def arithmetic(self) -> n.Node:
        """`+` and `-` over `~` over `*`, `/`, `//`, `%` over `**`: Jinja's levels and nodes
        (the walk checks each operator's two operands)."""
        return self._binary(0)

    def _binary(self, level: int) -> n.Node:
        if level == len(_LEVELS):
            return self.unary(True)
        operators = _LEVELS[level]
        left = self._binary(level + 1)
        if operators is None:  # `~`: one Concat of every operand
            parts = [left]
            while self.values[self.pos] == "~" and self.kinds[self.pos] == "op":
                self.pos += 1
                parts.append(self._binary(level + 1))
            return left if len(parts) == 1 else n.Concat(parts)
        while self.values[self.pos] in operators and self.kinds[self.pos] == "op":
            node_class = operators[self.values[self.pos]]
            if node_class is n.Mod and isinstance(left, n.Const):
                raise _Refused  # `'%s' % x` is refused (`sandbox.refusal`): Jinja decides
            self.pos += 1
            left = node_class(left, self._binary(level + 1))
        return left

    def unary(self, with_filter: bool) -> n.Node:
        if self.values[self.pos] in ("-", "+") and self.kinds[self.pos] == "op":
            sign = n.Neg if self.values[self.pos] == "-" else n.Pos
            self.pos += 1
            node: n.Node = sign(self.unary(False))
        else:
            node = self.primary()
        node = self.postfix(node)
        while with_filter and self.take("|"):
            name = self.name()
            self.filters.append(name)
            args, kwargs = self.call() if self.values[self.pos] == "(" else ([], [])
            node = n.Filter(node, name, args, kwargs)
        return node

    def postfix(self, node: n.Node) -> n.Node:
        while True:
            literal = isinstance(node, (n.Const, n.List, n.Dict))
            if literal and self.values[self.pos] in (".", "[", "("):
                # Jinja folds a lookup on a literal while it compiles, and may fail
                # there (`[0]['m'] and x`); a call of one is refused (`sandbox.refusal`):
                # Jinja decides.
                raise _Refused
            if self.take("."):
                attr = self.name()
                if isinstance(node, n.Name) and node.name == "inputs":
                    self.inputs.append(attr)
                node = n.Getattr(node, attr)
            elif self.take("["):
                arg = self.expr()
                self.expect("]")
                if isinstance(node, n.Name) and node.name == "inputs" and isinstance(arg, n.Const):
                    self.inputs.append(arg.value)
                node = n.Getitem(node, arg)
            elif self.values[self.pos] == "(":
                args, kwargs = self.call()
                node = n.Call(node, args, kwargs)
            else:
                return node

    def primary(self) -> n.Node:
        kind, value = self.kinds[self.pos], self.values[self.pos]
        if kind in ("str", "num"):
            if value != "'_'":  # a literal `_skeleton` did not take out (`1.x`): Jinja decides
                raise _Refused
            self.pos += 1
            self.slots += 1
            return n.Const(n.Slot(self.slots - 1))
        if kind == "name" and value in _CONSTANTS:
            self.pos += 1
            return n.Const(_CONSTANTS[value])
        if kind == "name":
            name = self.name()
            self.names.add(name)
            return n.Name(name)
        if self.take("("):
            node = self.expr()
            self.expect(")")
            return node
        if self.take("["):
            return n.List(self.sequence("]", pairs=False))
        if self.take("{"):
            return n.Dict(self.sequence("}", pairs=True))
        raise _Refused

    def sequence(self, closer: str, *, pairs: bool) -> list[n.Node]:
        items: list[n.Node] = []
        if self.take(closer):
            return items
        while True:
            item = self.expr()
            if pairs:
                self.expect(":")
                item = n.Pair(item, self.expr())
            items.append(item)
            if self.take(closer):
                return items
            self.expect(",")

    def call(self) -> tuple[list[n.Node], list[n.Node]]:
        self.expect("(")
        args: list[n.Node] = []
        kwargs: list[n.Node] = []
        if self.take(")"):
            return args, kwargs
        while True:
            if self.kinds[self.pos] == "name" and self.values[self.pos + 1] == "=":
                keyword = self.name()
                if any(k.key == keyword for k in kwargs):  # type: ignore[attr-defined]
                    raise _Refused
                self.pos += 1
                kwargs.append(n.Keyword(keyword, self.expr()))
            elif kwargs:  # a positional argument after a keyword argument
                raise _Refused
            else:
                args.append(self.expr())
            if self.take(")"):
                return args, kwargs
            self.expect(",")


_LITERAL = re.compile(
    r"'[^'\\{}\n]*'|\"[^\"\\{}\n]*\"|(?<![\w.])(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?![\w.])"
)
Literals = tuple[object, ...]
Tree = tuple[n.Node, Literals]


@lru_cache(maxsize=8192)
def _skeleton(text: str) -> tuple[str, Literals]:
    """`text` with every string and number literal replaced by `'_'`, and the literals in order.

    Expressions that differ only in their literals (`urgency >= 3`, `urgency >= 4`)
    share one skeleton, parsed once; trees read a literal through its `Slot`.
    """
    literals: list[object] = []
    parts: list[str] = []
    end = 0
    for match in _LITERAL.finditer(text):
        token = match.group()
        if token[0] in "'\"":
            literals.append(token[1:-1])
        else:
            literals.append(float(token) if "." in token else int(token))
        parts.append(text[end : match.start()])
        parts.append("'_'")
        end = match.end()
    if not literals:
        return text, ()
    parts.append(text[end:])
    return "".join(parts), tuple(literals)


@lru_cache(maxsize=8192)
def _parse_skeleton(
    text: str,
) -> tuple[frozenset[str], tuple[str, ...], tuple[object, ...], n.Node] | None:
    """(free names, filters, inputs read (names or `Slot`s), tree) of one skeleton."""
    if "\n" in text:
        return None
    kinds: list[str] = []
    values: list[str] = []
    end = 0
    for match in _TOKEN.finditer(text):
        if match.start() != end:
            return None  # a character no token matches
        end = match.end()
        kind = match.lastgroup
        if kind is not None:
            kinds.append(kind)
            values.append(match.group())
    if end != len(text):
        return None
    parser = _Parser(kinds, values)
    try:
        node = parser.expr()
    except _Refused:
        return None
    if parser.pos != len(kinds):
        return None
    return frozenset(parser.names), tuple(parser.filters), tuple(parser.inputs), node


@lru_cache(maxsize=8192)
def _expression(text: str) -> tuple[Analysis, Tree] | None:
    """The analysis and (tree, literals) of one expression (or the inside of one `{{ }}`)."""
    skeleton, literals = _skeleton(text)
    found = _parse_skeleton(skeleton)
    if found is None:
        return None
    names, filters, reads, node = found
    values = [literals[r.index] if isinstance(r, n.Slot) else r for r in reads]
    inputs = tuple(v for v in values if isinstance(v, str))  # `inputs[0]` reads no input
    return (names, filters, inputs), (node, literals)


@lru_cache(maxsize=8192)
def parsed(text: str, *, expression: bool) -> tuple[tuple[int, n.Node, Literals], ...] | None:
    """(line within the template, tree, literals) of each expression, when `text` is in the subset.

    A tree's `Const` nodes hold a `Slot`: `literals[slot.index]` is the value.
    """
    if expression:
        found = _expression(text)
        return None if found is None else ((1, *found[1]),)
    if "{%" in text or "{#" in text:
        return None
    if "{{" in BLOCK.sub("", text):
        return None
    trees: list[tuple[int, n.Node, Literals]] = []
    for match in BLOCK.finditer(text):
        block = match.group(1)
        if "{" in block or "}" in block:
            return None
        found = _expression(block)
        if found is None:
            return None
        trees.append((text.count("\n", 0, match.start()) + 1, *found[1]))
    return tuple(trees)


@lru_cache(maxsize=8192)
def analyse(text: str, *, expression: bool) -> Analysis | None:
    """(free names, filters, `inputs.X` names) when `text` is in the subset, else None."""
    if expression:
        found = _expression(text)
        return None if found is None else found[0]
    if parsed(text, expression=False) is None:
        return None
    names: set[str] = set()
    filters: list[str] = []
    inputs: list[str] = []
    for match in BLOCK.finditer(text):
        found = _expression(match.group(1))
        if found is None:
            return None
        names.update(found[0][0])
        filters.extend(found[0][1])
        inputs.extend(found[0][2])
    return frozenset(names), tuple(filters), tuple(inputs)
