from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ROOT / "pipelines"
EXAMPLES = ["market-entry", "incident-triage", "vendor-review"]


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def write(folder: Path, name: str, *texts: str) -> Path:
    path = folder / name
    path.write_text("".join(textwrap.dedent(t) for t in texts), encoding="utf-8")
    return path


HEADER = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
"""


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_converges_with_json_output(name: str) -> None:
    code, out, _ = cli("run", PIPELINES / f"{name}.yaml", "--format", "json")
    doc = json.loads(out)
    assert code == 0
    assert doc["stop_reason"] == "converged"
    assert doc["converged"] is True
    assert set(doc) == {"stop_reason", "converged", "cycles", "facts", "diagnostics", "usage"}
    assert doc["usage"]["model_calls"] >= 1
    for key, facts in doc["facts"].items():
        for fact in facts:
            if key == "diagnostic":  # gate rejections are the engine's
                continue
            assert set(fact) == {"id", "content", "data", "confidence", "provenance"}
            assert isinstance(fact["content"], str)
            assert fact["provenance"]["source"].endswith(f"@{name}")


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_human_output(name: str) -> None:
    code, out, err = cli("run", PIPELINES / f"{name}.yaml")
    assert code == 0
    assert "stop: converged" in out
    assert "cycle 1:" in err  # plain progress lines when not a terminal


def test_market_entry_facts_and_llm_provenance() -> None:
    _, out, _ = cli("run", PIPELINES / "market-entry.yaml", "--format", "json")
    doc = json.loads(out)
    competitors = doc["facts"]["competitors"]
    assert [c["id"] for c in competitors] == [
        "competitor-freightly",
        "competitor-routewise",
        "competitor-nordhaul",
    ]
    assert competitors[0]["content"] == "Freightly (31% share)"
    assert competitors[0]["provenance"]["model_id"]
    assert doc["facts"]["strategies"][0]["id"] == "differentiate"


def test_same_inputs_same_result() -> None:
    first = cli("run", PIPELINES / "market-entry.yaml", "--format", "json")[1]
    second = cli("run", PIPELINES / "market-entry.yaml", "--format", "json")[1]
    assert first == second


def _llm_pipeline(tmp_path: Path, reply: str) -> Path:
    write(
        tmp_path,
        "s.yaml",
        f"""\
        apiVersion: converge-dsl/v1
        kind: ModelScript
        rules:
          - match: {{suggestor: scan}}
            reply: '{reply}'
        """,
    )
    return write(
        tmp_path,
        "p.yaml",
        HEADER,
        """\
        models: {m: {adapter: scripted, script: s.yaml}}
        seeds: [{id: market, content: tea}]
        suggestors:
          - name: scan
            kind: llm
            model: m
            dependencies: [seeds]
            target: competitors
            prompt: {user: "List competitors of {{ facts.seeds[0].content }}"}
            output:
              format: json
              schema: {type: array, items: {type: object, required: [name]}}
              id: "c-{{ index }}"
              content: "{{ item.name }}"
        """,
    )


def test_llm_json_conforming_answer_is_promoted(tmp_path: Path) -> None:
    code, out, _ = cli(
        "run",
        _llm_pipeline(tmp_path, '[{"name": "Lipton"}, {"name": "Twinings"}]'),
        "--format",
        "json",
    )
    doc = json.loads(out)
    assert code == 0
    assert [f["content"] for f in doc["facts"]["competitors"]] == ["Lipton", "Twinings"]
    assert "diagnostic" not in doc["facts"]


# The request carries the output schema, and the scripted model answers only what a
# model constrained to it could: another reply fails the run, naming the rule. (An
# answer that does not conform after decoding is a diagnostic: tests/compiler.)
def test_llm_json_non_conforming_scripted_reply_fails_naming_the_rule(tmp_path: Path) -> None:
    code, out, err = cli(
        "run", _llm_pipeline(tmp_path, '[{"title": "Lipton"}]'), "--format", "json"
    )
    doc = json.loads(out)
    assert code == 1
    assert doc["stop_reason"] == "error"
    assert "competitors" not in doc["facts"]
    assert "E_SCRIPT: model script s.yaml: rules[0] (s.yaml:4:5)" in err
    assert "at JSON pointer /0: 'name' is a required property" in err


def test_llm_scripted_reply_that_is_not_json_fails(tmp_path: Path) -> None:
    code, _, err = cli("run", _llm_pipeline(tmp_path, "sorry, no idea"), "--format", "json")
    assert code == 1
    assert "the reply is not JSON" in err


def test_runtime_template_error_is_located(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.yaml",
        HEADER,
        """\
        seeds: [{id: a, content: x}]
        suggestors:
          - name: late
            kind: rule
            dependencies: [seeds]
            emit:
              - key: strategies
                id: s
                content: |
                  first line
                  {{ facts.seeds[5].content }}
        """,
    )
    code, out, err = cli("run", path, "--format", "json")
    assert code == 1
    (diag,) = json.loads(out)["diagnostics"]
    assert (diag["file"], diag["line"]) == (str(path), 14)
    assert "suggestor 'late', cycle 1" in diag["message"]
    assert f"--> {path}:14:11" in err


def test_exit_2_invalid_pipeline(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.yaml",
        HEADER,
        """\
        suggestors:
          - name: r
            kind: rule
            emit: [{key: strategies, id: "{{ nope }}", content: x}]
        """,
    )
    code, _, err = cli("run", path)
    assert code == 2
    assert err == cli("validate", path)[1]
    assert "nope" in err
    code, out, err = cli("run", path, "--format", "json")
    assert code == 2
    assert err == ""
    doc = json.loads(out)
    assert (doc["stop_reason"], doc["converged"], doc["facts"]) == ("invalid", False, {})
    assert doc["diagnostics"] == json.loads(cli("validate", path, "--format", "json")[1])
    assert doc["diagnostics"][0]["code"] == "CD208"


def test_exit_3_usage_errors(tmp_path: Path) -> None:
    assert cli("run", tmp_path / "missing.yaml")[0] == 3
    assert cli("run", PIPELINES / "market-entry.yaml", "--input", "markt=x")[0] == 3
    assert cli("run", PIPELINES / "market-entry.yaml", "--input", "novalue")[0] == 3
    assert cli("run", PIPELINES / "market-entry.yaml", "--resume", tmp_path)[0] == 3


def test_input_reaches_templates() -> None:
    _, out, _ = cli(
        "run",
        PIPELINES / "market-entry.yaml",
        "--input",
        "market=Baltic fintech",
        "--format",
        "json",
    )
    seeds = json.loads(out)["facts"]["seeds"]
    assert seeds[1]["content"] == "Target market: Baltic fintech"


def test_exit_4_budget_exhausted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.yaml",
        HEADER,
        """\
        budget: {max_cycles: 3}
        suggestors:
          - name: counter
            kind: rule
            when: "true"
            emit: [{key: strategies, id: "s{{ cycle }}", content: "step {{ cycle }}"}]
        """,
    )
    code, out, _ = cli("run", path, "--format", "json")
    assert code == 4
    assert json.loads(out)["stop_reason"] == "cycle_budget_exhausted"


def test_exit_5_invariant_violated(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.yaml",
        HEADER,
        """\
        seeds: [{id: a, content: x}]
        invariants: [{name: needs-strategy, class: acceptance, check: "has('strategies')"}]
        """,
    )
    code, out, _ = cli("run", path, "--format", "json")
    assert code == 5
    assert json.loads(out)["stop_reason"] == "invariant_violated"


def test_trace_is_jsonl_with_type_and_span(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    assert cli("run", PIPELINES / "market-entry.yaml", "--trace", trace)[0] == 0
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert all("type" in line and "seq" in line for line in lines)
    promoted = [
        x for x in lines if x["type"] == "fact_promoted" and x["suggestor"] == "differentiate"
    ]
    assert promoted[0]["span"]["file"].endswith("market-entry.yaml")
    assert lines[-1]["type"] == "run_finished"


HARNESS = """
import os, signal, sys
from converge_dsl.runtime import CheckpointStore
save = CheckpointStore.save
def killing_save(self, state):
    save(self, state)
    if state.cycle == 2 and {kill}:
        open(os.path.join(str(self.folder), ".checkpoint.jsonl.999.tmp"), "w").write('{{"torn')
        os.kill(os.getpid(), signal.SIGKILL)
CheckpointStore.save = killing_save
from converge_dsl.cli import run
sys.exit(run(sys.argv[1:], sys.stdout, sys.stderr))
"""


def _harness(tmp_path: Path, kill: bool, *argv: str | Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "harness.py"
    script.write_text(HARNESS.format(kill=kill))
    return subprocess.run(
        [sys.executable, str(script), *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_sigkill_mid_run_then_resume_gives_the_same_result(tmp_path: Path) -> None:
    pipeline = PIPELINES / "market-entry.yaml"
    whole = _harness(tmp_path, False, "run", pipeline, "--format", "json")
    ckpt = tmp_path / "ckpt"
    killed = _harness(tmp_path, True, "run", pipeline, "--format", "json", "--checkpoint", ckpt)
    assert killed.returncode == -signal.SIGKILL
    last = (ckpt / "checkpoint.jsonl").read_text().splitlines()[-1]
    assert json.loads(last)["record"]["cycle"] == 2
    resumed = _harness(tmp_path, False, "run", pipeline, "--format", "json", "--resume", ckpt)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == json.loads(whole.stdout)


def test_torn_checkpoint_is_never_read(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    assert cli("run", PIPELINES / "market-entry.yaml", "--checkpoint", ckpt)[0] == 0
    first = (ckpt / "checkpoint.jsonl").read_text().splitlines()[0]
    (ckpt / "checkpoint.jsonl").write_text(first[: len(first) // 2])  # no complete record
    code, _, err = cli("run", PIPELINES / "market-entry.yaml", "--resume", ckpt)
    assert code == 3
    assert "torn or corrupt" in err


def test_checkpoint_of_another_pipeline_is_refused(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    assert cli("run", PIPELINES / "market-entry.yaml", "--checkpoint", ckpt)[0] == 0
    code, _, err = cli("run", PIPELINES / "vendor-review.yaml", "--resume", ckpt)
    assert code == 3
    assert "another pipeline" in err


def test_checkpoint_write_is_atomic_rename(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    cli("run", PIPELINES / "market-entry.yaml", "--checkpoint", ckpt)
    assert sorted(os.listdir(ckpt)) == [".lock", "checkpoint.jsonl"]
