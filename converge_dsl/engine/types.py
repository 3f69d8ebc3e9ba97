"""Core engine types of the Converge suggestor contract (docs/architecture.md §7).

Everything here is immutable. Facts are append-only and carry no wall-clock
time: the promotion record holds a logical (Lamport) time, so that the same
pipeline with the same inputs yields byte-identical results.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from converge_dsl._json_types import JsonValue
from converge_dsl.keys import BUILTIN_KEYS

_BUILTIN_ORDER = {name: index for index, name in enumerate(BUILTIN_KEYS)}
_INTERNED: dict[str, ContextKey] = {}
# Past this many distinct names keys are still made, just not interned (a
# suggestor proposing ever new key names must not grow the table without end).
_MAX_INTERNED = 4096


class ContextKey(str):
    """The name of a context key.

    A `str` subclass, so it hashes and compares like its name (dicts keyed by
    keys accept plain strings). Built-in keys sort first, in their order of docs/architecture.md §3;
    keys a pipeline declares sort after them, by name.

    Interned: `ContextKey(name)` returns one shared object per name (for the
    first 4,096 names), so proposals and facts do not each carry their own
    copy, and its hash is computed once.
    """

    __slots__ = ()

    def __new__(cls, name: str = "") -> ContextKey:
        if cls is not ContextKey:
            return str.__new__(cls, name)
        key = _INTERNED.get(name)
        if key is None:
            key = str.__new__(cls, name)
            if len(_INTERNED) < _MAX_INTERNED:
                _INTERNED[str(key)] = key
        return key

    def __reduce__(self) -> tuple[type[ContextKey], tuple[str]]:
        return (ContextKey, (str(self),))

    @property
    def is_builtin(self) -> bool:
        return self in _BUILTIN_ORDER

    def sort_key(self) -> tuple[int, str]:
        return (_BUILTIN_ORDER.get(self, len(BUILTIN_KEYS)), str(self))


def key_sort_key(key: str) -> tuple[int, str]:
    """Sort order for any key name (built-ins first, in their order of docs/architecture.md §3)."""
    return (_BUILTIN_ORDER.get(key, len(BUILTIN_KEYS)), key)


SEEDS = ContextKey("seeds")
HYPOTHESES = ContextKey("hypotheses")
STRATEGIES = ContextKey("strategies")
CONSTRAINTS = ContextKey("constraints")
SIGNALS = ContextKey("signals")
COMPETITORS = ContextKey("competitors")
EVALUATIONS = ContextKey("evaluations")
PROPOSALS = ContextKey("proposals")
DIAGNOSTIC = ContextKey("diagnostic")
VOTES = ContextKey("votes")
DISAGREEMENTS = ContextKey("disagreements")
CONSENSUS_OUTCOMES = ContextKey("consensus_outcomes")


class FrozenDict(dict[str, Any]):
    """A JSON object that refuses mutation. `json.dumps` serialises it as a dict.

    Its `canonical_json` text is kept once made (`_text`): the promotion gate
    measures a proposal's data with it, and a batch's result line is read
    back from it (`bench/batch.py`, CPU per case).
    """

    __slots__ = ("_text",)
    _text: str

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise TypeError("fact data is immutable")

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(canonical_json(self))

    def __reduce__(self) -> tuple[Any, ...]:
        # Made whole at once: pickle would otherwise fill it item by item (refused).
        return (FrozenDict, (dict(self),))


def freeze_json(value: Any) -> Any:
    """Deep-freeze a JSON value: objects become `FrozenDict`, arrays tuples.

    Keys are kept as they are: a key that is not a string is the promotion
    gate's to refuse (see `json_problem`), not silently renamed here.
    """
    if type(value) in _FROZEN:
        return value  # the leaves and frozen objects, answered before the isinstance checks
    if isinstance(value, FrozenDict):
        return value
    # Members already frozen are taken as they are, without a call each (most are leaves).
    if isinstance(value, Mapping):
        return FrozenDict(
            {k: v if type(v) in _FROZEN else freeze_json(v) for k, v in value.items()}
        )
    if isinstance(value, list | tuple):
        return tuple([v if type(v) in _FROZEN else freeze_json(v) for v in value])
    return value


_FROZEN = frozenset((str, int, float, bool, type(None), FrozenDict))  # `freeze_json` keeps these


# What `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)` uses,
# made once: `dumps` with arguments builds an encoder per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """Stable JSON text (sorted keys, no spaces) used to compare and hash data.

    A `FrozenDict`'s text is made once and kept (`freeze_json` froze its members
    too, so the text cannot go stale); any other value's is made on each call.
    """
    if type(value) is not FrozenDict:
        return _CANONICAL.encode(value)
    try:
        return value._text
    except AttributeError:
        text: str = _CANONICAL.encode(value)
        value._text = text
        return text


def text_and_data(content: Any, data: Any) -> tuple[str, Any]:
    """A fact's content as text, and its data.

    Content is text for people and prompts. An object given as content (the
    legacy form) becomes the data when no data is given, and its canonical JSON
    text the content: what a suggestor and a pipeline seed propose, and what
    `validate` compares two seeds of one id by (CD256).
    """
    if isinstance(content, str):
        return content, data
    return canonical_json(content), content if data is None else data


def _legacy_text(value: Any) -> str:
    """The text of a legacy structured content: canonical JSON, or its repr if not JSON."""
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)


Content: TypeAlias = str
"""A fact's content: always text (structured values live in `data`)."""


def clamp_confidence(value: float) -> float:
    """Clamp to [0, 1]; NaN and infinities become 0."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    if math.isnan(number) or math.isinf(number):
        return 0.0
    return min(1.0, max(0.0, number))


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a proposal came from. `source` is e.g. `suggestor@pipeline`.

    An empty `source` is representable so that the engine can detect it and
    raise a kernel error naming the suggestor; use `is_empty` to test.
    """

    source: str
    model_id: str | None = None
    account: str | None = None

    @property
    def is_empty(self) -> bool:
        return not self.source.strip()

    def __str__(self) -> str:
        parts = [self.source]
        if self.model_id:
            parts.append(f"model={self.model_id}")
        if self.account:
            parts.append(f"account={self.account}")
        return " ".join(parts)


class _Vouched:
    """The slot of a proposal's `checked` evidence: no dataclass field, so no comparison,
    repr, copy, pickle or walk of a proposal's fields sees it."""

    __slots__ = ("checked",)


@dataclass(frozen=True, slots=True)
class ProposedFact(_Vouched):
    """A suggestion for a new fact. Confidence is clamped on construction.

    `content` is text, for people and prompts; `data` (any JSON value, or
    None) is what rules and solvers read, frozen on construction. A legacy
    caller that gives a non-text `content` gets it moved: `data` becomes that
    value (unless `data` is given too) and `content` its canonical JSON text.
    Whether `data` really is JSON is the promotion gate's question, not this
    constructor's. `checked` is None, or the evidence that `data` was already
    checked against its key's schema (`_vouched`), which the gate may take
    instead of checking it again.
    """

    key: str
    id: str
    content: Content
    confidence: float = 1.0
    provenance: Provenance = field(default_factory=lambda: Provenance(""))
    data: JsonValue = None

    def __post_init__(self) -> None:
        _set_checked(self, None)
        if type(self.key) is not ContextKey:
            object.__setattr__(self, "key", ContextKey(self.key))
        object.__setattr__(self, "confidence", clamp_confidence(self.confidence))
        if not isinstance(self.content, str):
            legacy = freeze_json(self.content)
            object.__setattr__(self, "content", _legacy_text(legacy))
            if self.data is None:
                object.__setattr__(self, "data", legacy)
                return
        if self.data is not None:
            object.__setattr__(self, "data", freeze_json(self.data))

    def content_text(self) -> str:
        """The content (always text; kept for callers written when it could be JSON)."""
        return self.content

    def _vouched(self, evidence: object) -> ProposedFact:
        """This proposal carrying `evidence` (a `converge_dsl.sandbox` check's) that its
        data fits its key's schema. Only its maker, which checked the very value it gave
        as data, says so; a copy made otherwise (`replace`, pickle) carries none.

        Private: the evidence names the schema and the steps of its check, not the
        value checked, so the gate trusts its maker. The llm suggestor's item check
        (`converge_dsl.compiler`) is the only one."""
        proposal = _new(ProposedFact)
        for name, put in _PROPOSAL_SETTERS:
            put(proposal, getattr(self, name))
        _set_checked(proposal, evidence)
        return proposal


_set_checked = _Vouched.checked.__set__  # type: ignore[attr-defined]  # a slot's descriptor
# Each field's slot descriptor: `_vouched` copies a proposal without constructing it again.
_PROPOSAL_SETTERS = tuple(
    (name, vars(ProposedFact)[name].__set__)
    for name in ("key", "id", "content", "confidence", "provenance", "data")
)


@dataclass(frozen=True, slots=True)
class PromotionRecord:
    """How a proposal became a fact. `logical_time` is a Lamport counter, not a clock."""

    gate: str
    approver: str
    cycle: int
    evidence: tuple[str, ...] = ()
    trace_link: str | None = None
    logical_time: int = 0

    @classmethod
    def shared(
        cls, gate: str, approver: str, cycle: int, evidence: tuple[str, ...], trace_link: str
    ) -> PromotionRecord:
        """`PromotionRecord(gate, approver, cycle, evidence, trace_link)`, the basis the
        engine shares among the facts promoted alike (built per suggestor and cycle)."""
        record = _new(cls)
        _record_gate(record, gate)
        _record_approver(record, approver)
        _record_cycle(record, cycle)
        _record_evidence(record, evidence)
        _record_link(record, trace_link)
        _record_time(record, 0)
        return record


# The slots of `PromotionRecord` and `Fact` are set through their descriptors when the
# engine promotes (a record per suggestor and cycle, a fact per promotion): both refuse
# `setattr`, and `object.__setattr__` looks each name up again (`bench/peers.py`, chain).
_new = object.__new__
(
    _record_gate,
    _record_approver,
    _record_cycle,
    _record_evidence,
    _record_link,
    _record_time,
) = (
    vars(PromotionRecord)[name].__set__
    for name in ("gate", "approver", "cycle", "evidence", "trace_link", "logical_time")
)


_FACT_SLOTS = ("key", "id", "content", "provenance", "confidence", "data", "_basis", "logical_time")


class Fact:
    """A promoted proposal. Facts are append-only and immutable.

    `content` is text and `data` frozen JSON or None, as on `ProposedFact`
    (the engine builds facts only from proposals and checkpoints).

    Compact: `promotion` is kept as a record shared by the facts promoted
    the same way (same gate, approver, cycle, evidence, trace link) plus this
    fact's own `logical_time`; reading `promotion` gives the whole record.
    Constructed, compared, hashed and pickled as the dataclass it was, with
    fields `key, id, content, provenance, confidence, promotion, data`.
    """

    __slots__ = _FACT_SLOTS
    __match_args__ = ("key", "id", "content", "provenance", "confidence", "promotion", "data")

    key: str
    id: str
    content: Content
    provenance: Provenance
    confidence: float
    data: JsonValue
    logical_time: int
    _basis: PromotionRecord

    def __init__(  # noqa: PLR0917 - positional, as the dataclass it was
        self,
        key: str,
        id: str,
        content: Content,
        provenance: Provenance,
        confidence: float,
        promotion: PromotionRecord,
        data: JsonValue = None,
    ) -> None:
        values = (key, id, content, provenance, confidence, data, promotion, promotion.logical_time)
        for name, value in zip(_FACT_SLOTS, values, strict=True):
            object.__setattr__(self, name, value)

    @classmethod
    def promoted(
        cls, proposal: ProposedFact | Fact, basis: PromotionRecord, logical_time: int
    ) -> Fact:
        """The fact of `proposal` (or a copy of a fact), promoted as `basis` says (shareable:
        its own time is ignored), at `logical_time`."""
        fact = _new(cls)
        _fact_key(fact, proposal.key)
        _fact_id(fact, proposal.id)
        _fact_content(fact, proposal.content)
        _fact_provenance(fact, proposal.provenance)
        _fact_confidence(fact, proposal.confidence)
        _fact_data(fact, proposal.data)
        _fact_basis(fact, basis)
        _fact_time(fact, logical_time)
        return fact

    @property
    def promotion(self) -> PromotionRecord:
        """How this fact was promoted (its own logical time included)."""
        basis = self._basis
        if basis.logical_time == self.logical_time:
            return basis
        return PromotionRecord(
            basis.gate,
            basis.approver,
            basis.cycle,
            basis.evidence,
            basis.trace_link,
            self.logical_time,
        )

    def content_text(self) -> str:
        """The content (always text; kept for callers written when it could be JSON)."""
        return self.content

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.key,
            self.id,
            self.content,
            self.provenance,
            self.confidence,
            self.promotion,
            self.data,
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: facts are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: facts are immutable")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __reduce__(self) -> tuple[type[Fact], tuple[Any, ...]]:
        return (Fact, self._fields())

    def __repr__(self) -> str:
        names = ("key", "id", "content", "provenance", "confidence", "promotion", "data")
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, self._fields(), strict=True))
        return f"Fact({shown})"


(
    _fact_key,
    _fact_id,
    _fact_content,
    _fact_provenance,
    _fact_confidence,
    _fact_data,
    _fact_basis,
    _fact_time,
) = (vars(Fact)[name].__set__ for name in _FACT_SLOTS)


@dataclass(frozen=True, slots=True)
class AgentEffect:
    """What one `execute` returns: proposals, nothing else."""

    proposals: tuple[ProposedFact, ...] = ()

    @classmethod
    def of(cls, proposals: Sequence[ProposedFact]) -> AgentEffect:
        return cls(tuple(proposals))

    @classmethod
    def empty(cls) -> AgentEffect:
        return _EMPTY_EFFECT


_EMPTY_EFFECT = AgentEffect()


@runtime_checkable
class ContextView(Protocol):
    """A read-only view of the context that suggestors see."""

    @property
    def version(self) -> int:
        """Increases every time a fact is added."""
        ...

    @property
    def cycle(self) -> int: ...

    def get(self, key: str) -> tuple[Fact, ...]:
        """Facts of `key` in promotion order (empty tuple if none)."""
        ...

    def has(self, key: str) -> bool: ...

    def count(self, key: str) -> int: ...

    def fact(self, key: str, fact_id: str) -> Fact | None: ...

    def proposals(self, key: str) -> tuple[ProposedFact, ...]:
        """Proposals for `key` still pending (e.g. awaiting a human)."""
        ...

    def keys(self) -> tuple[str, ...]:
        """Keys that hold at least one fact, in key sort order."""
        ...


@runtime_checkable
class Suggestor(Protocol):
    """The Converge suggestor contract.

    `accepts` is pure and deterministic (no I/O); `execute` reads the view and
    returns proposals, never mutating anything; `provenance` is never empty.
    """

    @property
    def name(self) -> str: ...

    @property
    def dependencies(self) -> tuple[str, ...]:
        """Keys it reads; empty means it is a candidate every cycle."""
        ...

    def accepts(self, ctx: ContextView) -> bool: ...

    async def execute(self, ctx: ContextView) -> AgentEffect: ...

    def provenance(self) -> Provenance: ...

    def complexity_hint(self) -> str | None: ...


@runtime_checkable
class SyncSuggestor(Suggestor, Protocol):
    """A suggestor that does no I/O and calls no model: the engine runs it inline.

    `synchronous` is True (read once, when the suggestor is registered), and
    `propose(ctx)` returns what `await execute(ctx)` would, with no await; the
    engine calls `propose` on the run's own task, so
    a cycle of synchronous suggestors schedules nothing on the event loop
    (docs/architecture.md §7).
    """

    @property
    def synchronous(self) -> bool: ...

    def propose(self, ctx: ContextView) -> AgentEffect: ...
