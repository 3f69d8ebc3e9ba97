"""`pack verify`: the repository's index and archive, the lock and the cache; yanked pins."""

from __future__ import annotations

import io
import json
import shutil
import socket
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.packs import PackCache, lock_pipeline, publish, read_lock, verify_pipeline, yank
from converge_dsl.packs import _cache as cache_module
from converge_dsl.packs._index import archive_path, index_path

from .conftest import make_pack, write_pipeline


@pytest.fixture(autouse=True)
def _forget_proofs() -> None:
    cache_module._PROVEN.clear()


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


def _locked(tmp_path: Path, versions: tuple[str, ...] = ("1.0.0",)) -> Path:
    for version in versions:
        publish(make_pack(tmp_path, "alpha", version), tmp_path / "repo")
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache"))
    cache_module._PROVEN.clear()
    return pipeline


def _verify(tmp_path: Path, pipeline: Path, *flags: str) -> tuple[int, str, str]:
    return _cli("pack", "verify", str(pipeline), "--cache", str(tmp_path / "cache"), *flags)


def _archive(tmp_path: Path, version: str = "1.0.0") -> Path:
    return tmp_path / "repo" / archive_path("alpha", version)


def _edit_index(tmp_path: Path, change: object) -> None:
    path = tmp_path / "repo" / index_path("alpha")
    index = json.loads(path.read_text())
    change(index)  # type: ignore[operator]
    path.write_text(json.dumps(index))


def test_a_sound_pack_is_checked_against_index_archive_and_cache(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path)
    assert _verify(tmp_path, pipeline) == (0, "ok  alpha 1.0.0\n1 pack(s) verified\n", "")
    report = verify_pipeline(pipeline, cache=PackCache(tmp_path / "cache"))
    assert report.verdicts[0].checked == ("index", "archive", "cache")
    assert report.as_json()["packs"][0]["ok"] is True


def test_a_tampered_archive_in_the_repository_fails_although_the_cache_is_sound(
    tmp_path: Path,
) -> None:
    pipeline = _locked(tmp_path)
    _archive(tmp_path).write_bytes(_archive(tmp_path).read_bytes() + b"\0")
    code, out, err = _verify(tmp_path, pipeline)
    assert (code, out) == (1, "")
    assert err.startswith("error[CD570]: alpha 1.0.0: the archive in path:repo has sha256 ")
    assert "it was altered or re-published after locking\n" in err
    assert err.endswith("1 of 1 pack(s) failed verification\n")
    # the verified copy in the cache was neither replaced nor reported
    assert "pack cache" not in err.split("hint:")[0]


def test_a_tampered_archive_with_an_empty_cache_is_one_finding_and_caches_nothing(
    tmp_path: Path,
) -> None:
    pipeline = _locked(tmp_path)
    shutil.rmtree(tmp_path / "cache")
    _archive(tmp_path).write_bytes(b"not an archive")
    code, _, err = _verify(tmp_path, pipeline)
    assert code == 1
    assert err.count("error") == 1
    assert "error[CD570]" in err
    assert not (tmp_path / "cache" / "unpacked").exists()


def test_the_index_listing_another_digest_is_coded(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path)

    def other_digest(index: dict[str, list[dict[str, str]]]) -> None:
        index["versions"][0]["sha256"] = "0" * 64

    _edit_index(tmp_path, other_digest)
    code, _, err = _verify(tmp_path, pipeline)
    assert code == 1
    assert err.startswith(
        "error[CD571]: alpha 1.0.0: the index of path:repo lists sha256 0000000000000000... "
        "for it, the lock pins "
    )
    assert "--repin" in err


def test_a_version_gone_from_the_index_is_coded(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path)
    _edit_index(tmp_path, lambda index: index.update(versions=[]))
    code, _, err = _verify(tmp_path, pipeline)
    assert code == 1
    assert err.startswith(
        "error[CD571]: alpha 1.0.0: the index of path:repo no longer lists this version\n"
    )


def test_a_pin_yanked_since_locking_is_a_warning(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path)
    yank(tmp_path / "repo", "alpha", "1.0.0")
    code, out, err = _verify(tmp_path, pipeline)
    assert (code, out) == (0, "ok  alpha 1.0.0\n1 pack(s) verified\n")
    assert err.startswith(
        "warning[CD572]: alpha 1.0.0, pinned by the lock, is yanked in path:repo; "
        "the lock keeps it until you move off it\n"
    )


def test_an_unreachable_folder_repository_is_a_finding(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path)
    shutil.rmtree(tmp_path / "repo")
    code, _, err = _verify(tmp_path, pipeline)
    assert code == 1
    assert err.startswith(
        "error[CD325]: alpha 1.0.0: cannot read its index: repository repo does not exist\n"
    )
    assert "Traceback" not in err
    assert _verify(tmp_path, pipeline, "--offline") == (
        0,
        "ok  alpha 1.0.0\n1 pack(s) verified (offline: the lock and the pack cache only)\n",
        "",
    )


def test_an_unreachable_http_repository_is_a_finding(
    tmp_path: Path, http_root: tuple[Path, str]
) -> None:
    served, url = http_root
    publish(make_pack(tmp_path, "alpha", "1.0.0"), served)
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}', f'[{{url: "{url}"}}]')
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache"))
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    text = pipeline.read_text().replace(url, closed)
    pipeline.write_text(text)
    lock_file = pipeline.parent / "converge.lock"
    lock_file.write_text(lock_file.read_text().replace(url, closed))
    code, _, err = _verify(tmp_path, pipeline)
    assert code == 1
    assert err.startswith("error[CD327]: alpha 1.0.0: cannot read its index: ")
    assert "Traceback" not in err


def test_the_archive_is_downloaded_once_when_the_cache_lacks_it(
    tmp_path: Path, http_root: tuple[Path, str], http_requests: list[str]
) -> None:
    served, url = http_root
    publish(make_pack(tmp_path, "alpha", "1.0.0"), served)
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}', f'[{{url: "{url}"}}]')
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache"))
    shutil.rmtree(tmp_path / "cache")
    http_requests.clear()
    code, out, _ = _verify(tmp_path, pipeline)
    assert (code, out) == (0, "ok  alpha 1.0.0\n1 pack(s) verified\n")
    assert http_requests == ["/index/alpha.json", "/archives/alpha/alpha-1.0.0.tar.gz"]
    assert (tmp_path / "cache" / "archives").is_dir()


def test_offline_never_fetches_and_reports_what_the_cache_lacks(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path)
    shutil.rmtree(tmp_path / "cache")
    code, _, err = _verify(tmp_path, pipeline, "--offline")
    assert code == 1
    assert err.startswith("error[CD506]: alpha 1.0.0: it is not in the pack cache\n")
    assert "  hint: run: converge-dsl pack fetch pipeline.yaml\n" in err
    assert not (tmp_path / "cache" / "archives").exists()


def test_verify_refuses_a_missing_pipeline_and_a_stale_lock(tmp_path: Path) -> None:
    code, _, err = _cli("pack", "verify", str(tmp_path / "nope.yaml"))
    assert (code, err.startswith("error[CD334]: no such pipeline file")) == (3, True)
    pipeline = _locked(tmp_path)
    pipeline.write_text(pipeline.read_text().replace('">=1"', '">=2"'))
    code, _, err = _verify(tmp_path, pipeline)
    assert code == 1
    assert "stale" in err


def test_relocking_warns_about_a_yanked_pin_and_the_hint_moves_off_it(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path, ("1.0.0", "1.1.0"))
    yank(tmp_path / "repo", "alpha", "1.1.0")
    cache = str(tmp_path / "cache")
    code, out, err = _cli("lock", str(pipeline), "--cache", cache)
    assert code == 0
    assert "alpha 1.1.0" in out
    assert err == (
        "warning[CD572]: alpha 1.1.0, pinned by the lock, is yanked in path:repo; the lock "
        "keeps it until you move off it\n"
        "  hint: to move to alpha 1.0.0, run: converge-dsl lock pipeline.yaml --upgrade alpha\n"
    )
    hinted = err.rsplit("run: ", 1)[1].split()
    assert hinted[:3] == ["converge-dsl", "lock", "pipeline.yaml"]
    code, out, err = _cli("lock", str(pipeline), *hinted[3:], "--cache", cache)
    assert (code, err) == (0, "")
    lock = read_lock(pipeline)
    assert lock is not None
    assert lock.packs["alpha"].version == "1.0.0"


def test_a_yanked_pin_is_warned_about_by_pack_add_too(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path)
    yank(tmp_path / "repo", "alpha", "1.0.0")
    publish(make_pack(tmp_path, "beta", "1.0.0"), tmp_path / "repo")
    code, _, err = _cli("pack", "add", "beta", str(pipeline), "--cache", str(tmp_path / "cache"))
    assert code == 0
    assert err.startswith("warning[CD572]: alpha 1.0.0, pinned by the lock, is yanked")


def test_a_signature_forged_in_the_index_after_locking_is_found(tmp_path: Path) -> None:
    from converge_dsl.packs import generate_key
    from converge_dsl.packs._signing import sign

    private, public = generate_key()
    publish(make_pack(tmp_path, "alpha", "1.0.0"), tmp_path / "repo", sign_key=private)
    repositories = f'[{{path: repo, trusted_keys: ["{public}"]}}]'
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}', repositories)
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache"))
    assert _verify(tmp_path, pipeline)[0] == 0
    forger, _ = generate_key()

    def forge(index: dict[str, list[dict[str, dict[str, str]]]]) -> None:
        entry = index["versions"][0]
        entry["signature"]["signature"] = sign(forger, "alpha", "1.0.0", str(entry["sha256"]))[
            "signature"
        ]

    _edit_index(tmp_path, forge)
    code, _, err = _verify(tmp_path, pipeline)
    assert code == 1
    assert err.startswith("error[CD502]: alpha 1.0.0: in the index: bad signature on alpha 1.0.0")


def test_offline_reports_an_altered_cache_copy_without_repairing_it(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path)
    lock = read_lock(pipeline)
    assert lock is not None
    readme = PackCache(tmp_path / "cache").folder(lock.packs["alpha"].sha256) / "prompts"
    (readme / "readme.md").write_text("TAMPERED\n")
    code, _, err = _verify(tmp_path, pipeline, "--offline")
    assert code == 1
    assert "does not match its locked archive (altered)" in err
    assert (readme / "readme.md").read_text() == "TAMPERED\n"  # offline never writes the cache


def test_lock_notes_a_newer_version_and_upgrade_moves_to_it(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path)
    publish(make_pack(tmp_path, "alpha", "1.1.0"), tmp_path / "repo")
    cache = str(tmp_path / "cache")
    code, out, err = _cli("lock", str(pipeline), "--cache", cache)
    assert code == 0
    assert "alpha 1.0.0" in out
    assert err == (
        "warning[CD577]: alpha 1.1.0 is published and fits '>=1'; the lock keeps 1.0.0\n"
        "  hint: to move to it, run: converge-dsl lock pipeline.yaml --upgrade alpha\n"
    )
    hinted = err.rsplit("run: ", 1)[1].split()
    code, out, err = _cli("lock", str(pipeline), *hinted[3:], "--cache", cache)
    assert (code, err) == (0, "")
    lock = read_lock(pipeline)
    assert lock is not None
    assert lock.packs["alpha"].version == "1.1.0"
    code, out, err = _cli("lock", str(pipeline), "--upgrade", "--cache", cache)  # all packs
    assert (code, err) == (0, "")


def test_upgrade_names_a_pack_of_the_pipeline(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path)
    code, _, err = _cli("lock", str(pipeline), "--upgrade", "alpah", "--cache", str(tmp_path))
    assert code == 3
    assert "the pipeline has no pack 'alpah'" in err
    assert "did you mean 'alpha'?" in err


def test_lock_that_no_version_fits_is_coded_and_points_at_the_specifier(tmp_path: Path) -> None:
    pipeline = _locked(tmp_path)
    pipeline.write_text(pipeline.read_text().replace('">=1"', '">=5"'))
    code, _, err = _cli("lock", str(pipeline), "--cache", str(tmp_path / "cache"))
    assert code == 1
    first, where = err.splitlines()[:2]
    assert first == "error[CD567]: no version of pack 'alpha' satisfies every requirement:"
    line = next(n for n, text in enumerate(pipeline.read_text().splitlines(), 1) if ">=5" in text)
    assert where.startswith(f" --> pipeline.yaml:{line}:")
    cache = str(tmp_path / "cache")
    code, out, _ = _cli("lock", str(pipeline), "--cache", cache, "--format", "json")
    assert json.loads(out)["error"]["code"] == "CD567"


@pytest.mark.parametrize("command", ["validate", "run"])
def test_validate_and_run_warn_at_a_yanked_pin_and_the_hint_moves_off_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    pipeline = _locked(tmp_path, ("1.0.0", "1.1.0"))
    yank(tmp_path / "repo", "alpha", "1.1.0")
    code, out, err = _cli(command, "pipeline.yaml")
    shown = out if command == "validate" else err
    assert code == 0, shown
    assert shown.startswith(
        "warning[CD572]: alpha 1.1.0, pinned by the lock, is yanked in path:repo; the lock "
        "keeps it until you move off it\n"
        " --> pipeline.yaml:4:9\n"
        "  |\n"
        '4 | packs: {alpha: ">=1"}\n'
        "  |         ^^^^^\n"
        "  = hint: to move to alpha 1.0.0, run: converge-dsl lock pipeline.yaml --upgrade alpha\n"
    )
    hinted = shown.split("\n")[5].rsplit("run: ", 1)[1].split()
    assert hinted[:3] == ["converge-dsl", "lock", "pipeline.yaml"]
    assert _cli(*hinted[1:])[0] == 0
    assert read_lock(pipeline).packs["alpha"].version == "1.0.0"  # type: ignore[union-attr]
    code, out, err = _cli(command, "pipeline.yaml")
    assert "CD572" not in out + err
