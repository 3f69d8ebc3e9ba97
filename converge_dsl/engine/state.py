"""What a run leaves behind: the resumable `EngineState`, a `HitlPause`, the `RunResult`.

`EngineState` is everything the engine needs to continue after a cycle
(facts with promotion records, cycle, dirty keys, Lamport time, ids a human
rejected, proposals awaiting a human, usage). `to_json`/`from_json` round-trip
exactly. Law: a fresh engine with the same suggestors, resumed from the state
after cycle k, reaches the same `RunResult.fingerprint()` as the run that was
never interrupted.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from converge_dsl import codes
from converge_dsl.engine.budget import StopReason, UsageTotals
from converge_dsl.engine.context import Context
from converge_dsl.engine.stops import StopNote
from converge_dsl.engine.types import (
    Fact,
    PromotionRecord,
    ProposedFact,
    Provenance,
    canonical_json,
    freeze_json,
)
from converge_dsl.errors import ConvergeError

STATE_FORMAT = "converge-dsl/engine-state/v1"
_NO_USAGE = UsageTotals()


@dataclass(frozen=True, slots=True)
class PendingProposal:
    """A proposal held for a human decision: who proposed it, in which cycle, and why it waits."""

    proposal: ProposedFact
    suggestor: str
    cycle: int
    reason: str

    @property
    def id(self) -> str:
        return self.proposal.id


@dataclass(frozen=True, slots=True, repr=False)
class EngineState:
    """The complete, serialisable state of a run after a cycle."""

    facts: tuple[Fact, ...] = ()
    cycle: int = 0
    dirty: tuple[str, ...] = ()
    lamport: int = 0
    rejected_ids: tuple[str, ...] = ()
    pending: tuple[PendingProposal, ...] = ()
    usage: UsageTotals = _NO_USAGE

    def __repr__(self) -> str:
        # Short on purpose: asyncio formats a finished task's result on some paths
        # (e.g. when `asyncio.run` restores its SIGINT handler), and states can be huge.
        return (
            f"EngineState(cycle={self.cycle}, facts={len(self.facts)}, "
            f"dirty={list(self.dirty)}, pending={len(self.pending)})"
        )

    def to_data(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "cycle": self.cycle,
            "lamport": self.lamport,
            "dirty": list(self.dirty),
            "rejected_ids": list(self.rejected_ids),
            "usage": usage_to_data(self.usage),
            "facts": [fact_to_data(fact) for fact in self.facts],
            "pending": [pending_to_data(item) for item in self.pending],
        }

    def to_json(self) -> str:
        """Canonical JSON text (sorted keys, no spaces); `from_json` restores it exactly."""
        return canonical_json(self.to_data())

    @classmethod
    def from_json(cls, text: str) -> EngineState:
        """Parse `to_json` output. Malformed text raises `ConvergeError`."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConvergeError(
                f"malformed engine state: {type(exc).__name__}: {exc}",
                hint="the checkpoint file may be truncated or from another version",
                code=codes.CHECKPOINT_CORRUPT,
            ) from None
        return cls.from_data(data)

    @classmethod
    def from_data(cls, data: Any) -> EngineState:
        """The state of `to_data` output (parsed JSON). Malformed data raises `ConvergeError`."""
        try:
            if data.get("format") != STATE_FORMAT:
                raise ConvergeError(
                    f"not an engine state (format {data.get('format')!r}, "
                    f"expected {STATE_FORMAT!r})",
                    code=codes.CHECKPOINT_CORRUPT,
                )
            return cls(
                facts=_facts_from_data(data["facts"]),
                cycle=int(data["cycle"]),
                dirty=tuple(str(key) for key in data["dirty"]),
                lamport=int(data["lamport"]),
                rejected_ids=tuple(str(item) for item in data["rejected_ids"]),
                pending=tuple(pending_from_data(item) for item in data["pending"]),
                usage=usage_from_data(data["usage"]),
            )
        except ConvergeError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConvergeError(
                f"malformed engine state: {type(exc).__name__}: {exc}",
                hint="the checkpoint file may be truncated or from another version",
                code=codes.CHECKPOINT_CORRUPT,
            ) from None


@dataclass(frozen=True, slots=True)
class HitlPause:
    """A run paused for human decisions on `pending`; `Engine.resume(pause, decisions)` goes on."""

    pending: tuple[PendingProposal, ...]
    state: EngineState

    @property
    def cycle(self) -> int:
        return self.state.cycle


@dataclass(frozen=True, slots=True, repr=False)
class RunResult:
    """The outcome of `Engine.run` / `Engine.resume`.

    `state` is the state at the stop (resume a pause through `pause`).
    `events` are the run's events in order (empty if the engine records none).
    `notes` say why a run that did not converge stopped (at least one each).
    """

    context: Context
    cycles: int
    stop_reason: StopReason
    state: EngineState
    usage: UsageTotals
    pause: HitlPause | None = None
    error: ConvergeError | None = None
    events: tuple[BaseModel, ...] = ()
    notes: tuple[StopNote, ...] = ()

    def __repr__(self) -> str:  # short: see EngineState.__repr__
        return (
            f"RunResult(stop_reason={str(self.stop_reason)!r}, cycles={self.cycles}, "
            f"facts={len(self.context)}, events={len(self.events)})"
        )

    @property
    def converged(self) -> bool:
        return self.stop_reason is StopReason.CONVERGED

    def deterministic_data(self) -> dict[str, Any]:
        """Everything deterministic about the result (no events, no timings)."""
        return {
            "cycles": self.cycles,
            "stop_reason": str(self.stop_reason),
            "error": None if self.error is None else f"{type(self.error).__name__}: {self.error}",
            "usage": usage_to_data(self.usage),
            "facts": [fact_to_data(fact) for fact in self.context],
            "pending": [pending_to_data(item) for item in self.state.pending],
        }

    def canonical_json(self) -> str:
        return canonical_json(self.deterministic_data())

    def fingerprint(self) -> str:
        """SHA-256 of `canonical_json()`: equal for byte-identical results."""
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()


# -- JSON shapes --------------------------------------------------------------


def _provenance_data(provenance: Provenance) -> dict[str, Any]:
    return {
        "source": provenance.source,
        "model_id": provenance.model_id,
        "account": provenance.account,
    }


def _provenance_from_data(data: dict[str, Any]) -> Provenance:
    return Provenance(str(data["source"]), data.get("model_id"), data.get("account"))


def fact_to_data(fact: Fact) -> dict[str, Any]:
    """A fact as JSON-ready data (the shape used in states, results and traces)."""
    # The record shared by the facts promoted alike, and this fact's own time: what
    # `fact.promotion` would give, without building a record to read once.
    record = fact._basis
    return {
        "key": str(fact.key),
        "id": fact.id,
        "content": fact.content,
        "data": fact.data,
        "confidence": fact.confidence,
        "provenance": _provenance_data(fact.provenance),
        "promotion": {
            "gate": record.gate,
            "approver": record.approver,
            "cycle": record.cycle,
            "evidence": list(record.evidence),
            "trace_link": record.trace_link,
            "logical_time": fact.logical_time,
        },
    }


def fact_from_data(data: dict[str, Any]) -> Fact:
    """A fact from `fact_to_data`'s shape. A checkpoint written when content could be
    JSON gets it moved as `ProposedFact` does: data = that value, content = its text."""
    record = data["promotion"]
    content, value = data["content"], freeze_json(data.get("data"))
    if not isinstance(content, str):
        value = freeze_json(content) if value is None else value
        content = canonical_json(content)
    return Fact(
        key=str(data["key"]),
        id=str(data["id"]),
        content=content,
        data=value,
        provenance=_provenance_from_data(data["provenance"]),
        confidence=float(data["confidence"]),
        promotion=PromotionRecord(
            gate=str(record["gate"]),
            approver=str(record["approver"]),
            cycle=int(record["cycle"]),
            evidence=tuple(str(item) for item in record["evidence"]),
            trace_link=record.get("trace_link"),
            logical_time=int(record["logical_time"]),
        ),
    )


def _facts_from_data(items: list[dict[str, Any]]) -> tuple[Fact, ...]:
    """Facts of `fact_from_data`'s shape, promoted alike ones sharing one promotion record."""
    bases: dict[tuple[Any, ...], PromotionRecord] = {}
    facts = []
    for item in items:
        fact = fact_from_data(item)
        record = fact.promotion
        shape = (record.gate, record.approver, record.cycle, record.evidence, record.trace_link)
        basis = bases.setdefault(shape, record)
        if basis is not record:
            fact = Fact.promoted(fact, basis, record.logical_time)
        facts.append(fact)
    return tuple(facts)


def pending_to_data(item: PendingProposal) -> dict[str, Any]:
    """A pending proposal as JSON-ready data (states, checkpoints)."""
    proposal = item.proposal
    return {
        "suggestor": item.suggestor,
        "cycle": item.cycle,
        "reason": item.reason,
        "key": str(proposal.key),
        "id": proposal.id,
        "content": proposal.content,
        "data": proposal.data,
        "confidence": proposal.confidence,
        "provenance": _provenance_data(proposal.provenance),
    }


def pending_from_data(data: dict[str, Any]) -> PendingProposal:
    """The pending proposal of `pending_to_data`'s shape."""
    proposal = ProposedFact(
        key=str(data["key"]),
        id=str(data["id"]),
        content=data["content"],
        confidence=float(data["confidence"]),
        provenance=_provenance_from_data(data["provenance"]),
        data=data.get("data"),
    )
    return PendingProposal(
        proposal, str(data["suggestor"]), int(data["cycle"]), str(data["reason"])
    )


def usage_to_data(usage: UsageTotals) -> dict[str, int]:
    """Usage totals as JSON-ready data."""
    return {
        "model_calls": usage.model_calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    }


def usage_from_data(data: dict[str, Any]) -> UsageTotals:
    """The usage totals of `usage_to_data`'s shape."""
    return UsageTotals(
        int(data["model_calls"]), int(data["input_tokens"]), int(data["output_tokens"])
    )
