"""Render scopes: views kept up to date by the keys that changed, and linear context reads."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest

from converge_dsl.compiler import RenderScopes, compile_pipeline
from converge_dsl.engine import (
    Context,
    Engine,
    Fact,
    PromotionRecord,
    ProposedFact,
    Provenance,
)
from converge_dsl.engine.context import ContextWriter
from converge_dsl.frontend import load_text

KEYS = ("a", "b", "c", "d")


def _fact(key: str, fact_id: str, source: str = "s@t") -> Fact:
    record = PromotionRecord("auto", "engine", 1, (), None, 1)
    return Fact(key, fact_id, f"text {fact_id}", Provenance(source), 0.9, record)


def _proposal(key: str, fact_id: str, source: str = "p@t") -> ProposedFact:
    return ProposedFact(key, fact_id, "x", 0.9, Provenance(source))


def _built_from_scratch(view: Context, keys: tuple[str, ...]) -> dict[str, Any]:
    return RenderScopes(keys).scope(view)


def test_an_advanced_scope_equals_one_built_from_scratch() -> None:
    """Random promotions (some under undeclared keys) and pending replacements."""
    rng = random.Random(7)
    ctx = Context()
    writer = ContextWriter(ctx)
    scopes = RenderScopes(KEYS)
    for step in range(200):
        roll = rng.random()
        if roll < 0.6:
            writer.add_fact(_fact(rng.choice((*KEYS, "undeclared")), f"f{step}"))
        elif roll < 0.8:
            keys = rng.sample((*KEYS, "undeclared"), rng.randint(0, 3))
            writer.set_pending(_proposal(k, f"p{step}") for k in keys)
        else:
            writer.set_cycle(ctx.cycle + 1)
        scope = scopes.scope(ctx)
        fresh = _built_from_scratch(ctx, KEYS)
        assert scope["facts"] == fresh["facts"]
        assert list(scope["facts"]) == list(KEYS)  # declared order, declared keys only
        assert scope["proposals"] == fresh["proposals"]
        assert scope["cycle"] == ctx.cycle
        assert scope["count"]("a") == ctx.count("a")
    assert "undeclared" not in scopes.scope(ctx)["facts"]


def test_each_new_version_gets_a_new_scope_dict_and_the_same_version_shares_one() -> None:
    ctx = Context()
    writer = ContextWriter(ctx)
    scopes = RenderScopes(KEYS)
    first = scopes.scope(ctx)
    assert scopes.scope(ctx) is first
    writer.add_fact(_fact("a", "x"))
    second = scopes.scope(ctx)
    assert second is not first  # a cache keyed on the scope's identity sees the change
    assert [f.id for f in second["facts"]["a"]] == ["x"]
    writer.set_pending([_proposal("b", "y")])
    third = scopes.scope(ctx)
    assert third is not second
    assert [p.id for p in third["proposals"]["b"]] == ["y"]
    writer.set_pending([])
    assert scopes.scope(ctx)["proposals"]["b"] == ()


def test_another_view_is_built_from_scratch() -> None:
    scopes = RenderScopes(KEYS)
    one = Context.from_facts([_fact("a", "1")])
    other = Context.from_facts([_fact("b", "2")])
    assert [f.id for f in scopes.scope(one)["facts"]["a"]] == ["1"]
    scope = scopes.scope(other)
    assert scope["facts"]["a"] == ()
    assert [f.id for f in scope["facts"]["b"]] == ["2"]


def test_views_that_take_turns_keep_their_scopes_up_to_date() -> None:
    """A batch's runs take turns on one loop with the same suggestors: each view keeps
    its scope (not built again when another was asked for in between), advanced by what
    changed, the same as one built from scratch; past `KEEP_VIEWS` views, the oldest
    is built again when it comes back."""
    from converge_dsl.compiler._scope import KEEP_VIEWS

    rng = random.Random(11)
    scopes = RenderScopes(KEYS)
    contexts = [Context() for _ in range(3)]
    writers = [ContextWriter(ctx) for ctx in contexts]
    first = [scopes.scope(ctx) for ctx in contexts]
    assert [scopes.scope(ctx) for ctx in contexts] == first
    assert all(a is b for a, b in zip(first, [scopes.scope(c) for c in contexts], strict=True))
    for step in range(150):
        turn = rng.randrange(3)
        if rng.random() < 0.7:
            writers[turn].add_fact(_fact(rng.choice(KEYS), f"f{step}"))
        else:
            writers[turn].set_pending([_proposal(rng.choice(KEYS), f"p{step}")])
        for ctx in contexts:
            scope, fresh = scopes.scope(ctx), _built_from_scratch(ctx, KEYS)
            assert (scope["facts"], scope["proposals"]) == (fresh["facts"], fresh["proposals"])
            assert scopes.scope(ctx) is scope
    many = [Context.from_facts([_fact("a", str(i))]) for i in range(KEEP_VIEWS + 1)]
    for ctx in many:
        scopes.scope(ctx)
    again = scopes.scope(contexts[0])  # dropped by the many since: built again, the same
    assert again["facts"] == _built_from_scratch(contexts[0], KEYS)["facts"]
    assert [f.id for f in scopes.scope(many[-1])["facts"]["a"]] == [str(KEEP_VIEWS)]


class _PlainView:
    """A `ContextView` that is not a `Context`: scopes rebuild it, `owns` reads it."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self.version = ctx.version
        self.cycle = ctx.cycle

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def test_owns_answers_from_the_index_for_facts_and_pending_proposals() -> None:
    ctx = Context.from_facts([_fact("a", "1", "r1@t")], pending=[_proposal("b", "2", "r2@t")])
    scopes = RenderScopes(KEYS)
    cases = [("a", "r1@t", True), ("a", "r2@t", False), ("b", "r2@t", True), ("c", "r1@t", False)]
    for key, source, expected in cases:
        assert scopes.owns(ctx, key, source) is expected
        assert (source in scopes.own_sources(ctx, key)) is expected
        assert scopes.owns(_PlainView(ctx), key, source) is expected  # type: ignore[arg-type]
    ContextWriter(ctx).set_pending([])
    assert not scopes.owns(ctx, "b", "r2@t")


# -- linear reads over compiled rule chains ----------------------------------------

_READS = ("get", "proposals", "fact", "count", "has", "holds_source", "facts_since")


def _chain(length: int) -> str:
    """Rule i reads key k{i-1} and writes k{i}; the seed is under k0."""
    keys = ", ".join(f"{{name: k{i}}}" for i in range(length + 1))
    lines = [
        "apiVersion: converge-dsl/v1",
        "kind: Pipeline",
        "name: chain",
        f"keys: [{keys}]",
        f"budget: {{max_cycles: {length + 5}, max_facts: {length + 5}}}",
        "seeds: [{id: s, key: k0, content: go}]",
        "suggestors:",
    ]
    for i in range(1, length + 1):
        lines.append(
            f"  - {{name: r{i}, kind: rule, dependencies: [k{i - 1}], "
            f"emit: [{{key: k{i}, id: f, content: x}}]}}"
        )
    return "\n".join(lines) + "\n"


def _reads_of_a_chain(length: int, monkeypatch: pytest.MonkeyPatch) -> int:
    document = load_text(_chain(length), "chain.yaml")
    compiled = compile_pipeline(document, inputs={}, models={}, usage=None)  # type: ignore[arg-type]
    engine = Engine(budget=compiled.budget, declared_keys=compiled.declared_keys)
    for suggestor in compiled.suggestors:
        engine.register(suggestor)
    counter = [0]
    with monkeypatch.context() as patch:
        for name in _READS:
            original: Callable[..., Any] = getattr(Context, name)

            def counted(self: Context, *args: Any, _original: Any = original) -> Any:
                counter[0] += 1
                return _original(self, *args)

            patch.setattr(Context, name, counted)
        result = asyncio.run(engine.run(compiled.seeds))
    assert str(result.stop_reason) == "converged"
    assert result.context.count(f"k{length}") == 1
    return counter[0]


def test_context_reads_grow_linearly_with_a_compiled_rule_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from converge_dsl.engine import types as engine_types

    # 10,000 declared keys would fill the process's key intern table for every later test.
    monkeypatch.setattr(engine_types, "_INTERNED", dict(engine_types._INTERNED))
    small = _reads_of_a_chain(1_000, monkeypatch)
    large = _reads_of_a_chain(10_000, monkeypatch)
    assert large / small <= 11, (small, large)
    assert large <= 10 * 10_000  # a handful per cycle, not one per declared key
