"""Admission of proposals: the kernel rules, the promotion gate, and promotion itself.

Private: `_Run` inherits `Admission`, which holds the state the rules need
(context, dirty keys, Lamport time, pending and human-rejected proposals) and
emits events. Every rule that ends the run raises `_Stop`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from converge_dsl.clock import Clock
from converge_dsl.diagnostics import did_you_mean
from converge_dsl.engine import events as ev
from converge_dsl.engine.budget import Budget, StopReason
from converge_dsl.engine.context import Context
from converge_dsl.engine.events import EventSink
from converge_dsl.engine.policy import PromotionGate
from converge_dsl.engine.state import PendingProposal
from converge_dsl.engine.types import (
    DIAGNOSTIC,
    Fact,
    PromotionRecord,
    ProposedFact,
    Provenance,
    freeze_json,
    key_sort_key,
)
from converge_dsl.errors import ConvergeError, KernelError

if TYPE_CHECKING:
    from converge_dsl.engine.engine import Engine

_ENGINE_PROVENANCE = Provenance("engine")


class _Stop(Exception):
    def __init__(self, reason: StopReason, error: ConvergeError | None = None) -> None:
        super().__init__(str(reason))
        self.reason = reason
        self.error = error


def _sorted_keys(keys: set[str]) -> tuple[str, ...]:
    return tuple(sorted(keys, key=key_sort_key))


def _same_content(a: ProposedFact | Fact, b: ProposedFact) -> bool:
    if isinstance(a.content, str) or isinstance(b.content, str):
        return a.content == b.content
    return a.content_text() == b.content_text()


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Admission:
    engine: Engine
    ctx: Context
    gate: PromotionGate
    budget: Budget
    clock: Clock
    sink: EventSink | None
    emitting: bool
    events: list[BaseModel]
    dirty: set[str]
    lamport: int
    rejected: set[str]
    pending: list[PendingProposal]
    promoted: int
    evidence: dict[str, tuple[str, ...]]
    links: dict[tuple[str | None, int], str]

    def _admit(
        self, name: str, proposal: ProposedFact, cycle: int, *, gate: str, approver: str, hitl: bool
    ) -> None:
        """Pass `proposal` from `name` through the kernel rules and the gate."""
        key = proposal.key
        if key not in self.engine._known_keys:
            close = did_you_mean(key, self.engine._known_keys)
            raise _Stop(
                StopReason.ERROR,
                KernelError(
                    f"proposal {proposal.id!r} targets unknown key {key!r}",
                    hint=f"did you mean {close!r}?" if close else "declare the key in `keys:`",
                    suggestor=name,
                    cycle=cycle,
                ),
            )
        if proposal.id in self.rejected:
            return  # a human said no: silently dropped
        existing: ProposedFact | Fact | None = self.ctx.fact(key, proposal.id)
        if existing is None:
            existing = (
                next(
                    (
                        p.proposal
                        for p in self.pending
                        if p.proposal.key == key and p.id == proposal.id
                    ),
                    None,
                )
                if self.pending
                else None
            )
        if existing is not None:
            if _same_content(existing, proposal):
                return
            raise _Stop(
                StopReason.ERROR,
                KernelError(
                    f"conflicting fact {key}/{proposal.id}: it holds "
                    f"{_short(existing.content_text())!r} (from {existing.provenance}), "
                    f"the new proposal holds {_short(proposal.content_text())!r}",
                    hint="the same id must always carry the same content",
                    suggestor=name,
                    cycle=cycle,
                ),
            )
        reason = self.gate.rejection(proposal)
        if reason is not None:
            self._reject(name, proposal, reason, cycle)
            return
        if hitl:
            why = self.gate.needs_human(proposal)
            if why is not None:
                self.pending.append(PendingProposal(proposal, name, cycle, why))
                if self.emitting:
                    self._emit(
                        ev.ProposalPending(
                            cycle=cycle, suggestor=name, key=key, id=proposal.id, reason=why
                        )
                    )
                return
        self._promote(
            name, proposal, cycle, gate=gate, approver=approver, evidence=self._evidence(name)
        )

    def _admit_checked(
        self,
        name: str,
        proposal: ProposedFact,
        cycle: int,
        *,
        gate: str,
        approver: str,
        evidence: tuple[str, ...],
    ) -> None:
        """Promote an already-gated proposal (identical fact: no-op; different one: conflict)."""
        existing = self.ctx.fact(proposal.key, proposal.id)
        if existing is None:
            self._promote(name, proposal, cycle, gate=gate, approver=approver, evidence=evidence)
        elif not _same_content(existing, proposal):
            self._admit(name, proposal, cycle, gate=gate, approver=approver, hitl=False)

    def _promote(
        self,
        name: str | None,
        proposal: ProposedFact,
        cycle: int,
        *,
        gate: str,
        approver: str,
        evidence: tuple[str, ...],
    ) -> None:
        ctx = self.ctx
        if ctx.version >= self.budget.max_facts:
            raise _Stop(StopReason.FACT_BUDGET_EXHAUSTED)
        self.lamport += 1
        key = proposal.key
        ctx._add_fact(
            Fact(
                key=key,
                id=proposal.id,
                content=proposal.content,
                provenance=proposal.provenance,
                confidence=proposal.confidence,
                promotion=PromotionRecord(
                    gate=gate,
                    approver=approver,
                    cycle=cycle,
                    evidence=evidence,
                    trace_link=self._trace_link(name, cycle),
                    logical_time=self.lamport,
                ),
            )
        )
        self.dirty.add(key)
        self.promoted += 1
        if self.emitting:
            self._emit(
                ev.FactPromoted(
                    cycle=cycle,
                    suggestor=name,
                    key=key,
                    id=proposal.id,
                    gate=gate,
                    logical_time=self.lamport,
                )
            )

    def _evidence(self, name: str) -> tuple[str, ...]:
        # Shared per suggestor: one tuple for all its facts, not one per fact.
        evidence = self.evidence.get(name)
        if evidence is None:
            evidence = self.evidence[name] = (f"suggestor:{name}",)
        return evidence

    def _trace_link(self, name: str | None, cycle: int) -> str:
        link = self.links.get((name, cycle))
        if link is None:
            link = f"cycle/{cycle}/{name}" if name else f"cycle/{cycle}"
            if len(self.links) > 4096:
                self.links.clear()
            self.links[(name, cycle)] = link
        return link

    def _engine_fact(self, fact_id: str, content: dict[str, Any], cycle: int) -> None:
        """A `diagnostic` fact written by the engine itself; an existing id is kept."""
        if self.ctx.fact(DIAGNOSTIC, fact_id) is None:
            self._promote(
                None,
                ProposedFact(DIAGNOSTIC, fact_id, freeze_json(content), 1.0, _ENGINE_PROVENANCE),
                cycle,
                gate="engine",
                approver="engine",
                evidence=(),
            )

    def _reject(self, name: str, proposal: ProposedFact, reason: str, cycle: int) -> None:
        if self.emitting:
            self._emit(
                ev.ProposalRejected(
                    cycle=cycle, suggestor=name, key=proposal.key, id=proposal.id, reason=reason
                )
            )
        self._engine_fact(
            f"validation:rejected:{proposal.id}",
            {
                "proposal": proposal.id,
                "key": str(proposal.key),
                "suggestor": name,
                "reason": reason,
            },
            cycle,
        )

    def _timing(self, duration: float | None = None) -> ev.Timing:
        return ev.Timing(at=self.clock.monotonic(), duration_s=duration)

    def _emit(self, event: BaseModel) -> None:
        if self.engine._record_events:
            self.events.append(event)
        if self.sink is not None:
            self.sink(event)
