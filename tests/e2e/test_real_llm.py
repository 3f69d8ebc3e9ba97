"""The framework against a real inference server: llama.cpp's `llama-server` with a GGUF model.

The tests assert the framework's behaviour, not the model's wisdom: an llm
suggestor with a schema yields schema-valid facts or a located diagnostic; a
text suggestor converges with `max_tokens` set; an agent with
`tool_choice: required` produces a valid `context.propose` call or a soft
error (a warning fact); every run replays byte-identically from its cassette;
the token budget holds on the server's own usage counts.

The server binary is `CONVERGE_DSL_LLAMA_SERVER`, the model `CONVERGE_DSL_GGUF`
(`.ci/run` builds and caches both with `CONVERGE_DSL_REAL_LLM=1`). The model is
a base model without a chat template: the tests serve it with
`data/real_llm/chat-template.jinja`. A missing server or model FAILS these
tests once they are asked for (`CONVERGE_DSL_REAL_LLM=1`, or the server named);
`CONVERGE_DSL_SKIP_REAL_LLM=1` skips them, and so does a plain `pytest` that asks
for neither (it says so in the skip reason).
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from converge_dsl.cli import run

HERE = Path(__file__).parent
TEMPLATE = HERE / "data" / "real_llm" / "chat-template.jinja"
START_S = 180.0
# One server for the module under `pytest -n`: its tests go to one worker (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("real-llm")

if os.environ.get("CONVERGE_DSL_SKIP_REAL_LLM") == "1":
    pytest.skip("CONVERGE_DSL_SKIP_REAL_LLM=1: the real-LLM tests are off", allow_module_level=True)
if os.environ.get("CONVERGE_DSL_REAL_LLM") != "1" and "CONVERGE_DSL_LLAMA_SERVER" not in os.environ:
    pytest.skip(
        "real-LLM tests not asked for: CONVERGE_DSL_REAL_LLM=1 .ci/run builds llama-server "
        "and runs them",
        allow_module_level=True,
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _required(name: str) -> Path:
    value = os.environ.get(name)
    if not value or not Path(value).is_file():
        pytest.fail(
            f"{name} does not name a file ({value!r}): build the server with "
            "`CONVERGE_DSL_REAL_LLM=1 .ci/run`, or set CONVERGE_DSL_SKIP_REAL_LLM=1 to skip"
        )
    return Path(value)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The base URL (OpenAI-compatible, `/v1`) of a llama-server serving the test model."""
    binary, model = _required("CONVERGE_DSL_LLAMA_SERVER"), _required("CONVERGE_DSL_GGUF")
    port = _free_port()
    argv = [
        str(binary),
        *("-m", str(model), "--host", "127.0.0.1", "--port", str(port)),
        *("--jinja", "--chat-template-file", str(TEMPLATE)),
        *("-c", "4096", "-np", "2", "-t", "2", "--seed", "7", "--temp", "0"),
    ]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + START_S
        while True:
            if process.poll() is not None:
                err = process.stderr.read().decode(errors="replace") if process.stderr else ""
                pytest.fail(f"llama-server exited with {process.returncode}: {err[-2000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama-server did not become healthy within {START_S:g} s")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def pipeline(tmp: Path, url: str, suggestors: list[Any], budget: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "converge-dsl/v1",
        "kind": "Pipeline",
        "name": "real-llm",
        "keys": [
            {
                "name": "risks",
                "schema": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"type": "string", "maxLength": 60}},
                    "additionalProperties": False,
                },
            }
        ],
        "models": {
            "local": {
                "adapter": "openai",
                "base_url": url,
                "model": "gemma3-270m",
                # An answer's length is bounded, so a loaded machine makes a call slower, not
                # endless: unbounded, the agent's turn runs to ~2,000 tokens (37 s idle).
                "max_tokens": 256,
                "timeout_s": 300,
                "retries": 1,
                "temperature": 0,
                "structured_output": "json_schema",
            }
        },
        "budget": {"max_cycles": 4, **budget},
        "seeds": [{"id": "topic", "content": "opening a tea shop"}],
        "suggestors": suggestors,
    }
    path = tmp / "real.yaml"
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def record_and_replay(path: Path) -> dict[str, Any]:
    """Run `path` recording a cassette, replay it, and check the replay is byte-identical."""
    cassette = path.with_suffix(".cassette.jsonl")
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", str(path), "--format", "json", "--record", str(cassette)], out, err)
    replay_out, replay_err = io.StringIO(), io.StringIO()
    argv = ["run", str(path), "--format", "json", "--replay", str(cassette)]
    replay_code = run(argv, replay_out, replay_err)
    assert (replay_code, replay_out.getvalue()) == (code, out.getvalue()), replay_err.getvalue()
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def test_a_schema_suggestor_yields_valid_facts_or_a_located_diagnostic(
    server: str, tmp_path: Path
) -> None:
    risks = {
        "name": "risks",
        "kind": "llm",
        "model": "local",
        "dependencies": ["seeds"],
        "target": "risks",
        "max_tokens": 200,
        "prompt": {"user": "List two risks of {{ facts.seeds[0].content }} as JSON."},
        "output": {"format": "json", "id": "risk-{{ index }}"},
    }
    result = record_and_replay(pipeline(tmp_path, server, [risks], {}))
    facts = result["facts"].get("risks", [])
    invalid = [f for f in result["facts"].get("diagnostic", []) if "invalid-output" in f["id"]]
    assert facts or invalid, json.dumps(result, indent=1)[:4000]
    for fact in facts:
        assert set(fact["data"]) == {"name"}
        assert isinstance(fact["data"]["name"], str)
    for diagnostic in invalid:
        assert diagnostic["data"]["location"].startswith(str(tmp_path / "real.yaml"))


def test_a_text_suggestor_converges_with_max_tokens(server: str, tmp_path: Path) -> None:
    summary = {
        "name": "summary",
        "kind": "llm",
        "model": "local",
        "dependencies": ["seeds"],
        "target": "hypotheses",
        "max_tokens": 40,
        "prompt": {"user": "In one sentence: why open {{ facts.seeds[0].content }}?"},
        "output": {"format": "text", "id": "why"},
    }
    result = record_and_replay(pipeline(tmp_path, server, [summary], {}))
    assert result["stop_reason"] == "converged"
    assert result["usage"]["output_tokens"] <= 40


def test_an_agent_with_tool_choice_required_proposes_or_reports(
    server: str, tmp_path: Path
) -> None:
    agent = {
        "name": "reviewer",
        "kind": "agent",
        "model": "local",
        "dependencies": ["seeds"],
        "target": "evaluations",
        "goal": "Propose one evaluation of the seed with context.propose.",
        "max_turns": 3,
        "tools": ["context.propose"],
        "tool_choice": "required",
    }
    result = record_and_replay(pipeline(tmp_path, server, [agent], {}))
    evaluations = result["facts"].get("evaluations", [])
    warnings = [
        f
        for f in result["facts"].get("diagnostic", [])
        if f["data"].get("code") in ("CD922", "CD923")
    ]
    assert evaluations or warnings, json.dumps(result, indent=1)[:4000]
    assert result["stop_reason"] in ("converged", "cycle_budget_exhausted")


def test_the_token_budget_holds_on_the_servers_counts(server: str, tmp_path: Path) -> None:
    suggestors = [
        {
            "name": f"idea{i}",
            "kind": "llm",
            "model": "local",
            "dependencies": ["seeds"],
            "target": "hypotheses",
            "prompt": {"user": f"Idea {i} for {{{{ facts.seeds[0].content }}}}, at length."},
            "output": {"format": "text", "id": f"idea{i}"},
        }
        for i in range(3)
    ]
    budget = 400
    result = record_and_replay(pipeline(tmp_path, server, suggestors, {"max_tokens": budget}))
    overshoots = [
        f for f in result["facts"].get("diagnostic", []) if f["data"].get("code") == "CD924"
    ]
    assert overshoots == []  # llama-server honours max_tokens
    usage = result["usage"]
    input_margin = 64  # the chat template's tokens, beyond the adapter's input estimate
    assert usage["input_tokens"] + usage["output_tokens"] <= budget + input_margin
