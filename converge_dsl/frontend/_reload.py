"""Loading an edited text again, re-reading only the entry the edit lies in.

`reload(previous, text)` returns what `load_text(text, previous.file)` returns,
built from `previous` (the document of an earlier text of the same file, as an
editor sends one text after another) and one entry read again: the top-level
entry the edit lies in, or the item or entry of a top-level block list or
mapping it lies in (a suggestor, a key, a model). The other entries' data and
marks are the earlier document's own objects. It returns None where that
cannot be done exactly, and the caller loads the whole text.

Why it is exact. An entry's text runs from the line of its first token (its
key, or its list item's `-`) to the line of the next sibling's first token
(comments and blank lines in between are its own). The text before it and
the text after it are the same as before, and both meet it at line starts.
The entry's new text is parsed alone, after as many empty lines as precede it
(so every mark is the document's), under a line `x:` standing for its
top-level key when it sits one level down, and followed by a line standing
for the next token of the document at the same line and column (`- y` or `y:`
for a sibling, `y:` for the next top-level key, nothing at the end of the
text). The parse must begin where the entry began, give exactly one node, and
then reach that stand-in where the real token sits: libyaml is then in the
same state after the entry as in the whole text (block context, the same
indentation, no open flow collection, scalar or simple key), so the text after
it reads as before, only moved by the lines the edit added or removed, and the
marks of the collections an edit closes (they end at the next token) are
those of the whole text. Moved nodes are moved lazily (`MarkTree.moved`).

It is tried only where nothing but the entry's text decides the entry: the
earlier document has no anchor, alias or tag (an alias reads another entry;
whether a tag counts depends on texts elsewhere) and no float whose text a
float loses, and the texts break lines with `\\n` (or `\\r\\n`) only (libyaml
also breaks lines at `\\r`, NEL, LS and PS). An entry with a problem of its own
(a duplicate key, a YAML 1.1 boolean, a syntax error...) or renamed to a key
its mapping already has is left to the whole load, whose diagnostics are
then the loader's own.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from itertools import accumulate, count
from operator import add
from typing import Any

from converge_dsl._pyyaml import yaml
from converge_dsl.frontend._build import Builder
from converge_dsl.frontend._marks import MAP, SEQ, MarkTree, NodeSourceMap
from converge_dsl.frontend.document import OTHER_BREAKS, LoadedDocument

__all__ = ["reload"]

_STAND_IN = "y"  # the key or item standing for the next token after the entry

Event = Any
MappingEnd = yaml.events.MappingEndEvent
SequenceEnd = yaml.events.SequenceEndEvent
MappingStart = yaml.events.MappingStartEvent
SequenceStart = yaml.events.SequenceStartEvent
Scalar = yaml.events.ScalarEvent
DocumentEnd = yaml.events.DocumentEndEvent
StreamEnd = yaml.events.StreamEndEvent


class _Place:
    """Where the edited entry sits: the edge that leads to it and the lines of its text."""

    __slots__ = ("column", "edge", "first", "parent", "path", "root_edge", "sibling", "stop")

    def __init__(  # noqa: PLR0917 (one record, filled in one place)
        self,
        parent: int,
        edge: int,
        path: tuple[str | int, ...],
        column: int,
        first: int,
        stop: int | None,
        sibling: bool,
        root_edge: int,
    ) -> None:
        self.parent = parent  # the collection holding the entry (0: the root)
        self.edge = edge  # the parent's edge to it
        self.path = path  # the JSON path of its value
        self.column = column  # the column of its first token (the parent's)
        self.first = first  # the line of its first token
        self.stop = stop  # the line of the next token, None at the end of the text
        self.sibling = sibling  # whether that token is the entry's sibling's
        self.root_edge = root_edge  # the root's edge to the entry or to its parent


def reload(previous: LoadedDocument, text: str) -> LoadedDocument | None:
    """`text` loaded re-using `previous`'s unchanged entries; None when it cannot be (see
    the module docstring)."""
    old = previous.text
    if text == old:
        return previous
    source_map = previous.source_map
    if not isinstance(source_map, NodeSourceMap) or previous.inexact:
        return None
    tree = source_map.tree
    if not tree.plain or tree.kind[0] != MAP or not (_lines_plain(old) and _lines_plain(text)):
        return None
    start = _common_prefix(old, text)
    old_stop = len(old) - _common_suffix(old, text, start)
    offsets = _line_offsets(old)
    place = _place(tree, old, offsets, start, old_stop)
    if place is None:
        return None
    begin = offsets[place.first]
    end = len(text) if place.stop is None else offsets[place.stop] + len(text) - len(old)
    piece = text[begin:end]
    if place.stop is not None and not piece.endswith("\n"):
        return None
    if 2 * len(piece) > len(text):  # most of the text: the whole load is as quick
        return None
    read = _read(previous.file, tree, place, piece)
    if read is None:
        return None
    lines = text.count("\n") - old.count("\n")
    return _document(previous, text, source_map, place, read, lines)


# -- where the edit lies ------------------------------------------------------------------


def _place(
    tree: MarkTree, old: str, offsets: list[int], start: int, old_stop: int
) -> _Place | None:
    """The deepest entry (top level, or one level down) whose text holds the edit.

    Text inserted at a line's start (a line typed above an entry) counts as the end
    of the entry before it, whose text then holds it; the entry after it keeps its
    first token's place."""
    at = start - 1 if start == old_stop and start > 0 and old[start - 1] == "\n" else start
    line = bisect_right(offsets, at) - 1
    root_column = tree.marks[1]
    if _char_at(old, offsets, tree.marks[0], root_column) == "{":
        return None
    firsts = _first_lines(tree, 0, 0)
    j = bisect_right(firsts, line) - 1
    if j < 0:
        return None
    stop = firsts[j + 1] if j + 1 < len(firsts) else None
    if stop is not None and old_stop > offsets[stop]:
        return None  # the edit runs into the next entry
    root_edges = tree.edges(0)
    root_edge = root_edges[j]
    key = tree.keys[root_edge]
    assert key is not None
    value = tree.child[root_edge]
    inner = _inner(tree, old, offsets, value, line, old_stop, stop, root_edge, key)
    if inner is not None:
        return inner
    if not _starts_line(old, offsets, firsts[j], root_column, ""):
        return None
    if j > 0 and firsts[j - 1] >= firsts[j]:
        return None
    if stop is not None and (
        stop <= firsts[j] or not _starts_line(old, offsets, stop, root_column, "")
    ):
        return None
    return _Place(0, root_edge, (key,), root_column, firsts[j], stop, stop is not None, root_edge)


def _inner(  # noqa: PLR0917 (the parent's place, unpacked)
    tree: MarkTree,
    old: str,
    offsets: list[int],
    value: int,
    line: int,
    old_stop: int,
    stop: int | None,
    root_edge: int,
    key: str,
) -> _Place | None:
    """The item or entry of the top-level block collection `value` whose text holds the
    edit, or None."""
    kind = tree.kind[value]
    if kind not in (SEQ, MAP):
        return None
    shift = tree.moved.get(value, 0)
    value_line, column = tree.marks[4 * value] + shift, tree.marks[4 * value + 1]
    if _char_at(old, offsets, value_line, column) in ("[", "{"):
        return None  # a flow collection
    firsts = _first_lines(tree, value, shift)
    k = bisect_right(firsts, line) - 1
    if k < 0:
        return None
    if k > 0 and firsts[k - 1] >= firsts[k]:
        return None
    sibling = k + 1 < len(firsts)
    inner_stop = firsts[k + 1] if sibling else stop
    if inner_stop is not None and old_stop > offsets[inner_stop]:
        return None
    dash = "-" if kind == SEQ else ""
    if not _starts_line(old, offsets, firsts[k], column, dash):
        return None
    if sibling and (
        firsts[k + 1] <= firsts[k] or not _starts_line(old, offsets, firsts[k + 1], column, dash)
    ):
        return None
    edge = tree.edges(value)[k]
    step: str | int = k if kind == SEQ else tree.keys[edge] or ""
    return _Place(value, edge, (key, step), column, firsts[k], inner_stop, sibling, root_edge)


def _first_lines(tree: MarkTree, node: int, shift: int) -> list[int]:
    """The line of each child's first token: its key's, or (in a list) its value's."""
    moved, marks, keymarks = tree.moved, tree.marks, tree.keymarks
    lines = []
    is_map = tree.kind[node] == MAP
    for edge in tree.edges(node):
        child = tree.child[edge]
        at = keymarks[4 * edge] if is_map else marks[4 * child]
        lines.append(at + shift + moved.get(child, 0))
    return lines


def _starts_line(old: str, offsets: list[int], line: int, column: int, dash: str) -> bool:
    """Whether line `line` of `old` holds only spaces before `column` and a token there
    (`dash`: the `-` of a list item, followed by its value on the same line)."""
    if not 0 <= line < len(offsets) - 1:
        return False
    text = old[offsets[line] : offsets[line + 1]]
    if text[:column] != " " * column or len(text) <= column:
        return False
    if dash:
        return text[column] == "-" and text[column + 1 : column + 2] == " "
    return text[column] not in " #\n"


def _char_at(old: str, offsets: list[int], line: int, column: int) -> str:
    at = offsets[line] + column if 0 <= line < len(offsets) else len(old)
    return old[at : at + 1]


# -- reading the entry --------------------------------------------------------------------


class _Read:
    """The entry as parsed alone: its data, its key (in a mapping), its marks' tree."""

    __slots__ = ("builder", "ends", "key", "key_marks", "node", "value")

    def __init__(self) -> None:
        self.builder: Builder
        self.node = 0
        self.value: Any = None
        self.key: str | None = None
        self.key_marks: tuple[int, int, int, int] | None = None
        self.ends: list[Event] = []  # at the end of the text: the end events of its parents


def _read(file: str, tree: MarkTree, place: _Place, piece: str) -> _Read | None:
    """The entry's text parsed alone (see the module docstring), or None when the
    parse differs from the whole text's or has a problem."""
    root_column = tree.marks[1]
    nested = place.parent != 0
    head = "\n" * place.first
    if nested:
        head = "\n" * (place.first - 1) + " " * root_column + "x:\n"
    tail = ""
    is_seq = tree.kind[place.parent] == SEQ
    if place.sibling:
        tail = " " * place.column + ("- " if is_seq else "") + _STAND_IN + ":" * (not is_seq)
    elif place.stop is not None:
        tail = " " * root_column + _STAND_IN + ":"
    parser = yaml._yaml.CParser(head + piece + tail + "\n" * bool(tail))
    try:
        return _parse(parser, file, place, is_seq, piece.count("\n"), root_column)
    except yaml.YAMLError:
        return None
    finally:
        parser.dispose()


def _parse(  # noqa: PLR0917 (each check of the parse says no in its own place)
    parser: Any,
    file: str,
    place: _Place,
    is_seq: bool,
    lines: int,
    root_column: int,
) -> _Read | None:
    next_event = parser.get_event
    next_event()  # the stream's start
    next_event()  # the document's start
    root = next_event()
    if type(root) is not MappingStart or root.flow_style:
        return None
    read = _Read()
    builder = read.builder = Builder(parser, file)
    nested = place.parent != 0
    if nested:
        if not _at(root, place.first - 1, root_column):
            return None
        next_event()  # the stand-in key `x`
        parent = next_event()
        if type(parent) is not (SequenceStart if is_seq else MappingStart) or parent.flow_style:
            return None
    else:
        parent = root
    if not _at(parent, place.first, place.column):
        return None
    if is_seq:
        builder.path = list(place.path)
        read.value = builder.build(next_event())
    else:
        builder.path = list(place.path[:-1])
        found = builder.key(next_event())
        if found is None:
            return None
        read.key, read.key_marks = found
        builder.path.append(read.key)
        read.value = builder.build(next_event())
    read.node = builder.node
    if builder.problems or builder.inexact or not builder.plain_only:
        return None
    line = place.first + lines
    if place.sibling:
        return read if _stand_in(next_event(), line, place.column + 2 * is_seq) else None
    if nested:
        end = next_event()
        if type(end) is not (SequenceEnd if is_seq else MappingEnd):
            return None
        if place.stop is not None:
            return read if _stand_in(next_event(), line, root_column) else None
        read.ends.append(end)
    end = next_event()
    if type(end) is not MappingEnd:
        return None
    read.ends.append(end)
    if type(next_event()) is not DocumentEnd or type(next_event()) is not StreamEnd:
        return None
    return read


def _at(event: Event, line: int, column: int) -> bool:
    mark = event.start_mark
    return bool(mark.line == line and mark.column == column)


def _stand_in(event: Event, line: int, column: int) -> bool:
    return (
        type(event) is Scalar
        and event.value == _STAND_IN
        and not event.style
        and _at(event, line, column)
    )


# -- the new document ---------------------------------------------------------------------


def _document(  # noqa: PLR0917 (the parts of one reload)
    previous: LoadedDocument,
    text: str,
    source_map: NodeSourceMap,
    place: _Place,
    read: _Read,
    lines: int,
) -> LoadedDocument | None:
    """`previous` with the entry at `place` replaced by `read`."""
    tree = source_map.tree
    data = _data(previous.data, tree, place, read)
    if data is None:
        return None
    part = read.builder.tree
    new = _grafted(tree, part, read.node, place.edge)
    if read.key is not None and read.key_marks is not None:
        new.keys[place.edge] = read.key
        new.keymarks[4 * place.edge : 4 * place.edge + 4] = array("i", read.key_marks)
    parent_shift = tree.moved.get(place.parent, 0)
    if parent_shift:  # the new nodes' marks are the text's: undo what the path adds
        new.moved[len(tree.kind)] = -parent_shift
    _move(new, place, lines, read.ends)
    paths = len(source_map) - _size(tree, tree.child[place.edge]) + len(part.kind) - read.node
    if len(new.kind) > 2 * paths:  # more dropped nodes than live ones: start afresh
        return None
    return LoadedDocument(
        file=previous.file,
        text=text,
        data=data,
        source_map=NodeSourceMap(previous.file, new, paths),
    )


def _data(root: dict[str, Any], tree: MarkTree, place: _Place, read: _Read) -> Any:
    """The new data: `root` with the entry replaced (None: a key its mapping has)."""
    if place.parent == 0:
        return _replaced(root, tree.keys[place.edge], read.key, read.value)
    key = place.path[0]
    assert isinstance(key, str)
    inner = root[key]
    if isinstance(inner, list):
        items = list(inner)
        items[int(place.path[1])] = read.value
        new_inner: Any = items
    else:
        new_inner = _replaced(inner, tree.keys[place.edge], read.key, read.value)
        if new_inner is None:
            return None
    new_root = dict(root)
    new_root[key] = new_inner
    return new_root


def _replaced(
    mapping: dict[str, Any], old_key: str | None, key: str | None, value: Any
) -> dict[str, Any] | None:
    """`mapping` with `old_key`'s entry now `key: value`, in its place."""
    assert old_key is not None
    assert key is not None
    if key == old_key:
        new = dict(mapping)
        new[key] = value
        return new
    if key in mapping:
        return None  # a duplicate key: the whole load reports it
    return {
        (key if k == old_key else k): (value if k == old_key else v) for k, v in mapping.items()
    }


def _grafted(tree: MarkTree, part: MarkTree, unit: int, edge: int) -> MarkTree:
    """`tree` plus the nodes of `part` from `unit` on, `edge` now leading to `unit`."""
    nodes, edges = len(tree.kind), len(tree.child)
    new = MarkTree()
    new.marks = tree.marks + part.marks[4 * unit :]
    new.kind = tree.kind + part.kind[unit:]
    new.first = tree.first + array("i", [first + edges for first in part.first[unit:]])
    new.count = tree.count + part.count[unit:]
    new.child = tree.child + array("i", [child - unit + nodes for child in part.child])
    new.keymarks = tree.keymarks + part.keymarks
    new.keys = tree.keys + part.keys
    new.child[edge] = nodes
    new.moved = dict(tree.moved)
    new.plain = True
    return new


def _move(new: MarkTree, place: _Place, lines: int, ends: list[Event]) -> None:
    """Move what follows the entry by `lines`; at the end of the text, end its parents
    where the parse ended them."""
    moved, marks = new.moved, new.marks
    parents = [place.parent] if place.parent == 0 else [place.parent, 0]
    if ends:
        for node, end in zip(parents, ends, strict=True):
            marks[4 * node + 2] = end.start_mark.line - moved.get(node, 0)
            marks[4 * node + 3] = end.start_mark.column
    if not lines:
        return
    after = [(place.parent, place.edge)]
    if place.parent != 0:
        after.append((0, place.root_edge))
    for node, edge in after:
        for later in range(edge + 1, new.first[node] + new.count[node]):
            child = new.child[later]
            moved[child] = moved.get(child, 0) + lines
    if not ends:
        for node in parents:
            marks[4 * node + 2] += lines


def _size(tree: MarkTree, node: int) -> int:
    """How many nodes there are under `node`, itself included (no alias: one path each)."""
    size, stack = 0, [node]
    kind, child = tree.kind, tree.child
    while stack:
        top = stack.pop()
        size += 1
        if kind[top] in (SEQ, MAP):
            stack.extend(child[edge] for edge in tree.edges(top))
    return size


# -- texts --------------------------------------------------------------------------------


def _lines_plain(text: str) -> bool:
    """Whether `text` breaks lines with `\\n` (or `\\r\\n`) only, as the line arithmetic here
    counts them."""
    if "\r" in text and text.count("\r") != text.count("\r\n"):
        return False
    return not any(mark in text for mark in OTHER_BREAKS)


def _line_offsets(text: str) -> list[int]:
    """The offset of each line's start, and one more (the end plus one)."""
    lengths = accumulate(map(len, text.split("\n")), initial=0)
    return list(map(add, lengths, count()))


def _common_prefix(a: str, b: str) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, prefix: int) -> int:
    """The length of the common end of `a` and `b`, not reaching into `prefix`."""
    low, high = 0, min(len(a), len(b)) - prefix
    end_a, end_b = len(a), len(b)
    while low < high:
        middle = (low + high + 1) // 2
        if a[end_a - middle : end_a - low] == b[end_b - middle : end_b - low]:
            low = middle
        else:
            high = middle - 1
    return low
