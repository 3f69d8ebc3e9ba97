"""What each template and expression reads from the context: its key reads, found once per text.

`reads(text, expression)` lists every read of a context key, in the order
written: through `facts.K`, `facts['K']`, `facts.get('K')` (and the same of
`proposals`), `count('K')`, `has('K')`, `fact('K', ...)` and `data_of('K')`,
where `'K'` may also be string literals joined by `~` or `+` (`count('no' ~
'tes')`, bounded: `_joined_keys`). A read whose key is not a literal
(`facts[name]`, `count(inputs.key)`, a bare `facts | length`, `facts.items()`)
has `key` None: the analysis stops there and
says so (never guesses). A name the template binds itself (`{% for fact in ...
%}`, `{% set count = ... %}`) is its own, and reads nothing.

Trees come from the fast path (`_fastjinja.parsed`) when it accepts the text,
else from Jinja's parse (`_jinja_parse.parse`, shared with the other checks):
both are read by class and field names. A fast-path tree is shared by every
text that differs only in its literals, so its reads are found once per tree,
with literals as `Slot`s, and resolved per text. `read_span` locates a read in
the file, at the key's own characters inside the string: every read of a
template is located in one pass over its text, however many are reported.

`misfit_calls` lists the calls of the context functions whose arguments do
not fit their parameters (`fact('K')`), from the same trees.

`inferred_dependencies(templates, own)` is `dependencies: auto`: the keys a
suggestor's templates read with a literal name, less the keys it writes (a
suggestor is not re-run on its own output; its guard reads that key), in the
order first read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from converge_dsl._escapes import quoted
from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.frontend import _joined_keys
from converge_dsl.frontend._mininodes import Slot

if TYPE_CHECKING:
    from converge_dsl.frontend.document import LoadedDocument

NAMESPACES = frozenset({"facts", "proposals"})
FUNCTIONS = frozenset({"count", "has", "fact", "data_of"})
_WHOLE = frozenset({"items", "keys", "values"})  # mapping methods that read every key
_MENTIONS = re.compile(r"facts|proposals|count|has|fact|data_of")
_MARKERS = ("{{", "{%")


class KeyRead(tuple[str | None, str, str]):
    """One read of a context key: `key` (None: named at run time), through `via` (`facts`,
    `count`...) written as `style`: `.` (`facts.K`), `[` (`facts['K']`), `get`
    (`facts.get('K')`), `(` (`count('K')`) or `` (the whole namespace). A tuple, so the
    checks compare and hash reads cheaply (a pipeline has thousands)."""

    __slots__ = ()

    def __new__(cls, key: str | None, via: str, style: str) -> KeyRead:
        return tuple.__new__(cls, (key, via, style))

    @property
    def key(self) -> str | None:
        return self[0]

    @property
    def via(self) -> str:
        return self[1]

    @property
    def style(self) -> str:
        return self[2]

    @property
    def written(self) -> str:
        """How the read is written, for messages: `count('K')`, `facts.K`, `facts[...]`."""
        key = "..." if self.key is None else quoted(self.key)
        if self.style == ".":
            return f"{self.via}.{self.key}"
        if self.style == "[":
            return f"{self.via}[{key}]"
        if self.style == "get":
            return f"{self.via}.get({key})"
        if self.style == "(":
            return f"{self.via}({key}, ...)" if self.via == "fact" else f"{self.via}({key})"
        return self.via


# A read before its literal is resolved: (via, style, the key: text, a `Slot`, another
# literal, the `Parts` of a joined key, or `_NAMED_LATER`).
_Raw = tuple[str, str, object]
_NAMED_LATER = object()


@lru_cache(maxsize=8192)
def reads(text: str, expression: bool) -> tuple[KeyRead, ...]:
    """Every key read of one template (or expression), in the order written."""
    if _MENTIONS.search(text) is None or not (expression or any(m in text for m in _MARKERS)):
        return ()
    from converge_dsl.frontend._fastjinja import parsed

    trees = parsed(text, expression=expression)
    found: list[KeyRead] = []
    if trees is not None:
        for _, tree, literals in trees:
            for via, style, ref in _tree_reads(tree):
                _add(found, via, style, _resolved(ref, literals))
        return tuple(found)
    from converge_dsl.frontend._jinja_parse import parse

    ast, error = parse(text, expression)
    if ast is None or error is not None:
        return ()  # the template checks report it
    raw: list[_Raw] = []
    _walk(ast, _bound(ast), raw)
    for via, style, ref in raw:
        _add(found, via, style, _resolved(ref, ()))
    return tuple(found)


@lru_cache(maxsize=64)
def ordinals(text: str, expression: bool) -> tuple[int, ...]:
    """For each read of `reads(text, expression)`, how many equal reads come before it."""
    seen: dict[KeyRead, int] = {}
    found: list[int] = []
    for read in reads(text, expression):
        found.append(seen.get(read, 0))
        seen[read] = found[-1] + 1
    return tuple(found)


def _resolved(ref: object, literals: tuple[object, ...]) -> object:
    """The key `ref` names, its `Slot`s and joined parts read from `literals`."""
    if isinstance(ref, Slot):
        return literals[ref.index]
    if isinstance(ref, _joined_keys.Parts):
        key = _joined_keys.join(ref, literals)
        return _NAMED_LATER if key is None else key
    return ref


# The context functions' parameters (`compiler._scope._helpers`) and how each is called.
PARAMETERS: dict[str, tuple[str, ...]] = {
    "count": ("key",),
    "has": ("key",),
    "fact": ("key", "fact_id"),
    "data_of": ("key",),
}
CALLED_AS = {
    "count": "count('KEY')",
    "has": "has('KEY')",
    "fact": "fact('KEY', 'ID')",
    "data_of": "data_of('KEY')",
}


@lru_cache(maxsize=4096)
def misfit_calls(text: str, expression: bool) -> tuple[tuple[str, str], ...]:
    """(function, what is wrong) of each call of a context function (`count`, `has`,
    `fact`, `data_of`, not bound by the template) whose arguments do not fit its
    parameters: the run would fail there with Python's TypeError."""
    if _MENTIONS.search(text) is None or not (expression or any(m in text for m in _MARKERS)):
        return ()
    from converge_dsl.frontend._fastjinja import parsed

    trees = parsed(text, expression=expression)
    bound: frozenset[str] = frozenset()
    roots: list[Any]  # the fast path's trees or Jinja's (read by class and field names)
    if trees is not None:
        roots = [tree for _, tree, _ in trees]
    else:
        from converge_dsl.frontend._jinja_parse import parse

        ast, error = parse(text, expression)
        if ast is None or error is not None:
            return ()  # the template checks report it
        roots, bound = [ast], _bound(ast)
    found: list[tuple[str, str]] = []
    for root in roots:
        _calls(root, bound, found)
    return tuple(found)


def _calls(node: Any, bound: frozenset[str], out: list[tuple[str, str]]) -> None:
    if type(node).__name__ == "Call" and _free(node.node, FUNCTIONS, bound):
        spread = getattr(node, "dyn_args", None) or getattr(node, "dyn_kwargs", None)
        problem = None if spread else _misfit(node.node.name, node.args, node.kwargs)
        if problem is not None:
            out.append((node.node.name, problem))
    for child in node.iter_child_nodes():
        _calls(child, bound, out)


def _misfit(name: str, args: list[Any], kwargs: list[Any]) -> str | None:
    """What is wrong with a call of `name` (`fact() without 'fact_id'`), or None."""
    parameters = PARAMETERS[name]
    if len(args) > len(parameters):
        return f"{name}() with {len(args)} arguments; it takes {len(parameters)}"
    given = set(parameters[: len(args)])
    for keyword in kwargs:
        if keyword.key not in parameters:
            return f"{name}() with an argument {quoted(keyword.key)} it does not take"
        if keyword.key in given:
            return f"{name}() with {quoted(keyword.key)} twice"
        given.add(keyword.key)
    missing = [p for p in parameters if p not in given]
    if missing:
        return f"{name}() without {' and '.join(repr(m) for m in missing)}"
    return None


def _add(found: list[KeyRead], via: str, style: str, key: object) -> None:
    if key is _NAMED_LATER or isinstance(key, str):
        found.append(KeyRead(key if isinstance(key, str) else None, via, style))
    # another literal (`facts[0]`) names no key: the template fails at run time, not here


# id(tree) -> (tree, its reads): the tree is kept with its entry, so an id is never reused
# while it is cached (trees are shared by the fast path's caches).
_TREES: dict[int, tuple[Any, tuple[_Raw, ...]]] = {}


def _tree_reads(tree: Any) -> tuple[_Raw, ...]:
    entry = _TREES.get(id(tree))
    if entry is None or entry[0] is not tree:
        if len(_TREES) > 8192:
            _TREES.clear()
        raw: list[_Raw] = []
        _walk(tree, frozenset(), raw)
        entry = _TREES[id(tree)] = (tree, tuple(raw))
    return entry[1]


def _bound(ast: Any) -> frozenset[str]:
    """The names a Jinja template binds anywhere (`for` targets, `set`, macros and their
    arguments)."""
    from jinja2 import nodes

    names = {node.name for node in ast.find_all(nodes.Name) if node.ctx in ("store", "param")}
    return frozenset(names | {macro.name for macro in ast.find_all(nodes.Macro)})


def _free(node: Any, names: frozenset[str], bound: frozenset[str]) -> bool:
    """`node` is a `Name` among `names` that the template does not bind."""
    return type(node).__name__ == "Name" and node.name in names and node.name not in bound


def _argument(args: list[Any]) -> object:
    """The first argument as a key: its literal (a value or a `Slot`), the `Parts` of
    literals it joins, or `_NAMED_LATER`."""
    first = args[0]
    if type(first).__name__ == "Const":
        return first.value
    joined = _joined_keys.parts(first)
    return _NAMED_LATER if joined is None else joined


def _walk(node: Any, bound: frozenset[str], out: list[_Raw]) -> None:
    """Append the reads under `node` (Jinja's nodes or the fast path's) to `out`, in order."""
    kind = type(node).__name__
    children: Iterable[Any]
    if kind == "Call":
        callee, args = node.node, node.args
        if args and _free(callee, FUNCTIONS, bound):
            out.append((callee.name, "(", _argument(args)))
        elif (
            args
            and type(callee).__name__ == "Getattr"
            and callee.attr == "get"
            and _free(callee.node, NAMESPACES, bound)
        ):
            out.append((callee.node.name, "get", _argument(args)))
        elif not _free(callee, FUNCTIONS, bound):
            _walk(callee, bound, out)
        extra = [getattr(node, "dyn_args", None), getattr(node, "dyn_kwargs", None)]
        children = [*args, *(k.value for k in node.kwargs), *(e for e in extra if e is not None)]
    elif kind == "Getattr" and _free(node.node, NAMESPACES, bound):
        whole = node.attr in _WHOLE
        out.append((node.node.name, "" if whole else ".", _NAMED_LATER if whole else node.attr))
        return
    elif kind == "Getitem" and _free(node.node, NAMESPACES, bound):
        out.append((node.node.name, "[", _argument([node.arg])))
        children = [node.arg]
    elif kind == "Name":
        if _free(node, NAMESPACES, bound):
            out.append((node.name, "", _NAMED_LATER))
        return
    else:
        children = node.iter_child_nodes()
    for child in children:
        _walk(child, bound, out)


@lru_cache(maxsize=4096)
def stop_guards(text: str) -> frozenset[str]:
    """The keys an expression reads only as a stop: `not has('K')`, `count('K') == 0`,
    `count('K') < 3`, under `and`/`or` only. Facts are append-only, so such a read can
    only turn the expression false as `K` grows: a suggestor needs no re-run on `K`."""
    from converge_dsl.frontend._fastjinja import parsed

    trees = parsed(text, expression=True)
    if trees is not None:
        (_, tree, literals), *_ = trees
    else:
        from converge_dsl.frontend._jinja_parse import parse

        ast, error = parse(text, True)
        if ast is None or error is not None:
            return frozenset()
        tree, literals = ast.body[0].nodes[0], ()  # type: ignore[attr-defined]
    polarity: dict[str, set[int]] = {}
    _polarity(tree, 1, literals, polarity)
    return frozenset(key for key, signs in polarity.items() if signs == {-1})


_STOPS = {"lt": -1, "lteq": -1, "eq": 0, "ne": 1, "gt": 1, "gteq": 1}  # count('K') OP number
_MIRROR = {"lt": "gt", "lteq": "gteq", "gt": "lt", "gteq": "lteq", "eq": "eq", "ne": "ne"}


def _polarity(node: Any, sign: int, literals: tuple[object, ...], out: dict[str, set[int]]) -> None:
    """Record, per key read under `node`, the sign of its effect on the whole (1: a new fact
    can turn it true, -1: only false, 0: either)."""
    kind = type(node).__name__
    if kind in ("Op", "And", "Or"):
        for child in node.iter_child_nodes():
            _polarity(child, sign, literals, out)
        return
    if kind == "Not":
        _polarity(node.node, -sign, literals, out)
        return
    if kind == "Compare" and len(node.ops) == 1:
        left, op, right = node.expr, node.ops[0].op, node.ops[0].expr
        if _counts(right) is not None:
            left, right, op = right, left, _MIRROR.get(op, op)
        counted, number = _counts(left), _number(right, literals)
        key = _resolved(counted, literals)
        if isinstance(key, str) and op in _STOPS and number is not None:
            stop = -1 if op == "eq" and number == 0 else _STOPS[op]
            out.setdefault(key, set()).add(sign * stop)
            return
    found: list[_Raw] = []
    _walk(node, frozenset(), found)
    for via, style, ref in found:
        key = _resolved(ref, literals)
        if isinstance(key, str):
            # `has('K')` and a bare `count('K')` grow true as K does; any other read: either
            effect = sign if kind == "Call" and style == "(" and via in ("has", "count") else 0
            out.setdefault(key, set()).add(effect)


def _counts(node: Any) -> object:
    """The key (a literal, a `Slot` or joined `Parts`) when `node` is `count('K')`, else None."""
    if type(node).__name__ != "Call" or not node.args or node.kwargs:
        return None
    callee = node.node
    if type(callee).__name__ != "Name" or callee.name != "count":
        return None
    key = _argument(node.args)
    return None if key is _NAMED_LATER else key


def _number(node: Any, literals: tuple[object, ...]) -> float | None:
    if type(node).__name__ != "Const":
        return None
    value = literals[node.value.index] if isinstance(node.value, Slot) else node.value
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def inferred_dependencies(
    templates: Iterable[tuple[str, bool]], own: Iterable[str]
) -> tuple[str, ...]:
    """`dependencies: auto`: the keys the `(text, is an expression)` templates read by name,
    less `own` (the suggestor's targets)."""
    own = set(own)
    keys: dict[str, None] = {}
    for text, expression in templates:
        for read in reads(text, expression):
            if read.key is not None and read.key not in own:
                keys[read.key] = None
    return tuple(keys)


@lru_cache(maxsize=256)
def _unnamed_spans(text: str, via: str, style: str) -> tuple[tuple[int, int, int], ...]:
    """Where each read through `via` written as `style` whose key is named at run time is,
    in `text`: the `via`'s characters (start, end, and the end again: one piece)."""
    tail = {
        "": r"(?:\s*\.\s*(?:items|keys|values)\b|\b(?!\s*[\[(.]))",
        "(": r"\s*\((?!\s*['\"])",
        "[": r"\s*\[(?!\s*['\"])",
        "get": r"\s*\.\s*get\s*\((?!\s*['\"])",
    }[style]
    pattern = re.compile(rf"(?<![\w.])(?P<via>{via}){tail}")
    return tuple((*match.span("via"), match.end("via")) for match in pattern.finditer(text))


_VIA = "|".join(sorted(NAMESPACES | FUNCTIONS))
# A key read by name: `facts.K` (group `attr`), or the opening of its literal argument:
# `facts.get(`, `facts[`, `count(`.
_NAMED = re.compile(
    rf"(?<![\w.])(?P<via>{_VIA})"
    r"(?:\s*\.\s*(?P<get>get\s*\()|\s*\.\s*(?P<attr>\w+)|(?P<item>\s*\[)|(?P<call>\s*\())"
)
_Spans = dict[tuple[str, str, str], list[tuple[int, int, int]]]


@lru_cache(maxsize=64)
def _spans(text: str) -> _Spans:
    """(key, via, style) -> where each read of it is written in `text`, in order: every
    read found in one pass over the text (a template may hold thousands; each is located
    once, however many of them a check reports)."""
    found: _Spans = {}
    for match in _NAMED.finditer(text):
        via, attr = match["via"], match["attr"]
        if attr is not None:
            found.setdefault((attr, via, "."), []).append((*match.span("attr"), match.end("attr")))
            continue
        style = "get" if match["get"] is not None else "[" if match["item"] is not None else "("
        argument = _joined_keys.argument(text, match.end())
        if argument is not None:
            found.setdefault((argument[0], via, style), []).append(argument[1])
    return found


def read_span(
    doc: LoadedDocument, path: JsonPath, text: str, read: KeyRead, nth: int = 0
) -> SourceSpan:
    """Where the `nth` (0-based) read like `read` of the template at `path` is, in the file:
    the key's characters inside the string (the joined literals of a joined key, its first
    literal when they cross the file's lines: `LoadedDocument.joined_span`; the function or
    namespace for a key named at run time), mapped through the source map; the template's
    first line if not found."""
    if read.key is None:
        spans: Sequence[tuple[int, int, int]] = _unnamed_spans(text, read.via, read.style)
    else:
        spans = _spans(text).get((read.key, read.via, read.style), ())
    if not spans:
        return doc.template_span(path, None)
    return doc.joined_span(path, text, *spans[min(nth, len(spans) - 1)])


def word_span(doc: LoadedDocument, path: JsonPath, text: str, word: str) -> SourceSpan:
    """Where the first whole-word `word` of the template at `path` is, in the file."""
    match = re.search(rf"(?<![\w.]){re.escape(word)}(?!\w)", text)
    if match is None:
        return doc.template_span(path, None)
    return doc.text_span(path, text, *match.span())
