from __future__ import annotations

import pytest

from converge_dsl.engine import PromotionGate, PromotionPolicy, ProposedFact, Provenance


def _p(
    content: object = "text", confidence: float = 1.0, key: str = "hypotheses", fid: str = "x"
) -> ProposedFact:
    return ProposedFact(key, fid, content, confidence, Provenance("s"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("proposal", "reason"),
    [
        (_p(fid="  "), "blank id"),
        (_p(fid="a\x00b"), "id 'a\\x00b' holds a NUL byte"),
        (_p(fid="up/../x"), "id 'up/../x' has '..' as a path segment (a folder up)"),
        (_p(fid="a\u202eb"), "id 'a\\u202eb' holds a hidden character (U+202E)"),
        (_p("   "), "blank content"),
        (_p("x" * 21), "content length 21 exceeds max_content_length 20"),
        # a legacy object content is text (its JSON) plus data (the object): both count
        (_p({"k": "x" * 20}), "content and data are 56 characters; max_content_length is 20"),
        (_p("a GUARANTEED"), "content contains forbidden term 'guaranteed'"),
        (_p("ok", 0.2), "confidence 0.2 is below min_confidence 0.5"),
        (_p("ok", float("nan")), "confidence 0 is below min_confidence 0.5"),
    ],
)
def test_rejections_carry_the_reason(proposal: ProposedFact, reason: str) -> None:
    gate = PromotionGate(PromotionPolicy(max_content_length=20, forbidden_terms=("guaranteed",)))
    assert gate.rejection(proposal) == reason


def test_passing_proposals_and_boundaries() -> None:
    gate = PromotionGate(PromotionPolicy(max_content_length=4))
    assert gate.rejection(_p("four", 0.5)) is None  # exactly at both limits
    assert gate.rejection(_p({}, 1.0)) is None  # an object is never "blank text"


def test_human_gating_by_key_and_threshold() -> None:
    gate = PromotionGate(PromotionPolicy(gated_keys=("strategies",), confidence_threshold=0.7))
    assert gate.needs_human(_p(key="strategies")) == "key 'strategies' is gated"
    assert gate.needs_human(_p(confidence=0.7)) == (
        "confidence 0.7 is at or below confidence_threshold 0.7"
    )
    assert gate.needs_human(_p(confidence=0.71)) is None
