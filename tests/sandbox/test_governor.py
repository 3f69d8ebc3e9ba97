"""The governor closes every builder of the sandbox, by mechanism (issue payloads and more).

Payloads that would allocate gigabytes run in a subprocess under a 1 GB address
space limit, so a hole fails the test instead of the machine; CPU burners run
under a fake clock whose deadline has passed, or a small budget.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.sandbox._governor import (
    Budget,
    DeadlinePassed,
    Exhausted,
    charge_deep,
    governed,
    run_deadline,
    spend,
)
from converge_dsl.sandbox._templating import (
    GLOBALS,
    TemplateRenderError,
    compile_expression,
    compile_template,
    evaluate,
    render,
)

_BOUNDED = textwrap.dedent(
    """\
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    from converge_dsl.sandbox import (
        GLOBALS, TemplateCompileError, TemplateRenderError, compile_template, render
    )
    try:  # a part that always fails is refused as it compiles (`'%s' % x`)
        render(compile_template(sys.argv[1]), dict(GLOBALS))
    except (TemplateCompileError, TemplateRenderError) as exc:
        print("refused:", exc.message)
    else:
        print("rendered")
    """
)

MEMORY_BOMBS = [
    # The payloads.
    "{{ '{0:>2500000000}'.format(1) }}",
    "{{ '{x:>2500000000}'.format_map({'x': 1}) }}",
    "{{ '{0:{1}}'.format(1, 2500000000) }}",
    "{{ 'a'.encode() * 2500000000 }}",
    "{{ [(range(10000)|list)*100]*1000000 == [] }}",
    # Other format paths, other builders, other sequences.
    "{{ '{0:.2500000000f}'.format(1.0) }}",
    "{{ '{:{}}'.format('', 2500000000) }}",
    "{{ '%2500000000d' % 1 }}",
    "{{ '%2500000000d'.encode() % 1 }}",
    "{{ 2500000000 * 'a'.encode() }}",
    "{{ ('a' * 1000).encode() * 2500000 }}",
    "{{ ('a' * 1000000).encode() + ('a' * 1000000).encode() }}",
    "{{ [[0] * 1000] * 2500000 }}",
    "{{ [[[0] * 100] * 100] * 1000 }}",
    "{{ ([1] * 1000000) + ([1] * 1000000) }}",
    "{{ [('x' * 1000, 'y')] * 100000 }}",
    "{{ (('x' * 1000,) * 1000) * 1000 }}",
    "{{ ('ab' * 500000).encode().replace('a'.encode(), ('a' * 10000).encode()) }}",
    "{{ ','.encode().join([('x' * 1000000).encode()] * 3) }}",
    "{{ ('x' * 1000000).encode().hex().encode().hex() }}",
    "{{ [[1] * 999999] * 3 | sum(start=[]) }}",
]


@pytest.mark.parametrize("source", MEMORY_BOMBS)
def test_memory_bombs_are_refused_within_1_gb(source: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BOUNDED, source],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused:"), done.stdout


def _refusal(source: str) -> str:
    with pytest.raises(TemplateRenderError) as info:
        render(compile_template(source), dict(GLOBALS))
    return info.value.message


def test_format_methods_are_refused_by_the_attribute_rules() -> None:
    assert "'format' of 'str' object is unsafe" in _refusal("{{ '{0}'.format(1) }}")
    assert "'format_map'" in _refusal("{{ '{x}'.format_map({'x': 1}) }}")


def test_nested_repetition_counts_nested_items() -> None:
    assert "repetition of more than" in _refusal("{{ [(range(10000)|list)*100]*1000000 }}")
    assert "repetition of more than" in _refusal("{{ [[1] * 1001] * 1000 }}")
    within = "{{ ([[1] * 999] * 1000) | length }} {{ ((range(10000)|list)*100) | length }}"
    assert render(compile_template(within), dict(GLOBALS)) == "1000 1000000"


# Shared references built with list literals: each level doubles the nested size.
_DOUBLINGS = (
    "{% set a0 = (range(10000)|list)*100 %}{% set b0 = (range(10000)|list)*100 %}"
    + "".join(
        f"{{% set a{i} = [a{i - 1}, a{i - 1}] %}}{{% set b{i} = [b{i - 1}, b{i - 1}] %}}"
        for i in range(1, 30)
    )
)


@pytest.mark.parametrize(
    "test",
    ["{{ a29 == b29 }}", "{{ a29 is eq b29 }}", "{{ a29 in [b29] }}", "{{ a29 < b29 }}"],
)
def test_comparisons_of_shared_structures_are_charged_before_they_run(test: str) -> None:
    # CPU time: a loaded machine stretches the wall time, not the work (about 1 s of CPU;
    # run, the comparison would walk 2**29 items).
    start = time.process_time()
    message = _refusal(_DOUBLINGS + test)
    assert "built or scanned more than" in message
    assert time.process_time() - start < 5


def test_comparisons_and_tests_still_work() -> None:
    source = (
        "{{ 1 < 2 < 3 }} {{ 3 in [1, 2] }} {{ 'a' not in 'bc' }} "
        "{{ [1, 2] | select('eq', 2) | list }}"
    )
    assert render(compile_template(source), dict(GLOBALS)) == "True False True [2]"


def test_a_render_past_the_run_deadline_is_refused() -> None:
    clock = FakeClock()
    burner = "{% for i in range(1000) %}{% for j in range(10) %}{% endfor %}{% endfor %}"
    with run_deadline(clock, 5.0):
        assert render(compile_template("{{ 1 }}"), dict(GLOBALS)) == "1"
        clock.advance(6)
        with pytest.raises(TemplateRenderError) as info:
            render(compile_template(burner), dict(GLOBALS))
    assert "the run's deadline (max_wall_s) passed" in info.value.message
    # With no deadline set, the same render finishes.
    render(compile_template(burner), dict(GLOBALS))


def test_an_expression_past_the_run_deadline_is_refused() -> None:
    clock = FakeClock(start=100.0)
    expression = compile_expression("(range(1000) | list | map('abs') | list) == []")
    with run_deadline(clock, 99.0), pytest.raises(TemplateRenderError, match="deadline"):
        evaluate(expression, dict(GLOBALS))


def _spend_often(times: int) -> None:
    for _ in range(times):
        spend(0)


def test_the_governor_shares_one_budget_and_reads_the_deadline_cooperatively() -> None:
    clock = FakeClock()
    with run_deadline(clock, 1.0), governed(10, 100, "check") as budget:
        with governed(1_000, 1_000) as inner:
            assert inner is budget  # nested computations share the outer budget
        spend(2, 50)
        assert (budget.steps, budget.work) == (8, 50)
        clock.advance(2)
        with pytest.raises(DeadlinePassed, match="while a check ran"):
            _spend_often(300)
    spend(10**9)  # no budget open: nothing is counted


class _CountingClock(FakeClock):
    """A fake clock that counts its reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def monotonic(self) -> float:
        self.reads += 1
        return super().monotonic()


def _charges(
    use_spend: bool, deadline: float | None, charges: list[tuple[int, int]], late: int
) -> list[Any]:
    """What each charge leaves (steps, work, clock reads) or raises, charged through the
    module's `spend` (its inlined fast path) or straight through `Budget.spend`; the
    clock passes any deadline before charge `late`."""
    clock = _CountingClock()
    seen: list[Any] = []
    with run_deadline(clock, deadline), governed(600, 900, "check") as budget:
        for number, (steps, size) in enumerate(charges):
            if number == late:
                clock.advance(10)
            try:
                if use_spend:
                    spend(steps, size)
                else:
                    budget.spend(steps, size)
            except Exhausted as exc:
                seen.append((type(exc).__name__, exc.message, budget.steps, budget.work))
                break
            seen.append((budget.steps, budget.work, clock.reads))
    return seen


@pytest.mark.parametrize("deadline", [None, 5.0])
@pytest.mark.parametrize("shape", ["steps", "work", "deadline"])
def test_spend_charges_as_the_budget_does_up_to_and_past_every_bound(
    deadline: float | None, shape: str
) -> None:
    rng = random.Random(f"{shape}{deadline}")
    if shape == "steps":  # crosses the 600 steps before the deadline is looked at again
        charges = [(rng.choice((0, 1, 1, 2)), 0) for _ in range(1_000)]
    elif shape == "work":
        charges = [(0, rng.choice((0, 1, 3))) for _ in range(1_000)]
    else:  # within both bounds: only the deadline (checked every CLOCK_EVERY) stops it
        charges = [(rng.choice((0, 1)), 0) for _ in range(1_000)][:590]
    late = 400 if shape == "deadline" else len(charges)
    seen = _charges(True, deadline, charges, late)
    assert seen == _charges(False, deadline, charges, late)
    stopped = {"steps": "Exhausted", "work": "Exhausted", "deadline": "DeadlinePassed"}[shape]
    if shape != "deadline" or deadline is not None:
        assert seen[-1][0] == stopped
    else:
        assert len(seen) == len(charges)


def test_a_comparison_is_charged_through_spends_inlined_path_and_its_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with governed(1, 100):
        charge_deep(1, 2)
        with pytest.raises(Exhausted, match="budget of 1 steps"):
            charge_deep("ab", "abc")
    charged: list[tuple[int, int]] = []
    monkeypatch.setattr(Budget, "spend", lambda _, *charge: charged.append(charge))
    with governed(10, 100) as budget:
        charge_deep(1, [1, 2])  # a scalar: nothing to walk, a step
        charge_deep("ab", "abc")  # the smaller of the two
        charge_deep()
    assert (budget.steps, budget.work) == (7, 98)
    assert charged == []  # within the bounds, with no clock read due
