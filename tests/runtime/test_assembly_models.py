"""The models the run assembly builds for each run (`converge_dsl.runtime._models`)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from converge_dsl.batch import load

TRIAGE = Path(__file__).resolve().parents[2] / "pipelines" / "support-triage.yaml"


def test_a_run_on_a_scripted_model_makes_no_random_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Only the HTTP adapters draw retry jitter: a batch case on a scripted model
    # pays nothing for a generator it never reads.
    pipeline = load(TRIAGE)

    def refused(*args: object) -> random.Random:
        raise AssertionError("a random generator was made")

    monkeypatch.setattr(random, "Random", refused)
    out = asyncio.run(pipeline.outcome())
    assert out.exit_code == 0
    assert out.document.stop_reason == "converged"
