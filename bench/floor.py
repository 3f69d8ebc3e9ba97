"""The floor: a minimal hand-written fixed-point loop doing a pipeline's logical work.

What the engine must do at the least for a pipeline of literal seeds and
rules, in plain Python, with nothing the work does not need: a dict of keys
to facts (by id), a dirty-key set, an index of the rules under each key they
read, one frozen dataclass per fact, no asyncio, no events. It keeps the
engine's checks, so the comparison is honest:

- eligibility: a rule is a candidate when a key it reads got a fact in the
  previous cycle (or it reads none), and it fires unless a fact from it is
  already under one of its target keys (the engine's default `accepts`);
- the kernel rules and the gate: a known key, a same id with the same content
  is a no-op and with other content a conflict, the fact budget, the cycle
  budget; a Lamport time per fact; promotion in registration order;
- the fixed point: a cycle that promotes nothing ends the run.

`Floor.of(data)` builds it from a loaded pipeline's data (the same YAML the
engine runs; every id and content must be literal text); `run()` returns the
facts in promotion order, and `assert_same(floor_facts, engine_facts)` checks
the engine promoted exactly those (key, id, content, source, cycle, time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BUILTIN = ("seeds", "hypotheses", "strategies", "constraints", "signals", "competitors")


@dataclass(frozen=True, slots=True)
class FloorFact:
    key: str
    id: str
    content: str
    source: str
    cycle: int
    logical_time: int


@dataclass(frozen=True, slots=True)
class FloorRule:
    name: str
    source: str
    reads: tuple[str, ...]
    targets: tuple[str, ...]
    emit: tuple[tuple[str, str, str], ...]  # (key, id, content), literal


class FloorStop(Exception):
    """A budget or kernel rule ended the floor's run (the engine would stop too)."""


def _literal(value: Any) -> str:
    text = str(value)
    if "{{" in text or "{%" in text:
        raise ValueError(f"the floor runs literal contents only, not {text!r}")
    return text


@dataclass(frozen=True, slots=True)
class Floor:
    """One pipeline's seeds, rules and budgets, ready to run to its fixed point."""

    seeds: tuple[tuple[str, str, str], ...]
    seed_source: str
    rules: tuple[FloorRule, ...]
    known: frozenset[str]
    max_cycles: int
    max_facts: int

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Floor:
        name = str(data["name"])
        budget = data.get("budget") or {}
        rules = []
        for spec in data.get("suggestors") or ():
            if spec.get("kind") != "rule" or "when" in spec:
                raise ValueError("the floor runs rules with no `when` only")
            emit = tuple(
                (str(e["key"]), _literal(e["id"]), _literal(e["content"])) for e in spec["emit"]
            )
            rules.append(
                FloorRule(
                    name=str(spec["name"]),
                    source=f"{spec['name']}@{name}",
                    reads=tuple(spec.get("dependencies") or ()),
                    targets=tuple(dict.fromkeys(key for key, _, _ in emit)),
                    emit=emit,
                )
            )
        seeds = tuple(
            (str(s.get("key", "seeds")), _literal(s["id"]), _literal(s["content"]))
            for s in data.get("seeds") or ()
        )
        return cls(
            seeds=seeds,
            seed_source=f"seeds@{name}",
            rules=tuple(rules),
            known=frozenset(BUILTIN) | {str(k["name"]) for k in data.get("keys") or ()},
            max_cycles=int(budget.get("max_cycles", 100)),
            max_facts=int(budget.get("max_facts", 10_000)),
        )

    def run(self) -> list[FloorFact]:
        """The facts of a run to the fixed point, in promotion order."""
        facts: dict[str, dict[str, FloorFact]] = {}
        sources: dict[str, set[str]] = {}
        order: list[FloorFact] = []
        dirty: set[str] = set()
        by_key: dict[str, list[int]] = {}
        always: list[int] = []
        for index, rule in enumerate(self.rules):
            for key in rule.reads:
                by_key.setdefault(key, []).append(index)
            if not rule.reads:
                always.append(index)

        def admit(key: str, fact_id: str, content: str, source: str, cycle: int) -> None:
            if key not in self.known:
                raise FloorStop(f"unknown key {key}")
            ids = facts.get(key)
            if ids is None:
                ids = facts[key] = {}
            existing = ids.get(fact_id)
            if existing is not None:
                if existing.content == content:
                    return
                raise FloorStop(f"conflicting fact {key}/{fact_id}")
            if len(order) >= self.max_facts:
                raise FloorStop("fact budget exhausted")
            fact = FloorFact(key, fact_id, content, source, cycle, len(order) + 1)
            ids[fact_id] = fact
            order.append(fact)
            sources.setdefault(key, set()).add(source)
            dirty.add(key)

        for key, fact_id, content in self.seeds:
            admit(key, fact_id, content, self.seed_source, 0)
        rules, cycle = self.rules, 0
        while True:
            cycle += 1
            if cycle > self.max_cycles:
                raise FloorStop("cycle budget exhausted")
            found = set(always)
            for key in dirty:
                found.update(by_key.get(key, ()))
            dirty = set()
            eligible = [
                rules[i]
                for i in sorted(found)
                if not any(rules[i].source in sources.get(k, ()) for k in rules[i].targets)
            ]
            before = len(order)
            for rule in eligible:
                for key, fact_id, content in rule.emit:
                    admit(key, fact_id, content, rule.source, cycle)
            if len(order) == before:
                return order


def engine_view(facts: Sequence[Any]) -> list[tuple[str, str, str, str, int, int]]:
    """The engine's facts as the floor's tuples (key, id, content, source, cycle, time)."""
    return [
        (str(f.key), f.id, f.content, f.provenance.source, f.promotion.cycle, f.logical_time)
        for f in facts
    ]


def assert_same(floor: Sequence[FloorFact], engine: Sequence[Any]) -> None:
    """The engine promoted exactly the floor's facts, in the same order."""
    ours = [(f.key, f.id, f.content, f.source, f.cycle, f.logical_time) for f in floor]
    theirs = engine_view(engine)
    assert ours == theirs, (len(ours), len(theirs), ours[:3], theirs[:3])
