"""`json_depth` and `nests_deeper`: how deeply a decoded JSON value nests."""

from __future__ import annotations

import json

from converge_dsl._json_types import json_depth, nests_deeper


def test_the_depth_counts_arrays_and_objects_not_scalars() -> None:
    assert [json_depth(v) for v in (1, "[[", [], {"a": [1]}, [[[{}]]])] == [0, 0, 1, 2, 4]


def test_nests_deeper_reads_the_value_not_the_brackets_of_its_text() -> None:
    shallow = '{"a": "[[[[[[[[{{{{"}'  # brackets inside a string: walked, and found shallow
    deep = "[" * 5 + "]" * 5
    assert not nests_deeper(json.loads(shallow), shallow, 3)
    assert nests_deeper(json.loads(deep), deep, 4)
    assert not nests_deeper(json.loads(deep), deep, 5)
