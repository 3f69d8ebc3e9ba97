"""A loaded pipeline (batch, test, the Python API) uses the answer cache its environment names."""

from __future__ import annotations

from pathlib import Path

import pytest

from converge_dsl.batch import load
from converge_dsl.clock import FakeClock
from converge_dsl.errors import UsageError
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

from .conftest import topic_pipeline

PIPELINE = topic_pipeline("cached", "TEST_KEY")


def test_cases_share_the_cache_the_environment_turns_on(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.reset(FakeReply(text="tea is good"))
        path = tmp_path / "p.yaml"
        path.write_text(PIPELINE.format(url=server.openai_base_url), encoding="utf-8")
        env = {
            "TEST_KEY": "sk-test",
            "CONVERGE_DSL_CACHE_MODE": "read-write",
            "CONVERGE_DSL_CACHE": str(tmp_path / "cache"),
        }
        with load(path, env=env, clock=FakeClock()) as pipeline:
            cases = [{"topic": "tea"}, {"topic": "coffee"}, {"topic": "tea"}]
            documents = list(pipeline.run_many(cases, concurrency=1))
        assert len(server.requests) == 2
    assert [d.usage.cached_calls for d in documents] == [None, None, 1]
    assert [d.usage.model_calls for d in documents] == [1, 1, 0]
    assert (tmp_path / "cache" / "answers" / "answers.sqlite3").exists()


def test_without_the_variable_nothing_is_cached(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        path = tmp_path / "p.yaml"
        path.write_text(PIPELINE.format(url=server.openai_base_url), encoding="utf-8")
        env = {"TEST_KEY": "sk-test", "CONVERGE_DSL_CACHE": str(tmp_path / "cache")}
        with load(path, env=env, clock=FakeClock()) as pipeline:
            list(pipeline.run_many([{"topic": "tea"}, {"topic": "tea"}], concurrency=1))
        assert len(server.requests) == 2
    assert not (tmp_path / "cache" / "answers").exists()


def test_a_mode_that_is_none_of_the_three_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE.format(url="http://127.0.0.1:9/v1"), encoding="utf-8")
    with pytest.raises(UsageError, match=r"CD976"):
        load(path, env={"TEST_KEY": "k", "CONVERGE_DSL_CACHE_MODE": "on"})
