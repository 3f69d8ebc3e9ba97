from __future__ import annotations

import asyncio

from converge_dsl.engine import (
    Engine,
    ProposedFact,
    Provenance,
    ReactOnceSuggestor,
    SeedSuggestor,
    StopReason,
)


def test_seed_then_react_once_gives_one_hypothesis_per_seed() -> None:
    engine = Engine()
    engine.register(SeedSuggestor("seed", [("a", "alpha"), ("b", {"x": 1})]))
    engine.register(ReactOnceSuggestor())
    result = asyncio.run(engine.run())
    assert result.stop_reason is StopReason.CONVERGED
    hypotheses = result.context.get("hypotheses")
    assert [(h.id, h.content, h.provenance.source) for h in hypotheses] == [
        ("hypothesis-a", "Hypothesis about alpha", "react-once"),
        ("hypothesis-b", 'Hypothesis about {"x":1}', "react-once"),
    ]
    assert result.context.get("seeds")[0].provenance == Provenance("seed")
    for suggestor in engine.suggestors:
        assert not suggestor.accepts(result.context)


def test_react_once_reacts_to_run_seeds_and_only_once() -> None:
    engine = Engine()
    react = ReactOnceSuggestor("react")
    engine.register(react)
    seed = ProposedFact("seeds", "s", "market", 1.0, Provenance("pipeline"))
    result = asyncio.run(engine.run([seed]))
    assert [h.id for h in result.context.get("hypotheses")] == ["hypothesis-s"]
    assert result.cycles == 2
    assert react.provenance() == Provenance("react")
    assert react.complexity_hint() is None


def test_seed_suggestor_keeps_given_proposals_and_target_key() -> None:
    own = ProposedFact("constraints", "c", "budget", 0.9, Provenance("elsewhere"))
    suggestor = SeedSuggestor("seed", [own, ("x", "y")], key="signals")
    assert suggestor.facts[0] is own
    assert suggestor.facts[1].key == "signals"
    assert suggestor.facts[1].provenance == Provenance("seed")
