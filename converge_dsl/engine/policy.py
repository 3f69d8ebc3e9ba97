"""The promotion gate: which proposals become facts, which are rejected, which wait for a human.

Automatic checks run in this order and the first failure is the reason:
blank id, blank text, content length, forbidden terms (case-insensitive),
confidence below `min_confidence`. A proposal that passes them waits for a
human when its key is in `gated_keys` or its confidence is at or below
`confidence_threshold`. (Empty provenance is not a rejection but a kernel
error; the engine checks it before the gate.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from converge_dsl.engine.types import ProposedFact


@dataclass(frozen=True, slots=True)
class PromotionPolicy:
    """Configuration of the promotion gate (docs/architecture.md §7, language `promotion:`)."""

    min_confidence: float = 0.5
    max_content_length: int = 10000
    require_provenance: bool = True
    forbidden_terms: tuple[str, ...] = ()
    gated_keys: tuple[str, ...] = ()
    confidence_threshold: float | None = None
    key_schemas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "forbidden_terms", tuple(self.forbidden_terms))
        object.__setattr__(self, "gated_keys", tuple(self.gated_keys))


class PromotionGate:
    """A compiled `PromotionPolicy`: lower-cased terms and a gated-key set."""

    __slots__ = ("_gated", "_policy", "_terms")

    def __init__(self, policy: PromotionPolicy) -> None:
        self._policy = policy
        self._terms = tuple((term, term.casefold()) for term in policy.forbidden_terms if term)
        self._gated = frozenset(policy.gated_keys)

    @property
    def policy(self) -> PromotionPolicy:
        return self._policy

    def rejection(self, proposal: ProposedFact) -> str | None:
        """Why `proposal` is rejected, or None if it passes the automatic checks."""
        policy = self._policy
        if not proposal.id.strip():
            return "blank id"
        text = proposal.content_text()
        if isinstance(proposal.content, str) and not text.strip():
            return "blank content"
        if len(text) > policy.max_content_length:
            return (
                f"content length {len(text)} exceeds max_content_length {policy.max_content_length}"
            )
        if self._terms:
            folded = text.casefold()
            for term, folded_term in self._terms:
                if folded_term in folded:
                    return f"content contains forbidden term {term!r}"
        if proposal.confidence < policy.min_confidence:
            return (
                f"confidence {proposal.confidence:g} is below min_confidence "
                f"{policy.min_confidence:g}"
            )
        return None

    def needs_human(self, proposal: ProposedFact) -> str | None:
        """Why `proposal` waits for a human decision, or None."""
        if proposal.key in self._gated:
            return f"key {proposal.key!r} is gated"
        threshold = self._policy.confidence_threshold
        if threshold is not None and proposal.confidence <= threshold:
            return (
                f"confidence {proposal.confidence:g} is at or below "
                f"confidence_threshold {threshold:g}"
            )
        return None
