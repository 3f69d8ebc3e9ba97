"""A walk over one template's Jinja AST that follows facts and their data to key schemas.

It tracks what each expression is, as far as the front end can tell: the
`facts` (or `proposals`) namespace, the facts of one key (`facts.tickets`,
filtered by `selectattr`, `sort`, ...), one fact (`facts.tickets[0]`,
`fact('tickets', 'x')`, `... | first`, a loop variable), the data of a key's
facts (`.data`, `data_of('tickets')` elements, llm `item`) as a place in its
schema (`DataShape`), or nothing known. Reads it can check become findings:
an unknown fact attribute, a data field the schema does not have, a
comparison with a literal that can never hold. Anything it does not
understand is "nothing known": no finding, never a false alarm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import nodes

from converge_dsl import codes
from converge_dsl.diagnostics import Severity, did_you_mean
from converge_dsl.frontend._dataschema import DataShape

FACT_FIELDS = ("confidence", "content", "data", "id", "key", "provenance")
_FACT_EXTRA = frozenset({"promotion"})  # admitted facts also carry their promotion record
_MAPPING_METHODS = frozenset({"get", "items", "keys", "values"})
_SAME_LIST = frozenset(
    {"sort", "unique", "list", "reverse", "selectattr", "rejectattr", "select", "reject"}
)
_ONE = frozenset({"first", "last", "random"})


@dataclass(frozen=True)
class _Namespace:
    """`facts` or `proposals`."""


@dataclass(frozen=True)
class _Facts:
    key: str


@dataclass(frozen=True)
class _Fact:
    key: str


@dataclass(frozen=True)
class _List:
    element: Any


@dataclass(frozen=True)
class Finding:
    """One problem: its code, words, and where in the template (line, text to find)."""

    code: str
    message: str
    hint: str | None
    lineno: int
    needle: str
    severity: Severity


class Walker:
    """Walks templates against `schemas` (key -> schema root); `item` is the llm item's shape."""

    def __init__(self, schemas: Mapping[str, Any], item: DataShape | None = None) -> None:
        self.schemas = schemas
        self.item = item
        self.findings: list[Finding] = []

    def walk(self, ast: nodes.Node) -> list[Finding]:
        self._statements(ast, {})
        return self.findings

    # --- statements ----------------------------------------------------------------
    def _statements(self, node: nodes.Node, scope: dict[str, Any]) -> None:
        if isinstance(node, nodes.For):
            element = self._element(self.value(node.iter, scope))
            inner = dict(scope)
            for name in node.target.find_all(nodes.Name):
                inner[name.name] = None
            if isinstance(node.target, nodes.Name):
                inner[node.target.name] = element
            inner["loop"] = None
            for child in (*node.body, *node.else_, *((node.test,) if node.test else ())):
                self._statements(child, inner)
            return
        if isinstance(node, nodes.Assign) and isinstance(node.target, nodes.Name):
            scope[node.target.name] = self.value(node.node, scope)
            return
        if isinstance(node, nodes.Expr):
            self.value(node, scope)
            return
        for child in node.iter_child_nodes():
            self._statements(child, scope)

    # --- expressions ---------------------------------------------------------------
    def value(self, node: nodes.Node, scope: dict[str, Any]) -> Any:
        """What `node` is (see the module docstring); None when nothing is known."""
        if isinstance(node, nodes.Name):
            return self._name(node.name, scope)
        if isinstance(node, nodes.Getattr):
            return self.attribute(self.value(node.node, scope), node.attr, node.lineno, ".")
        if isinstance(node, nodes.Getitem):
            return self._getitem(node, scope)
        if isinstance(node, nodes.Call):
            return self._call(node, scope)
        if isinstance(node, nodes.Filter):
            return self._filter(node, scope)
        if isinstance(node, nodes.Compare):
            self._compare(node, scope)
            return None
        for child in node.iter_child_nodes():
            self.value(child, scope)
        return None

    def _name(self, name: str, scope: dict[str, Any]) -> Any:
        if name in scope:
            return scope[name]
        if name in ("facts", "proposals"):
            return _Namespace()
        if name == "item":
            return self.item
        return None

    def attribute(self, base: Any, name: str, lineno: int, mark: str) -> Any:
        """What `base.name` (or `base['name']`) is; records an unknown attribute or field."""
        if isinstance(base, _Namespace):
            return _Facts(name)
        if isinstance(base, _Fact):
            if name == "data":
                schema = self.schemas.get(base.key)
                return (
                    None if schema is None else DataShape(schema, schema, f"key {base.key!r} data")
                )
            if name not in FACT_FIELDS and name not in _FACT_EXTRA:
                self._unknown_attribute(name, lineno, mark)
            return None
        if isinstance(base, DataShape):
            known, shape, names = base.field(name)
            shape = (
                None if shape is None else DataShape(shape.root, shape.node, f"{base.label}.{name}")
            )
            if known is False and name not in _MAPPING_METHODS:
                guess = did_you_mean(name, names)
                self.findings.append(
                    Finding(
                        codes.UNKNOWN_DATA_FIELD,
                        f"{base.label} has no field {name!r}",
                        f"did you mean {guess!r}?"
                        if guess
                        else f"its fields: {', '.join(names) or '(none)'}",
                        lineno,
                        _needle(name, mark),
                        Severity.ERROR,
                    )
                )
            return shape
        return None

    def _unknown_attribute(self, name: str, lineno: int, mark: str) -> None:
        guess = did_you_mean(name, FACT_FIELDS)
        self.findings.append(
            Finding(
                codes.UNKNOWN_FACT_ATTRIBUTE,
                f"facts have no attribute {name!r}",
                (f"did you mean {guess!r}? " if guess else "")
                + f"a fact has {', '.join(FACT_FIELDS)}",
                lineno,
                _needle(name, mark),
                Severity.ERROR,
            )
        )

    def _getitem(self, node: nodes.Getitem, scope: dict[str, Any]) -> Any:
        base = self.value(node.node, scope)
        arg = node.arg
        if isinstance(arg, nodes.Slice):
            self.value(arg, scope)
            return base if isinstance(base, _Facts | _List) else None
        if not isinstance(arg, nodes.Const):
            self.value(arg, scope)
            return None
        if isinstance(arg.value, str):
            return self.attribute(base, arg.value, node.lineno, "[")
        if isinstance(arg.value, int):
            return self._element(base)
        return None

    def _element(self, base: Any) -> Any:
        """What one element of `base` is when iterated or indexed."""
        if isinstance(base, _Facts):
            return _Fact(base.key)
        if isinstance(base, _List):
            return base.element
        if isinstance(base, DataShape):
            return base.element()
        return None

    def _call(self, node: nodes.Call, scope: dict[str, Any]) -> Any:
        for child in (*node.args, *(k.value for k in node.kwargs)):
            self.value(child, scope)
        first = node.args[0] if node.args else None
        key = first.value if isinstance(first, nodes.Const) else None
        if (
            isinstance(node.node, nodes.Name)
            and node.node.name not in scope
            and isinstance(key, str)
        ):
            if node.node.name == "fact":
                return _Fact(key)
            if node.node.name == "data_of":
                return _List(self.attribute(_Fact(key), "data", node.lineno, "."))
        self.value(node.node, scope)
        return None

    def _filter(self, node: nodes.Filter, scope: dict[str, Any]) -> Any:
        base = self.value(node.node, scope) if node.node is not None else None
        for child in (*node.args, *(k.value for k in node.kwargs)):
            self.value(child, scope)
        element = self._element(base)
        paths = self._attribute_arguments(node)
        for text, lineno in paths:
            self._path(element, text, lineno)
        if node.name in _ONE:
            return element
        if node.name in _SAME_LIST and isinstance(base, _Facts | _List):
            return base
        if node.name == "map" and paths:
            return _List(self._path(element, paths[0][0], None))
        return None

    @staticmethod
    def _attribute_arguments(node: nodes.Filter) -> list[tuple[str, int]]:
        """The dotted attribute paths a filter reads on each element (`attribute='data.x'`)."""
        found = [
            (k.value.value, k.value.lineno)
            for k in node.kwargs
            if k.key == "attribute" and isinstance(k.value, nodes.Const)
        ]
        first = node.args[0] if node.args else None
        if node.name in ("selectattr", "rejectattr") and isinstance(first, nodes.Const):
            found.append((first.value, first.lineno))
        return [(text, lineno) for text, lineno in found if isinstance(text, str)]

    def _path(self, element: Any, text: str, lineno: int | None) -> Any:
        """Follow `a.b.c` from `element`; records findings only when `lineno` is given."""
        current = element
        for part in text.split("."):
            if current is None:
                return None
            if lineno is None:
                saved = self.findings
                self.findings = []
                current = self.attribute(current, part, 1, "")
                self.findings = saved
            else:
                current = self.attribute(current, part, lineno, "")
        return current

    def _compare(self, node: nodes.Compare, scope: dict[str, Any]) -> None:
        left = node.expr
        left_value = self.value(left, scope)
        for operand in node.ops:
            right_value = self.value(operand.expr, scope)
            if operand.op in ("eq", "ne"):
                self._literal(left_value, operand.expr)
                self._literal(right_value, left)
            elif operand.op in ("in", "notin"):
                for literal in _items(operand.expr):
                    self._literal(left_value, literal)
            left, left_value = operand.expr, right_value

    def _literal(self, shape: Any, literal: nodes.Node) -> None:
        if not isinstance(shape, DataShape) or not isinstance(literal, nodes.Const):
            return
        problem = shape.literal_problem(literal.value)
        if problem is None:
            return
        kind, why = problem
        self.findings.append(
            Finding(
                codes.OUTSIDE_ENUM if kind == "enum" else codes.MISMATCHED_LITERAL,
                f"this comparison is never true: {why}",
                "compare with one of the values the key's schema allows",
                literal.lineno,
                repr(literal.value) if isinstance(literal.value, str) else str(literal.value),
                Severity.WARNING,
            )
        )


def _items(node: nodes.Node) -> list[nodes.Node]:
    """The literal elements of a list literal (Jinja's name analysis may fold it to a Const)."""
    if isinstance(node, nodes.List | nodes.Tuple):
        return list(node.items)
    if isinstance(node, nodes.Const) and isinstance(node.value, list | tuple):
        return [nodes.Const(v, lineno=node.lineno) for v in node.value]
    return []


def _needle(name: str, mark: str) -> str:
    """The text to find for a field read as `.name`, `['name']` or inside a string."""
    if mark == ".":
        return f".{name}"
    if mark == "[":
        return f"[{name!r}]"
    return name
