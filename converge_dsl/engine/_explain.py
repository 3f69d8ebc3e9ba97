"""The `StopNote`s of a stop: why the run stopped, in words, naming who. Engine-internal.

`explain(stop, state, budget, names)` gives at least one note for every stop
reason but `converged` (docs/architecture.md §7). A budget stop names the
suggestors that spent the budget, most first, with their counts: model calls
and tokens from the usage meter's per-suggestor breakdown, cycles and time
from the run's own counts, facts from the promotion records of the context.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from converge_dsl import codes
from converge_dsl.diagnostics import Severity
from converge_dsl.engine._runstate import RunState, Stop
from converge_dsl.engine.budget import MIN_ANSWER_TOKENS, Budget, OuterCap, StopReason, UsageMeter
from converge_dsl.engine.stops import StopNote
from converge_dsl.engine.types import Fact
from converge_dsl.errors import KernelError, ModelFailure, RunError

_NAMED = 5  # suggestors named in a message; the rest are counted
_SEED_OWNER = {"seed": "seeds", "engine": "the engine", "human": "a human"}


def explain(
    stop: Stop, state: RunState, budget: Budget, names: Collection[str]
) -> tuple[StopNote, ...]:
    """The notes of `stop` (empty for `converged`); `names`: the registered suggestors."""
    reason = stop.reason
    if reason is StopReason.CONVERGED:
        return ()
    if reason is StopReason.HITL_PAUSE:
        return _paused(state)
    explainer = _BUDGET.get(reason)
    if explainer is not None:
        note = explainer(stop, state, budget, names)
        # A located cause of a budget stop (a schema check cut by the deadline) is noted too.
        located = (_failed(stop, state, names),) if stop.error is not None and stop.code else ()
        return (note, *located)
    if reason is StopReason.CANCELLED:
        return (_cancelled(stop, state),)
    return (_failed(stop, state, names),)


def _plural(count: int | float, unit: str) -> str:
    return f"{count:g} {unit}" + ("" if count == 1 else "s")


def ranked(
    counts: Mapping[str, float], unit: str, verb: str, names: Collection[str] | None = None
) -> str:
    """`'summarise' made 14 calls, 'classify' 6`: most first, `_NAMED` named, zeros left out.

    With `names`, only those are quoted as suggestors (`seeds 1` is not one).
    """
    ordered = sorted(
        ((name, count) for name, count in counts.items() if count > 0),
        key=lambda item: (-item[1], item[0]),
    )
    shown = [repr(name) if names is None or name in names else name for name, _ in ordered[:_NAMED]]
    parts = [
        f"{who} {verb} {_plural(count, unit)}" if index == 0 else f"{who} {count:g}"
        for index, (who, (_, count)) in enumerate(zip(shown, ordered, strict=False))
    ]
    if len(ordered) > _NAMED:
        parts.append(f"{len(ordered) - _NAMED} more")
    return ", ".join(parts) if parts else f"no suggestor {verb} any"


def _top(counts: Mapping[str, float], names: Collection[str]) -> str | None:
    """The registered suggestor with the largest count (ties: by name)."""
    best = sorted(
        ((n, c) for n, c in counts.items() if n in names and c > 0), key=lambda i: (-i[1], i[0])
    )
    return best[0][0] if best else None


def _budget_note(
    code: str,
    setting: str,
    limit: object,
    what: str,
    *,
    state: RunState,
    counts: Mapping[str, float],
    names: Collection[str],
    culprit: str | None = None,
    cap: OuterCap | None = None,
) -> StopNote:
    """The note of a budget stop, about `culprit` if it is a suggestor, else the top spender.

    With `cap` (a cap beyond the run's budget made the refusal) the note names
    that cap and its flag, and no setting of the pipeline (nor locates there).
    """
    if cap is not None:  # about the suggestor the cap refused
        culprit = state.usage.refused_by
    suggestor = culprit if culprit is not None and culprit in names else _top(counts, names)
    if cap is not None:
        return StopNote(
            code=code,
            message=f"{cap.owner}'s cap {cap.setting} {cap.limit} reached{what}",
            suggestor=suggestor,
            cycle=state.context.cycle,
            hint=f"raise {cap.setting} (the cap of {cap.owner} as a whole; "
            f"this run's own budget.{setting} was not reached)",
        )
    return StopNote(
        code=code,
        message=f"{setting} {limit} reached{what}",
        suggestor=suggestor,
        setting=setting,
        cycle=state.context.cycle,
        hint=f"raise budget.{setting}, or make the suggestors named stop sooner (`when`)",
    )


def _outer(meter: UsageMeter, stop: Stop) -> OuterCap | None:
    """The cap beyond the run's budget that refused the call this stop is about, if one did."""
    return meter.refused_cap if meter.refused is stop.reason else None


def _calls(stop: Stop, state: RunState, budget: Budget, names: Collection[str]) -> StopNote:
    meter, spent = state.usage, state.usage.spent_by()
    counts = {name: float(usage.model_calls) for name, usage in spent.items()}
    what = ": " + ranked(counts, "call", "made") + _earlier(meter.totals.model_calls, counts)
    what += _refused(meter.refused_by, meter.refused, stop.reason, "a call")
    return _budget_note(
        codes.STOP_MODEL_CALL_BUDGET,
        "max_model_calls",
        budget.max_model_calls,
        what,
        state=state,
        counts=counts,
        names=names,
        cap=_outer(meter, stop),
    )


def _tool_calls(stop: Stop, state: RunState, budget: Budget, names: Collection[str]) -> StopNote:
    meter = state.usage
    counts = {name: float(count) for name, count in meter.tool_calls_by().items()}
    what = ": " + ranked(counts, "tool call", "made")
    what += _refused(meter.refused_by, meter.refused, stop.reason, "a tool call")
    return _budget_note(
        codes.STOP_TOOL_CALL_BUDGET,
        "max_tool_calls",
        budget.max_tool_calls,
        what,
        state=state,
        counts=counts,
        names=names,
        culprit=meter.refused_by,
    )


def _tokens(stop: Stop, state: RunState, budget: Budget, names: Collection[str]) -> StopNote:
    meter, spent = state.usage, state.usage.spent_by()
    counts = {name: float(usage.tokens) for name, usage in spent.items()}
    total = meter.totals.tokens
    what = f": {_plural(total, 'token')} used; " + ranked(counts, "token", "used")
    what += _earlier(total, counts) + _refused(
        meter.refused_by, meter.refused, stop.reason, "a call"
    )
    limit, cap = budget.max_tokens, _outer(meter, stop)
    if cap is None and meter.refused is stop.reason and limit is not None and total < limit:
        what += (
            f" with {_plural(limit - total, 'token')} left (a call holds its input estimate "
            f"plus an answer cap of at least {MIN_ANSWER_TOKENS})"
        )
    return _budget_note(
        codes.STOP_TOKEN_BUDGET,
        "max_tokens",
        budget.max_tokens,
        what,
        state=state,
        counts=counts,
        names=names,
        cap=cap,
    )


def _cycles(stop: Stop, state: RunState, budget: Budget, names: Collection[str]) -> StopNote:
    counts = {name: float(count) for name, count in state.ran.items()}
    return _budget_note(
        codes.STOP_CYCLE_BUDGET,
        "max_cycles",
        budget.max_cycles,
        ": " + ranked(counts, "cycle", "ran in"),
        state=state,
        counts=counts,
        names=names,
    )


def _facts(stop: Stop, state: RunState, budget: Budget, names: Collection[str]) -> StopNote:
    counts: dict[str, float] = {}
    for fact in state.context:
        owner = fact_owner(fact)
        counts[owner] = counts.get(owner, 0.0) + 1
    return _budget_note(
        codes.STOP_FACT_BUDGET,
        "max_facts",
        budget.max_facts,
        ": " + ranked(counts, "fact", "promoted", names) + _one_more(stop.suggestor, names),
        state=state,
        counts=counts,
        names=names,
        culprit=stop.suggestor,
    )


def _time(stop: Stop, state: RunState, budget: Budget, names: Collection[str]) -> StopNote:
    cycle, meter = state.context.cycle, state.usage
    if stop.in_flight:
        flight = ", ".join(repr(name) for name in stop.in_flight)
        what = f" in cycle {cycle}, cancelling {flight} in flight"
    else:
        what = f" after cycle {cycle}"
    what += _refused(meter.refused_by, meter.refused, stop.reason, "a model call")
    if state.busy:
        slowest = sorted(state.busy.items(), key=lambda item: (-item[1], item[0]))[:_NAMED]
        what += "; most time went to " + ", ".join(repr(name) for name, _ in slowest)
    first = stop.in_flight[0] if stop.in_flight else meter.refused_by
    return _budget_note(
        codes.STOP_TIME_BUDGET,
        "max_wall_s",
        f"{budget.max_wall_s:g} s",
        what,
        state=state,
        counts=state.busy,
        names=names,
        culprit=first,
    )


_BUDGET: dict[StopReason, Callable[[Stop, RunState, Budget, Collection[str]], StopNote]] = {
    StopReason.MODEL_CALL_BUDGET_EXHAUSTED: _calls,
    StopReason.TOOL_CALL_BUDGET_EXHAUSTED: _tool_calls,
    StopReason.TOKEN_BUDGET_EXHAUSTED: _tokens,
    StopReason.CYCLE_BUDGET_EXHAUSTED: _cycles,
    StopReason.FACT_BUDGET_EXHAUSTED: _facts,
    StopReason.TIME_BUDGET_EXHAUSTED: _time,
}


def fact_owner(fact: Fact) -> str:
    """Who promoted `fact`: its suggestor (from the evidence), else seeds or the engine."""
    for item in fact.promotion.evidence:
        if item.startswith("suggestor:"):
            return item[len("suggestor:") :]
    return _SEED_OWNER.get(fact.promotion.gate, fact.promotion.gate)


def _one_more(culprit: str | None, names: Collection[str]) -> str:
    return f"; {culprit!r} proposed one more" if culprit in names else ""


def _earlier(total: int, counts: Mapping[str, float]) -> str:
    """What earlier runs (before a resume) spent: the total the breakdown does not cover."""
    rest = total - int(sum(counts.values()))
    return f", {rest} before the resume" if rest > 0 else ""


def _refused(by: str | None, reason: StopReason | None, stop: StopReason, what: str) -> str:
    return f"; {by!r} was refused {what}" if by is not None and reason is stop else ""


def _paused(state: RunState) -> tuple[StopNote, ...]:
    by: dict[str, list[str]] = {}
    why: dict[str, str] = {}
    for item in state.pending:
        by.setdefault(item.suggestor, []).append(item.id)
        why.setdefault(item.suggestor, item.reason)
    return tuple(
        StopNote(
            code=codes.STOP_HITL_PAUSE,
            message=f"paused for a human: {_plural(len(ids), 'proposal')} of {name!r} "
            f"await a decision ({', '.join(ids)}; gated: {why[name]})",
            severity=Severity.WARNING,
            suggestor=name,
            cycle=state.context.cycle,
            hint="continue with --resume DIR and --approve ID... or --reject ID...",
        )
        for name, ids in by.items()
    )


def _cancelled(stop: Stop, state: RunState) -> StopNote:
    cycle = state.context.cycle
    if stop.in_flight:
        flight = ", ".join(repr(name) for name in stop.in_flight)
        message = f"the run was cancelled in cycle {cycle}; cancelled in flight: {flight}"
    else:
        message = f"the run was cancelled after cycle {cycle}"
    return StopNote(
        code=codes.STOP_CANCELLED,
        message=message,
        suggestor=stop.in_flight[0] if stop.in_flight else None,
        cycle=cycle,
    )


def _failed(stop: Stop, state: RunState, names: Collection[str]) -> StopNote:
    """An `error` or `invariant_violated` stop, by what the error is."""
    error, cycle = stop.error, state.context.cycle
    if error is None:
        return StopNote(codes.STOP_RUN_FAILED, f"the run stopped: {stop.reason}", cycle=cycle)
    suggestor = stop.suggestor
    span = None
    if isinstance(error, RunError):
        if error.suggestor in names:
            suggestor = error.suggestor
        cycle = error.cycle if error.cycle is not None else cycle
        span = error.span
    who = f" (suggestor {suggestor!r}, cycle {cycle})" if suggestor else ""
    code = stop.code or _error_code(stop, error)
    what = error.message
    model = error if isinstance(error, ModelFailure) else error.__cause__
    if isinstance(model, ModelFailure) and model.code:  # a model's E_* is no diagnostic code
        what = f"{model.code}: {what}"
    if code == codes.STOP_INVARIANT_FAILED:
        what = f"invariant {stop.invariant!r} could not be checked: {what}"
    return StopNote(
        code=code,
        message=f"{what}{who}",
        suggestor=suggestor,
        invariant=stop.invariant,
        cycle=cycle,
        span=span,
        hint=error.hint,
    )


def _error_code(stop: Stop, error: Exception) -> str:
    if stop.reason is StopReason.INVARIANT_VIOLATED:
        return codes.STOP_INVARIANT_VIOLATED
    if isinstance(error, ModelFailure) or isinstance(error.__cause__, ModelFailure):
        own = getattr(error, "diagnostic_code", None) or getattr(
            error.__cause__, "diagnostic_code", None
        )
        return own if isinstance(own, str) else codes.STOP_MODEL_FAILED
    # A failure with a code of its own: a run error's (a changed tool list), else its
    # cause's (a tool replay's miss).
    own = getattr(error, "diagnostic_code", None) if isinstance(error, RunError) else None
    if not isinstance(own, str):
        own = getattr(error.__cause__, "diagnostic_code", None)
    if isinstance(own, str):
        return own
    if isinstance(error, RunError) and error.span is not None:
        return codes.RUN_ERROR
    if isinstance(error, KernelError):
        return codes.STOP_KERNEL_RULE
    if isinstance(error, RunError) and error.suggestor:
        return codes.STOP_SUGGESTOR_FAILED
    return codes.STOP_RUN_FAILED
