from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from converge_dsl.errors import PackError
from converge_dsl.packs import (
    PackCache,
    generate_key,
    load_locked_packs,
    lock_pipeline,
    publish,
    read_lock,
)
from converge_dsl.packs._index import archive_path, index_path

from .conftest import make_pack, write_pipeline


def _published(tmp_path: Path, **kwargs: str) -> Path:
    repo = tmp_path / "repo"
    publish(make_pack(tmp_path, "alpha", "1.0.0"), repo, **kwargs)  # type: ignore[arg-type]
    return repo


def test_publish_lock_then_run_offline_from_the_cache(tmp_path: Path) -> None:
    repo = _published(tmp_path)
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1,<2"}')
    cache = PackCache(tmp_path / "cache")
    lock = lock_pipeline(pipeline, cache=cache)
    assert lock.packs["alpha"].version == "1.0.0"
    assert read_lock(pipeline) == lock
    shutil.rmtree(repo)  # offline: the repository is gone
    packs = load_locked_packs(pipeline, cache=cache)
    assert packs["alpha"].suggestors["note"].kind == "rule"
    assert packs["alpha"].folder.is_relative_to(cache.root)


def test_lock_is_deterministic(tmp_path: Path) -> None:
    _published(tmp_path)
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache"))
    first = (tmp_path / "converge.lock").read_text()
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache2"))
    assert (tmp_path / "converge.lock").read_text() == first


def test_missing_and_stale_locks_are_refused_with_the_fix(tmp_path: Path) -> None:
    _published(tmp_path)
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    with pytest.raises(PackError, match=r"converge.lock is missing") as missing:
        load_locked_packs(pipeline, cache=PackCache(tmp_path / "cache"))
    assert missing.value.hint == "run: converge-dsl lock pipeline.yaml"
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache"))
    write_pipeline(tmp_path, '{alpha: ">=2"}')
    with pytest.raises(PackError, match=r"pins alpha 1.0.0, which does not satisfy '>=2'"):
        load_locked_packs(pipeline, cache=PackCache(tmp_path / "cache"))


def _lock_then_tamper(tmp_path: Path, tamper: str) -> tuple[Path, PackCache]:
    repo = _published(tmp_path)
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "warm"))
    archive = repo / archive_path("alpha", "1.0.0")
    if tamper == "archive":
        other = make_pack(tmp_path / "evil", "alpha", "1.0.0")
        (other / "prompts" / "readme.md").write_text("evil\n")
        from converge_dsl.packs import build_archive

        archive.write_bytes(build_archive(other))
    else:
        lock = json.loads((tmp_path / "converge.lock").read_text())
        lock["pipelines"]["pipeline.yaml"]["packs"]["alpha"]["sha256"] = "0" * 64
        (tmp_path / "converge.lock").write_text(json.dumps(lock))
    return pipeline, PackCache(tmp_path / "cold")


@pytest.mark.parametrize("tamper", ["archive", "digest"])
def test_tampered_archive_or_wrong_digest_is_refused_and_nothing_unpacked(
    tmp_path: Path, tamper: str
) -> None:
    pipeline, cache = _lock_then_tamper(tmp_path, tamper)
    with pytest.raises(PackError, match=r"digest mismatch for alpha 1.0.0") as caught:
        load_locked_packs(pipeline, cache=cache)
    assert "nothing was unpacked" in caught.value.message
    assert not (cache.root / "unpacked").exists()
    assert not (cache.root / "archives").exists()


def _signed_pipeline(tmp_path: Path, trusted: str) -> Path:
    return write_pipeline(
        tmp_path, '{alpha: ">=1"}', f'[{{path: repo, trusted_keys: ["{trusted}"]}}]'
    )


def test_signed_pack_verifies_against_a_trusted_key(tmp_path: Path) -> None:
    private, public = generate_key()
    _published(tmp_path, sign_key=private)
    pipeline = _signed_pipeline(tmp_path, public)
    lock = lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache"))
    assert lock.packs["alpha"].signature is not None
    assert "alpha" in load_locked_packs(pipeline, cache=PackCache(tmp_path / "cache"))


def test_bad_signature_is_refused_and_nothing_unpacked(tmp_path: Path) -> None:
    private, public = generate_key()
    repo = _published(tmp_path, sign_key=private)
    index_file = repo / index_path("alpha")
    index = json.loads(index_file.read_text())
    forged = dict(index["versions"][0]["signature"])
    forger, _ = generate_key()
    from converge_dsl.packs._signing import sign

    forged["signature"] = sign(forger, "alpha", "1.0.0", index["versions"][0]["sha256"])[
        "signature"
    ]
    index["versions"][0]["signature"] = forged
    index_file.write_text(json.dumps(index))
    cache = PackCache(tmp_path / "cache")
    with pytest.raises(PackError, match=r"bad signature on alpha 1\.0\.0"):
        lock_pipeline(_signed_pipeline(tmp_path, public), cache=cache)
    assert not cache.root.exists()


@pytest.mark.parametrize(
    ("signature", "said"),
    [
        ("ed25519:!!!", "the signature of alpha 1.0.0 is not valid base64"),
        ("AAAA", "the signature of alpha 1.0.0 must start with 'ed25519:'"),
    ],
)
def test_a_malformed_signature_names_the_pack_and_what_to_do(
    tmp_path: Path, signature: str, said: str
) -> None:
    # It read "signature is not valid base64", naming no pack, with no hint.
    private, public = generate_key()
    repo = _published(tmp_path, sign_key=private)
    index_file = repo / index_path("alpha")
    index = json.loads(index_file.read_text())
    index["versions"][0]["signature"]["signature"] = signature
    index_file.write_text(json.dumps(index))
    with pytest.raises(PackError) as caught:
        lock_pipeline(_signed_pipeline(tmp_path, public), cache=PackCache(tmp_path / "cache"))
    assert (caught.value.code, caught.value.message) == ("CD502", said)
    assert (caught.value.hint or "").startswith("ask the repository owner to publish it again")


def test_unsigned_or_untrusted_packs_are_refused_when_keys_are_trusted(tmp_path: Path) -> None:
    _, public = generate_key()
    _published(tmp_path)
    with pytest.raises(PackError, match=r"is not signed"):
        lock_pipeline(_signed_pipeline(tmp_path, public), cache=PackCache(tmp_path / "c"))


def test_http_repository_served_on_localhost(tmp_path: Path, http_root: tuple[Path, str]) -> None:
    served, url = http_root
    publish(make_pack(tmp_path, "alpha", "1.0.0"), served)
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}', f"[{{url: '{url}'}}]")
    cache = PackCache(tmp_path / "cache")
    lock = lock_pipeline(pipeline, cache=cache)
    assert lock.packs["alpha"].repository == f"url:{url}"
    shutil.rmtree(served)  # the server now answers 404 for everything
    assert "alpha" in load_locked_packs(pipeline, cache=cache)
    with pytest.raises(PackError, match=r"no repository has pack 'alpha'"):
        lock_pipeline(pipeline, cache=PackCache(tmp_path / "cold"))


def test_unreachable_http_repository_is_a_clear_error(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}', "[{url: 'http://127.0.0.1:9'}]")
    with pytest.raises(PackError, match=r"cannot reach http://127.0.0.1:9/index/alpha.json"):
        lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache"))


def test_republishing_a_version_with_other_content_is_refused(tmp_path: Path) -> None:
    repo = _published(tmp_path)
    changed = make_pack(tmp_path / "v2", "alpha", "1.0.0")
    (changed / "prompts" / "readme.md").write_text("changed\n")
    with pytest.raises(PackError, match=r"already published with a different digest"):
        publish(changed, repo)
    done = publish(make_pack(tmp_path, "alpha", "1.0.0"), repo)
    assert (done.name, done.entry.version.public, done.created) == ("alpha", "1.0.0", False)


def test_a_validated_pipelines_manifest_gives_what_the_file_gives(tmp_path: Path) -> None:
    from converge_dsl.frontend import build_manifest, load_file
    from converge_dsl.packs import PipelinePacks

    _published(tmp_path)
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1,<2"}')
    manifest = build_manifest(load_file(pipeline))
    from_manifest = PipelinePacks.read(pipeline, manifest)
    assert from_manifest == PipelinePacks.read(pipeline)
    assert from_manifest.packs == {"alpha": ">=1,<2"}
    assert from_manifest.repositories == tuple(r.written for r in manifest.repositories)
    cache = PackCache(tmp_path / "cache")
    lock_pipeline(pipeline, manifest, cache=cache)
    assert set(load_locked_packs(pipeline, manifest, cache=cache)) == {"alpha"}
