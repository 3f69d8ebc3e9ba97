"""Laws of the engine, checked with hypothesis."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from converge_dsl.engine import (
    ContextView,
    Engine,
    EngineState,
    ProposedFact,
    Provenance,
    RunResult,
)
from converge_dsl.engine.testing import FnSuggestor, StepClock, SyncFnSuggestor

KEYS = ("seeds", "hypotheses", "strategies", "signals", "votes")


# A suggestor spec: (reads, writes, fan-out). Its proposals are a monotone function of
# the facts of `reads`: one derived fact per input fact (ids bounded in depth, so finite).
Spec = tuple[int, int, int]
specs = st.lists(
    st.tuples(st.integers(0, len(KEYS) - 1), st.integers(1, len(KEYS) - 1), st.integers(1, 2)),
    min_size=1,
    max_size=6,
)


def _derive(index: int, reads: str, writes: str, fan: int):  # type: ignore[no-untyped-def]
    def propose(ctx: ContextView) -> list[ProposedFact]:
        out = []
        for fact in ctx.get(reads):
            if fact.id.count(".") >= 2:
                continue
            for k in range(fan):
                fid = f"{fact.id}.{index}{k}"
                out.append(
                    ProposedFact(
                        writes,
                        fid,
                        f"{writes}:{fid}",
                        0.4 if k == 1 else 0.9,
                        Provenance(f"d{index}"),
                    )
                )
        return out

    return propose


def _engine(
    spec: list[Spec], delays: list[int] | None = None, inline: list[bool] | None = None
) -> Engine:
    """The engine of `spec`; `inline[i % len]` makes suggestor i synchronous (run inline)."""
    clock = StepClock()
    engine = Engine(clock=clock)
    for i, (reads, writes, fan) in enumerate(spec):
        propose = _derive(i, KEYS[reads], KEYS[writes], fan)
        if inline and inline[i % len(inline)]:
            engine.register(SyncFnSuggestor(f"d{i}", [KEYS[reads]], propose, clock=clock))
            continue
        engine.register(
            FnSuggestor(
                f"d{i}",
                [KEYS[reads]],
                propose,
                delay=delays[i % len(delays)] if delays else 0,
                clock=clock,
            )
        )
    return engine


SEEDS = [ProposedFact("seeds", f"s{i}", f"seed {i}", 1.0, Provenance("seed")) for i in range(3)]


def _run(engine: Engine, state: EngineState | None = None) -> RunResult:
    return asyncio.run(engine.run(() if state else SEEDS, resume_from=state))


@settings(max_examples=40, deadline=None)
@given(specs, st.lists(st.integers(0, 6), min_size=1, max_size=6))
def test_finishing_order_never_changes_the_result(spec: list[Spec], delays: list[int]) -> None:
    assert _run(_engine(spec, delays)).fingerprint() == _run(_engine(spec)).fingerprint()


@settings(max_examples=40, deadline=None)
@given(
    specs,
    st.lists(st.integers(0, 6), min_size=1, max_size=6),
    st.lists(st.booleans(), min_size=1, max_size=6),
)
def test_running_some_suggestors_inline_never_changes_the_result(
    spec: list[Spec], delays: list[int], inline: list[bool]
) -> None:
    mixed = _run(_engine(spec, delays, inline))
    assert mixed.fingerprint() == _run(_engine(spec)).fingerprint()
    assert mixed.context.facts() == _run(_engine(spec)).context.facts()


@settings(max_examples=40, deadline=None)
@given(specs)
def test_monotone_suggestors_reach_a_fixed_point(spec: list[Spec]) -> None:
    engine = _engine(spec)
    result = _run(engine)
    assert result.converged
    for suggestor in engine.suggestors:
        assert not suggestor.accepts(result.context), suggestor.name


@settings(max_examples=30, deadline=None)
@given(specs)
def test_rerunning_a_converged_context_changes_nothing(spec: list[Spec]) -> None:
    first = _run(_engine(spec))
    everything_dirty = replace(first.state, dirty=first.context.keys())
    again = _run(_engine(spec), everything_dirty)
    assert again.converged
    assert again.context.facts() == first.context.facts()
