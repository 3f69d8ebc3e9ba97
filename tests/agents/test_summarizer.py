"""The budgeted span summarizer: every outcome, the audit fields, recovery, no stalling."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import Recorder, Recording, compile_agents, fact, run, scripted, texts

from converge_dsl.agents import Reducer
from converge_dsl.agents._events import messages_to_json
from converge_dsl.engine.budget import Budget, UsageMeter
from converge_dsl.engine.context import Context

AGENT = """
default:
  tool_calls: [{name: context.read, input: {key: seeds}}]
"""


def build(
    cheap_script: str,
    budget: str = "",
    prompt: str = "",
    meter: UsageMeter | None = None,
) -> tuple[Any, Recording, Recorder]:
    budget = budget or (
        "{max_calls: 5, max_input_chars: 5000, timeout_s: 2, "
        "expected_summary_bytes: 20, cost_floor_multiple: 2}"
    )
    yaml = f"""
  - name: rev
    kind: agent
    model: main
    target: evaluations
    goal: "Review the seeds"
    max_turns: 8
    context_window: 400
    summarizer:
      model: cheap
      clear_turns_older_than: 2
{prompt}      budget: {budget}
"""
    main = Recording(scripted(AGENT))
    cheap = scripted(cheap_script, "cheap.script.yaml")
    sink = Recorder()
    agents = compile_agents(yaml, {"main": main, "cheap": cheap}, sink=sink, meter=meter)
    return agents["rev"], main, sink


def outcomes(sink: Recorder) -> list[tuple[str, str]]:
    out = []
    for event in sink.events:
        if event.type == "agent_summary_taken":  # type: ignore[attr-defined]
            out.append((event.reduction_id, "summary"))  # type: ignore[attr-defined]
        elif event.type == "agent_summary_fallback":  # type: ignore[attr-defined]
            out.append((event.reduction_id, event.reason))  # type: ignore[attr-defined]
    return out


def test_summary_taken_records_model_prompt_version_and_hash() -> None:
    meter = UsageMeter(Budget())
    agent, main, sink = build("default: {reply: '  read seeds twice  '}", meter=meter)
    run(agent, fact("seeds", "s1", "a" * 120))
    taken = sink.of("agent_summary_taken")
    assert [t.reduction_id for t in taken] == ["rev.c1.r1", "rev.c1.r2", "rev.c1.r3"]
    first = taken[0]
    assert first.model_id == "scripted:cheap.script.yaml"
    assert first.prompt_version == "summary-v1"
    assert first.sha256 == hashlib.sha256(b"read seeds twice").hexdigest()
    compaction = sink.of("agent_compaction")[0]
    assert compaction.replacement == "summary"
    assert (
        f"[summary of turns {compaction.first_turn}-{compaction.last_turn}] read seeds twice"
        in (texts(main.requests[compaction.turn]))
    )
    # Summary calls count against the run's model budget, like the agent's own calls.
    assert meter.totals.model_calls == len(main.requests) + 3


def test_custom_prompt_gets_its_own_version() -> None:
    agent, _, sink = build(
        "default: {reply: ok summary}", prompt="      prompt: 'Briefly: {{ span }}'\n"
    )
    run(agent, fact("seeds", "s1", "a" * 120))
    version = sink.of("agent_summary_taken")[0].prompt_version
    assert version.startswith("custom-")
    assert len(version) == len("custom-") + 12


@pytest.mark.parametrize(
    ("script", "budget", "expected"),
    [
        (
            "default: {reply: x, delay_s: 5}",
            "{max_calls: 5, max_input_chars: 5000, timeout_s: 0.05, "
            "expected_summary_bytes: 20, cost_floor_multiple: 2}",
            "timeout",
        ),
        ("default: {error: {code: E_PROVIDER, message: down}}", "", "error"),
        ("default: {reply: '   '}", "", "blank"),
        (
            "default: {reply: ok}",
            "{max_calls: 5, max_input_chars: 50, timeout_s: 2, "
            "expected_summary_bytes: 5, cost_floor_multiple: 1}",
            "over_budget",
        ),
        (
            "default: {reply: ok}",
            "{max_calls: 5, max_input_chars: 5000, timeout_s: 2, "
            "expected_summary_bytes: 1000, cost_floor_multiple: 4}",
            "below_floor",
        ),
        ("default: {reply: " + "w" * 900 + "}", "", "not_shorter"),
    ],
)
def test_every_failure_falls_back_to_the_stub(script: str, budget: str, expected: str) -> None:
    agent, main, sink = build(script, budget)
    effect = run(agent, fact("seeds", "s1", "a" * 120))
    # It only reads: no proposal, and the warning that it proposed nothing.
    assert [p.id for p in effect.proposals] == ["agent:no-proposal:rev:1"]
    assert sink.of("agent_finished")[0].status == "max_turns"  # the loop went on
    assert outcomes(sink) == [(f"rev.c1.r{i}", expected) for i in (1, 2, 3)]
    fallback = sink.of("agent_summary_fallback")[0]
    assert fallback.detail
    compaction = sink.of("agent_compaction")[0]
    assert compaction.replacement == "stub"
    assert f"[turns {compaction.first_turn}-{compaction.last_turn} cleared]" in texts(
        main.requests[compaction.turn]
    )


def test_budget_exhausted_after_max_calls() -> None:
    budget = (
        "{max_calls: 1, max_input_chars: 5000, timeout_s: 2, expected_summary_bytes: 20, "
        "cost_floor_multiple: 2}"
    )
    agent, _, sink = build("default: {reply: fine}", budget)
    run(agent, fact("seeds", "s1", "a" * 120))
    assert outcomes(sink) == [
        ("rev.c1.r1", "summary"),
        ("rev.c1.r2", "budget_exhausted"),
        ("rev.c1.r3", "budget_exhausted"),
    ]
    assert sink.of("agent_summary_fallback")[0].detail == "1 of max_calls 1 used"
    # The budget is per run: a second execution of the same agent gets no call either.
    run(agent, fact("seeds", "s1", "a" * 120), cycle=2)
    assert {reason for _, reason in outcomes(sink)[3:]} == {"budget_exhausted"}


def test_cleared_turns_are_recoverable_verbatim() -> None:
    agent, main, sink = build("default: {reply: fine}")
    run(agent, fact("seeds", "s1", "a" * 120))
    cleared = sink.of("agent_span_cleared")[0]
    assert (cleared.first_turn, cleared.last_turn) == (0, 1)
    # Turn 1's messages as the model saw them in the request of turn 2.
    turn1 = main.requests[2].messages[-2:]
    assert cleared.turns[1].model_dump() == {"turn": 1, "messages": messages_to_json(turn1)}
    assert cleared.turns[0].messages[0].parts[0].name == "context.read"


class BlockingSummarizer:
    """A synchronous summarizer that blocks its thread far past the timeout."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def model_id(self) -> str:
        return "blocking"

    def summarize(self, span_text: str) -> str:
        self.release.wait(5)
        return "too late"


@pytest.mark.parametrize("kind", ["thread", "async"])
def test_blocking_summarizer_does_not_stall_other_suggestors(kind: str) -> None:
    log: list[str] = []
    timeout = (
        "{max_calls: 5, max_input_chars: 5000, timeout_s: 0.3, "
        "expected_summary_bytes: 20, cost_floor_multiple: 2}"
    )
    agent, _, sink = build("default: {reply: x, delay_s: 5}", timeout)
    blocking = BlockingSummarizer()
    if kind == "thread":
        agent = dataclasses.replace(agent, reducer=Reducer(agent.spec.summarizer, blocking))
    events = sink.events

    class Logging(Recorder):
        def __call__(self, event: Any) -> None:
            events.append(event)
            if event.type == "agent_summary_fallback":
                log.append(f"fallback:{event.reason}")

    agent = dataclasses.replace(agent, sink=Logging())

    async def other_suggestor() -> None:
        for _ in range(10):
            await asyncio.sleep(0.01)
        log.append("other:done")

    async def cycle() -> None:
        ctx = Context.from_facts([fact("seeds", "s1", "a" * 120)], cycle=1)
        started = time.monotonic()
        await asyncio.gather(agent.execute(ctx), other_suggestor())
        log.append(f"elapsed<{2 if time.monotonic() - started < 2 else 'inf'}")

    try:
        asyncio.run(cycle())
    finally:
        blocking.release.set()
    # The other suggestor finished while the first summary call was still blocked.
    assert log[0] == "other:done"
    assert log[1:4] == ["fallback:timeout"] * 3
    assert log[-1] == "elapsed<2"  # three timeouts of 0.3 s, not three 5 s blocks


def test_blocking_summarizer_does_not_stall_the_engine_cycle() -> None:
    """The same law through the engine: another suggestor of the cycle finishes first."""
    from converge_dsl.engine import Engine, ProposedFact, Provenance
    from converge_dsl.engine.testing import FnSuggestor

    timeout = (
        "{max_calls: 5, max_input_chars: 5000, timeout_s: 0.3, "
        "expected_summary_bytes: 20, cost_floor_multiple: 2}"
    )
    agent, _, _ = build("default: {reply: x, delay_s: 5}", timeout)
    blocking = BlockingSummarizer()
    agent = dataclasses.replace(agent, reducer=Reducer(agent.spec.summarizer, blocking))
    finished: list[float] = []

    def note(ctx: Any) -> list[ProposedFact]:
        return [ProposedFact("signals", "other", "done", 1.0, Provenance("other@t"))]

    class Other(FnSuggestor):
        async def execute(self, ctx: Any) -> Any:
            effect = await super().execute(ctx)
            finished.append(time.monotonic() - started)
            return effect

    engine = Engine()
    engine.register(agent)
    engine.register(Other("other", ["seeds"], note, delay=0.05))
    seeds = [ProposedFact("seeds", "s1", "a" * 120, 1.0, Provenance("seeds@t"))]
    started = time.monotonic()
    try:
        result = asyncio.run(engine.run(seeds))
    finally:
        blocking.release.set()
    elapsed = time.monotonic() - started
    assert result.context.fact("signals", "other") is not None
    # The other suggestor was not held up by the blocked summary call of the agent.
    assert len(finished) == 1
    assert finished[0] < 2.5  # half the 5 s block: held up, it would finish after it
    assert elapsed < 5  # bounded by the 0.3 s summary timeouts, not by the 5 s blocks
