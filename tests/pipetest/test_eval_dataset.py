"""Where an eval dataset's JSONL line names an input (`_eval_dataset._key_at`), for the
caret of CD802."""

from __future__ import annotations

import json

import pytest

from converge_dsl.pipetest._eval_dataset import _key_at


@pytest.mark.parametrize(
    ("line", "name", "found"),
    [
        ('{"inputs": {"a": 1, "b": 2}}', "b", '"b"'),
        ('{ "name" :"x" ,\t"inputs" :\t{ "a" : [1, {"b": 0}] ,\r"b"\t: 2 } }', "b", '"b"'),
        ('{"inputs": {"a\\u0062": 1, "ab": 2}}', "ab", '"a\\u0062"'),  # the first, escaped
        ('{"expected": {"b": 1}, "inputs": {"b": 2}}', "b", '"b"'),  # not `expected`'s
        ('{"inputs": {"a": 1}}', "b", None),
        ('{"inputs": [1]}', "b", None),
        ('{"inputs": {"a": 1}  ', "b", None),
    ],
)
def test_the_key_of_an_input_is_found_with_its_quotes(
    line: str, name: str, found: str | None
) -> None:
    start, end = _key_at(line, name, json.JSONDecoder())
    assert (line[start:end] if start >= 0 else None) == found
