from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl._json_text import loads, surrogate_problem


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[{"id": "T\\ud800x"}]', "the text at /0/id holds a lone surrogate (U+D800)"),
        ('{"a": ["\\uDFFF"]}', "the text at /a/0 holds a lone surrogate (U+DFFF)"),
        ('{"\\udc00k": 1}', "a key holds a lone surrogate (U+DC00)"),
        ('{"a~/b": "\\ud800"}', "the text at /a~0~1b holds a lone surrogate (U+D800)"),
        ('"\\ud83d"', "the text holds a lone surrogate (U+D83D)"),  # half a pair
        ('"\\ude00\\ud83d"', "the text holds a lone surrogate (U+DE00)"),  # a pair reversed
        ('"raw \ud800"', "the text holds a lone surrogate (U+D800)"),  # a str handed over
        (b'["\\ud800"]', "the text at /0 holds a lone surrogate (U+D800)"),
        (b'["\xed\xa0\x80"]', "'utf-8' codec can't decode byte 0xed"),  # encoded surrogate
        ('["\ud800"]'.encode("utf-16-le", "surrogatepass"), "'utf-16-le' codec can't decode"),
        ("[NaN]", "NaN is not standard JSON"),
        ('{"a": -Infinity}', "-Infinity is not standard JSON"),
    ],
)
def test_what_json_text_can_say_but_a_run_cannot_carry_is_refused(
    text: str | bytes, problem: str
) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(problem)):
        loads(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('"\\ud83d\\ude00"', "\U0001f600"),  # a pair is one character
        ('"\\\\ud800"', "\\ud800"),  # an escaped backslash: six characters of text
        ('{"k": [1, 2.5, null, true]}', {"k": [1, 2.5, None, True]}),
    ],
)
def test_standard_json_reads_as_json_loads_reads_it(text: str, value: Any) -> None:
    assert loads(text) == value == json.loads(text)


def test_keys_may_be_gathered_by_a_hook() -> None:
    assert loads('{"a": 1, "a": 2}', object_pairs_hook=lambda pairs: pairs) == [("a", 1), ("a", 2)]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(_JSON)
def test_any_unicode_json_reads_back_in_either_escaping(value: Any) -> None:
    for ascii_only in (True, False):
        text = json.dumps(value, ensure_ascii=ascii_only)
        assert loads(text) == value
        assert loads(text.encode("utf-8")) == value


@given(_JSON, st.integers(0xD800, 0xDFFF))
def test_a_lone_surrogate_anywhere_is_found(value: Any, code: int) -> None:
    planted = [value, {"x": chr(code)}]
    assert surrogate_problem(planted) == (
        f"the text at /1/x holds a lone surrogate (U+{code:04X}), which is not Unicode text"
    )
    with pytest.raises(ValueError, match=r"^the text at /1/x holds a lone surrogate"):
        loads(json.dumps(planted))
