"""A compact source map: YAML marks in flat arrays, located by walking the path.

The loader numbers every node it builds in pre-order and records its marks
(`MarkTree`): four integers per node (line, column, end line, end column,
0-based as libyaml's marks are), one byte for its kind and scalar style, and
for a collection the slice of the edge arrays that lists its children. An
edge holds the child's node number, and for a mapping entry its key (the
same string object the data holds) and the key's four marks. No JSON path is
stored: `NodeSourceMap` finds a path by walking it from the root, one edge
per step (a linear search of a mapping's keys, in C; a key index is built on
first use for a wide mapping). An alias's edge leads to its anchor's node, so
the paths under an alias share the anchor's marks, as they always have.
`NodeLocation` objects are made on lookup only.

A tree that `_reload` made from an earlier one also holds line shifts
(`MarkTree.moved`): node -> lines to add to the marks of that node and of
everything under it (and to the key that names it), summed along the path. An
edit that adds or removes lines moves the entries after it by a few numbers
there instead of rewriting the marks of every node below the edit.
"""

from __future__ import annotations

from array import array
from itertools import chain

from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.frontend.document import NodeLocation, SourceMap

SEQ, MAP = 1, 2  # node kinds; a scalar's kind byte is 0 (plain) or its style's character
# (line, column, end line, end column), 0-based as libyaml's marks are
Marks = tuple[int, int, int, int]
_WIDE = 16  # a mapping with more keys gets a key index on its first lookup


class MarkTree:
    """The loader's record of every node: marks, kinds and child edges (see the module doc)."""

    __slots__ = ("child", "count", "first", "keymarks", "keys", "kind", "marks", "moved", "plain")

    def __init__(self) -> None:
        self.marks = array("i")  # 4 per node
        self.kind = bytearray()  # 1 per node
        self.first = array("i")  # per node: its first edge (collections)
        self.count = array("i")  # per node: how many edges (collections)
        self.child = array("i")  # per edge: the child's node number
        self.keymarks = array("i")  # 4 per edge; -1 for a sequence item
        self.keys: list[str | None] = []  # per edge: the mapping key, None for a sequence item
        self.moved: dict[int, int] = {}  # node -> lines its subtree moved by (see the module doc)
        # no anchor, alias or tag: each entry's data and marks depend on its own text only
        self.plain = False

    def add(self, kind: int, line: int, column: int, end_line: int, end_column: int) -> int:
        """A new node; returns its number."""
        index = len(self.kind)
        self.kind.append(kind)
        self.marks.extend((line, column, end_line, end_column))
        self.first.append(0)
        self.count.append(0)
        return index

    def close(
        self,
        node: int,
        end_line: int,
        end_column: int,
        children: list[int],
        *,
        keys: list[str] | None = None,
        key_marks: list[Marks] | None = None,
    ) -> None:
        """Set a collection's end and its children, in order.

        A mapping gives each child's key and the key's marks; a sequence gives neither.
        """
        self.marks[4 * node + 2] = end_line
        self.marks[4 * node + 3] = end_column
        self.first[node] = len(self.child)
        self.count[node] = len(children)
        self.child.extend(children)
        if keys is None or key_marks is None:
            self.keys.extend([None] * len(children))
            self.keymarks.extend([-1] * (4 * len(children)))
        else:
            self.keys.extend(keys)
            self.keymarks.extend(chain.from_iterable(key_marks))

    def copy_marks(self, source: int, target: int) -> None:
        """Give node `target` the marks of node `source` (a recursive alias, once known)."""
        self.marks[4 * target : 4 * target + 4] = self.marks[4 * source : 4 * source + 4]

    def marks_of(self, node: int) -> Marks:
        line, column, end_line, end_column = self.marks[4 * node : 4 * node + 4]
        return line, column, end_line, end_column

    def span(self, file: str, node: int) -> SourceSpan:
        line, column, end_line, end_column = self.marks[4 * node : 4 * node + 4]
        return SourceSpan(file, line + 1, column + 1, end_line + 1, end_column + 1)

    def edges(self, node: int) -> range:
        """The edge numbers of a collection's children, in order."""
        first = self.first[node]
        return range(first, first + self.count[node])


class NodeSourceMap(SourceMap):
    """A `SourceMap` over a `MarkTree`: a lookup walks the path, O(depth)."""

    __slots__ = ("_paths", "_tree", "_wide")

    def __init__(self, file: str, tree: MarkTree, paths: int) -> None:
        self.file = file
        self._entries = {}
        self._tree = tree
        self._paths = paths  # how many JSON paths have a location (aliases expanded)
        self._wide: dict[int, dict[str | None, int]] = {}

    @property
    def tree(self) -> MarkTree:
        """The marks this map reads (`_reload` builds the next document's from it)."""
        return self._tree

    def _walk(self, path: JsonPath) -> tuple[int, int, int, int]:
        """(node, edge that reached it or -1, how many steps of `path` were found, the lines
        its marks moved by)."""
        tree = self._tree
        moved = tree.moved
        node, edge, shift = 0, -1, 0
        for depth, step in enumerate(path):
            kind = tree.kind[node]
            first, count = tree.first[node], tree.count[node]
            if kind == MAP and type(step) is str:
                if count > _WIDE:
                    index = self._wide.get(node)
                    if index is None:
                        keys = tree.keys
                        index = self._wide[node] = {keys[j]: j for j in range(first, first + count)}
                    found = index.get(step, -1)
                else:
                    try:
                        found = tree.keys.index(step, first, first + count)
                    except ValueError:
                        found = -1
            elif kind == SEQ and isinstance(step, int) and 0 <= step < count:
                found = first + step
            else:
                found = -1
            if found < 0:
                return node, edge, depth, shift
            node, edge = tree.child[found], found
            if moved:
                shift += moved.get(node, 0)
        return node, edge, len(path), shift

    def _location(self, node: int, edge: int, shift: int) -> NodeLocation:
        tree = self._tree
        key_span = None
        if edge >= 0 and tree.keymarks[4 * edge] >= 0:
            line, column, end_line, end_column = tree.keymarks[4 * edge : 4 * edge + 4]
            key_span = SourceSpan(
                self.file, line + shift + 1, column + 1, end_line + shift + 1, end_column + 1
            )
        kind = tree.kind[node]
        style = chr(kind) if kind > MAP else None
        line, column, end_line, end_column = tree.marks[4 * node : 4 * node + 4]
        span = SourceSpan(
            self.file, line + shift + 1, column + 1, end_line + shift + 1, end_column + 1
        )
        return NodeLocation(span=span, key_span=key_span, style=style)

    def get(self, path: JsonPath) -> NodeLocation | None:
        node, edge, found, shift = self._walk(tuple(path))
        return self._location(node, edge, shift) if found == len(path) else None

    def locate(self, path: JsonPath) -> NodeLocation:
        """The location of `path`, or of its nearest ancestor that has one."""
        node, edge, _, shift = self._walk(tuple(path))
        return self._location(node, edge, shift)

    def __len__(self) -> int:
        return self._paths
