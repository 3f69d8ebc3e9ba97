"""Admission: effects merged through the kernel rules and the promotion gate into the context.

Engine-internal. An `Admission` is built for one run with everything it
needs (the run's state, the gate, the known keys, the fact budget, the
invariants, the event log) and is the only writer of facts during the run:
it promotes, rejects (into `diagnostic` facts), holds proposals for a human,
and checks invariants. Every rule that ends the run raises `Stop`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NoReturn

from converge_dsl import codes
from converge_dsl._fact_ids import shown_id
from converge_dsl.diagnostics import did_you_mean, suggestion
from converge_dsl.engine import events as ev
from converge_dsl.engine._data import held_text, same_fact
from converge_dsl.engine._opening import pending_event
from converge_dsl.engine._runstate import EventLog, RunState, Stop
from converge_dsl.engine.budget import StopReason
from converge_dsl.engine.events import from_fields
from converge_dsl.engine.invariants import Invariant, InvariantClass
from converge_dsl.engine.policy import PromotionGate
from converge_dsl.engine.state import PendingProposal
from converge_dsl.engine.types import (
    DIAGNOSTIC,
    Fact,
    PromotionRecord,
    ProposedFact,
    Provenance,
    Suggestor,
)
from converge_dsl.errors import ConvergeError, KernelError, RunError
from converge_dsl.sandbox import DeadlinePassed, Exhausted, deadline_passed

_ENGINE_PROVENANCE = Provenance("engine")
_SEED_PROVENANCE = Provenance("seed")


class Admission:
    """Seeds, merges and invariant checks of a run (docs/architecture.md §7)."""

    __slots__ = (
        "_bases",
        "_ctx",
        "_evidence",
        "_gate",
        "_invariants",
        "_known_keys",
        "_log",
        "_max_facts",
        "_state",
        "_writer",
    )

    def __init__(
        self,
        *,
        state: RunState,
        gate: PromotionGate,
        known_keys: frozenset[str],
        max_facts: int,
        invariants: Mapping[InvariantClass, Sequence[Invariant]],
        log: EventLog,
    ) -> None:
        self._state = state
        self._ctx = state.context
        self._writer = state.writer
        self._gate = gate
        self._known_keys = known_keys
        self._max_facts = max_facts
        self._invariants = invariants
        self._log = log
        self._evidence: dict[str, tuple[str, ...]] = {}
        self._bases: dict[tuple[str | None, int, str, str, tuple[str, ...]], PromotionRecord] = {}

    # -- whole effects -------------------------------------------------------------

    def seed(self, seeds: Sequence[ProposedFact], staged: Sequence[PendingProposal]) -> None:
        """Promote seed facts and human-approved proposals before the first cycle."""
        ctx = self._ctx
        before, cycle = ctx.version, ctx.cycle
        basis = self._basis("seeds", cycle, "seed", "pipeline", self._evidence_of("seeds"))
        for seed in seeds:
            proposal = (
                replace(seed, provenance=_SEED_PROVENANCE) if seed.provenance.is_empty else seed
            )
            if self._passes("seeds", proposal, cycle, hitl=False):
                self._promote("seeds", proposal, cycle, "seed", basis)
        for item in staged:
            self.admit_checked(
                item.suggestor,
                item.proposal,
                item.cycle,
                gate="human",
                approver="human",
                evidence=(f"suggestor:{item.suggestor}", f"hitl:{item.reason}"),
            )
        if ctx.version != before:
            self.check_invariants("structural")

    def merge(self, suggestor: Suggestor, proposals: Sequence[ProposedFact], cycle: int) -> None:
        """Admit one suggestor's proposals in order, then check the structural invariants."""
        name = suggestor.name
        before = self._ctx.version
        require = self._gate.policy.require_provenance
        basis: PromotionRecord | None = None  # one record for the facts of this merge
        for proposed in proposals:
            proposal = proposed
            if proposal.provenance.is_empty:
                if require:
                    raise Stop(
                        StopReason.ERROR,
                        KernelError(
                            f"proposal {proposal.key}/{proposal.id} has an empty provenance",
                            hint="every proposal must say where it came from",
                            suggestor=name,
                            cycle=cycle,
                        ),
                    )
                proposal = replace(proposal, provenance=suggestor.provenance())
            if self._passes(name, proposal, cycle, hitl=True):
                if basis is None:  # a suggestor merges once a cycle: its record is a new one
                    link = f"cycle/{cycle}/{name}"
                    evidence = self._evidence_of(name)
                    basis = PromotionRecord.shared("auto", "engine", cycle, evidence, link)
                self._promote(name, proposal, cycle, "auto", basis)
        if self._ctx.version != before:
            self.check_invariants("structural", suggestor=name)

    # -- one proposal --------------------------------------------------------------

    def admit(
        self, name: str, proposal: ProposedFact, cycle: int, *, gate: str, approver: str, hitl: bool
    ) -> None:
        """Pass `proposal` from `name` through the kernel rules and the gate, and promote it."""
        if self._passes(name, proposal, cycle, hitl=hitl):
            basis = self._basis(name, cycle, gate, approver, self._evidence_of(name))
            self._promote(name, proposal, cycle, gate, basis)

    def _passes(self, name: str, proposal: ProposedFact, cycle: int, *, hitl: bool) -> bool:
        """Whether `proposal` is to be promoted: the kernel rules (which may stop the run),
        then the gate (a rejection becomes a `diagnostic` fact; with `hitl`, a proposal the
        policy gates is held for a human)."""
        key = proposal.key
        if key not in self._known_keys:
            self._unknown_key(name, proposal, cycle)
        if proposal.id in self._state.rejected:
            return False  # a human said no: silently dropped
        existing = self._existing(key, proposal.id)
        if existing is not None:
            if same_fact(existing, proposal):
                return False
            self._conflict(name, existing, proposal, cycle)
        try:
            reason = self._gate.rejection(proposal)
        except Exhausted as exc:  # its data could not be checked within the bounds
            self._unchecked(name, proposal, exc, cycle)
        if reason is not None:
            self._reject(name, proposal, reason, cycle)
            return False
        if hitl:
            why = self._gate.needs_human(proposal)
            if why is not None:
                held = PendingProposal(proposal, name, cycle, why)
                self._state.pending.append(held)
                if self._log.enabled:
                    self._log.emit(pending_event(held))
                return False
        return True

    def _unchecked(self, name: str, proposal: ProposedFact, exc: Exhausted, cycle: int) -> NoReturn:
        """Stop the run: checking `proposal`'s data crossed a bound of the governor
        (`error`, or `time_budget_exhausted` for the deadline), naming the key and keyword."""
        exc.message = f"proposal {proposal.id!r} to key {proposal.key!r}: {exc.message}"
        exc.args = (exc.message,)
        exc.suggestor, exc.cycle = name, cycle
        timed_out = isinstance(exc, DeadlinePassed)
        reason = StopReason.TIME_BUDGET_EXHAUSTED if timed_out else StopReason.ERROR
        raise Stop(reason, exc, code=exc.code, suggestor=name) from None

    def admit_checked(
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
        existing = self._ctx.fact(proposal.key, proposal.id)
        if existing is None:
            self.promote(name, proposal, cycle, gate=gate, approver=approver, evidence=evidence)
        elif not same_fact(existing, proposal):
            self.admit(name, proposal, cycle, gate=gate, approver=approver, hitl=False)

    def promote(
        self,
        name: str | None,
        proposal: ProposedFact,
        cycle: int,
        *,
        gate: str,
        approver: str,
        evidence: tuple[str, ...],
    ) -> None:
        """Turn `proposal` into a fact (over `max_facts` -> `fact_budget_exhausted`)."""
        self._promote(
            name, proposal, cycle, gate, self._basis(name, cycle, gate, approver, evidence)
        )

    def _promote(
        self,
        name: str | None,
        proposal: ProposedFact,
        cycle: int,
        gate: str,
        basis: PromotionRecord,
    ) -> None:
        """`promote`, with the promotion record (`_basis`) already made."""
        state = self._state
        if self._ctx.version >= self._max_facts:
            raise Stop(StopReason.FACT_BUDGET_EXHAUSTED, suggestor=name)
        state.lamport += 1
        key = proposal.key
        self._writer.add_fact(Fact.promoted(proposal, basis, state.lamport))
        state.dirty.add(key)
        state.promoted += 1
        if self._log.enabled:
            provenance = proposal.provenance
            self._log.emit(
                from_fields(
                    ev.FactPromoted,
                    {
                        "cycle": cycle,
                        "suggestor": name,
                        "key": key,
                        "id": proposal.id,
                        "gate": gate,
                        "logical_time": state.lamport,
                        "data": proposal.data,
                        "content": proposal.content,
                        "confidence": proposal.confidence,
                        "source": provenance.source,
                        "model_id": provenance.model_id,
                        "account": provenance.account,
                    },
                )
            )

    def engine_fact(self, fact_id: str, text: str, data: dict[str, Any], cycle: int) -> None:
        """A `diagnostic` fact written by the engine itself (the finding in words as
        content, its fields as data); an existing id is kept."""
        if self._ctx.fact(DIAGNOSTIC, fact_id) is None:
            self.promote(
                None,
                ProposedFact(DIAGNOSTIC, fact_id, text, 1.0, _ENGINE_PROVENANCE, data),
                cycle,
                gate="engine",
                approver="engine",
                evidence=(),
            )

    # -- invariants ------------------------------------------------------------------

    def check_invariants(
        self, invariant_class: InvariantClass, *, suggestor: str | None = None
    ) -> None:
        """Check one class of invariants against the context, in registration order.

        A critical violation stops the run (`invariant_violated`); any other
        becomes the `diagnostic` fact `invariant:{name}`. `suggestor`: the one
        whose merge is being checked (named by the stop).
        """
        invariants = self._invariants[invariant_class]
        if not invariants:
            return
        ctx, cycle = self._ctx, self._ctx.cycle
        for invariant in invariants:
            try:
                message = invariant.check(ctx)
            except Exception as exc:
                if deadline_passed():  # the check ran out of time, it did not fail
                    raise Stop(StopReason.TIME_BUDGET_EXHAUSTED) from None
                error = (
                    exc
                    if isinstance(exc, ConvergeError)
                    else RunError(
                        f"invariant {invariant.name!r} raised {type(exc).__name__}: {exc}",
                        cycle=cycle,
                    )
                )
                raise Stop(
                    StopReason.ERROR,
                    error,
                    code=codes.STOP_INVARIANT_FAILED,
                    suggestor=suggestor,
                    invariant=invariant.name,
                ) from None
            if self._log.enabled:
                self._log.emit(
                    from_fields(
                        ev.InvariantChecked,
                        {
                            "cycle": cycle,
                            "invariant": invariant.name,
                            "invariant_class": invariant_class,
                            "critical": invariant.critical,
                            "holds": message is None,
                            "message": message,
                        },
                    )
                )
            if message is None:
                continue
            if invariant.critical:
                raise Stop(
                    StopReason.INVARIANT_VIOLATED,
                    RunError(
                        f"{invariant_class} invariant {invariant.name!r} violated: {message}",
                        cycle=cycle,
                    ),
                    suggestor=suggestor,
                    invariant=invariant.name,
                )
            self.engine_fact(
                f"invariant:{invariant.name}",
                f"{invariant_class} invariant {invariant.name!r} does not hold: {message}",
                {"invariant": invariant.name, "class": invariant_class, "message": message},
                cycle,
            )

    # -- rules -------------------------------------------------------------------------

    def _unknown_key(self, name: str, proposal: ProposedFact, cycle: int) -> NoReturn:
        close = did_you_mean(proposal.key, self._known_keys)
        raise Stop(
            StopReason.ERROR,
            KernelError(
                f"proposal {proposal.id!r} targets unknown key {proposal.key!r}",
                hint=suggestion(close) if close else "declare the key in `keys:`",
                suggestor=name,
                cycle=cycle,
            ),
        )

    def _existing(self, key: str, fact_id: str) -> ProposedFact | Fact | None:
        """The fact, or else the proposal pending a human, with this key and id."""
        fact = self._ctx.fact(key, fact_id)
        if fact is not None:
            return fact
        pending = self._state.pending
        if not pending:
            return None
        return next(
            (p.proposal for p in pending if p.proposal.key == key and p.id == fact_id), None
        )

    def _conflict(
        self, name: str, existing: ProposedFact | Fact, proposal: ProposedFact, cycle: int
    ) -> NoReturn:
        raise Stop(
            StopReason.ERROR,
            KernelError(
                f"conflicting fact {proposal.key}/{proposal.id}: it holds "
                f"{held_text(existing)} (from {existing.provenance}), "
                f"the new proposal holds {held_text(proposal)}",
                hint="the same id must always carry the same content and data",
                suggestor=name,
                cycle=cycle,
            ),
            code=codes.STOP_CONFLICT,
        )

    def _reject(self, name: str, proposal: ProposedFact, reason: str, cycle: int) -> None:
        fact_id = shown_id(proposal.id)  # a refused id is not carried on as it is
        if self._log.enabled:
            fields = {
                "cycle": cycle,
                "suggestor": name,
                "key": proposal.key,
                "id": fact_id,
                "reason": reason,
            }
            self._log.emit(from_fields(ev.ProposalRejected, fields))
        self.engine_fact(
            f"validation:rejected:{fact_id}",
            f"{proposal.key}/{fact_id} from {name} rejected: {reason}",
            {
                "proposal": fact_id,
                "key": str(proposal.key),
                "suggestor": name,
                "reason": reason,
            },
            cycle,
        )

    def _evidence_of(self, name: str) -> tuple[str, ...]:
        # Shared per suggestor: one tuple for all its facts, not one per fact.
        evidence = self._evidence.get(name)
        if evidence is None:
            evidence = self._evidence[name] = (f"suggestor:{name}",)
        return evidence

    def _basis(
        self, name: str | None, cycle: int, gate: str, approver: str, evidence: tuple[str, ...]
    ) -> PromotionRecord:
        """The promotion record shared by the facts promoted alike (one per suggestor and cycle,
        as a rule); each fact adds its own logical time (see `Fact.promoted`)."""
        shape = (name, cycle, gate, approver, evidence)
        basis = self._bases.get(shape)
        if basis is None:
            link = f"cycle/{cycle}/{name}" if name else f"cycle/{cycle}"
            basis = PromotionRecord.shared(gate, approver, cycle, evidence, link)
            if len(self._bases) > 4096:
                self._bases.clear()
            self._bases[shape] = basis
        return basis
