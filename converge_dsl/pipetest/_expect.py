"""A case's expectations, typed, and their check against a finished run.

`Expectations.of(raw)` reads an `expect:` mapping that the test file's schema
has checked (`expectation_problems(raw)` checks one given from Python, as the
pytest plugin's `run(expect=...)` does); `failures(expect, run, base)` ->
`Failure`s. `RunView` is what the checks read: the stop reason, the facts (key
-> id -> content and data, in the run's order), the usage, and a callable
telling whether a named invariant holds on the final context. Each `Failure`
names the expectation's JSON path in the test file, what was expected and what
the run gave (both as readable text), and for a snapshot expectation
(`stop_reason`, `counts.KEY`, `snapshot.KEY`) the value `--update` writes in
its place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from converge_dsl._json_types import JsonValue
from converge_dsl.diagnostics import JsonPath, did_you_mean, format_path, suggestion

# The schema of a test file (`_spec` reads files with it; `expect:` is checked against it).
SCHEMA_NAME = "pipeline-test.v1.json"

_MISSING = object()


@dataclass(frozen=True, slots=True)
class FactExpectation:
    """A fact that must be present (`facts:`) or absent (`absent:`, key and id only).

    `data` is a JSON subset of the fact's data; `has_data` tells `data: null`
    (the data must be null) from no `data` at all.
    """

    key: str
    id: str | None = None
    content: str | None = None
    contains: str | None = None
    matches: str | None = None
    data: JsonValue = None
    has_data: bool = False

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> FactExpectation:
        return cls(
            key=str(raw["key"]),
            id=raw.get("id"),
            content=raw.get("content"),
            contains=raw.get("contains"),
            matches=raw.get("matches"),
            data=raw.get("data"),
            has_data="data" in raw,
        )


@dataclass(frozen=True, slots=True)
class Expectations:
    """What must hold after a case's run; each part is checked only when given."""

    stop_reason: str | None = None
    facts: tuple[FactExpectation, ...] = ()
    absent: tuple[FactExpectation, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
    max_model_calls: int | None = None
    max_tokens: int | None = None
    invariants: tuple[str, ...] = ()
    snapshot: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Expectations:
        """The typed form of an `expect:` mapping the schema has checked."""
        usage: Mapping[str, int] = raw.get("usage") or {}
        return cls(
            stop_reason=raw.get("stop_reason"),
            facts=tuple(FactExpectation.of(item) for item in raw.get("facts") or ()),
            absent=tuple(FactExpectation.of(item) for item in raw.get("absent") or ()),
            counts={str(key): int(n) for key, n in (raw.get("counts") or {}).items()},
            max_model_calls=usage.get("max_model_calls"),
            max_tokens=usage.get("max_tokens"),
            invariants=tuple(str(name) for name in raw.get("invariants") or ()),
            snapshot={
                str(key): {str(i): str(c) for i, c in facts.items()}
                for key, facts in (raw.get("snapshot") or {}).items()
            },
        )


def expectation_problems(raw: object) -> list[str]:
    """Why `raw` is not an `expect:` mapping as a test file writes it (empty when it is).

    The test file's own schema judges it, as the one case of a test file, so the
    problems read as `validate`'s do: one line each, its place inside `expect`
    first (`facts[0]: unknown field 'kye' (did you mean 'key'?)`).
    """
    from converge_dsl.errors import PipelineInvalid
    from converge_dsl.frontend import load_text, schema_diagnostics

    case = {"name": "expect", "expect": raw}
    body = {"apiVersion": "converge-dsl/v1", "kind": "PipelineTest", "cases": [case]}
    try:
        text = json.dumps(body, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return [f"expect: holds a value that is not JSON ({exc})"]
    try:
        document = load_text(text, "<expect>")
    except PipelineInvalid as exc:
        return [d.message for d in exc.diagnostics]
    prefix = ("cases", 0, "expect")
    out = []
    for problem in schema_diagnostics(document, SCHEMA_NAME):
        if problem.is_error:
            inside = problem.path[len(prefix) :] if problem.path[:3] == prefix else ()
            message = problem.message.replace(format_path(prefix), "expect")
            hint = f" ({problem.hint})" if problem.hint else ""
            out.append(f"{format_path(('expect', *inside))}: {message}{hint}")
    return out


@dataclass(frozen=True, slots=True)
class FactView:
    id: str
    content: str
    data: JsonValue


@dataclass(frozen=True, slots=True)
class RunView:
    """The parts of a finished run the expectations read."""

    stop_reason: str
    facts: Mapping[str, Sequence[FactView]]
    model_calls: int
    tokens: int
    holds: Callable[[str], str | None]  # invariant name -> None (holds) or why not
    notes: tuple[str, ...] = ()  # the run's own diagnostics, as one line each


@dataclass(frozen=True, slots=True)
class Failure:
    """One expectation that did not hold. `path` is its place in the test file."""

    path: JsonPath
    title: str
    expected: str
    actual: str
    snapshot: Any = _MISSING  # the value `--update` writes at `path`, for snapshot expectations

    @property
    def updatable(self) -> bool:
        return self.snapshot is not _MISSING


def failures(expect: Expectations, run: RunView, base: JsonPath) -> list[Failure]:
    """Every expectation of `expect` (at `base` in the test file) that `run` breaks."""
    out: list[Failure] = []
    stop = expect.stop_reason
    if stop is not None and stop != run.stop_reason:
        why = "".join(f"\n{note}" for note in run.notes)
        out.append(
            Failure(
                (*base, "stop_reason"), "stop reason", stop, run.stop_reason + why, run.stop_reason
            )
        )
    for index, item in enumerate(expect.facts):
        out.extend(_present(item, run, (*base, "facts", index)))
    for index, item in enumerate(expect.absent):
        out.extend(_absent(item, run, (*base, "absent", index)))
    for key, count in expect.counts.items():
        actual = len(run.facts.get(key, ()))
        if actual != count:
            listed = _listing(run.facts.get(key, ()))
            out.append(
                Failure(
                    (*base, "counts", key),
                    f"count of {key!r}",
                    str(count),
                    f"{actual}{listed}",
                    actual,
                )
            )
    out.extend(_usage(expect, run, (*base, "usage")))
    for index, name in enumerate(expect.invariants):
        broken = run.holds(name)
        if broken is not None:
            out.append(
                Failure(
                    (*base, "invariants", index),
                    f"invariant {name!r}",
                    "holds",
                    f"violated: {broken}",
                )
            )
    for key, expected in expect.snapshot.items():
        actual_map = {f.id: f.content for f in run.facts.get(key, ())}
        if dict(expected) != actual_map:
            out.append(
                Failure(
                    (*base, "snapshot", key),
                    f"snapshot of {key!r}",
                    _yaml_lines(dict(expected)),
                    _yaml_lines(actual_map),
                    actual_map,
                )
            )
    return out


def _present(item: FactExpectation, run: RunView, path: JsonPath) -> Iterator[Failure]:
    key = item.key
    facts = run.facts.get(key, ())
    wanted = _describe(item)
    if item.id is not None:
        chosen = [f for f in facts if f.id == item.id]
        if not chosen:
            guess = did_you_mean(item.id, [f.id for f in facts])
            hint = f" ({suggestion(guess)})" if guess else ""
            yield Failure(
                path,
                f"fact {key}/{item.id}",
                "present" + (f": {wanted}" if wanted else ""),
                f"absent{hint}{_listing(facts)}",
            )
            return
    else:
        chosen = list(facts)
        if not chosen:
            yield Failure(path, f"a fact of {key!r}", wanted or "present", f"no fact of {key!r}")
            return
    problems = [_mismatch(item, fact) for fact in chosen]
    if any(p is None for p in problems):
        return
    if len(chosen) == 1:
        fact = chosen[0]
        yield Failure(path, f"fact {key}/{fact.id}", wanted, str(problems[0]))
    else:
        yield Failure(path, f"a fact of {key!r}", wanted, f"none matches{_listing(chosen)}")


def _absent(item: FactExpectation, run: RunView, path: JsonPath) -> Iterator[Failure]:
    facts = run.facts.get(item.key, ())
    if item.id is not None:
        if any(f.id == item.id for f in facts):
            yield Failure(path, f"fact {item.key}/{item.id}", "absent", "present")
    elif facts:
        yield Failure(path, f"facts of {item.key!r}", "none", f"{len(facts)}{_listing(facts)}")


def _usage(expect: Expectations, run: RunView, path: JsonPath) -> Iterator[Failure]:
    calls = expect.max_model_calls
    if calls is not None and run.model_calls > calls:
        yield Failure(
            (*path, "max_model_calls"), "model calls", f"at most {calls}", str(run.model_calls)
        )
    tokens = expect.max_tokens
    if tokens is not None and run.tokens > tokens:
        yield Failure((*path, "max_tokens"), "tokens", f"at most {tokens}", str(run.tokens))


def _describe(item: FactExpectation) -> str:
    parts = []
    if item.content is not None:
        parts.append(f"content {item.content!r}")
    if item.contains is not None:
        parts.append(f"content containing {item.contains!r}")
    if item.matches is not None:
        parts.append(f"content matching /{item.matches}/")
    if item.has_data:
        parts.append(f"data including {_json(item.data)}")
    return ", ".join(parts)


def _mismatch(item: FactExpectation, fact: FactView) -> str | None:
    """Why `fact` does not match `item` (None when it does), as readable text."""
    from converge_dsl.sandbox import search

    if item.content is not None and fact.content != item.content:
        return f"content {fact.content!r}"
    if item.contains is not None and item.contains not in fact.content:
        return f"content {fact.content!r}"
    if item.matches is not None and not search(item.matches, fact.content):
        return f"content {fact.content!r}"
    if item.has_data:
        where = subset_mismatch(item.data, fact.data, ("data",))
        if where is not None:
            return where
    return None


def subset_mismatch(expected: JsonValue, actual: JsonValue, path: JsonPath = ()) -> str | None:
    """Where `expected` is not a JSON subset of `actual`, or None.

    A mapping matches when each of its keys is in `actual` with a matching
    value; a list when `actual` is a list of the same length matching item by
    item; anything else when equal (`1` and `1.0` are equal, `true` and `1` not).
    """
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return f"{format_path(path)}: expected a mapping, got {_json(actual)}"
        for key, value in expected.items():
            if key not in actual:
                guess = did_you_mean(str(key), [str(k) for k in actual])
                hint = f" ({suggestion(guess)})" if guess else ""
                return f"{format_path((*path, key))}: missing{hint}"
            found = subset_mismatch(value, actual[key], (*path, key))
            if found is not None:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{format_path(path)}: expected a list, got {_json(actual)}"
        if len(expected) != len(actual):
            found = f"expected {len(expected)} items, got {len(actual)}: {_json(actual)}"
            return f"{format_path(path)}: {found}"
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            found = subset_mismatch(want, got, (*path, index))
            if found is not None:
                return found
        return None
    if isinstance(expected, bool) != isinstance(actual, bool) or expected != actual:
        return f"{format_path(path)}: expected {_json(expected)}, got {_json(actual)}"
    return None


def _listing(facts: Sequence[FactView], limit: int = 10) -> str:
    if not facts:
        return ""
    lines = [f"\n  {f.id}: {f.content!r}" for f in facts[:limit]]
    more = f"\n  ... and {len(facts) - limit} more" if len(facts) > limit else ""
    return "; the run has:" + "".join(lines) + more


def _yaml_lines(mapping: Mapping[str, str]) -> str:
    return "\n".join(
        f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in mapping.items()
    )


def _json(value: JsonValue) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:197] + "..."
