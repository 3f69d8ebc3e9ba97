"""The expression nodes the fast path builds: Jinja's node names and fields, without jinja2.

The data-field walk (`_datawalk`) reads both these and Jinja's own nodes, by
class name and field names only, so a template the fast path accepts is never
parsed by Jinja. Only expression nodes exist here (the fast path has no
statements); arithmetic has Jinja's binary nodes (`Add`, `Sub`, `Mul`, `Div`,
`FloorDiv`, `Mod`, `Pow`, each with its `operator`) and `Concat`, whose
operands the walk checks against their types; `Not`, `Neg` and `Pos` are
Jinja's unary nodes; `Op` stands for `and` and `or`, whose operands are all
the walks need.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class Node:
    """A node: its fields in order (`fields`) and its line within the template."""

    __slots__ = ("lineno",)
    lineno: int
    fields: tuple[str, ...] = ()

    def __init__(self, *values: Any, lineno: int = 1) -> None:
        for name, value in zip(self.fields, values, strict=True):
            setattr(self, name, value)
        self.lineno = lineno

    def iter_child_nodes(self) -> Iterator[Node]:
        for name in self.fields:
            value = getattr(self, name)
            if isinstance(value, Node):
                yield value
            elif isinstance(value, list):
                yield from (v for v in value if isinstance(v, Node))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.fields)
        return f"{type(self).__name__}({inner})"


class Slot:
    """The place of a literal in its expression's literal list (see `_fastjinja.parsed`)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"Slot({self.index})"


class Name(Node):
    name: str
    __slots__ = ("name",)
    fields = ("name",)


class Const(Node):
    value: Any
    __slots__ = ("value",)
    fields = ("value",)


class Getattr(Node):
    node: Node
    attr: str
    __slots__ = ("attr", "node")
    fields = ("node", "attr")


class Getitem(Node):
    node: Node
    arg: Node
    __slots__ = ("arg", "node")
    fields = ("node", "arg")


class Keyword(Node):
    key: str
    value: Node
    __slots__ = ("key", "value")
    fields = ("key", "value")


class Call(Node):
    node: Node
    args: list[Node]
    kwargs: list[Keyword]
    __slots__ = ("args", "kwargs", "node")
    fields = ("node", "args", "kwargs")


class Filter(Node):
    node: Node
    name: str
    args: list[Node]
    kwargs: list[Keyword]
    __slots__ = ("args", "kwargs", "name", "node")
    fields = ("node", "name", "args", "kwargs")


class Operand(Node):
    op: str
    expr: Node
    __slots__ = ("expr", "op")
    fields = ("op", "expr")


class Compare(Node):
    expr: Node
    ops: list[Node]
    __slots__ = ("expr", "ops")
    fields = ("expr", "ops")


class List(Node):
    items: list[Node]
    __slots__ = ("items",)
    fields = ("items",)


class Pair(Node):
    key: Node
    value: Node
    __slots__ = ("key", "value")
    fields = ("key", "value")


class Dict(Node):
    items: list[Node]
    __slots__ = ("items",)
    fields = ("items",)


class Op(Node):
    """`and` and `or` (flattened: both are monotone, so the walks need only the operands)."""

    nodes: list[Node]
    __slots__ = ("nodes",)
    fields = ("nodes",)


class BinExpr(Node):
    """A binary arithmetic operator (Jinja's `BinExpr`): `left operator right`."""

    left: Node
    right: Node
    operator: str = ""
    __slots__ = ("left", "right")
    fields = ("left", "right")


class Add(BinExpr):
    __slots__ = ()
    operator = "+"


class Sub(BinExpr):
    __slots__ = ()
    operator = "-"


class Mul(BinExpr):
    __slots__ = ()
    operator = "*"


class Div(BinExpr):
    __slots__ = ()
    operator = "/"


class FloorDiv(BinExpr):
    __slots__ = ()
    operator = "//"


class Mod(BinExpr):
    __slots__ = ()
    operator = "%"


class Pow(BinExpr):
    __slots__ = ()
    operator = "**"


class Concat(Node):
    """`a ~ b ~ c`: string concatenation of every operand (Jinja's `Concat`)."""

    nodes: list[Node]
    __slots__ = ("nodes",)
    fields = ("nodes",)


class Not(Node):
    node: Node
    __slots__ = ("node",)
    fields = ("node",)


class Neg(Node):
    node: Node
    __slots__ = ("node",)
    fields = ("node",)


class Pos(Node):
    node: Node
    __slots__ = ("node",)
    fields = ("node",)
