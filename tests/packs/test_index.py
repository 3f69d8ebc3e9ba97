"""Repository data of any shape is a PackError naming the repository, pack and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.errors import PackError
from converge_dsl.packs import FolderRepository
from converge_dsl.packs._index import parse_index

GOOD: dict[str, Any] = {"version": "1.0.0", "sha256": "a" * 64}
DEEP = b"[" * 100_000 + b"]" * 100_000


def _index(*versions: Any) -> bytes:
    return json.dumps({"name": "evil", "versions": list(versions)}).encode()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (DEEP, "JSON nested too deeply"),
        (b"\xff", "not JSON"),
        (json.dumps({"name": "evil", "versions": {"a": 1}}).encode(), "'versions' is not a list"),
        (_index("1.0.0"), "versions[0]: it is not an object"),
        (_index({**GOOD, "signature": "ed25519:zzz"}), "version 1.0.0: field 'signature'"),
        (_index({**GOOD, "signature": {"key": 1}}), "field 'signature'"),
        (_index({**GOOD, "version": 1}), "versions[0]: field 'version'"),
        (_index({**GOOD, "sha256": "xyz"}), "field 'sha256'"),
        (_index({**GOOD, "yanked": "no"}), "field 'yanked'"),
        (_index({**GOOD, "published": 5}), "field 'published'"),
        (_index({**GOOD, "requires": []}), "field 'requires'"),
        (_index({**GOOD, "requires": {"packs": ["a"]}}), "field 'requires.packs'"),
        (_index({**GOOD, "requires": {"packs": {"a": "!!"}}}), "field 'requires.packs.a'"),
        (_index({**GOOD, "requires": {"converge-dsl": 3}}), "field 'requires.converge-dsl'"),
    ],
)
def test_malformed_index_data_is_refused_clearly(data: bytes, problem: str) -> None:
    with pytest.raises(PackError) as caught:
        parse_index(data, "evil", "url:http://repo index/evil.json")
    message = caught.value.message
    assert message.startswith("url:http://repo index/evil.json: ")
    assert problem in message
    if "versions" in problem or "field" in problem:
        assert "pack 'evil'" in message


def test_a_well_formed_entry_parses() -> None:
    signature = {"key": "ed25519:k", "signature": "ed25519:s"}
    index = parse_index(_index({**GOOD, "signature": signature}), "evil", "x")
    assert index.entries[0].signature == signature


def test_deep_or_wrong_names_file_is_a_pack_error(tmp_path: Path) -> None:
    (tmp_path / "names.json").write_bytes(DEEP)
    with pytest.raises(PackError, match=r"names\.json: JSON nested too deeply"):
        FolderRepository(tmp_path).names()
    (tmp_path / "names.json").write_text('{"a": 1}')
    with pytest.raises(PackError, match="not a list of pack names"):
        FolderRepository(tmp_path).names()


def test_a_missing_repository_folder_is_named(tmp_path: Path) -> None:
    repository = FolderRepository(tmp_path / "norepo", label="./norepo")
    with pytest.raises(PackError) as caught:
        repository.fetch_index("evil")
    assert caught.value.message == "repository ./norepo does not exist"
    with pytest.raises(PackError, match="does not exist"):
        repository.names()
