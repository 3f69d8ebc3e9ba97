"""The promotion gate: which proposals become facts, which are rejected, which wait for a human.

Automatic checks run in this order and the first failure is the reason:
blank id; an id that cannot name a fact (`converge_dsl._fact_ids`: a NUL byte,
a control or hidden character, a `..` segment between slashes); blank content
(when there is no data); data that is not JSON; size (content plus the
canonical JSON of data, against `max_content_length`); the key's schema
(`key_schemas`, JSON Schema draft 2020-12, checked against the data, `None` as
null); forbidden terms (case-insensitive, in content and data); confidence
below `min_confidence`. A proposal that passes them waits
for a human when its key is in `gated_keys` or its confidence is at or below
`confidence_threshold`. (Empty provenance is not a rejection but a kernel
error; the engine checks it before the gate.) A proposal that carries
evidence that its data fits its key's schema (`ProposedFact._vouched`, by the
llm suggestor that checked its item) has that check charged, not made again,
and is known to be JSON; the verdicts and their order are the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from converge_dsl._fact_ids import id_refusal
from converge_dsl._json_types import JsonSchema
from converge_dsl.engine._data import KeySchemas, json_problem
from converge_dsl.engine.types import FrozenDict, ProposedFact, canonical_json, freeze_json


@dataclass(frozen=True, slots=True)
class PromotionPolicy:
    """Configuration of the promotion gate (docs/architecture.md §7, language `promotion:`)."""

    min_confidence: float = 0.5
    max_content_length: int = 10000
    require_provenance: bool = True
    forbidden_terms: tuple[str, ...] = ()
    gated_keys: tuple[str, ...] = ()
    confidence_threshold: float | None = None
    key_schemas: Mapping[str, JsonSchema] = field(default_factory=FrozenDict)
    """Key -> JSON Schema (draft 2020-12) that the data of every fact on that key must fit."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "forbidden_terms", tuple(self.forbidden_terms))
        object.__setattr__(self, "gated_keys", tuple(self.gated_keys))
        object.__setattr__(self, "key_schemas", freeze_json(dict(self.key_schemas)))


class PromotionGate:
    """A compiled `PromotionPolicy`: lower-cased terms, a gated-key set, compiled key schemas.

    Building it compiles every key schema; an invalid one is a `RunError`.
    """

    __slots__ = ("_gated", "_policy", "_schemas", "_terms")

    def __init__(self, policy: PromotionPolicy) -> None:
        self._policy = policy
        self._terms = tuple((term, term.casefold()) for term in policy.forbidden_terms if term)
        self._gated = frozenset(policy.gated_keys)
        self._schemas = KeySchemas(policy.key_schemas)

    @property
    def policy(self) -> PromotionPolicy:
        return self._policy

    def rejection(self, proposal: ProposedFact) -> str | None:
        """Why `proposal` is rejected, or None if it passes the automatic checks."""
        policy = self._policy
        refused = id_refusal(proposal.id)
        if refused is not None:
            return refused
        text, data = proposal.content, proposal.data
        evidence = getattr(proposal, "checked", None)  # unset in an unpickled proposal
        if evidence is not None and not self._schemas.vouched(proposal.key, evidence):
            evidence = None
        limit = policy.max_content_length
        data_text: str | None = None
        if data is None:
            if not text.strip():
                return "blank content"
            if len(text) > limit:
                return f"content length {len(text)} exceeds max_content_length {limit}"
        else:
            # Evidence that the data fits the key's schema says it is JSON too.
            problem = json_problem(data) if evidence is None else None
            if problem is not None:
                return f"{problem} (data must be JSON)"
            data_text = canonical_json(data)
            size = len(text) + len(data_text)
            if size > limit:
                return f"content and data are {size} characters; max_content_length is {limit}"
        if self._schemas:
            problem = self._schemas.problem(proposal.key, data_text, data, evidence)
            if problem is not None:
                return problem
        if self._terms:
            found = self._forbidden(text, "content") or self._forbidden(data_text, "data")
            if found is not None:
                return found
        if proposal.confidence < policy.min_confidence:
            return (
                f"confidence {proposal.confidence:g} is below min_confidence "
                f"{policy.min_confidence:g}"
            )
        return None

    def _forbidden(self, text: str | None, what: str) -> str | None:
        if not text:
            return None
        folded = text.casefold()
        for term, folded_term in self._terms:
            if folded_term in folded:
                return f"{what} contains forbidden term {term!r}"
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


# The gates compiled so far, by policy identity (the policy kept alive with its gate).
_GATES: dict[int, tuple[PromotionPolicy, PromotionGate]] = {}
_KEEP_GATES = 32


def gate_of(policy: PromotionPolicy) -> PromotionGate:
    """The `PromotionGate` of `policy`, compiled once per policy object.

    A gate is immutable once built; the engines of many runs of one compiled
    pipeline (a batch) share their settings' policy, so they share its gate
    instead of compiling every key schema per run.
    """
    kept = _GATES.get(id(policy))
    if kept is not None and kept[0] is policy:
        return kept[1]
    gate = PromotionGate(policy)
    if len(_GATES) >= _KEEP_GATES:
        _GATES.clear()
    _GATES[id(policy)] = (policy, gate)
    return gate
