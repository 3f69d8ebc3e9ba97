"""The journal's record bodies: one line of UTF-8 JSON text that decodes to the body."""

from __future__ import annotations

import json
from typing import Any

import pytest

from converge_dsl.engine.types import FrozenDict
from converge_dsl.runtime._journal import encode, parse_journal, seal

KEY = bytes(range(32))


@pytest.mark.parametrize(
    "body",
    [
        {"facts": [{"content": 'a\nb\r\t\x00\x1f"\\', "data": None, "confidence": 0.1}]},
        {"text": "é \u2028 \u2029 \u0085 𝄞", "big": 2**70, "negative": -0.0, "tiny": 5e-324},
        {"data": FrozenDict({"b": (1, 2.5, FrozenDict({"x": True})), "a": None})},
        {"lone": "a\ud800b", "ok": "z"},
    ],
)
def test_a_body_is_one_line_decoding_to_itself(body: dict[str, Any]) -> None:
    text = encode(body)
    assert b"\n" not in text
    text.decode("utf-8")
    assert json.loads(text) == json.loads(json.dumps(body))


def test_a_value_json_cannot_hold_is_refused_as_json_dumps_refuses_it() -> None:
    with pytest.raises(TypeError):
        encode({"x": object()})


def test_encoded_records_are_read_back_verified() -> None:
    bodies = [{"kind": "snapshot", "seq": 0}, {"kind": "cycle", "seq": 1, "note": "a\ud800"}]
    raw, mac = b"", ""
    for body in bodies:
        mac, line = seal(KEY, mac, encode(body))
        raw += line
    records = parse_journal(raw, KEY, "journal").records
    assert [record.body for record in records] == bodies
    assert records[-1].mac == mac
