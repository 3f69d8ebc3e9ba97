"""Static reachability: which keys can ever hold a fact, which suggestors can ever fire.

The engine's rule (docs/architecture.md §7): a suggestor with no dependencies
is always a candidate; one with dependencies becomes a candidate when any of
them is dirty, that is when a fact is promoted under it. Facts come from the
pipeline's seeds and from the targets of suggestors that fire. So, from the
seeded keys, a fixed point: a suggestor fires when it has no dependency or
one dependency can hold facts; its targets then can too. The gate turns any
rejected proposal into a `diagnostic` fact, so `diagnostic` can hold facts as
soon as any suggestor fires.

It over-approximates on purpose: a `when` expression is not evaluated, so a
suggestor marked as able to fire may still never accept. What it marks as
unreachable is certain. Linear in suggestors plus dependencies.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# The built-in key the promotion gate writes rejections to (`converge_dsl.keys`).
DIAGNOSTIC_KEY = "diagnostic"


@dataclass(frozen=True, slots=True)
class Flow:
    """What reachability needs of one suggestor."""

    name: str
    dependencies: tuple[str, ...]
    targets: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Reach:
    keys: frozenset[str]
    suggestors: frozenset[str]


def reach(seeded: Iterable[str], flows: Sequence[Flow]) -> Reach:
    """The keys that can hold facts and the suggestors that can fire (see the module)."""
    readers: dict[str, list[Flow]] = defaultdict(list)
    for flow in flows:
        for key in flow.dependencies:
            readers[key].append(flow)
    keys: set[str] = set()
    fired: set[str] = set()
    pending = list(dict.fromkeys(seeded))
    for flow in flows:
        if not flow.dependencies:
            fired.add(flow.name)
            pending.extend(flow.targets)
    if fired:
        pending.append(DIAGNOSTIC_KEY)
    while pending:
        key = pending.pop()
        if key in keys:
            continue
        keys.add(key)
        for flow in readers.get(key, ()):
            if flow.name not in fired:
                fired.add(flow.name)
                pending.extend(flow.targets)
                pending.append(DIAGNOSTIC_KEY)
    return Reach(frozenset(keys), frozenset(fired))
