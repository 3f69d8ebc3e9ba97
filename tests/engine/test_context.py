from __future__ import annotations

from converge_dsl.engine import (
    Context,
    ContextView,
    Fact,
    PromotionRecord,
    ProposedFact,
    Provenance,
)
from converge_dsl.engine.context import ContextWriter


def _fact(key: str, fact_id: str, content: str = "c", time: int = 1) -> Fact:
    return Fact(
        key,
        fact_id,
        content,
        Provenance("t"),
        1.0,
        PromotionRecord("auto", "engine", 1, (), None, time),
    )


def test_context_is_a_context_view_with_per_key_order() -> None:
    ctx = Context.from_facts(
        [_fact("hypotheses", "h1"), _fact("seeds", "s1"), _fact("seeds", "s2")], cycle=3
    )
    assert isinstance(ctx, ContextView)
    assert [f.id for f in ctx.get("seeds")] == ["s1", "s2"]
    assert ctx.count("seeds") == 2
    assert ctx.count("votes") == 0
    assert ctx.get("votes") == ()
    assert ctx.has("hypotheses")
    assert not ctx.has("votes")
    assert ctx.fact("seeds", "s2") is not None
    assert ctx.fact("hypotheses", "s2") is None
    assert ctx.keys() == ("seeds", "hypotheses")  # DESIGN order, not insertion order
    assert ctx.version == 3
    assert ctx.cycle == 3
    assert [f.id for f in ctx.facts()] == ["h1", "s1", "s2"]


def test_get_sees_appended_facts_and_is_a_stable_tuple() -> None:
    ctx = Context()
    writer = ContextWriter(ctx)
    writer.add_fact(_fact("seeds", "a"))
    first = ctx.get("seeds")
    writer.add_fact(_fact("seeds", "b"))
    assert [f.id for f in first] == ["a"]
    assert [f.id for f in ctx.get("seeds")] == ["a", "b"]
    assert ctx.get("seeds") is ctx.get("seeds")


def test_from_facts_keeps_the_first_of_duplicate_ids_and_pending_proposals() -> None:
    pending = ProposedFact("strategies", "p", "x", 0.9, Provenance("s"))
    ctx = Context.from_facts(
        [_fact("seeds", "a", "one"), _fact("seeds", "a", "two")], pending=[pending]
    )
    assert [f.content for f in ctx.get("seeds")] == ["one"]
    assert ctx.proposals("strategies") == (pending,)
    assert ctx.proposals("seeds") == ()
    assert ctx.pending() == (pending,)
    assert len(ctx) == 1


def test_a_writer_sets_the_cycle_and_the_pending_proposals_of_its_context() -> None:
    ctx = Context()
    writer = ContextWriter(ctx)
    assert writer.context is ctx
    writer.set_cycle(4)
    first = ProposedFact("strategies", "p", "x", 0.9, Provenance("s"))
    second = ProposedFact("seeds", "q", "y", 0.9, Provenance("s"))
    writer.set_pending([first, second])
    assert ctx.cycle == 4
    assert ctx.proposals("strategies") == (first,)
    assert ctx.pending() == (second, first)  # key sort order
    writer.set_pending(())
    assert ctx.pending() == ()


def test_a_context_has_no_public_mutators() -> None:
    public = {name for name in dir(Context) if not name.startswith("_")}
    assert not {"add_fact", "set_cycle", "set_pending"} & public


def test_the_source_index_follows_promotions_and_pending_replacements() -> None:
    ctx = Context()
    writer = ContextWriter(ctx)
    writer.add_fact(Fact("seeds", "s1", "c", Provenance("a@p"), 1.0, _fact("x", "y").promotion))
    writer.add_fact(Fact("seeds", "s2", "c", Provenance("b@p"), 1.0, _fact("x", "y").promotion))
    assert ctx.holds_source("seeds", "a@p")
    assert ctx.holds_source("seeds", "b@p")
    assert not ctx.holds_source("seeds", "c@p")
    assert not ctx.holds_source("votes", "a@p")
    before = ctx.pending_version
    writer.set_pending([ProposedFact("votes", "v", "c", 1.0, Provenance("c@p"))])
    assert ctx.pending_version == before + 1
    assert ctx.holds_source("votes", "c@p")
    assert ctx.pending_keys() == frozenset({"votes"})
    writer.set_pending([])
    assert not ctx.holds_source("votes", "c@p")
    assert ctx.pending_keys() == frozenset()


def test_facts_since_a_version_are_the_later_promotions_in_order() -> None:
    ctx = Context.from_facts([_fact("seeds", "s1"), _fact("hypotheses", "h1")])
    version = ctx.version
    writer = ContextWriter(ctx)
    writer.add_fact(_fact("votes", "v1"))
    writer.add_fact(_fact("seeds", "s2"))
    assert [f.id for f in ctx.facts_since(version)] == ["v1", "s2"]
    assert ctx.facts_since(ctx.version) == []
    assert [f.id for f in ctx.facts_since(0)] == ["s1", "h1", "v1", "s2"]
