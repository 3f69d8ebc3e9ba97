"""Anchors, aliases and located problems for the event builder (`_build`).

An anchor remembers what its node built (the data, the problems and inexact
floats found under it, with paths relative to the anchor, how many nodes it
expands to and how deep it goes). An alias replays that at its own path: a
copy of the data, the problems and floats re-based, and an edge of the
`MarkTree` to the anchor's node (so the paths under an alias are located at
the anchor, as PyYAML's re-walked nodes were). The alias budget counts what
re-walking the expanded nodes would count: every collection met under an
alias adds the number of nodes it expands to (`_Anchor.cost` sums those);
when an alias would exceed `MAX_ALIAS_NODES` or `MAX_DEPTH`, the replay walks
the tree to report the exact node and path. An alias to a node still being
built (a recursive alias) is located at that node once its end is read
(`Pending`).
"""

from __future__ import annotations

from typing import Any

from converge_dsl import codes
from converge_dsl._pyyaml import yaml
from converge_dsl.diagnostics import Diagnostic, JsonPath, SourceSpan, format_path
from converge_dsl.frontend._marks import MAP, SEQ, MarkTree

MAX_DEPTH = 64
MAX_ALIAS_NODES = 100_000


class _Anchor:
    """What an anchored node built, for its aliases to replay."""

    __slots__ = (
        "cost",
        "deepest",
        "done",
        "explicit",
        "height",
        "inexact",
        "inexact_from",
        "mark",
        "node",
        "problems",
        "problems_from",
        "size",
        "style",
        "tag",
        "text",
        "value",
        "waiting",
        "where",
    )

    def __init__(self, node: int, mark: Any, where: int, problems: int, inexact: int) -> None:
        self.node = node
        self.mark = mark  # its start, for a duplicate anchor's error
        self.where = where  # the length of its path
        self.problems_from, self.inexact_from = problems, inexact
        self.done = False
        self.value: Any = None
        self.size, self.cost, self.height, self.deepest = 1, 0, 0, 0
        self.problems: list[tuple[JsonPath, Diagnostic]] = []
        self.inexact: list[tuple[JsonPath, str]] = []
        self.waiting: list[tuple[Pending, int]] = []  # recursive aliases: (problem, leaf node)
        self.tag: str | None = None  # a scalar's resolved tag and text (an alias used as a key)
        self.text: str | None = None
        self.style: str | None = None
        self.explicit = False


class Pending:
    """A problem located at a collection whose end has not been read yet."""

    __slots__ = ("code", "hint", "message", "node", "path")

    def __init__(self, code: str, message: str, path: JsonPath, node: int, hint: str) -> None:
        self.code, self.message, self.path, self.node, self.hint = code, message, path, node, hint


class Replayer:
    """The builder's state, anchors and aliases, and problems (`_build.Builder` reads the nodes)."""

    def __init__(self, parser: Any, file: str, plain: dict[str, str] | None) -> None:
        self.next = parser.get_event
        self.file = file
        self.tree = MarkTree()
        self.problems: list[Diagnostic | Pending] = []
        self.inexact: list[tuple[JsonPath, str]] = []  # floats whose text a float drops
        self.anchors: dict[str, _Anchor] = {}
        self.path: list[str | int] = []
        self.node = 0  # the node number of what `build` last returned
        self.paths = 0  # JSON paths built so far
        self.cost = 0  # sum of the sizes of the collections built so far (see `_Anchor.cost`)
        self.aliased = 0  # nodes expanded by aliases so far, counted as a re-walk counts them
        self.deepest = 0  # the deepest collection so far (an anchor's height)
        # plain text -> its implicit tag, memoised; `complete` when it holds every untagged text
        self.plain: dict[str, str] = {} if plain is None else plain
        self.complete = plain is not None
        self.resolver = yaml.resolver.Resolver()
        self.strings: dict[str, str] = {}  # short scalar texts, shared (`_build._SHARED`)
        self.sizes: dict[int, int] = {}  # node -> nodes it expands to (slow replays only)
        self.plain_only = True  # no anchor, alias or tag met yet (`MarkTree.plain`)

    def scalar(self, tag: str, explicit: bool, text: str, style: str | None, node: int) -> Any:
        raise NotImplementedError  # pragma: no cover - `Builder.scalar`

    # -- anchors and aliases ---------------------------------------------------------------

    def open_anchor(self, name: str, node: int, mark: Any) -> _Anchor:
        self.plain_only = False
        first = self.anchors.get(name)
        if first is not None:
            raise yaml.composer.ComposerError(
                "found duplicate anchor; first occurrence", first.mark, "second occurrence", mark
            )
        record = _Anchor(node, mark, len(self.path), len(self.problems), len(self.inexact))
        record.deepest, self.deepest = self.deepest, len(self.path)
        self.anchors[name] = record
        return record

    def close_anchor(self, record: _Anchor, value: Any, size: int, cost: int) -> None:
        record.value, record.size, record.cost = value, size, cost
        record.height = self.deepest - record.where
        self.deepest = max(self.deepest, record.deepest)
        for pending, leaf in record.waiting:
            self.tree.copy_marks(record.node, leaf)
            self.settle(pending)
        record.waiting = []
        where = record.where
        record.problems = [
            (problem.path[where:], problem)
            for problem in self.problems[record.problems_from :]
            if type(problem) is Diagnostic
        ]
        record.inexact = [
            (path[where:], text) for path, text in self.inexact[record.inexact_from :]
        ]
        record.done = True

    def anchor_of(self, event: Any) -> _Anchor:
        self.plain_only = False
        record = self.anchors.get(event.anchor)
        if record is None:
            raise yaml.composer.ComposerError(None, None, "found undefined alias", event.start_mark)
        return record

    def alias(self, event: Any) -> Any:
        record = self.anchor_of(event)
        self.paths += 1
        if not record.done:  # an alias inside its own anchor
            leaf = self.tree.add(0, 0, 0, 0, 0)  # its marks are the anchor's, once known
            pending = (
                Pending(
                    codes.TOO_DEEP,
                    f"nesting deeper than {MAX_DEPTH} levels",
                    tuple(self.path),
                    record.node,
                    "flatten the structure",
                )
                if len(self.path) >= MAX_DEPTH
                else Pending(
                    codes.ALIAS_BUDGET,
                    "an alias refers to a node that contains it",
                    tuple(self.path),
                    record.node,
                    "recursive structures cannot be turned into JSON",
                )
            )
            self.problems.append(pending)
            record.waiting.append((pending, leaf))
            self.node = leaf
            return None
        self.node = record.node
        if record.text is not None:  # a scalar: read again, as a value
            assert record.tag is not None
            return self.scalar(record.tag, record.explicit, record.text, record.style, record.node)
        self.paths += record.size - 1
        self.cost += record.cost
        depth = len(self.path)
        if depth + record.height >= MAX_DEPTH or self.aliased + record.cost > MAX_ALIAS_NODES:
            problems = len(self.problems)
            self.rewalk(record.node, list(self.path))
            if len(self.problems) > problems or self.aliased > MAX_ALIAS_NODES:
                return None  # a re-walk over the budget stops at once, reporting nothing more
        else:
            self.aliased += record.cost
        self.deepest = max(self.deepest, depth + record.height)
        base = tuple(self.path)
        self.problems += [_rebased(problem, base + rest) for rest, problem in record.problems]
        self.inexact += [(base + rest, text) for rest, text in record.inexact]
        return _copy(record.value)

    def rewalk(self, node: int, path: list[str | int]) -> None:
        """Count the collections under an alias one by one, as a re-walk would: locate a limit."""
        tree = self.tree
        if tree.kind[node] not in (SEQ, MAP):
            return
        span = tree.span(self.file, node)
        if len(path) >= MAX_DEPTH:
            self.fail(
                codes.TOO_DEEP,
                f"nesting deeper than {MAX_DEPTH} levels",
                span,
                hint="flatten the structure",
                path=tuple(path),
            )
            return
        size = self.size_of(node)
        self.aliased += size
        if self.aliased > MAX_ALIAS_NODES:
            if self.aliased - size <= MAX_ALIAS_NODES:
                self.fail(
                    codes.ALIAS_BUDGET,
                    f"aliases expand to more than {MAX_ALIAS_NODES} nodes",
                    span,
                    hint="write the data out instead of nesting aliases",
                    path=tuple(path),
                )
            return
        first = tree.first[node]
        for edge in tree.edges(node):
            key = tree.keys[edge]
            path.append(edge - first if key is None else key)
            self.rewalk(tree.child[edge], path)
            path.pop()

    def size_of(self, node: int) -> int:
        """How many nodes `node` expands to (its aliases followed), without recursion."""
        tree, sizes = self.tree, self.sizes
        stack = [node]
        while stack:
            top = stack[-1]
            if top in sizes:
                stack.pop()
                continue
            if tree.kind[top] not in (SEQ, MAP):
                sizes[top] = 1
                stack.pop()
                continue
            children = [tree.child[edge] for edge in tree.edges(top)]
            missing = [child for child in children if child not in sizes]
            if missing:
                stack += missing
                continue
            sizes[top] = 1 + sum(sizes[child] for child in children)
            stack.pop()
        return sizes[node]

    # -- problems --------------------------------------------------------------------------

    def fail(
        self,
        code: str,
        message: str,
        span: SourceSpan,
        *,
        hint: str | None = None,
        path: JsonPath | None = None,
    ) -> None:
        where = tuple(self.path) if path is None else path
        self.problems.append(Diagnostic.at(code, message, span, path=where, hint=hint))

    def fail_at(self, record: _Anchor, code: str, message: str) -> None:
        """A problem at an anchored node, which may still be open (its end unknown)."""
        if record.done:
            self.fail(code, message, self.tree.span(self.file, record.node))
            return
        pending = Pending(code, message, tuple(self.path), record.node, "")
        self.problems.append(pending)
        record.waiting.append((pending, self.tree.add(0, 0, 0, 0, 0)))

    def settle(self, pending: Pending) -> None:
        """Replace `pending` (if still listed) by its diagnostic, its node's end being known."""
        for at in range(len(self.problems) - 1, -1, -1):
            if self.problems[at] is pending:
                span = self.tree.span(self.file, pending.node)
                self.problems[at] = Diagnostic.at(
                    pending.code,
                    pending.message,
                    span,
                    path=pending.path,
                    hint=pending.hint or None,
                )
                return

    def diagnostics(self) -> list[Diagnostic]:
        return [problem for problem in self.problems if type(problem) is Diagnostic]


def _rebased(problem: Diagnostic, path: JsonPath) -> Diagnostic:
    """`problem` found under an anchor, replayed at an alias: its path (and a message naming it)."""
    message = problem.message
    named = f" in {format_path(problem.path)}"
    if problem.code == codes.DUPLICATE_KEY and message.endswith(named):
        message = message[: -len(named)] + f" in {format_path(path)}"
    return problem._replace(path=path, message=message)


def _copy(value: Any) -> Any:
    """A fresh copy of built data (each alias gets its own objects, as a re-walk built them)."""
    kind = type(value)
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    if kind is list:
        return [_copy(item) for item in value]
    return value
