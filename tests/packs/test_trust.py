"""`lock` never moves a pin down or to another digest silently; it leaves no guard file."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.errors import PackError
from converge_dsl.packs import (
    PackCache,
    build_archive,
    generate_key,
    load_locked_packs,
    lock_pipeline,
    publish,
    read_lock,
)
from converge_dsl.packs._index import archive_path, index_path

from .conftest import make_pack, write_pipeline


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


def _two_versions(tmp_path: Path, repositories: str = "[{path: repo}]", **sign: str) -> Path:
    for version in ("1.0.0", "2.0.0"):
        publish(make_pack(tmp_path, "alpha", version), tmp_path / "repo", **sign)  # type: ignore[arg-type]
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}', repositories)
    assert lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache")).packs["alpha"].version == (
        "2.0.0"
    )
    return pipeline


def _drop_from_index(tmp_path: Path, version: str) -> None:
    index_file = tmp_path / "repo" / index_path("alpha")
    index = json.loads(index_file.read_text())
    index["versions"] = [v for v in index["versions"] if v["version"] != version]
    index_file.write_text(json.dumps(index))


def _lock(tmp_path: Path, pipeline: Path, *flags: str) -> tuple[int, str, str]:
    return _cli("lock", str(pipeline), "--cache", str(tmp_path / "cache"), *flags)


@pytest.mark.parametrize("signed", [False, True])
def test_the_newest_version_vanishing_does_not_silently_downgrade(
    tmp_path: Path, signed: bool
) -> None:
    private, public = generate_key()
    repositories = f'[{{path: repo, trusted_keys: ["{public}"]}}]' if signed else "[{path: repo}]"
    pipeline = _two_versions(tmp_path, repositories, **({"sign_key": private} if signed else {}))
    before = (tmp_path / "converge.lock").read_bytes()
    _drop_from_index(tmp_path, "2.0.0")
    code, out, err = _lock(tmp_path, pipeline)
    assert (code, out) == (1, "")
    assert err == (
        "error[CD565]: lock would move alpha down from 2.0.0 to 1.0.0 (path:repo): "
        "2.0.0 is no longer in the index of path:repo; the lock was not changed\n"
        "  hint: if the older version is expected, run: converge-dsl lock "
        "pipeline.yaml --allow-downgrade\n"
    )
    assert (tmp_path / "converge.lock").read_bytes() == before
    code, out, _ = _lock(tmp_path, pipeline, "--allow-downgrade")
    assert code == 0
    assert "alpha 1.0.0" in out
    lock = read_lock(pipeline)
    assert lock is not None
    assert lock.packs["alpha"].version == "1.0.0"


def test_a_downgrade_the_pipeline_asks_for_needs_no_flag(tmp_path: Path) -> None:
    pipeline = _two_versions(tmp_path)
    write_pipeline(tmp_path, '{alpha: "<2"}')
    code, out, _ = _lock(tmp_path, pipeline)
    assert code == 0
    assert "alpha 1.0.0" in out


def test_a_new_digest_for_a_pinned_version_needs_repin(tmp_path: Path) -> None:
    publish(make_pack(tmp_path, "alpha", "1.0.0"), tmp_path / "repo")
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    old = lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache")).packs["alpha"].sha256
    evil = make_pack(tmp_path / "evil", "alpha", "1.0.0")
    (evil / "prompts" / "readme.md").write_text("evil\n")
    archive = build_archive(evil)
    (tmp_path / "repo" / archive_path("alpha", "1.0.0")).write_bytes(archive)
    with pytest.raises(PackError, match="digest mismatch"):  # the run refuses the tampered one
        load_locked_packs(pipeline, cache=PackCache(tmp_path / "cold"))
    from converge_dsl.packs import sha256_hex

    index_file = tmp_path / "repo" / index_path("alpha")
    index_file.write_text(index_file.read_text().replace(old, sha256_hex(archive)))
    before = (tmp_path / "converge.lock").read_bytes()
    code, _, err = _lock(tmp_path, pipeline)
    assert code == 1
    assert err.startswith(
        f"error[CD566]: lock would re-pin alpha 1.0.0 to another archive: path:repo now serves "
        f"sha256 {sha256_hex(archive)[:16]}..., the lock has {old[:16]}...; "
    )
    assert "--repin" in err
    assert (tmp_path / "converge.lock").read_bytes() == before
    assert _lock(tmp_path, pipeline, "--repin")[0] == 0
    lock = read_lock(pipeline)
    assert lock is not None
    assert lock.packs["alpha"].sha256 == sha256_hex(archive)


def test_upgrades_and_unchanged_pins_pass(tmp_path: Path) -> None:
    publish(make_pack(tmp_path, "alpha", "1.0.0"), tmp_path / "repo")
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    assert _lock(tmp_path, pipeline)[0] == 0
    assert _lock(tmp_path, pipeline)[0] == 0
    publish(make_pack(tmp_path, "alpha", "2.0.0"), tmp_path / "repo")
    write_pipeline(tmp_path, '{alpha: ">=2"}')
    code, out, _ = _lock(tmp_path, pipeline)
    assert code == 0
    assert "alpha 2.0.0" in out


def test_lock_leaves_no_guard_file_and_removes_an_old_one(tmp_path: Path) -> None:
    publish(make_pack(tmp_path, "alpha", "1.0.0"), tmp_path / "repo")
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    (tmp_path / ".converge.lock.lock").write_bytes(b"")  # left by an older version
    assert _lock(tmp_path, pipeline)[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
