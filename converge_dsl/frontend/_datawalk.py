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

It reads Jinja's nodes and the fast path's (`_mininodes`) alike, by class
name and field names, so it never imports jinja2 itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge_dsl import codes
from converge_dsl._escapes import quoted
from converge_dsl._record import Record
from converge_dsl.diagnostics import Severity, did_you_mean, suggestion
from converge_dsl.frontend import _joined_keys
from converge_dsl.frontend._dataschema import DataShape, shown_value
from converge_dsl.frontend._mininodes import Const, Slot
from converge_dsl.sandbox import FACT_FIELDS

_FACT_EXTRA = frozenset({"promotion"})  # admitted facts also carry their promotion record
_MAPPING_METHODS = frozenset({"get", "items", "keys", "values"})
_SAME_LIST = frozenset(
    {"sort", "unique", "list", "reverse", "selectattr", "rejectattr", "select", "reject"}
)
_ONE = frozenset({"first", "last", "random"})
_BINARY = frozenset({"Add", "Sub", "Mul", "Div", "FloorDiv", "Mod", "Pow"})
_ORDER = {"lt": "<", "lteq": "<=", "gt": ">", "gteq": ">="}
# selectattr/rejectattr tests: those that compare for equality, and those that order.
_EQUAL_TESTS = frozenset({"eq", "equalto", "==", "sameas"})
_UNEQUAL_TESTS = frozenset({"ne", "!="})
_ORDER_TESTS = {
    "lt": "<", "lessthan": "<", "<": "<", "le": "<=", "<=": "<=",
    "gt": ">", "greaterthan": ">", ">": ">", "ge": ">=", ">=": ">=",
}  # fmt: skip
# The position of `attribute` among a filter's positional arguments (Jinja's signatures).
_ATTRIBUTE_AT = {"sum": 0, "groupby": 0, "unique": 1, "min": 1, "max": 1, "sort": 2}
# Jinja node classes that are expressions (`Output` holds them directly, not in an `Expr`).
_EXPRESSIONS = frozenset(
    {"Name", "Getattr", "Getitem", "Call", "Filter", "Compare", "Const", "List", "Dict", "Tuple"}
    | {"And", "Or", "Not", "CondExpr", "Concat", "Neg", "Pos", "Add", "Sub", "Mul", "Div"}
    | {"FloorDiv", "Mod", "Pow", "Test", "Slice"}
)


class _Namespace:
    """`facts` or `proposals`."""

    __slots__ = ()


class _Facts(Record):
    _fields = ("key",)
    __slots__ = _fields

    def __init__(self, key: str) -> None:
        self.key = key


class _Fact(Record):
    _fields = ("key",)
    __slots__ = _fields

    def __init__(self, key: str) -> None:
        self.key = key


class _List(Record):
    _fields = ("element",)
    __slots__ = _fields

    def __init__(self, element: Any) -> None:
        self.element = element


# (line, needle) -> how many reads of that text on that line a walk met (`Walker.reads`)
Reads = dict[tuple[int, str], int]


class Finding(Record):
    """One problem: its code, words, and where in the template (line, text to find, and
    which of the reads of that text on that line it is, from 0: `Walker.reads`)."""

    _fields = ("code", "message", "hint", "lineno", "needle", "severity", "occurrence")
    __slots__ = _fields

    def __init__(  # noqa: PLR0917 (positional, as the fields are ordered)
        self,
        code: str,
        message: str,
        hint: str | None,
        lineno: int,
        needle: str,
        severity: Severity,
        occurrence: int = 0,
    ) -> None:
        self.code = code
        self.message = message
        self.hint = hint
        self.lineno = lineno
        self.needle = needle
        self.severity = severity
        self.occurrence = occurrence


class Walker:
    """Walks templates against `schemas` (key -> schema root); `item` is the llm item's shape."""

    def __init__(self, schemas: Mapping[str, Any], item: DataShape | None = None) -> None:
        self.schemas = schemas
        self.item = item
        self.findings: list[Finding] = []
        self.literals: tuple[object, ...] = ()  # the fast path's literal values (`Slot`s)
        # the reads of `.name` and `['name']` met, findings or not, walked in the order they
        # are written: two findings of one text on one line are told apart by it
        self.reads: Reads = {}
        # the occurrence of each literal met (by `id`), counted as reads are: a literal's
        # finding (CD304, CD305, CD255) or a filter's attribute string's is marked on it
        self.occurrences: dict[int, int] = {}

    def walk(self, ast: Any) -> list[Finding]:
        """Findings of a Jinja template tree."""
        self._statements(ast, {})
        return self.findings

    def walk_expressions(self, trees: Any) -> list[Finding]:
        """Findings of the fast path's (line, expression tree, literals) triples."""
        for lineno, tree, literals in trees:
            self.literals = literals
            first = len(self.findings)
            self.value(tree, {})
            self.findings[first:] = [
                f._replace(lineno=f.lineno + lineno - 1) for f in self.findings[first:]
            ]
        return self.findings

    def const(self, node: Any) -> Any:
        """The value of a `Const` node, Jinja's or the fast path's (through its `Slot`)."""
        value = node.value
        return self.literals[value.index] if isinstance(value, Slot) else value

    def name_in(self, node: Any) -> Any:
        """The key a call's argument or a namespace's subscript names: a `Const`'s value, or
        the string literals it joins (`'ti' ~ 'ckets'`, read as the key checks read them:
        `_joined_keys`); None for anything else."""
        if type(node).__name__ == "Const":
            return self.const(node)
        joined = _joined_keys.parts(node)
        return None if joined is None else _joined_keys.join(joined, self.literals)

    # --- statements ----------------------------------------------------------------
    def _statements(self, node: Any, scope: dict[str, Any]) -> None:
        kind = type(node).__name__
        if kind == "For":
            element = self._element(self.value(node.iter, scope))
            inner = dict(scope)
            for name in _names(node.target):
                inner[name] = None
            if type(node.target).__name__ == "Name":
                inner[node.target.name] = element
            inner["loop"] = None
            for child in (*((node.test,) if node.test else ()), *node.body, *node.else_):
                self._statements(child, inner)
            return
        if kind == "Assign" and type(node.target).__name__ == "Name":
            scope[node.target.name] = self.value(node.node, scope)
            return
        if kind in _EXPRESSIONS or kind == "Expr":
            self.value(node, scope)
            return
        for child in node.iter_child_nodes():
            self._statements(child, scope)

    # --- expressions ---------------------------------------------------------------
    def value(self, node: Any, scope: dict[str, Any]) -> Any:
        """What `node` is (see the module docstring); None when nothing is known."""
        kind = type(node).__name__
        if kind == "Name":
            return self._name(node.name, scope)
        if kind == "Const":
            self._count(node)
            return None
        if kind == "Getattr":
            return self.attribute(self.value(node.node, scope), node.attr, node.lineno, ".")
        if kind == "Getitem":
            return self._getitem(node, scope)
        if kind == "Call":
            return self._call(node, scope)
        if kind == "Filter":
            return self._filter(node, scope)
        if kind == "Compare":
            self._compare(node, scope)
            return None
        if kind == "CondExpr":  # in the order written: `a.x if b.x else c.x`
            for child in (node.expr1, node.test, node.expr2):
                if child is not None:
                    self.value(child, scope)
            return None
        if kind in _BINARY:
            left, right = self.value(node.left, scope), self.value(node.right, scope)
            self._operand(left, node.operator, node.right)
            self._operand(right, node.operator, node.left)
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

    def _count(self, node: Any) -> None:
        """Count the literal `node` among the reads of its text on its line."""
        needle = _literal_needle(self.const(node))
        occurrence = self.reads.get((node.lineno, needle), 0)
        self.reads[node.lineno, needle] = occurrence + 1
        self.occurrences[id(node)] = occurrence

    def _at(self, literal: Any) -> tuple[str, int]:
        """(needle, occurrence) of the literal node `literal` (see `_count`)."""
        return _literal_needle(self.const(literal)), self.occurrences.get(id(literal), 0)

    def attribute(
        self, base: Any, name: str, lineno: int, mark: str, at: tuple[str, int] | None = None
    ) -> Any:
        """What `base.name` (or `base['name']`) is; records an unknown attribute or field,
        marked on `at` (needle, occurrence) when given (a filter's attribute string)."""
        needle = _needle(name, mark)
        occurrence = self.reads.get((lineno, needle), 0)
        if mark:
            self.reads[lineno, needle] = occurrence + 1
        if at is not None:
            needle, occurrence = at
        if isinstance(base, _Namespace):
            return _Facts(name)
        if isinstance(base, _Fact):
            if name == "data":
                schema = self.schemas.get(base.key)
                if schema is None:
                    return None
                named = quoted(base.key)
                return DataShape(schema, schema, f"key {named} data", f"the schema of key {named}")
            if name not in FACT_FIELDS and name not in _FACT_EXTRA:
                self._unknown_attribute(name, lineno, needle, occurrence)
            return None
        if isinstance(base, DataShape):
            known, shape, names = base.field(name)
            shape = None if shape is None else shape.at(shape.node, f"{base.label}.{name}")
            if name in _MAPPING_METHODS:
                return shape
            if known is False:
                guess = did_you_mean(name, names)
                self.findings.append(
                    Finding(
                        codes.UNKNOWN_DATA_FIELD,
                        f"{base.label} has no field {quoted(name)}",
                        suggestion(guess)
                        if guess
                        else f"its fields: {', '.join(names) or '(none)'}",
                        lineno,
                        needle,
                        Severity.ERROR,
                        occurrence,
                    )
                )
            elif known is None and base.unnamed(name):
                guess = did_you_mean(name, names)
                self.findings.append(
                    Finding(
                        codes.FIELD_NOT_IN_SCHEMA,
                        f"{base.label} has no field {quoted(name)}: {base.source} names only "
                        f"{', '.join(names)}, so reading it fails at run time unless the data "
                        "has it anyway",
                        suggestion(guess) + f" (or add {quoted(name)} to the schema's properties)"
                        if guess
                        else f"add {quoted(name)} to the schema's properties, or read a field "
                        "it names",
                        lineno,
                        needle,
                        Severity.WARNING,
                        occurrence,
                    )
                )
            return shape
        return None

    def _unknown_attribute(self, name: str, lineno: int, needle: str, occurrence: int) -> None:
        guess = did_you_mean(name, FACT_FIELDS)
        self.findings.append(
            Finding(
                codes.UNKNOWN_FACT_ATTRIBUTE,
                f"facts have no attribute {quoted(name)}",
                (suggestion(guess) + " " if guess else "") + f"a fact has {', '.join(FACT_FIELDS)}",
                lineno,
                needle,
                Severity.ERROR,
                occurrence,
            )
        )

    def _getitem(self, node: Any, scope: dict[str, Any]) -> Any:
        base = self.value(node.node, scope)
        arg = node.arg
        if type(arg).__name__ == "Slice":
            self.value(arg, scope)
            return base if isinstance(base, _Facts | _List) else None
        if type(arg).__name__ == "Const":
            self._count(arg)  # `['bill']` is found by the text of a literal `'bill'` too
            value = self.const(arg)
        else:
            # `facts['ti' ~ 'ckets']` names a key, read as the key checks read it, and
            # `data['categ' ~ 'ory']` a field, as `data['category']` does
            value = self.name_in(arg)
            if value is None:
                self.value(arg, scope)
                return None
        if isinstance(value, str):
            return self.attribute(base, value, node.lineno, "[")
        if isinstance(value, int) and not isinstance(value, bool):
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

    def _call(self, node: Any, scope: dict[str, Any]) -> Any:
        self.value(node.node, scope)  # first, as written: `x.get(y.z)`
        for child in (*node.args, *(k.value for k in node.kwargs)):
            self.value(child, scope)
        first = node.args[0] if node.args else None
        key = None if first is None else self.name_in(first)
        callee = node.node
        if type(callee).__name__ == "Name" and callee.name not in scope and isinstance(key, str):
            if callee.name == "fact":
                return _Fact(key)
            if callee.name == "data_of":
                return _List(self.attribute(_Fact(key), "data", node.lineno, ""))
        return None

    def _filter(self, node: Any, scope: dict[str, Any]) -> Any:
        base = self.value(node.node, scope) if node.node is not None else None
        for child in (*node.args, *(k.value for k in node.kwargs)):
            self.value(child, scope)
        element = self._element(base)
        paths = self._attribute_arguments(node)
        for text, literal in paths:
            self._path(element, text, literal)
        if node.name in ("selectattr", "rejectattr"):
            self._tested(node, element)
        if node.name in _ONE:
            return element
        if node.name in _SAME_LIST and isinstance(base, _Facts | _List):
            return base
        if node.name == "map" and paths:
            return _List(self._path(element, paths[0][0], None))
        return None

    def _attribute_arguments(self, node: Any) -> list[tuple[str, Any]]:
        """The dotted attribute paths a filter reads on each element (`attribute='data.x'`),
        each with its literal."""
        found = [
            k.value
            for k in node.kwargs
            if k.key == "attribute" and type(k.value).__name__ == "Const"
        ]
        first: Any = node.args[0] if node.args else None
        if node.name in ("selectattr", "rejectattr") and type(first).__name__ == "Const":
            found.append(first)
        at = _ATTRIBUTE_AT.get(node.name)
        if at is not None and len(node.args) > at and type(node.args[at]).__name__ == "Const":
            found.append(node.args[at])
        return [(self.const(x), x) for x in found if isinstance(self.const(x), str)]

    def _path(self, element: Any, text: str, literal: Any) -> Any:
        """Follow `a.b.c` from `element`; records findings, marked on the attribute string
        `literal`, only when it is given."""
        current = element
        parts = text.split(".")
        if literal is not None:
            for part in parts[1:]:  # the text `.x` of 'data.x' is found as a read `.x` is
                place = (literal.lineno, _needle(part, "."))
                self.reads[place] = self.reads.get(place, 0) + 1
        for part in parts:
            if current is None:
                return None
            if literal is None:
                saved = self.findings
                self.findings = []
                current = self.attribute(current, part, 1, "")
                self.findings = saved
            else:
                current = self.attribute(current, part, literal.lineno, "", self._at(literal))
        return current

    def _compare(self, node: Any, scope: dict[str, Any]) -> None:
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
            elif operand.op in _ORDER:
                self._operand(left_value, _ORDER[operand.op], operand.expr)
                self._operand(right_value, _ORDER[operand.op], left)
            left, left_value = operand.expr, right_value

    def _literal(self, shape: Any, literal: Any) -> None:
        if not isinstance(shape, DataShape) or type(literal).__name__ != "Const":
            return
        value = self.const(literal)
        problem = shape.literal_problem(value)
        if problem is None:
            return
        kind, why = problem
        self.findings.append(
            Finding(
                codes.OUTSIDE_ENUM if kind == "enum" else codes.MISMATCHED_LITERAL,
                f"this comparison is never true: {why}",
                "compare with one of the values the key's schema allows",
                literal.lineno,
                self._at(literal)[0],
                Severity.WARNING,
                self._at(literal)[1],
            )
        )

    def _operand(self, shape: Any, operator: str, literal: Any) -> None:
        """A finding when `operator` between the data at `shape` and the literal fails."""
        if not isinstance(shape, DataShape) or type(literal).__name__ != "Const":
            return
        value = self.const(literal)
        why = shape.operand_problem(operator, value)
        if why is None:
            return
        self.findings.append(
            Finding(
                codes.TYPE_MISMATCH,
                f"{shape.label} {operator} {shown_value(value)} fails at run time: {why}",
                "use a literal of its type, or convert one side first (`| int`, `| string`)",
                literal.lineno,
                self._at(literal)[0],
                Severity.WARNING,
                self._at(literal)[1],
            )
        )

    def _tested(self, node: Any, element: Any) -> None:
        """`selectattr('data.x', 'eq', 'v')` (or `rejectattr`): the test's literal against
        the schema of the attribute it reads."""
        args = node.args
        if len(args) < 3 or not all(type(a).__name__ == "Const" for a in args[:2]):
            return
        path, test = self.const(args[0]), self.const(args[1])
        if not isinstance(path, str) or not isinstance(test, str):
            return
        shape = self._path(element, path, None)
        if not isinstance(shape, DataShape):
            return
        literal = args[2]
        if test in _ORDER_TESTS:
            self._operand(shape, _ORDER_TESTS[test], literal)
            return
        if test not in _EQUAL_TESTS and test not in _UNEQUAL_TESTS and test != "in":
            return
        for item in _items(literal) if test == "in" else [literal]:
            if type(item).__name__ != "Const":
                continue
            value = self.const(item)
            problem = shape.literal_problem(value)
            if problem is None:
                continue
            kind, why = problem
            keeps = (node.name == "selectattr") == (test not in _UNEQUAL_TESTS)
            self.findings.append(
                Finding(
                    codes.OUTSIDE_ENUM if kind == "enum" else codes.MISMATCHED_LITERAL,
                    f"{node.name}({shown_value(path)}, {shown_value(test)}, ...) "
                    f"{'keeps' if keeps else 'drops'} "
                    f"{'no' if keeps else 'every'} fact: {why} ({shape.source})",
                    "test with one of the values the schema allows",
                    item.lineno,
                    self._at(item)[0],
                    Severity.WARNING,
                    self._at(item)[1],
                )
            )


def _items(node: Any) -> list[Any]:
    """The literal elements of a list literal (Jinja's name analysis may fold it to a Const)."""
    kind = type(node).__name__
    if kind in ("List", "Tuple"):
        return list(node.items)
    if kind == "Const" and isinstance(node.value, list | tuple):
        return [Const(v, lineno=node.lineno) for v in node.value]
    return []


def _names(target: Any) -> list[str]:
    """The names a `for` target binds (`t`, or `k, v`)."""
    if type(target).__name__ == "Name":
        return [target.name]
    return [name for item in getattr(target, "items", ()) for name in _names(item)]


def _literal_needle(value: object) -> str:
    """The text to find for a literal: a string's value in quotes (`'bill'`), else its
    value after `=` (`=True`, `=2.5`), found however Jinja lets it be written (`"bill"`,
    `'bi\\x6cl'`, `true`, `2.50`)."""
    return f"'{value}'" if isinstance(value, str) else f"={value}"


def _needle(name: str, mark: str) -> str:
    """The text to find for a field read as `.name`, `['name']` (`[name`: one literal or
    joined ones, `['na' ~ 'me']`) or inside a string."""
    if mark == ".":
        return f".{name}"
    if mark == "[":
        return f"[{name}"
    return name
