"""Failures are data: every stop but `converged` explains itself in the run result.

Each case runs a pipeline of `tests/e2e/data/stops/` through `run --format
json` and through the human output, and compares both with the files in
`tests/e2e/expected/stops/` byte for byte (`UPDATE_EXPECTED=1` rewrites them:
read the diff). Every diagnostic has a stable code, a message, the suggestor
concerned and its location (file, line, column, JSON path); a budget stop
names the suggestors that spent the budget. A run that never started (invalid
pipeline, usage error, a model that cannot be built) prints the same
run-result object, with no facts.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import jsonschema
import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
DATA = "tests/e2e/data/stops"
EXPECTED = Path(__file__).parent / "expected" / "stops"
SCHEMA = json.loads((ROOT / "schemas" / "run-result.v1.json").read_text(encoding="utf-8"))

# case -> (pipeline, extra arguments, exit code, stop reason, codes of the diagnostics)
CASES: dict[str, tuple[str, tuple[str, ...], int, str, tuple[str, ...]]] = {
    "cycles": ("cycles", (), 4, "cycle_budget_exhausted", ("CD901",)),
    "facts": ("facts", (), 4, "fact_budget_exhausted", ("CD902",)),
    "tokens": ("tokens", (), 4, "token_budget_exhausted", ("CD903",)),
    "calls": ("calls", (), 4, "model_call_budget_exhausted", ("CD904",)),
    "time": ("time", (), 4, "time_budget_exhausted", ("CD905",)),
    "invariant": ("invariant", (), 5, "invariant_violated", ("CD906",)),
    "pause": ("pause", (), 6, "hitl_pause", ("CD907",)),
    "conflict": ("conflict", (), 1, "error", ("CD909",)),
    "model-error": ("model-error", (), 1, "error", ("CD911",)),
    "invariant-error": ("invariant-error", (), 1, "error", ("CD913",)),
    "usage": ("cycles", ("--input", "nope=1"), 3, "usage_error", ("CD338",)),
    "no-key": ("no-key", (), 1, "error", ("CD921",)),
    "invalid": ("invalid", (), 2, "invalid", ("CD208",)),
}


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def expect(name: str, actual: str) -> None:
    path = EXPECTED / name
    if os.environ.get("UPDATE_EXPECTED") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # relative paths in the messages, as a user types them
    monkeypatch.delenv("CONVERGE_TEST_UNSET_API_KEY", raising=False)


@pytest.mark.parametrize("case", sorted(CASES))
def test_json_run_result_explains_the_stop(case: str) -> None:
    pipeline, extra, exit_code, stop, expected_codes = CASES[case]
    code, out, _ = _cli("run", f"{DATA}/{pipeline}.yaml", *extra, "--format", "json")
    assert code == exit_code
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert (doc["stop_reason"], doc["converged"]) == (stop, False)
    assert tuple(d["code"] for d in doc["diagnostics"]) == expected_codes
    for diagnostic in doc["diagnostics"]:
        assert diagnostic["file"]
        assert min(diagnostic["line"], diagnostic["column"]) >= 1
    expect(f"{case}.json", out)


@pytest.mark.parametrize("case", sorted(CASES))
def test_human_output_shows_the_same_diagnostics(case: str) -> None:
    pipeline, extra, exit_code, _, expected_codes = CASES[case]
    code, _, err = _cli("run", f"{DATA}/{pipeline}.yaml", *extra)
    assert code == exit_code
    assert all(f"[{code}]" in err for code in expected_codes if code < "CD920")
    expect(f"{case}.stderr.txt", err)


def test_a_suggestor_stop_names_the_suggestor_and_where_it_is() -> None:
    _, out, _ = _cli("run", f"{DATA}/conflict.yaml", "--format", "json")
    (diagnostic,) = json.loads(out)["diagnostics"]
    assert diagnostic["suggestor"] == "pessimist"
    assert diagnostic["cycle"] == 1
    assert (diagnostic["line"], diagnostic["column"], diagnostic["path"]) == (
        10,
        5,
        "suggestors[1]",
    )


def test_model_call_budget_names_who_made_the_calls() -> None:
    _, out, _ = _cli("run", f"{DATA}/calls.yaml", "--format", "json")
    (diagnostic,) = json.loads(out)["diagnostics"]
    assert diagnostic["message"] == (
        "max_model_calls 5 reached: 'summarise' made 3 calls, 'classify' 2"
    )
    assert diagnostic["suggestor"] == "summarise"


def test_a_converged_run_has_no_diagnostics() -> None:
    code, out, _ = _cli("run", "tests/e2e/data/key-schema.yaml", "--format", "json")
    doc = json.loads(out)
    assert (code, doc["stop_reason"], doc["diagnostics"]) == (0, "converged", [])


def test_an_environment_error_before_the_run_is_a_run_result_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from converge_dsl import runtime

    async def fail(options: object) -> object:
        raise OSError(28, "No space left on device", "out.jsonl")

    monkeypatch.setattr(runtime, "run_pipeline", fail)
    code, out, err = _cli("run", f"{DATA}/cycles.yaml", "--format", "json")
    assert code == 1
    assert err == "error[CD361]: cannot use 'out.jsonl': No space left on device\n"
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["stop_reason"] == "error"
    assert [(d["code"], d["message"]) for d in doc["diagnostics"]] == [
        ("CD361", "cannot use 'out.jsonl': No space left on device")
    ]
