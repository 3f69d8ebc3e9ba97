"""From libyaml's event stream to JSON-like data and a `MarkTree`, in one pass.

No node graph is composed: each event is read once, the data is built as the
events arrive, and the marks go into the flat arrays of a `MarkTree`
(`_marks`). Events are short-lived, so the peak memory of a load is the data
plus the tree, not PyYAML's graph of nodes and marks. Anchors and aliases are
replayed (`_anchors`). Problems under a skipped key or value (a collection
key, a merge key, a duplicate key) are dropped, as the values themselves are:
only the key is reported.

One case looks ahead: whether a written tag on a plain scalar counts as
explicit depends on whether the same text appears untagged anywhere in the
document (`Builder.explicit`). When a text's answer is not known yet, the
builder sets `needs_all_texts`, and the loader builds the document again
with every untagged text's tag known (`untagged_texts`): rare (`!!int
000123`), and the first pass's result is dropped.
"""

from __future__ import annotations

import sys
from typing import Any

from converge_dsl import codes
from converge_dsl._escapes import quoted
from converge_dsl._pyyaml import yaml
from converge_dsl.diagnostics import SourceSpan, format_path
from converge_dsl.frontend import _anchors
from converge_dsl.frontend._anchors import Pending, Replayer
from converge_dsl.frontend._marks import MAP, SEQ, Marks
from converge_dsl.frontend._scalars import BOOL, STR, TAG, Problem, read_scalar, text_lost

ComposerError = yaml.composer.ComposerError
ScalarNode = yaml.nodes.ScalarNode
AliasEvent = yaml.events.AliasEvent
MappingEndEvent = yaml.events.MappingEndEvent
MappingStartEvent = yaml.events.MappingStartEvent
ScalarEvent = yaml.events.ScalarEvent
SequenceEndEvent = yaml.events.SequenceEndEvent
SequenceStartEvent = yaml.events.SequenceStartEvent
StreamEndEvent = yaml.events.StreamEndEvent

_MAP, _SEQ = TAG + "map", TAG + "seq"
_MERGE = TAG + "merge"
# Scalars up to this length are shared: one string object per distinct text (a
# file of 10^5 seeds repeats `key: items` 10^5 times); keys are interned.
_SHARED = 32
_COLLECTION_KEY = "a mapping key must be a plain string, not a collection"
_PLAIN_ONLY = "only plain YAML (strings, numbers, true/false, null, lists, mappings) is read"


def untagged_texts(parser: Any) -> dict[str, str]:
    """Every plain untagged scalar's text -> its implicit tag, from a whole event stream."""
    resolve = yaml.resolver.Resolver().resolve
    texts: dict[str, str] = {}
    while True:
        event = parser.get_event()
        kind = type(event)
        if kind is ScalarEvent:
            text = event.value
            if (event.tag is None or event.tag == "!") and event.implicit[0] and text not in texts:
                texts[text] = resolve(ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
        elif kind is StreamEndEvent:
            return texts


class Builder(Replayer):
    """Reads one document's events; collects every problem instead of stopping at the first.

    `build(event)` returns the data of the node starting with `event`; then
    `tree`, `paths` (how many JSON paths were built, aliases expanded),
    `problems` and `inexact` hold the rest of the result. With `plain`
    (every untagged text's tag, `untagged_texts`) written tags are read
    exactly; without it, `needs_all_texts` tells when the result must be
    built again with it (see the module docstring).
    """

    def __init__(self, parser: Any, file: str, plain: dict[str, str] | None = None) -> None:
        super().__init__(parser, file, plain)
        self.needs_all_texts = False

    # -- nodes -----------------------------------------------------------------------------

    def build(self, event: Any) -> Any:
        kind = type(event)
        if kind is ScalarEvent:
            start, end = event.start_mark, event.end_mark
            style = event.style
            node = self.tree.add(_kind(style), start.line, start.column, end.line, end.column)
            self.node = node
            self.paths += 1
            tag, text = event.tag, event.value
            if len(text) <= _SHARED:
                text = self.strings.setdefault(text, text)
            explicit = False
            if tag is None or tag == "!":
                tag = self.resolved(event.implicit[0], text)
            else:
                self.plain_only = False
                explicit = self.explicit(tag, text, style)
            anchor = event.anchor
            record = None if anchor is None else self.open_anchor(anchor, node, start)
            value = self.scalar(tag, explicit, text, style, node)
            if record is not None:
                record.tag, record.text, record.style, record.explicit = tag, text, style, explicit
                self.close_anchor(record, value, 1, 0)
            return value
        if kind is AliasEvent:
            return self.alias(event)
        if kind is MappingStartEvent:
            return self.collection(event, MAP)
        if kind is SequenceStartEvent:
            return self.collection(event, SEQ)
        raise ComposerError(None, None, "expected a node", event.start_mark)  # pragma: no cover

    def collection(self, event: Any, kind: int) -> Any:
        start = event.start_mark
        tree = self.tree
        node = tree.add(kind, start.line, start.column, start.line, start.column)
        self.paths += 1
        depth = len(self.path)
        if depth >= _anchors.MAX_DEPTH:
            return self.too_deep(event, node)
        anchor = event.anchor
        record = None if anchor is None else self.open_anchor(anchor, node, start)
        self.deepest = max(self.deepest, depth)
        tag = event.tag
        if tag is not None:
            self.plain_only = False
        forbidden = None
        if tag is not None and tag not in ("!", _MAP if kind == MAP else _SEQ):
            forbidden = Pending(
                codes.FORBIDDEN_TAG,
                f"tag {tag.replace(TAG, '!!')!r} is not allowed",
                tuple(self.path),
                node,
                _PLAIN_ONLY,
            )
            self.problems.append(forbidden)
        paths, cost = self.paths, self.cost
        value = self.mapping(node) if kind == MAP else self.sequence(node)
        size = self.paths - paths + 1
        total = size + self.cost - cost
        self.cost = cost + total
        if forbidden is not None:
            self.settle(forbidden)
        if record is not None:
            self.close_anchor(record, value, size, total)
        self.node = node
        return value

    def sequence(self, node: int) -> list[Any]:
        items: list[Any] = []
        children: list[int] = []
        path, next_event, build = self.path, self.next, self.build
        path.append(0)
        while True:
            event = next_event()
            if type(event) is SequenceEndEvent:
                break
            path[-1] = len(items)
            items.append(build(event))
            children.append(self.node)
        path.pop()
        end: Any = event.end_mark
        self.tree.close(node, end.line, end.column, children)
        return items

    def mapping(self, node: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        children: list[int] = []
        keys: list[str] = []
        key_marks: list[Marks] = []
        path, next_event = self.path, self.next
        while True:
            event = next_event()
            if type(event) is MappingEndEvent:
                break
            found = self.key(event)
            if found is None:
                self.skip_value()
                continue
            key, marks = found
            if key in result:
                first_line = key_marks[keys.index(key)][0]
                self.fail(
                    codes.DUPLICATE_KEY,
                    f"duplicate key {quoted(key)} in {format_path(tuple(path))}",
                    self.span_of(marks),
                    hint=f"the first {quoted(key)} is on line {first_line + 1}; keep one",
                )
                self.skip_value()
                continue
            path.append(key)
            result[key] = self.build(next_event())
            path.pop()
            children.append(self.node)
            keys.append(key)
            key_marks.append(marks)
        end: Any = event.end_mark
        self.tree.close(node, end.line, end.column, children, keys=keys, key_marks=key_marks)
        return result

    def key(self, event: Any) -> tuple[str, Marks] | None:
        """A mapping key and its marks; None (reported) when it cannot be one."""
        kind, tree = type(event), self.tree
        record = None
        marks: Marks
        if kind is ScalarEvent:
            start, end = event.start_mark, event.end_mark
            marks = (start.line, start.column, end.line, end.column)
            tag, text, style = event.tag, sys.intern(event.value), event.style
            explicit = False
            if tag is None or tag == "!":
                tag = self.resolved(event.implicit[0], text)
            else:
                self.plain_only = False
                explicit = self.explicit(tag, text, style)
            if event.anchor is not None:  # an anchored key: a node of its own
                record = self.open_anchor(event.anchor, tree.add(_kind(style), *marks), start)
                record.tag, record.text, record.style = tag, text, style
                record.explicit = explicit
        elif kind is AliasEvent:
            anchored = self.anchor_of(event)
            if anchored.text is None:  # a collection
                self.fail_at(anchored, codes.BAD_KEY, _COLLECTION_KEY)
                return None
            marks = tree.marks_of(anchored.node)
            tag, text, style = anchored.tag or STR, anchored.text, anchored.style
            explicit = anchored.explicit
        else:
            self.mute(event)
            self.fail(codes.BAD_KEY, _COLLECTION_KEY, tree.span(self.file, self.node))
            return None
        if tag == _MERGE:
            self.fail(
                codes.BAD_KEY,
                "merge keys ('<<') are not supported",
                self.span_of(marks),
                hint="repeat the keys; merge keys are a YAML 1.1 extension",
            )
            if record is not None:
                self.close_anchor(record, text, 1, 0)
            return None
        key = self.scalar_at(tag, explicit, text, style, marks, is_key=True)
        if record is not None:
            self.close_anchor(record, key, 1, 0)
        if type(key) is not str:
            if tag != BOOL:  # YAML 1.1 booleans were reported by scalar_at()
                self.fail(
                    codes.BAD_KEY,
                    f"mapping key {text!r} is not a string",
                    self.span_of(marks),
                    hint=f"quote it: '{text}'",
                )
            return None
        return key, marks

    def span_of(self, marks: Marks) -> SourceSpan:
        line, column, end_line, end_column = marks
        return SourceSpan(self.file, line + 1, column + 1, end_line + 1, end_column + 1)

    def too_deep(self, event: Any, node: int) -> None:
        """A collection at `MAX_DEPTH`: reported, its events read and dropped."""
        anchor = event.anchor
        record = None if anchor is None else self.open_anchor(anchor, node, event.start_mark)
        depth = 1
        while depth:
            event = self.next()
            kind = type(event)
            if kind is MappingStartEvent or kind is SequenceStartEvent:
                depth += 1
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                depth -= 1
                continue
            elif kind is AliasEvent:
                self.anchor_of(event)  # an undefined alias is an error wherever it is
                continue
            if event.anchor is not None:  # replays as the dropped node it is under
                self.close_anchor(
                    self.open_anchor(event.anchor, node, event.start_mark), None, 1, 0
                )
        end = event.end_mark
        self.tree.close(node, end.line, end.column, [])  # its children are dropped
        if record is not None:  # its aliases do not repeat the report (they are not as deep)
            self.close_anchor(record, None, 1, 0)
        self.fail(
            codes.TOO_DEEP,
            f"nesting deeper than {_anchors.MAX_DEPTH} levels",
            self.tree.span(self.file, node),
            hint="flatten the structure",
        )
        self.node = node

    def mute(self, event: Any) -> None:
        """Build a node whose value is dropped: its anchors are kept, not its problems."""
        problems, inexact = len(self.problems), len(self.inexact)
        counters = self.paths, self.cost, self.aliased
        self.path.append("?")
        self.build(event)
        self.path.pop()
        del self.problems[problems:]
        del self.inexact[inexact:]
        self.paths, self.cost, self.aliased = counters

    def skip_value(self) -> None:
        node = self.node
        self.mute(self.next())
        self.node = node

    # -- scalars ---------------------------------------------------------------------------

    def resolved(self, plain: bool, text: str) -> str:
        """The tag of an untagged scalar (PyYAML's core-schema resolution, memoised per text)."""
        if not plain:
            return STR
        tag = self.plain.get(text)
        if tag is None:
            tag = self.plain[text] = self.resolver.resolve(ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
        return tag

    def explicit(self, tag: str, text: str, style: str | None) -> bool:
        """Whether a written tag counts as explicit (`read_scalar`), as PyYAML's graph told it.

        A plain scalar's written tag counts unless it is `!!str`, or the tag
        the same text gets where it is written untagged anywhere in the
        document. That last case looks ahead: when the text has not been
        seen untagged yet but would get this tag, the answer is not known
        before the end, and `needs_all_texts` asks for a second pass.
        """
        if style:
            return tag != STR
        if tag == STR:
            return False
        known = self.plain.get(text)
        if known is None and not self.complete:
            if self.resolver.resolve(ScalarNode, text, (True, False)) == tag:  # type: ignore[no-untyped-call]
                self.needs_all_texts = True
            return True
        return tag != known

    def scalar(self, tag: str, explicit: bool, text: str, style: str | None, node: int) -> Any:
        value = read_scalar(tag, text, plain=not style, explicit=explicit)
        if type(value) is Problem:
            self.problem(value, tag, self.tree.span(self.file, node))
            return text
        if type(value) is float and text_lost(text, value):
            self.inexact.append((tuple(self.path), text))
        return value

    def scalar_at(
        self,
        tag: str,
        explicit: bool,
        text: str,
        style: str | None,
        marks: Marks,
        *,
        is_key: bool,
    ) -> Any:
        """`scalar` for a key (or an anchored value) located by its `marks`; the span
        is built only for a problem."""
        value = read_scalar(tag, text, plain=not style, explicit=explicit)
        if type(value) is Problem:
            self.problem(value, tag, self.span_of(marks))
            return text
        if type(value) is float and not is_key and text_lost(text, value):
            self.inexact.append((tuple(self.path), text))
        return value

    def problem(self, problem: Problem, tag: str, span: SourceSpan) -> None:
        if problem.code == codes.FORBIDDEN_TAG:
            self.fail(
                codes.FORBIDDEN_TAG,
                f"tag {tag.replace(TAG, '!!')!r} is not allowed",
                span,
                hint=_PLAIN_ONLY,
            )
        else:
            self.fail(problem.code, problem.message, span, hint=problem.hint)


def _kind(style: str | None) -> int:
    """A scalar's kind byte in the `MarkTree`: 0 when plain, else its style's character."""
    return ord(style) if style else 0
