"""Pack invariants run in the governed sandbox: bounded memory and CPU, and the deadline."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.packs._manifest import InvariantDef
from converge_dsl.packs._suggestor import evaluate_invariant
from converge_dsl.sandbox._governor import run_deadline
from converge_dsl.sandbox._templating import TemplateRenderError

_BOUNDED = textwrap.dedent(
    """\
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    from converge_dsl.packs._manifest import InvariantDef
    from converge_dsl.packs._suggestor import evaluate_invariant
    check = evaluate_invariant(InvariantDef("bomb", sys.argv[1]), {"x": 1}, {}, {})
    print(check.ok, check.message)
    """
)


@pytest.mark.parametrize(
    "check",
    [
        "('x' * 1000000) * 2500 == plan",
        "'a'.encode() * 2500000000 == plan",
        "[(range(10000)|list)*100]*1000000 == plan",
        "'{0:>2500000000}'.format(1) == plan",
    ],
)
def test_a_memory_bomb_in_a_pack_invariant_is_a_failed_check_within_1_gb(check: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BOUNDED, check],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("False cannot evaluate"), done.stdout


def test_a_cpu_burner_in_a_pack_invariant_is_bounded() -> None:
    burner = "(range(10000) | list | map('abs') | map('abs') | list | length) == 0"
    nested = "[1] * 999999 == [1] * 999998 and " * 10 + "true"
    for source in (burner, nested):
        start = time.monotonic()
        check = evaluate_invariant(InvariantDef("burn", source), {}, {}, {})
        assert time.monotonic() - start < 5
        assert check.ok is False or "cannot evaluate" not in check.message


def test_a_pack_invariant_past_the_run_deadline_stops_with_the_deadline() -> None:
    clock = FakeClock(start=10.0)
    check = InvariantDef("late", "(range(1000) | list | map('abs') | list) != []")
    with run_deadline(clock, 5.0), pytest.raises(TemplateRenderError, match="deadline"):
        evaluate_invariant(check, {}, {}, {})
    assert evaluate_invariant(check, {}, {}, {}).ok is True
