from __future__ import annotations

from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from converge_dsl.errors import PackError
from converge_dsl.packs import FolderRepository, publish, resolve, yank

from .conftest import make_pack


def _repo(tmp_path: Path, packs: list[tuple[str, str, str]]) -> FolderRepository:
    root = tmp_path / "repo"
    for name, version, requires in packs:
        publish(
            make_pack(tmp_path, name, version, requires), root, published="2025-01-01T00:00:00Z"
        )
    return FolderRepository(root, label="repo")


def test_resolves_transitively_to_the_newest_fitting_versions(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        [
            ("alpha", "1.0.0", '{beta: ">=1"}'),
            ("alpha", "1.2.0", '{beta: ">=1.1,<2"}'),
            ("beta", "1.0.0", "{}"),
            ("beta", "1.5.0", "{}"),
            ("beta", "2.0.0", "{}"),
        ],
    )
    found = resolve({"alpha": SpecifierSet(">=1")}, [repo], requester="pipeline 'demo'")
    assert {n: str(r.entry.version) for n, r in found.items()} == {
        "alpha": "1.2.0",
        "beta": "1.5.0",
    }
    assert found["beta"].requested_by == ("pack alpha 1.2.0",)
    assert found["alpha"].repository == "path:repo"


def test_conflict_names_both_requesters_and_the_versions_that_exist(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        [("alpha", "1.0.0", '{beta: "<2"}'), ("beta", "1.0.0", "{}"), ("beta", "2.0.0", "{}")],
    )
    with pytest.raises(PackError) as caught:
        resolve(
            {"alpha": SpecifierSet(">=1"), "beta": SpecifierSet(">=2")},
            [repo],
            requester="pipeline 'demo'",
        )
    assert caught.value.message == (
        "no version of pack 'beta' satisfies every requirement:\n"
        "  pipeline 'demo' asks for beta >=2 (fits: 2.0.0)\n"
        "  pack alpha 1.0.0 asks for beta <2 (fits: 1.0.0)\n"
        "  versions that exist: 1.0.0, 2.0.0"
    )


def test_every_conflict_is_explained_with_requesters_and_yanked_versions(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        [
            ("alpha", "1.0.0", '{gamma: ">=3"}'),
            ("alpha", "1.1.0", '{beta: "<2"}'),
            ("beta", "1.0.0", "{}"),
            ("beta", "2.0.0", "{}"),
            ("beta", "2.1.0", "{}"),
            ("gamma", "1.0.0", "{}"),
            ("gamma", "3.0.0", "{}"),
        ],
    )
    yank(repo.root, "beta", "2.1.0")
    yank(repo.root, "gamma", "3.0.0")
    with pytest.raises(PackError) as caught:
        resolve(
            {"alpha": SpecifierSet(">=1"), "beta": SpecifierSet(">=2")},
            [repo],
            requester="pipeline 'demo'",
        )
    assert caught.value.message == (
        "no version of pack 'beta' satisfies every requirement:\n"
        "  pipeline 'demo' asks for beta >=2 (fits: 2.0.0)\n"
        "  pack alpha 1.1.0 asks for beta <2 (fits: 1.0.0)\n"
        "  versions that exist: 1.0.0, 2.0.0, 2.1.0 (yanked)\n"
        "  yanked versions are skipped unless the lock pins them\n"
        "no version of pack 'gamma' satisfies every requirement:\n"
        "  pack alpha 1.0.0 asks for gamma >=3 (fits: none)\n"
        "  versions that exist: 1.0.0, 3.0.0 (yanked)\n"
        "  yanked versions are skipped unless the lock pins them"
    )
    assert (
        caught.value.hint == "relax a specifier, or publish a version that fits every requirement"
    )


def test_backtracks_to_an_older_version_when_the_newest_conflicts(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        [
            ("alpha", "1.0.0", '{beta: ">=2"}'),
            ("alpha", "1.1.0", '{beta: "<2"}'),
            ("beta", "2.0.0", "{}"),
            ("beta", "1.0.0", "{}"),
        ],
    )
    found = resolve(
        {"beta": SpecifierSet(">=2"), "alpha": SpecifierSet("")}, [repo], requester="pipeline"
    )
    assert str(found["alpha"].entry.version) == "1.0.0"


def test_unknown_pack_suggests_a_near_name(tmp_path: Path) -> None:
    repo = _repo(tmp_path, [("alpha", "1.0.0", "{}")])
    with pytest.raises(
        PackError, match=r"no repository has pack 'alpah'[\s\S]*did you mean 'alpha'"
    ):
        resolve({"alpah": SpecifierSet()}, [repo], requester="pipeline")


def test_yanked_versions_are_skipped_unless_locked(tmp_path: Path) -> None:
    repo = _repo(tmp_path, [("alpha", "1.0.0", "{}"), ("alpha", "1.1.0", "{}")])
    yank(repo.root, "alpha", "1.1.0")
    fresh = resolve({"alpha": SpecifierSet()}, [repo], requester="pipeline")
    assert str(fresh["alpha"].entry.version) == "1.0.0"
    locked = resolve(
        {"alpha": SpecifierSet()}, [repo], requester="pipeline", locked={"alpha": Version("1.1.0")}
    )
    assert str(locked["alpha"].entry.version) == "1.1.0"
    yank(repo.root, "alpha", "1.0.0")
    with pytest.raises(PackError, match=r"exist: 1.0.0 \(yanked\), 1.1.0 \(yanked\)"):
        resolve({"alpha": SpecifierSet()}, [repo], requester="pipeline")


def test_versions_needing_another_converge_dsl_are_skipped(tmp_path: Path) -> None:
    repo = _repo(tmp_path, [("alpha", "1.0.0", "{}")])
    with pytest.raises(
        PackError, match=r"1.0.0 \(needs converge-dsl >=0.1\)\n  this is converge-dsl 0.0.1"
    ):
        resolve({"alpha": SpecifierSet()}, [repo], requester="p", converge_version=Version("0.0.1"))


def test_the_first_repository_that_has_a_pack_supplies_it(tmp_path: Path) -> None:
    first = _repo(tmp_path / "one", [("alpha", "1.0.0", "{}")])
    second = _repo(tmp_path / "two", [("alpha", "9.0.0", "{}")])
    found = resolve({"alpha": SpecifierSet()}, [first, second], requester="p")
    assert str(found["alpha"].entry.version) == "1.0.0"
    assert second.index_bytes_fetched == 0
