"""Names read from repository and lock files are never turned into paths or URLs unchecked."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.errors import PackError
from converge_dsl.packs import FolderRepository, HttpRepository, publish, read_lock

from .conftest import make_pack, write_pipeline
from .test_info import expect

HOSTILE = ["../../outside", "a/b", "\x1b[31mred", "", ".hidden"]


def _repo_with_names(tmp_path: Path, names: list[object]) -> Path:
    repo = tmp_path / "repo"
    publish(make_pack(tmp_path, "alpha", "1.0.0"), repo)
    (repo / "names.json").write_text(json.dumps(names), encoding="utf-8")
    return repo


@pytest.mark.parametrize("name", HOSTILE)
def test_a_names_file_naming_a_path_is_refused(tmp_path: Path, name: str) -> None:
    repo = _repo_with_names(tmp_path, ["alpha", name])
    (tmp_path / "outside.json").write_text('{"name": "../../outside", "versions": []}')
    with pytest.raises(PackError, match="is not a pack name"):
        FolderRepository(repo).names()


def test_pack_list_of_a_hostile_names_file_is_a_located_error(tmp_path: Path) -> None:
    repo = _repo_with_names(tmp_path, ["alpha", "\x1b[31mred"])
    out, err = io.StringIO(), io.StringIO()
    assert run(["pack", "list", "--repo", str(repo)], out, err, {}) == 1
    assert out.getvalue() == ""
    expect("list-hostile-name.txt", err.getvalue().replace(str(repo), "REPO"))


@pytest.mark.parametrize("name", HOSTILE)
def test_an_index_requiring_a_path_is_refused(tmp_path: Path, name: str) -> None:
    repo = tmp_path / "repo"
    publish(make_pack(tmp_path, "alpha", "1.0.0"), repo)
    index = repo / "index" / "alpha.json"
    body = json.loads(index.read_text())
    body["versions"][0]["requires"]["packs"] = {name: ">=1"}
    index.write_text(json.dumps(body))
    with pytest.raises(PackError, match="is not a pack name"):
        FolderRepository(repo).fetch_index("alpha")


@pytest.mark.parametrize("name", HOSTILE)
def test_a_repository_is_never_asked_for_a_path_as_a_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(PackError, match="is not a pack name"):
        FolderRepository(tmp_path).fetch_index(name)
    with pytest.raises(PackError, match="is not a pack name"):
        FolderRepository(tmp_path).fetch_archive(name, "1.0.0")


def test_a_lock_file_naming_a_path_is_refused(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path, "{alpha: '>=1'}")
    section = {
        "pipeline": {"packs": {"alpha": ">=1"}, "repositories": [{"path": "repo"}]},
        "packs": {"../../x": {"version": "1.0.0", "sha256": "0" * 64, "repository": "path:repo"}},
    }
    lock = {"lock-version": 1, "pipelines": {pipeline.name: section}}
    (tmp_path / "converge.lock").write_text(json.dumps(lock))
    with pytest.raises(PackError, match=re.escape("'../../x' is malformed: it is not a pack name")):
        read_lock(pipeline)


def test_an_http_url_with_control_characters_is_an_error_not_a_traceback() -> None:
    repository = HttpRepository("http://127.0.0.1:9/\x1b[31m")
    with pytest.raises(PackError, match="not a valid URL") as caught:
        repository.fetch_index("alpha")
    assert "\x1b" not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/repo/?token=1",
        "http://127.0.0.1:9/repo#top",
        "http://127.0.0.1:9/repo?",  # an empty query or fragment passed the check
        "http://127.0.0.1:9/repo#",
    ],
)
def test_an_http_url_with_a_query_or_fragment_is_refused_before_any_request(url: str) -> None:
    # Each file was asked at the url with its path appended after the query or
    # fragment: the repository's own files were never asked for, and `pack list`
    # printed nothing (exit 0).
    with pytest.raises(PackError, match="has a query or fragment") as caught:
        HttpRepository(url)
    assert caught.value.code == "CD327"
