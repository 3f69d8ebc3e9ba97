"""Helpers of the batch tests: the echo pipeline, cases files, result files."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"
ECHO = DATA / "echo.yaml"
EXPECTED = Path(__file__).parent / "expected"


def expected(name: str, actual: str) -> str:
    """The text of `expected/NAME`; written from `actual` when UPDATE_EXPECTED=1."""
    import os

    path = EXPECTED / name
    if os.environ.get("UPDATE_EXPECTED") == "1":
        path.write_text(actual, encoding="utf-8")
    return path.read_text(encoding="utf-8")


# One llm suggestor asking a model over HTTP about `inputs.topic` (`topic_pipeline`).
_TOPIC_PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: {name}
inputs: {{topic: {{description: the topic}}}}
models:
  remote:
    adapter: openai
    base_url: "{url}"
    model: m
    accounts: [{{name: main, api_key_env: {key_env}}}]
seeds:
  - {{id: topic, content: "a topic"}}
suggestors:
  - name: ask
    kind: llm
    model: remote
    dependencies: [seeds]
    target: hypotheses
    prompt: {{user: "Say something about {{{{ inputs.topic }}}}"}}
    output: {{format: text, id: said}}
"""


def topic_pipeline(name: str, key_env: str) -> str:
    """The topic pipeline named `name`, its API key in `key_env`; to format with `url`."""
    return _TOPIC_PIPELINE.replace("{name}", name).replace("{key_env}", key_env)


def write_cases(path: Path, cases: Sequence[dict[str, Any] | str]) -> Path:
    """A cases file: one JSON object (or raw text) a line."""
    lines = [c if isinstance(c, str) else json.dumps(c) for c in cases]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read_results(path: Path) -> list[dict[str, Any]]:
    """The result lines of `path`, in input order (by `index`)."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return sorted(lines, key=lambda line: line["index"])


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray of two CPUs for the tests of one module (the `ray` extra)."""
    ray = pytest.importorskip(
        "ray", reason="the `ray` extra is not installed (pip install '.[ray]')"
    )
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def records(database: Path, run: str) -> int:
    """The checkpoint records of `run` committed in the journals' `database`."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        query = "SELECT COUNT(*) FROM checkpoint_records WHERE run = ?"
        return int(db.execute(query, (run,)).fetchone()[0])
