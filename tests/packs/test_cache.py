"""The unpacked cache is proven against the locked archive before it is used."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.errors import PackError
from converge_dsl.packs import PackCache, build_archive, load_locked_packs, lock_pipeline, publish
from converge_dsl.packs import _cache as cache_module
from converge_dsl.packs._archive import matches

from .conftest import make_pack, write_pipeline


@pytest.fixture(autouse=True)
def _forget_proofs() -> None:
    """Each test starts as a new process would: nothing proven yet."""
    cache_module._PROVEN.clear()


def _locked(tmp_path: Path) -> tuple[Path, PackCache, Path]:
    publish(make_pack(tmp_path, "alpha", "1.0.0"), tmp_path / "repo")
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    cache = PackCache(tmp_path / "cache")
    lock = lock_pipeline(pipeline, cache=cache)
    cache_module._PROVEN.clear()
    return pipeline, cache, cache.folder(lock.packs["alpha"].sha256)


def _readme(folder: Path) -> Path:
    return folder / "prompts" / "readme.md"


def _tamper_readme(folder: Path) -> None:
    _readme(folder).write_text("TAMPERED\n")


def _add_file(folder: Path) -> None:
    (folder / "extra.yaml").write_text("x: 1\n")


def _remove_file(folder: Path) -> None:
    _readme(folder).unlink()


def _symlink(folder: Path) -> None:
    _readme(folder).unlink()
    os.symlink("/etc/hostname", _readme(folder))


@pytest.mark.parametrize("tamper", [_tamper_readme, _add_file, _remove_file, _symlink])
def test_an_altered_unpacked_pack_is_reinstalled_from_the_verified_archive(
    tmp_path: Path, tamper: object
) -> None:
    pipeline, cache, folder = _locked(tmp_path)
    tamper(folder)  # type: ignore[operator]
    packs = load_locked_packs(pipeline, cache=cache)
    assert cache.repaired == ["alpha 1.0.0"]
    assert _readme(packs["alpha"].folder).read_text() == "alpha 1.0.0\n"
    assert not (folder / "extra.yaml").exists()
    assert matches(build_archive(make_pack(tmp_path, "alpha", "1.0.0")), folder)


def test_an_intact_pack_is_proven_once_per_process(tmp_path: Path) -> None:
    pipeline, cache, folder = _locked(tmp_path)
    load_locked_packs(pipeline, cache=cache)
    assert cache.repaired == []
    _tamper_readme(folder)  # after the proof: this process keeps its verdict
    load_locked_packs(pipeline, cache=cache)
    assert cache.repaired == []
    cache_module._PROVEN.clear()  # a new process
    load_locked_packs(pipeline, cache=cache)
    assert cache.repaired == ["alpha 1.0.0"]


def test_without_the_cached_archive_the_folder_is_rebuilt_and_compared(tmp_path: Path) -> None:
    pipeline, cache, folder = _locked(tmp_path)
    shutil.rmtree(cache.root / "archives")
    load_locked_packs(pipeline, cache=cache)  # normalised archive: the rebuild proves it
    assert cache.repaired == []
    cache_module._PROVEN.clear()
    _tamper_readme(folder)
    load_locked_packs(pipeline, cache=cache)  # re-fetched from the repository
    assert cache.repaired == ["alpha 1.0.0"]
    assert _readme(folder).read_text() == "alpha 1.0.0\n"


def test_an_altered_pack_whose_archive_is_gone_is_an_error_naming_the_pack(
    tmp_path: Path,
) -> None:
    pipeline, cache, folder = _locked(tmp_path)
    shutil.rmtree(cache.root / "archives")
    shutil.rmtree(tmp_path / "repo")
    _tamper_readme(folder)
    with pytest.raises(PackError, match=r"unpacked copy of alpha 1\.0\.0 .* does not match"):
        load_locked_packs(pipeline, cache=cache)
    assert not folder.exists()  # the altered copy is never used


def test_pack_verify_detects_the_tampering(tmp_path: Path) -> None:
    pipeline, cache, folder = _locked(tmp_path)
    _tamper_readme(folder)
    out, err = io.StringIO(), io.StringIO()
    code = run(["pack", "verify", str(pipeline), "--cache", str(cache.root)], out, err)
    assert code == 1
    assert "unpacked copy of alpha 1.0.0 in the pack cache did not match" in err.getvalue()
    cache_module._PROVEN.clear()
    out = io.StringIO()
    code = run(["pack", "verify", str(pipeline), "--cache", str(cache.root)], out, err)
    assert (code, out.getvalue()) == (0, "ok  alpha 1.0.0\n1 pack(s) verified\n")


def _publish_bomb(tmp_path: Path) -> Path:
    """A folder repository whose alpha 1.0.0 archive is a pax bomb with a matching digest."""
    from converge_dsl.packs import sha256_hex
    from converge_dsl.packs._index import archive_path, index_path

    from .test_archive import pax_bomb

    repo = tmp_path / "repo"
    publish(make_pack(tmp_path, "alpha", "1.0.0"), repo)
    archive = repo / archive_path("alpha", "1.0.0")
    honest = sha256_hex(archive.read_bytes())
    bomb = pax_bomb(64)
    archive.write_bytes(bomb)
    index = repo / index_path("alpha")
    index.write_text(index.read_text().replace(honest, sha256_hex(bomb)))
    return write_pipeline(tmp_path, '{alpha: ">=1"}')


def test_a_refused_archive_leaves_no_lock_no_cached_archive_and_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge_dsl.packs import _archive

    monkeypatch.setattr(_archive, "MAX_TOTAL_BYTES", 1 << 20)
    monkeypatch.setattr(_archive, "MAX_MEMBERS", 100)
    pipeline = _publish_bomb(tmp_path)
    cache = PackCache(tmp_path / "cache")
    for _ in range(2):  # the second attempt pays the same bounded price: nothing was kept
        code, _out, err = _cli("lock", str(pipeline), "--cache", str(cache.root))
        assert code == 1
        assert err.startswith("error[CD560]: archive of alpha 1.0.0 from path:repo: it expands")
        assert "nothing was unpacked or cached" in err
        assert not (tmp_path / "converge.lock").exists()
        assert sorted(p.name for p in cache.root.rglob("*") if not p.is_dir()) == []


def test_a_cached_archive_that_no_longer_unpacks_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline, cache, folder = _locked(tmp_path)
    shutil.rmtree(folder)
    from converge_dsl.packs import _archive

    monkeypatch.setattr(_archive, "MAX_MEMBERS", 1)  # what an older version let in
    with pytest.raises(PackError, match="over 1 members"):
        load_locked_packs(pipeline, cache=cache)
    assert list((cache.root / "archives").iterdir()) == []
    assert not folder.exists()


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


def test_the_cache_root_is_the_given_environments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache_module.CACHE_ENV, str(tmp_path / "process"))
    handed = {cache_module.CACHE_ENV: str(tmp_path / "handed")}
    assert PackCache(environ=handed).root == tmp_path / "handed"
    assert PackCache(tmp_path / "given", environ=handed).root == tmp_path / "given"
    assert PackCache().root == tmp_path / "process"  # no environment given: the process's
    assert PackCache(environ={}).root.name == "packs"  # the user cache folder's
