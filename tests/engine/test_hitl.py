"""Human-in-the-loop: gated proposals pause the run; resume applies the decisions."""

from __future__ import annotations

import asyncio

import pytest

from converge_dsl.engine import (
    Engine,
    FactPromoted,
    HitlPause,
    PromotionPolicy,
    ProposalDecided,
    ProposalPending,
    ProposedFact,
    Provenance,
    RunResult,
    StopReason,
    deterministic_dump,
)
from converge_dsl.engine.testing import FnSuggestor
from converge_dsl.errors import UsageError


def P(key: str, fid: str, content: str = "c", confidence: float = 1.0) -> ProposedFact:
    return ProposedFact(key, fid, content, confidence, Provenance("s"))


def _engine() -> Engine:
    engine = Engine(policy=PromotionPolicy(gated_keys=("strategies",), confidence_threshold=0.6))
    engine.register(FnSuggestor("seed", [], lambda ctx: [P("seeds", "m")]))
    engine.register(
        FnSuggestor(
            "plan",
            ["seeds"],
            lambda ctx: [
                P("strategies", "s1", "go"),
                P("hypotheses", "h1", "maybe", 0.55),
                P("hypotheses", "h2", "sure", 0.9),
            ],
        )
    )
    engine.register(
        FnSuggestor("review", ["strategies"], lambda ctx: [P("evaluations", "e1", "ok")])
    )
    return engine


def _paused() -> RunResult:
    result = asyncio.run(_engine().run())
    assert result.stop_reason is StopReason.HITL_PAUSE
    return result


def test_gated_keys_and_low_confidence_pause_with_the_pending_proposals() -> None:
    result = _paused()
    pause = result.pause
    assert isinstance(pause, HitlPause)
    assert [(p.id, p.suggestor, p.cycle) for p in pause.pending] == [
        ("s1", "plan", 2),
        ("h1", "plan", 2),
    ]
    assert pause.pending[0].reason == "key 'strategies' is gated"
    assert result.context.fact("hypotheses", "h2") is not None  # the rest of the cycle merged
    assert result.context.fact("strategies", "s1") is None
    assert [p.id for p in result.context.proposals("strategies")] == ["s1"]
    assert result.cycles == 2


def test_resume_promotes_approved_and_drops_rejected_ids_forever() -> None:
    pause = _paused().pause
    assert pause is not None
    result = asyncio.run(_engine().resume(pause, {"s1": True, "h1": False}))
    assert result.stop_reason is StopReason.CONVERGED
    s1 = result.context.fact("strategies", "s1")
    assert s1 is not None
    assert (s1.promotion.gate, s1.promotion.approver, s1.promotion.cycle) == ("human", "human", 2)
    assert "hitl:key 'strategies' is gated" in s1.promotion.evidence
    assert result.context.fact("evaluations", "e1") is not None  # s1 made strategies dirty
    assert result.context.fact("hypotheses", "h1") is None
    assert result.state.rejected_ids == ("h1",)
    assert result.context.fact("diagnostic", "validation:rejected:h1") is None  # silently dropped


def test_resume_is_deterministic_on_a_fresh_engine() -> None:
    pause = _paused().pause
    assert pause is not None
    first = asyncio.run(_engine().resume(pause, {"s1": True, "h1": True}))
    second = asyncio.run(_engine().resume(pause, {"s1": True, "h1": True}))
    assert first.fingerprint() == second.fingerprint()


def test_decisions_must_name_every_pending_proposal_and_nothing_else() -> None:
    pause = _paused().pause
    assert pause is not None
    with pytest.raises(UsageError, match="no decision for pending proposal"):
        asyncio.run(_engine().resume(pause, {"s1": True}))
    with pytest.raises(UsageError, match="no pending proposal has id 's11'") as caught:
        asyncio.run(_engine().resume(pause, {"s1": True, "h1": True, "s11": False}))
    assert caught.value.hint == "did you mean 's1'?"


def test_a_state_with_pending_proposals_pauses_again_when_run() -> None:
    paused = _paused()
    again = asyncio.run(_engine().run(resume_from=paused.state))
    assert again.stop_reason is StopReason.HITL_PAUSE
    assert again.pause is not None
    assert again.pause.pending == paused.state.pending


def test_resume_emits_each_decision_before_the_approved_facts() -> None:
    pause = _paused().pause
    assert pause is not None
    result = asyncio.run(_engine().resume(pause, {"s1": True, "h1": False}))
    kinds = [event.model_dump()["type"] for event in result.events]
    assert kinds[:4] == ["run_started", "proposal_decided", "proposal_decided", "fact_promoted"]
    decided = [deterministic_dump(e) for e in result.events if isinstance(e, ProposalDecided)]
    assert decided == [
        {
            "type": "proposal_decided",
            "cycle": 2,
            "suggestor": "plan",
            "key": "strategies",
            "id": "s1",
            "decision": "approved",
            "reason": "key 'strategies' is gated",
        },
        {
            "type": "proposal_decided",
            "cycle": 2,
            "suggestor": "plan",
            "key": "hypotheses",
            "id": "h1",
            "decision": "rejected",
            "reason": "confidence 0.55 is at or below confidence_threshold 0.6",
        },
    ]
    promoted = result.events[3]
    assert isinstance(promoted, FactPromoted)
    assert (promoted.id, promoted.gate) == ("s1", "human")


def test_a_run_without_decisions_emits_none() -> None:
    result = asyncio.run(_engine().run())
    assert not [e for e in result.events if isinstance(e, ProposalDecided)]


def test_a_still_paused_state_lists_its_pending_proposals_again() -> None:
    paused = _paused()
    again = asyncio.run(_engine().run(resume_from=paused.state))
    pending = [e for e in again.events if isinstance(e, ProposalPending)]
    assert [(e.id, e.cycle, e.suggestor, e.reason) for e in pending] == [
        (p.id, p.cycle, p.suggestor, p.reason) for p in paused.state.pending
    ]
    assert [e.model_dump()["type"] for e in again.events][-2:] == ["hitl_paused", "run_finished"]
