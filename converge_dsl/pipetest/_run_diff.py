"""What changed between two run results: `diff_results(a, b)` -> `RunDiff`.

Facts are matched by (key, id). A fact only in B is added, only in A removed
(with its content, and its data when it has some); one in both is changed when
its content, its confidence or its data differ, the data compared by JSON path
(`/category`: A's value -> B's value). The stop reasons and the usage counts
are compared too. Provenance is not compared. A side where a fact, a field of
its data or a usage count is not there at all is `ABSENT`, told from a null.

`ignore` leaves sections out of the comparison (`DIFF_SECTIONS`: `usage`, the
stop reasons, the facts' `confidence`): a section left out is not compared at
all, so two runs that differ only there are the same, and the documents name
what was left out (`ignored`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from converge_dsl._json_pointer import pointer

from ._json_equal import same_json


class _Absent:
    """The value on the side where a fact, or a field of its data, is not there at all
    (told from a JSON null): `(absent)` in the text, no `a` or `b` in the JSON."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Absent()


def _shown(value: Any) -> str:
    """A field's value as JSON (`true`, `null`, `"text"`), or `(absent)`."""
    if value is ABSENT:
        return repr(value)
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# The sections `ignore` may leave out of a comparison, in the order the documents name them.
DIFF_SECTIONS = ("usage", "stop-reason", "confidence")


def not_compared(ignored: tuple[str, ...]) -> str:
    """The note that says what a comparison left out: `usage and confidence not compared`."""
    names = [name.replace("-", " ") for name in ignored]
    joined = ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]
    return f"{joined} not compared"


def _sides(what: str, a: Any, b: Any) -> dict[str, Any]:
    found = {"what": what, "a": a, "b": b}
    return {k: v for k, v in found.items() if v is not ABSENT}


@dataclass(frozen=True, slots=True)
class FactChange:
    key: str
    id: str
    change: str  # added, removed, changed
    fields: tuple[tuple[str, Any, Any], ...]  # (what: content, confidence or /data/path, a, b)


@dataclass(frozen=True, slots=True)
class RunDiff:
    facts: tuple[FactChange, ...]
    stop_reason: tuple[str, str] | None
    usage: tuple[tuple[str, Any, Any], ...]
    ignored: tuple[str, ...] = ()  # the DIFF_SECTIONS left out of the comparison

    @property
    def same(self) -> bool:
        return not self.facts and self.stop_reason is None and not self.usage

    def as_json(self) -> dict[str, Any]:
        return {**self.compared_json(), "ignored": list(self.ignored)}

    def compared_json(self) -> dict[str, Any]:
        """`as_json()` without `ignored` (a batch's cases share the batch's)."""
        return {
            "same": self.same,
            "facts": [
                {
                    "key": f.key,
                    "id": f.id,
                    "change": f.change,
                    "fields": [_sides(w, a, b) for w, a, b in f.fields],
                }
                for f in self.facts
            ],
            "stop_reason": list(self.stop_reason) if self.stop_reason else None,
            "usage": [_sides(w, a, b) for w, a, b in self.usage],
        }

    @property
    def same_facts(self) -> bool:
        """Whether the facts and the stop reasons are the same (the usage may differ)."""
        return not self.facts and self.stop_reason is None

    def text(self) -> str:
        lines = self.lines()
        lines.extend(f"usage {w}: {a} -> {b}" for w, a, b in self.usage)
        if not lines:
            left_out = f" ({not_compared(self.ignored)})" if self.ignored else ""
            return f"no difference{left_out}\n"
        return "\n".join(lines) + "\n"

    def lines(self) -> list[str]:
        """The lines of the facts and the stop reasons that differ (not the usage)."""
        lines: list[str] = []
        for f in self.facts:
            sign = {"added": "+", "removed": "-", "changed": "~"}[f.change]
            lines.append(f"{sign} {f.key}/{f.id}")
            lines.extend(f"    {w}: {_shown(a)} -> {_shown(b)}" for w, a, b in f.fields)
        if self.stop_reason:
            lines.append(f"stop reason: {self.stop_reason[0]} -> {self.stop_reason[1]}")
        return lines


def diff_results(
    a: Mapping[str, Any], b: Mapping[str, Any], ignore: Collection[str] = ()
) -> RunDiff:
    """The difference from run result `a` to run result `b` (run-result documents as JSON),
    the `ignore`d sections (of `DIFF_SECTIONS`) left out."""
    return Comparison.leaving_out(ignore).diff(a, b)


@dataclass(frozen=True, slots=True)
class Comparison:
    """What a diff compares, `ignore` checked once for every pair of results it compares
    (a batch's cases share one): the `ignored` sections in `DIFF_SECTIONS` order and the
    fields of a fact compared whole."""

    ignored: tuple[str, ...]
    fields: tuple[str, ...]

    @classmethod
    def leaving_out(cls, ignore: Collection[str]) -> Comparison:
        """The comparison without the `ignore`d sections; a name that is no section of
        `DIFF_SECTIONS` is a programming error (`ValueError`)."""
        unknown = set(ignore) - set(DIFF_SECTIONS)
        if unknown:
            raise ValueError(f"not a section of a diff: {sorted(unknown)}")
        ignored = tuple(name for name in DIFF_SECTIONS if name in ignore)
        fields = ("content",) if "confidence" in ignored else ("content", "confidence")
        return cls(ignored, fields)

    def diff(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> RunDiff:
        """The difference from run result `a` to run result `b`."""
        before, after = _facts(a), _facts(b)
        changes: list[FactChange] = []
        for where in sorted(before.keys() | after.keys()):
            old, new = before.get(where), after.get(where, {})
            if old is None:
                changes.append(FactChange(*where, "added", _whole(new, after=True)))
            elif where not in after:
                changes.append(FactChange(*where, "removed", _whole(old, after=False)))
            else:
                fields = [
                    (name, old.get(name), new.get(name))
                    for name in self.fields
                    if not same_json(old.get(name), new.get(name))
                ]
                fields.extend(
                    (f"/data{p}", x, y)
                    for p, x, y in _data_changes(old.get("data"), new.get("data"), ())
                )
                if fields:
                    changes.append(FactChange(*where, "changed", tuple(fields)))
        stop = (str(a.get("stop_reason")), str(b.get("stop_reason")))
        if "stop-reason" in self.ignored:
            stop = (stop[0], stop[0])
        usage_a, usage_b = a.get("usage") or {}, b.get("usage") or {}
        if "usage" in self.ignored:
            usage_a = usage_b = {}
        usage = tuple(
            (name, usage_a.get(name, ABSENT), usage_b.get(name, ABSENT))
            for name in sorted(usage_a.keys() | usage_b.keys())
            if not same_json(usage_a.get(name), usage_b.get(name))
        )
        stopped = None if stop[0] == stop[1] else stop
        return RunDiff(tuple(changes), stopped, usage, self.ignored)


def _whole(fact: Mapping[str, Any], *, after: bool) -> tuple[tuple[str, Any, Any], ...]:
    """The content and the data (when it has some) of a fact only one side holds."""
    fields = [("content", fact.get("content"))]
    if fact.get("data") is not None:
        fields.append(("/data", fact.get("data")))
    return tuple((what, ABSENT, v) if after else (what, v, ABSENT) for what, v in fields)


def _facts(result: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {
        (str(key), str(fact.get("id"))): fact
        for key, facts in (result.get("facts") or {}).items()
        for fact in facts
    }


def _data_changes(
    a: object, b: object, path: tuple[str | int, ...]
) -> Iterator[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for name in sorted(a.keys() | b.keys()):
            yield from _data_changes(a.get(name, ABSENT), b.get(name, ABSENT), (*path, name))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _data_changes(x, y, (*path, index))
    elif not same_json(a, b):
        yield pointer(path), a, b
