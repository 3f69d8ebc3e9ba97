"""Model-script regexes run on RE2: linear in the prompt, located refusals otherwise."""

from __future__ import annotations

import asyncio
import time

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.errors import PipelineInvalid
from converge_dsl.models import Message, ModelRequest, ScriptedModel

HEAD = "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules:\n"
PROMPT = "a" * 30_000 + "!"  # the 30k-character prompt, which no pattern matches


def _script(pattern: str) -> str:
    escaped = pattern.replace("\\", "\\\\")
    return HEAD + f'  - match: {{regex: "{escaped}"}}\n    reply: hit\ndefault: {{reply: miss}}\n'


@pytest.mark.parametrize(
    "pattern",
    [
        "a*a*a*a*a*a*a*b",
        "(a{1,10}){1,10}$",
        ".*.*.*.*.*.*=",
        "^(a+)+$b",
        "(a|aa)+c",
        "(\\w+\\s?)+$x",
        "(.*a){25}z",
    ],
)
def test_catastrophic_patterns_answer_at_once_on_a_long_prompt(pattern: str) -> None:
    model = ScriptedModel.from_text(_script(pattern), "s.yaml", clock=FakeClock())
    start = time.monotonic()
    request = ModelRequest("default", (Message.text("user", PROMPT),))
    result = asyncio.run(model.call(request))
    assert time.monotonic() - start < 2
    assert result.text == "miss"


def test_nested_repeats_are_no_longer_refused_and_still_match() -> None:
    model = ScriptedModel.from_text(_script("^(a+)+$"), "s.yaml", clock=FakeClock())
    request = ModelRequest("default", (Message.text("user", "aaa"),))
    assert asyncio.run(model.call(request)).text == "hit"


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(a*)\\1*b", "invalid escape sequence"),
        ("(?=a)a", "invalid perl operator"),
        ("(?<=x)y", "invalid perl operator"),
        ("x(?!y)", "invalid perl operator"),
    ],
)
def test_a_pattern_re2_cannot_run_is_a_located_cd703(pattern: str, reason: str) -> None:
    with pytest.raises(PipelineInvalid) as caught:
        ScriptedModel.from_text(_script(pattern), "s.yaml", clock=FakeClock())
    first = caught.value.diagnostics[0]
    assert first.code == "CD703"
    assert (first.file, first.line) == ("s.yaml", 4)
    assert first.path == ("rules", 0, "match", "regex")
    assert "cannot run in linear time" in first.message
    assert reason in first.message
    assert first.hint is not None
    assert "backreferences" in first.hint
