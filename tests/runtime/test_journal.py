"""The journal's records: bodies of one line of UTF-8 JSON text, sealed with a chained HMAC."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from converge_dsl.engine.types import FrozenDict
from converge_dsl.runtime import _journal
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


@pytest.mark.parametrize("size", [0, 100, 2047, 2048, 5000, 64 << 10, (64 << 10) + 1, 300_000])
def test_a_seal_is_one_hmac_of_the_previous_mac_a_newline_and_the_body(size: int) -> None:
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    mac, line = seal(KEY, "ab" * 32, body)
    assert mac == hmac.new(KEY, ("ab" * 32 + "\n").encode() + body, hashlib.sha256).hexdigest()
    assert line == b'{"mac":"' + mac.encode() + b'","record":' + body + b"}\n"


class _Recorder:
    """An HMAC that records the size of each buffer it is given."""

    def __init__(self, sizes: list[int]) -> None:
        self._hmac = hmac.new(KEY, digestmod=hashlib.sha256)
        self._sizes = sizes

    def copy(self) -> _Recorder:
        return self

    def update(self, data: bytes | memoryview) -> None:
        self._sizes.append(len(data))
        self._hmac.update(data)

    def hexdigest(self) -> str:
        return self._hmac.hexdigest()


def test_a_record_of_a_few_kilobytes_is_hashed_in_pieces_hashlib_hashes_holding_the_gil(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hashlib lets go of the GIL for 2 KiB or more, and a busy thread then keeps it."""
    sizes: list[int] = []
    monkeypatch.setattr(_journal, "_keyed", lambda key: _Recorder(sizes))
    body = b"y" * 10_000
    mac, _ = _journal.seal(KEY, "", body)
    assert max(sizes) < 2048
    assert sum(sizes) == len(body) + 1
    assert mac == hmac.new(KEY, b"\n" + body, hashlib.sha256).hexdigest()
