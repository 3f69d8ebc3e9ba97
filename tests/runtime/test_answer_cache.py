"""The answer cache end to end, against `fakellm` (a real OpenAI-compatible server on 127.0.0.1
that counts the requests each of its rules answered).

A three-llm-suggestor chain (ask-a -> ask-b -> ask-c, each reading the last one's fact) runs
with `--cache`: the second run sends no request and prints the same JSON result but for the
usage (`model_calls` 0, `cached_calls` 3); a change of ask-b's prompt sends exactly the
requests of ask-b and ask-c (ask-c's request holds ask-b's new answer); `--offline` after one
entry is removed fails with CD973 at that suggestor, with the diff to its nearest cached request.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from converge_dsl.cli import run
from converge_dsl.models.answer_store import SqliteAnswerStore

from ..models._fakellm import running_fakellm

pytest.importorskip("fakellm", reason="fakellm (the `dev` extra) is not installed")

RULES = json.dumps(
    {
        "version": 1,
        "rules": [
            {"name": "a", "when": {"messages_contain": "step-a"}, "respond": {"content": "Alpha"}},
            {
                "name": "b-one",
                "when": {"messages_contain": "step-b first"},
                "respond": {"content": "Beta one"},
            },
            {
                "name": "b-two",
                "when": {"messages_contain": "step-b second"},
                "respond": {"content": "Beta two"},
            },
            {"name": "c", "when": {"messages_contain": "step-c"}, "respond": {"content": "Gamma"}},
        ],
    }
)

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: chain
budget: {{max_model_calls: {calls}}}
keys: [{{name: drafts}}, {{name: reviews}}]
models:
  remote:
    adapter: openai
    base_url: "{url}/v1"
    model: gpt-4o-mini
    accounts: [{{name: main, api_key_env: CACHE_TEST_KEY}}]
seeds:
  - {{id: topic, content: tea}}
suggestors:
  - name: ask-a
    kind: llm
    model: remote
    dependencies: [seeds]
    target: hypotheses
    prompt: {{user: "step-a{edit}: say one word about {{{{ facts.seeds[0].content }}}}"}}
    output: {{format: text, id: a}}
  - name: ask-b
    kind: llm
    model: remote
    dependencies: [hypotheses]
    target: drafts
    prompt: {{user: "step-b {version}: expand {{{{ facts.hypotheses[0].content }}}}"}}
    output: {{format: text, id: b}}
  - name: ask-c
    kind: llm
    model: remote
    dependencies: [drafts]
    target: reviews
    prompt: {{user: "step-c: review {{{{ facts.drafts[0].content }}}}"}}
    output: {{format: text, id: c}}
"""


USAGE = re.compile(r'"usage": \{[^}]*\}')


def chain(url: str, *, version: str, edit: str = "", calls: int = 20) -> str:
    return PIPELINE.format(url=url, version=version, edit=edit, calls=calls)


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def counts(url: str) -> dict[str, int]:
    stats = httpx.get(f"{url}/_fakellm/stats", timeout=5).json()
    return {str(k): int(v) for k, v in stats["by_rule"].items()}


def without_usage(text: str) -> dict[str, Any]:
    document = json.loads(text)
    document.pop("usage")
    return document


def test_rerunning_calls_only_what_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CACHE_TEST_KEY", "sk-cache-test-0123456789")
    monkeypatch.delenv("CONVERGE_DSL_CACHE_MODE", raising=False)
    cache_dir = tmp_path / "answers"
    with running_fakellm(tmp_path, RULES) as url:
        pipeline = tmp_path / "chain.yaml"
        pipeline.write_text(chain(url, version="first"), encoding="utf-8")
        flags = ("--format", "json", "--cache", "--cache-dir", cache_dir)

        code, first, _ = cli("run", pipeline, *flags)
        assert code == 0
        assert counts(url) == {"a": 1, "b-one": 1, "c": 1}
        assert json.loads(first)["usage"]["model_calls"] == 3
        assert "cached_calls" not in json.loads(first)["usage"]

        trace, report = tmp_path / "second.jsonl", tmp_path / "second.html"
        code, second, _ = cli("run", pipeline, *flags, "--trace", trace, "--report", report)
        assert code == 0
        finished = [
            json.loads(line)
            for line in trace.read_text(encoding="utf-8").splitlines()
            if '"model_call_finished"' in line
        ]
        assert [event.get("cached") for event in finished] == [True, True, True]
        assert "remote (cached)" in report.read_text(encoding="utf-8")
        code, human, _ = cli("run", pipeline, "--cache", "--cache-dir", cache_dir)
        assert code == 0
        assert "; 3 cached answer(s), counted toward no budget" in human
        assert counts(url) == {"a": 1, "b-one": 1, "c": 1}  # no request at all
        assert json.loads(second)["usage"] == {
            "model_calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cached_calls": 3,
        }
        # Byte-identical but for the usage, the one place that says what was cached.
        assert USAGE.sub("", second) == USAGE.sub("", first)
        assert len(USAGE.findall(first)) == 1
        assert without_usage(second) == without_usage(first)

        pipeline.write_text(chain(url, version="second"), encoding="utf-8")
        code, third, err = cli("run", pipeline, *flags, "--explain-cache")
        assert code == 0
        assert counts(url) == {"a": 1, "b-one": 1, "b-two": 1, "c": 2}
        facts = json.loads(third)["facts"]
        assert facts["reviews"][0]["content"] == "Gamma"
        assert json.loads(third)["usage"]["cached_calls"] == 1
        explained = json.loads(err)["calls"]
        assert [(c["suggestor"], c["outcome"]) for c in explained] == [
            ("ask-a", "hit"),
            ("ask-b", "miss"),
            ("ask-c", "miss"),
        ]
        assert "the request differs at messages[0].parts[0].text" in explained[1]["why"]

        store = SqliteAnswerStore(cache_dir)
        (newest_c,) = [r for r in store.rows(suggestor="ask-c") if "Beta two" in r.request]
        assert store.delete(newest_c.key)
        store.close()
        code, _out, err = cli("run", pipeline, "--offline", "--cache-dir", cache_dir)
        assert counts(url)["c"] == 2  # offline: nothing sent
    assert code == 1
    assert "error[CD973]: E_CACHE_MISS: --offline: no cached answer for suggestor 'ask-c'" in err
    assert "chain.yaml:" in err  # located at the suggestor
    assert '-          "text": "step-c: review Beta one"' in err
    assert '+          "text": "step-c: review Beta two"' in err


def test_a_spent_call_budget_still_takes_cached_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ask-a's prompt changes (one request), its answer does not: ask-b and ask-c ask what they
    asked before. Under max_model_calls 1, the one call is ask-a's; the others need none."""
    monkeypatch.setenv("CACHE_TEST_KEY", "sk-cache-test-0123456789")
    monkeypatch.delenv("CONVERGE_DSL_CACHE_MODE", raising=False)
    flags = ("--format", "json", "--cache", "--cache-dir", tmp_path / "answers")
    with running_fakellm(tmp_path, RULES) as url:
        pipeline = tmp_path / "chain.yaml"
        pipeline.write_text(chain(url, version="first"), encoding="utf-8")
        assert cli("run", pipeline, *flags)[0] == 0
        pipeline.write_text(chain(url, version="first", edit=" now", calls=1), encoding="utf-8")
        code, out, _ = cli("run", pipeline, *flags)
        assert counts(url) == {"a": 2, "b-one": 1, "c": 1}
    result = json.loads(out)
    assert (code, result["stop_reason"]) == (0, "converged")
    assert result["usage"]["model_calls"] == 1
    assert result["usage"]["cached_calls"] == 2
    assert result["facts"]["reviews"][0]["content"] == "Gamma"
