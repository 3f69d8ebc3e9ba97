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
