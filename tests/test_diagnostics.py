"""`converge_dsl.diagnostics` helpers shared by the stages."""

from __future__ import annotations

from converge_dsl.diagnostics import unknown_name_hint


def test_a_likely_typo_gets_did_you_mean() -> None:
    hint = unknown_name_hint("analsyt", ["analyst", "critic"], "declared: analyst, critic")
    assert hint == "did you mean 'analyst'?"


def test_a_name_like_none_gets_the_fallback() -> None:
    hint = unknown_name_hint("zzz", {"analyst": 1}, "declared: analyst")
    assert hint == "declared: analyst"
