"""`run --cases` with the answer cache: `--cache`, `--offline`, `--cache-dir`, `--config` and
`--explain-cache` reach every case, in the `local` and the `process` executor alike.

The pipeline asks a loopback OpenAI-compatible server (`FakeProviderServer`) one question per
case about the case's topic; cases repeat topics, so a filled cache answers them all.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from converge_dsl.cli import run as cli
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

from .conftest import read_results, topic_pipeline, write_cases

PIPELINE = topic_pipeline("topics", "BATCH_CACHE_KEY")

TOPICS = ["tea", "coffee", "tea", "cocoa", "coffee", "tea"]


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCH_CACHE_KEY", "sk-batch-cache-0123456789")
    monkeypatch.delenv("CONVERGE_DSL_CACHE_MODE", raising=False)
    monkeypatch.delenv("CONVERGE_DSL_CACHE", raising=False)


def batch(pipeline: Path, cases: Path, out: Path, *extra: str | Path) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["run", pipeline, "--cases", cases, "--out", out, *extra]
    code = cli([str(a) for a in argv], stdout, stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def setup(tmp_path: Path, server: FakeProviderServer) -> tuple[Path, Path]:
    pipeline = tmp_path / "topics.yaml"
    pipeline.write_text(PIPELINE.format(url=server.openai_base_url), encoding="utf-8")
    cases = write_cases(
        tmp_path / "cases.jsonl", [{"id": f"c{i}", "topic": t} for i, t in enumerate(TOPICS)]
    )
    return pipeline, cases


@pytest.mark.parametrize("executor", ["local", "process"])
def test_a_batch_fills_the_cache_and_a_second_one_sends_nothing(
    tmp_path: Path, executor: str
) -> None:
    folder = tmp_path / "answers"
    flags = ("--executor", executor, "--concurrency", "1", "--cache", "--cache-dir", folder)
    with FakeProviderServer() as server:
        server.reset(FakeReply(text="said"))
        pipeline, cases = setup(tmp_path, server)
        code, _, err = batch(pipeline, cases, tmp_path / "first.jsonl", *flags)
        assert code == 0, err
        assert len(server.requests) == 3  # one per topic: the repeats were answered
        code, _, err = batch(pipeline, cases, tmp_path / "second.jsonl", *flags)
        assert code == 0, err
        assert len(server.requests) == 3
    first, second = read_results(tmp_path / "first.jsonl"), read_results(tmp_path / "second.jsonl")
    assert [line["usage"]["model_calls"] for line in first] == [1, 1, 0, 1, 0, 0]
    assert all(line["usage"]["model_calls"] == 0 for line in second)
    assert all(line["usage"]["cached_calls"] == 1 for line in second)
    assert [line["facts"] for line in second] == [line["facts"] for line in first]


def test_explain_cache_says_per_case_what_missed_and_why(tmp_path: Path) -> None:
    folder = tmp_path / "answers"
    with FakeProviderServer() as server:
        server.reset(FakeReply(text="said"))
        pipeline, cases = setup(tmp_path, server)
        flags = ("--concurrency", "1", "--cache-dir", folder)
        assert batch(pipeline, cases, tmp_path / "one.jsonl", "--cache", *flags)[0] == 0
        write_cases(cases, [{"id": "c0", "topic": "tea"}, {"id": "c1", "topic": "mate"}])
        code, _, err = batch(pipeline, cases, tmp_path / "two.jsonl", "--explain-cache", *flags)
        assert code == 0, err
        code, out, err_json = batch(
            pipeline, cases, tmp_path / "three.jsonl", "--explain-cache", "--format", "json", *flags
        )
        assert code == 0, err_json
    assert "answer cache: 2 call(s) in 2 case(s): 1 hit(s), 1 miss(es)\n" in err
    assert '  case 1 (id "c1"): 0 hit(s), 1 miss(es)\n' in err
    assert "    miss  ask (model remote, key " in err
    assert "the request differs at messages[0].parts[0].text" in err
    assert '+          "text": "Say something about mate"' in err
    assert "case 0" not in err  # answered wholly from the cache: in the total only
    summary = json.loads(out)  # the summary stays alone on standard output
    assert (summary["cases"], summary["model_calls"], summary["cached_calls"]) == (2, 0, 2)
    explained = json.loads(err_json[err_json.index('{\n  "cases"') :])
    assert [
        (c["index"], c["id"], [call["outcome"] for call in c["calls"]]) for c in explained["cases"]
    ] == [(0, "c0", ["hit"]), (1, "c1", ["hit"])]


def test_an_offline_batch_fails_only_the_cases_that_miss(tmp_path: Path) -> None:
    folder = tmp_path / "answers"
    with FakeProviderServer() as server:
        server.reset(FakeReply(text="said"))
        pipeline, cases = setup(tmp_path, server)
        flags = ("--concurrency", "1", "--cache-dir", folder)
        assert batch(pipeline, cases, tmp_path / "one.jsonl", "--cache", *flags)[0] == 0
        write_cases(cases, [{"topic": "tea"}, {"topic": "mate"}])
        code, _, _ = batch(pipeline, cases, tmp_path / "two.jsonl", "--offline", *flags)
        assert len(server.requests) == 3
    assert code == 1
    tea, mate = read_results(tmp_path / "two.jsonl")
    assert (tea["stop_reason"], tea["usage"]["cached_calls"]) == ("converged", 1)
    assert mate["stop_reason"] == "error"
    assert mate["diagnostics"][0]["code"] == "CD973"


def test_a_run_configuration_turns_the_cache_on_for_a_batch(tmp_path: Path) -> None:
    config = tmp_path / "dev.run.yaml"
    config.write_text(
        "apiVersion: converge-dsl/v1\nkind: RunConfig\ncache: {mode: read-write, dir: answers}\n",
        encoding="utf-8",
    )
    with FakeProviderServer() as server:
        server.reset(FakeReply(text="said"))
        pipeline, cases = setup(tmp_path, server)
        code, _, err = batch(
            pipeline, cases, tmp_path / "r.jsonl", "--config", config, "--concurrency", "1"
        )
        assert code == 0, err
        assert len(server.requests) == 3
    assert (tmp_path / "answers" / "answers.sqlite3").exists()
