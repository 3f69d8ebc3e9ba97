"""Check a case's expectations against a finished run: `failures(expect, run)` -> `Failure`s.

`RunView` is what the checks read: the stop reason, the facts (key -> id ->
content and data, in the run's order), the usage, and a callable telling
whether a named invariant holds on the final context. Each `Failure` names
the expectation's JSON path in the test file, what was expected and what the
run gave (both as readable text), and for a snapshot expectation (`stop_reason`,
`counts.KEY`, `snapshot.KEY`) the value `--update` writes in its place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from converge_dsl.diagnostics import JsonPath, did_you_mean, format_path

_MISSING = object()


@dataclass(frozen=True, slots=True)
class FactView:
    id: str
    content: str
    data: Any


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


def failures(expect: Mapping[str, Any], run: RunView, base: JsonPath) -> list[Failure]:
    """Every expectation of `expect` (at `base` in the test file) that `run` breaks."""
    out: list[Failure] = []
    stop = expect.get("stop_reason")
    if stop is not None and stop != run.stop_reason:
        why = "".join(f"\n{note}" for note in run.notes)
        out.append(
            Failure(
                (*base, "stop_reason"), "stop reason", stop, run.stop_reason + why, run.stop_reason
            )
        )
    for index, item in enumerate(expect.get("facts") or ()):
        out.extend(_present(item, run, (*base, "facts", index)))
    for index, item in enumerate(expect.get("absent") or ()):
        out.extend(_absent(item, run, (*base, "absent", index)))
    for key, count in (expect.get("counts") or {}).items():
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
    out.extend(_usage(expect.get("usage") or {}, run, (*base, "usage")))
    for index, name in enumerate(expect.get("invariants") or ()):
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
    for key, expected in (expect.get("snapshot") or {}).items():
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


def _present(item: Mapping[str, Any], run: RunView, path: JsonPath) -> Iterator[Failure]:
    key = item["key"]
    facts = run.facts.get(key, ())
    wanted = _describe(item)
    if "id" in item:
        chosen = [f for f in facts if f.id == item["id"]]
        if not chosen:
            guess = did_you_mean(item["id"], [f.id for f in facts])
            hint = f" (did you mean {guess!r}?)" if guess else ""
            yield Failure(
                path,
                f"fact {key}/{item['id']}",
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


def _absent(item: Mapping[str, Any], run: RunView, path: JsonPath) -> Iterator[Failure]:
    facts = run.facts.get(item["key"], ())
    if "id" in item:
        if any(f.id == item["id"] for f in facts):
            yield Failure(path, f"fact {item['key']}/{item['id']}", "absent", "present")
    elif facts:
        yield Failure(path, f"facts of {item['key']!r}", "none", f"{len(facts)}{_listing(facts)}")


def _usage(limits: Mapping[str, int], run: RunView, path: JsonPath) -> Iterator[Failure]:
    calls = limits.get("max_model_calls")
    if calls is not None and run.model_calls > calls:
        yield Failure(
            (*path, "max_model_calls"), "model calls", f"at most {calls}", str(run.model_calls)
        )
    tokens = limits.get("max_tokens")
    if tokens is not None and run.tokens > tokens:
        yield Failure((*path, "max_tokens"), "tokens", f"at most {tokens}", str(run.tokens))


def _describe(item: Mapping[str, Any]) -> str:
    parts = []
    if "content" in item:
        parts.append(f"content {item['content']!r}")
    if "contains" in item:
        parts.append(f"content containing {item['contains']!r}")
    if "matches" in item:
        parts.append(f"content matching /{item['matches']}/")
    if "data" in item:
        parts.append(f"data including {_json(item['data'])}")
    return ", ".join(parts)


def _mismatch(item: Mapping[str, Any], fact: FactView) -> str | None:
    """Why `fact` does not match `item` (None when it does), as readable text."""
    from converge_dsl.sandbox import search

    if "content" in item and fact.content != item["content"]:
        return f"content {fact.content!r}"
    if "contains" in item and item["contains"] not in fact.content:
        return f"content {fact.content!r}"
    if "matches" in item and not search(item["matches"], fact.content):
        return f"content {fact.content!r}"
    if "data" in item:
        where = subset_mismatch(item["data"], fact.data, ("data",))
        if where is not None:
            return where
    return None


def subset_mismatch(expected: Any, actual: Any, path: JsonPath = ()) -> str | None:
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
                hint = f" (did you mean {guess!r}?)" if guess else ""
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


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:197] + "..."
