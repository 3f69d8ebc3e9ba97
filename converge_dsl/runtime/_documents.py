"""The run result and trace line as pydantic models (schemas `run-result.v1`, `trace-event.v1`).

`RunResultDocument` is what `converge-dsl run --format json` prints;
`write_run_result` prints it with its facts streamed from the engine's facts
(no model object per fact, no one giant string), byte for byte what
`model_dump_json(indent=2)` of the whole document gives. The fact models of
facts the engine built are assembled without validation (`_unvalidated`: what
`model_construct` does, at a third of its cost): the engine made every value
with the field's type, and the schema is the contract, checked by the tests
against what this builds (`bench/peers.py`, `api`).
`TraceLine` is one line of a `--trace` JSONL file: the engine event's own
fields, plus `seq` (0-based order), `type`, and `span` (the source span of the
suggestor the event concerns, when there is one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_json

from converge_dsl._collector import quiet_collector
from converge_dsl.diagnostics import Diagnostic, SourceSpan
from converge_dsl.engine.state import PendingProposal
from converge_dsl.engine.types import (
    Fact,
    FrozenDict,
    Provenance,
    canonical_json,
    key_sort_key,
)

SCHEMA_BASE = "https://converge-dsl.dev/schemas/"
_M = TypeVar("_M", bound=BaseModel)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# The slots of every pydantic model, set through their descriptors (a frozen model
# refuses `setattr`, and `object.__setattr__` looks each name up again).
_SLOTS = vars(BaseModel)
_set_dict = _SLOTS["__dict__"].__set__
_set_fields_set = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__


def _unvalidated(cls: type[_M], values: dict[str, Any]) -> _M:
    """`cls.model_construct(**values)` for `values` giving every field of `cls` (each
    already of its field's type), without its per-field Python loop: the instance
    holds `values` itself as its `__dict__`."""
    model = object.__new__(cls)
    _set_dict(model, values)
    _set_fields_set(model, set(values))
    _set_extra(model, None)
    _set_private(model, None)
    return model


class SpanModel(_Frozen):
    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def of(cls, span: SourceSpan | None) -> SpanModel | None:
        if span is None:
            return None
        return cls(
            file=span.file,
            line=span.line,
            column=span.column,
            end_line=span.end_line,
            end_column=span.end_column,
        )


class ProvenanceModel(_Frozen):
    source: str = Field(description="`suggestor@pipeline`")
    model_id: str | None = None
    account: str | None = None

    @classmethod
    def of(cls, provenance: Provenance) -> ProvenanceModel:
        """Built without validation (a `Provenance` already has the field types), once per
        value: the model is frozen, so the facts of every document share it."""
        value = (provenance.source, provenance.model_id, provenance.account)
        model = _PROVENANCES.get(value)
        if model is None:
            source, model_id, account = value
            values = {"source": source, "model_id": model_id, "account": account}
            model = _unvalidated(cls, values)
            if len(_PROVENANCES) >= _KEEP_PROVENANCES:
                _PROVENANCES.clear()
            _PROVENANCES[value] = model
        return model


# The provenance models made so far, by value (a frozen dataclass hashes in Python).
_PROVENANCES: dict[tuple[str, str | None, str | None], ProvenanceModel] = {}
_KEEP_PROVENANCES = 4096


def _is_none(value: object) -> bool:
    return value is None


_DATA_DESCRIPTION = "the fact's JSON data (what rules and solvers read), or null"


# `json.loads` of a text known to be one JSON value and nothing around it, without
# its checks of the text's type and ends (a third of its cost on a fact's data).
_read_json = json.JSONDecoder().raw_decode


def _plain(data: Any) -> Any:
    """Frozen JSON (FrozenDict, tuples) as plain JSON values, in canonical key order
    (what `json.loads(canonical_json(data))` gives).

    A `FrozenDict` is read back from its canonical text, which it keeps once the
    promotion gate measured it: faster than walking it (`bench/batch.py`)."""
    kind = type(data)
    if kind is str or kind is int or kind is float or kind is bool or data is None:
        return data
    if kind is FrozenDict:
        try:
            return _read_json(canonical_json(data))[0]
        except (TypeError, ValueError, RecursionError):  # not JSON: walked as it is below
            pass
    if kind is tuple or kind is list:  # the plain types first, in C: the ABC's check is slower
        return [_plain(item) for item in data]
    if isinstance(data, dict | Mapping):
        return {key: _plain(data[key]) for key in sorted(data)}
    if isinstance(data, tuple | list):
        return [_plain(item) for item in data]
    return data


class FactModel(_Frozen):
    id: str
    content: str = Field(description="text, for people and prompts")
    data: Any = Field(default=None, description=_DATA_DESCRIPTION)
    confidence: float
    provenance: ProvenanceModel

    @classmethod
    def of(cls, fact: Fact) -> FactModel:
        """Built without validation: the engine made the fact (text content, float confidence);
        facts of one provenance share its (frozen) `ProvenanceModel`."""
        data = fact.data
        return _unvalidated(
            cls,
            {
                "id": fact.id,
                "content": fact.content,
                "data": None if data is None else _plain(data),
                "confidence": fact.confidence,
                "provenance": ProvenanceModel.of(fact.provenance),
            },
        )


class UsageModel(_Frozen):
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_calls: int | None = Field(
        default=None,
        description="model calls answered from the answer cache, which count toward no "
        "budget (only present when there were any)",
        exclude_if=_is_none,
    )


class DiagnosticModel(_Frozen):
    """A diagnostic as `validate --format json` prints it; a run's own add who and when."""

    code: str
    severity: str
    message: str
    file: str
    line: int
    column: int
    end_line: int
    end_column: int
    path: str
    hint: str | None = None
    suggestor: str | None = Field(
        default=None,
        description="the suggestor concerned (only present when a suggestor is)",
        exclude_if=_is_none,
    )
    cycle: int | None = Field(
        default=None,
        description="the cycle the run stopped in (only present for a run's own diagnostics)",
        exclude_if=_is_none,
    )

    @classmethod
    def of(
        cls, diagnostic: Diagnostic, suggestor: str | None = None, cycle: int | None = None
    ) -> DiagnosticModel:
        return cls.model_validate({**diagnostic.as_json(), "suggestor": suggestor, "cycle": cycle})


class PendingModel(_Frozen):
    """A proposal awaiting a human decision (`--approve ID` / `--reject ID`)."""

    id: str
    key: str
    content: str = Field(description="text, for people and prompts")
    data: Any = Field(default=None, description=_DATA_DESCRIPTION)
    confidence: float
    provenance: ProvenanceModel
    suggestor: str
    cycle: int
    reason: str = Field(description="why the proposal was gated")

    @classmethod
    def of(cls, item: PendingProposal) -> PendingModel:
        proposal = item.proposal
        return cls(
            id=proposal.id,
            key=str(proposal.key),
            content=proposal.content,
            data=_plain(proposal.data),
            confidence=proposal.confidence,
            provenance=ProvenanceModel.of(proposal.provenance),
            suggestor=item.suggestor,
            cycle=item.cycle,
            reason=item.reason,
        )


class RunResultDocument(_Frozen):
    """The JSON contract of `converge-dsl run --format json`."""

    model_config = ConfigDict(frozen=True, extra="forbid", title="converge-dsl run result")

    stop_reason: str = Field(
        description="why the run stopped: converged, cycle_budget_exhausted, "
        "fact_budget_exhausted, token_budget_exhausted, model_call_budget_exhausted, "
        "tool_call_budget_exhausted, time_budget_exhausted, invariant_violated, hitl_pause, "
        "cancelled or error; invalid (the pipeline failed validation) or usage_error (the "
        "command line is wrong) when the run never started. Every reason but converged comes "
        "with at least one diagnostic"
    )
    converged: bool
    cycles: int
    facts: dict[str, list[FactModel]] = Field(description="facts grouped by key, in key order")
    diagnostics: list[DiagnosticModel]
    usage: UsageModel
    pending: list[PendingModel] = Field(
        default_factory=list,
        description="proposals awaiting a human (only present when stop_reason is hitl_pause)",
        exclude_if=lambda value: not value,
    )
    held: dict[str, bool] = Field(
        default_factory=dict,
        description="decisions already given (id -> approve), held until every pending "
        "proposal is decided (only present when some are)",
        exclude_if=lambda value: not value,
    )

    def __repr_args__(self) -> Iterable[tuple[str | None, Any]]:
        # The facts as counts per key: `asyncio.run(pipeline.arun())` formats the repr of
        # its task's result (Python 3.11), which, facts in full, cost as much as the run.
        for name, value in super().__repr_args__():
            if name == "facts":
                yield name, {key: f"<{len(items)} facts>" for key, items in self.facts.items()}
            else:
                yield name, value

    @classmethod
    def build(
        cls,
        *,
        stop_reason: str,
        cycles: int,
        facts: tuple[Fact, ...],
        diagnostics: Sequence[Diagnostic | DiagnosticModel],
        usage: UsageModel,
        pending: tuple[PendingProposal, ...] = (),
        held: dict[str, bool] | None = None,
    ) -> RunResultDocument:
        grouped: dict[str, list[FactModel]] = {}
        for fact in facts:
            grouped.setdefault(fact.key, []).append(FactModel.of(fact))
        ordered = {k: grouped[k] for k in sorted(grouped, key=key_sort_key)}
        return cls(
            stop_reason=stop_reason,
            converged=stop_reason == "converged",
            cycles=cycles,
            facts=ordered,
            diagnostics=[
                d if isinstance(d, DiagnosticModel) else DiagnosticModel.of(d) for d in diagnostics
            ],
            usage=usage,
            pending=[PendingModel.of(item) for item in pending],
            held=dict(sorted((held or {}).items())),
        )


# -- streaming -------------------------------------------------------------------

_FACTS_FIELD = '\n  "facts": {}'
_CHUNK = 1024  # facts serialised per call; a chunk's text is all that is held at once


def fact_plain(fact: Fact, provenances: dict[Provenance, dict[str, Any]]) -> dict[str, Any]:
    """`FactModel.of(fact)` as plain JSON values, in its field order."""
    provenance = provenances.get(fact.provenance)
    if provenance is None:
        source = fact.provenance
        provenance = {
            "source": source.source,
            "model_id": source.model_id,
            "account": source.account,
        }
        if len(provenances) < 4096:
            provenances[source] = provenance
    return {
        "id": fact.id,
        "content": fact.content,
        "data": _plain(fact.data),
        "confidence": fact.confidence,
        "provenance": provenance,
    }


def fact_models(facts: Iterable[tuple[str, Sequence[Fact]]]) -> dict[str, list[FactModel]]:
    """Each key's facts (as `RunOutcome.facts_by_key` gives them) as `FactModel.of` of each.

    Built with the objects older than the call frozen (`quiet_collector`, as during
    a run): the collections its allocations cause walk only the models it makes. The
    keys are plain `str` (a `ContextKey` is a subclass), so a dump is plain data."""
    of = FactModel.of
    with quiet_collector():
        return {str(key): [of(fact) for fact in items] for key, items in facts}


def write_run_result(
    document: RunResultDocument,
    facts: Iterable[tuple[str, Sequence[Fact]]],
    stream: TextIO,
) -> None:
    """Write `document` with `facts` as its facts (indent 2, as `model_dump_json(indent=2)`).

    `document` holds no facts (its `facts` is `{}`); `facts` gives each key's
    facts, keys in key order, facts in promotion order (keys without facts are
    skipped). The facts are serialised a chunk at a time, so the text of the
    whole document never exists at once. No newline is written after it.
    """
    head, found, tail = document.model_dump_json(indent=2).partition(_FACTS_FIELD)
    if not found or document.facts:
        raise ValueError("write_run_result needs a document without facts")
    stream.write(head)
    stream.write('\n  "facts": {')
    provenances: dict[Provenance, dict[str, Any]] = {}
    wrote_key = False
    for key, items in facts:
        if not items:
            continue
        stream.write(",\n    " if wrote_key else "\n    ")
        stream.write(to_json(str(key)).decode("utf-8") + ": [")
        for start in range(0, len(items), _CHUNK):
            chunk = [fact_plain(fact, provenances) for fact in items[start : start + _CHUNK]]
            text = to_json(chunk, indent=2).decode("utf-8")
            # "[\n  {...},\n  {...}\n]": the objects, indented four more (JSON text
            # has no raw newline inside a string, so every newline is layout).
            stream.write(",\n    " if start else "\n    ")
            stream.write(text[2:-2].replace("\n", "\n    "))
        stream.write("\n    ]")
        wrote_key = True
    stream.write("\n  }" if wrote_key else "}")
    stream.write(tail)


class TraceLine(BaseModel):
    """One `--trace` line: an engine (or agent) event with its order and source span."""

    model_config = ConfigDict(
        frozen=True, extra="allow", title="converge-dsl trace event", defer_build=True
    )

    seq: int = Field(description="0-based position in the trace")
    type: str = Field(description="event type, e.g. cycle_started, fact_promoted, run_finished")
    span: SpanModel | None = Field(
        default=None, description="source span of the suggestor concerned"
    )
    excerpts: dict[str, str] | None = Field(
        default=None,
        description="on the `run_started` line: each suggestor's source lines, as the run "
        "loaded them (what `converge-dsl report` shows; it reads no file)",
    )
    kinds: dict[str, str] | None = Field(
        default=None,
        description="on the `run_started` line: each suggestor's kind (`rule`, `llm`, "
        "`agent`...), so a report draws it in its kind's colours",
    )
    time: str | None = Field(
        default=None,
        description="wall-clock time the line was written, RFC 3339 in UTC "
        "(e.g. 2026-01-01T12:00:00.250000Z); like `timing`, never compared between runs",
        json_schema_extra={"format": "date-time"},
    )


def exported_schemas() -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema, as committed in `schemas/`."""
    from ._trace_schema import trace_line_schema

    out: dict[str, dict[str, Any]] = {}
    for name, schema in (
        ("run-result.v1.json", RunResultDocument.model_json_schema()),
        ("trace-event.v1.json", trace_line_schema(TraceLine)),
    ):
        out[name] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": SCHEMA_BASE + name,
            **schema,
        }
    return out


def schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
