"""`pack publish` says "(signed)" only when it signed, and "nothing changed" on a re-publish;
publishes into one repository at once keep every version."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from converge_dsl.cli import run

from .conftest import make_pack


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


def _key(tmp_path: Path) -> str:
    path = tmp_path / "key"
    assert _cli("pack", "keygen", str(path))[0] == 0
    return str(path)


def _publish(tmp_path: Path, version: str, *flags: str) -> tuple[int, str, str]:
    pack = make_pack(tmp_path, "alpha", version)
    return _cli("pack", "publish", str(pack), "--repo", str(tmp_path / "repo"), *flags)


def test_signed_only_when_this_publish_signed(tmp_path: Path) -> None:
    code, out, err = _publish(tmp_path, "1.0.0")
    assert (code, err) == (0, "")
    assert out.startswith("published alpha 1.0.0 sha256:")
    assert "(signed)" not in out
    code, out, err = _publish(tmp_path, "1.1.0", "--sign-key", _key(tmp_path))
    assert (code, err) == (0, "")
    assert out.startswith("published alpha 1.1.0 sha256:")
    assert out.endswith(" (signed)\n")


def test_republishing_a_signed_version_without_a_key_prints_no_signed(tmp_path: Path) -> None:
    assert _publish(tmp_path, "1.0.0", "--sign-key", _key(tmp_path))[1].endswith("(signed)\n")
    code, out, err = _publish(tmp_path, "1.0.0")
    assert (code, err) == (0, "")
    assert out.startswith("alpha 1.0.0 is already published with this archive (sha256:")
    assert out.endswith("); nothing changed\n")
    assert "(signed)" not in out


def test_a_key_that_signed_nothing_is_warned_about(tmp_path: Path) -> None:
    key = _key(tmp_path)
    assert _publish(tmp_path, "1.0.0")[0] == 0
    code, out, err = _publish(tmp_path, "1.0.0", "--sign-key", key)
    assert code == 0
    assert "(signed)" not in out
    assert err == (
        "warning[CD575]: --sign-key was not used: alpha 1.0.0 was already published with this "
        "archive (unsigned), and a published entry never changes\n"
        "  hint: to publish a signed version, bump the version in pack.yaml and publish again\n"
    )
    assert _publish(tmp_path, "1.1.0", "--sign-key", key)[0] == 0
    _, _, err = _publish(tmp_path, "1.1.0", "--sign-key", key)
    assert "(signed earlier)" in err


def test_published_as_json(tmp_path: Path) -> None:
    from converge_dsl.packs import publish

    first = publish(make_pack(tmp_path, "alpha", "1.0.0"), tmp_path / "repo")
    again = publish(make_pack(tmp_path, "alpha", "1.0.0"), tmp_path / "repo")
    assert first.as_json() == {
        "name": "alpha",
        "version": "1.0.0",
        "sha256": first.entry.sha256,
        "created": True,
        "signed": False,
    }
    assert again.as_json() == {**first.as_json(), "created": False}


def test_publishes_into_one_repository_at_once_keep_every_version(tmp_path: Path) -> None:
    # Each read the index, added its version and wrote the index whole: of eight
    # publishes at once, each said "published", and the index kept two of the versions.
    versions = [f"1.{n}.0" for n in range(6)]
    packs = [make_pack(tmp_path, "alpha", version) for version in versions]
    repo = tmp_path / "repo"
    command = [sys.executable, "-m", "converge_dsl", "pack", "publish"]
    running = [
        subprocess.Popen([*command, str(pack), "--repo", str(repo)], stdout=subprocess.DEVNULL)
        for pack in packs
    ]
    assert [process.wait(timeout=120) for process in running] == [0] * len(versions)
    index = json.loads((repo / "index" / "alpha.json").read_text(encoding="utf-8"))
    assert sorted(entry["version"] for entry in index["versions"]) == versions
    assert all((repo / "archives" / "alpha" / f"alpha-{v}.tar.gz").is_file() for v in versions)


def test_publish_into_a_file_names_the_repository(tmp_path: Path) -> None:
    (tmp_path / "repo").write_text("")
    code, out, err = _publish(tmp_path, "1.0.0")
    assert (code, out) == (1, "")
    assert err.startswith(f"error[CD325]: repository {(tmp_path / 'repo').as_posix()} is a file")


def test_a_publish_with_a_bad_signing_key_leaves_no_repository_folder(tmp_path: Path) -> None:
    # The folder was made (for its lock) before the key was read, and left there empty.
    bad = tmp_path / "badkey"
    bad.write_text("not a key\n")
    code, out, err = _publish(tmp_path, "1.0.0", "--sign-key", str(bad))
    assert (code, out) == (1, "")
    assert err.startswith("error[CD")
    assert not (tmp_path / "repo").exists()


def test_a_held_repository_is_named_with_who_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The message named names.json and hinted at "lock or pack add".
    from converge_dsl.packs import _lockfile

    monkeypatch.setattr(_lockfile, "LOCK_WAIT_S", 0.0)
    assert _publish(tmp_path, "1.0.0")[0] == 0
    repo = tmp_path / "repo"
    with _lockfile.exclusive(repo / "names.json"):
        code, out, err = _cli("pack", "yank", "alpha", "1.0.0", "--repo", str(repo))
    assert (code, out) == (1, "")
    assert err == (
        f"error[CD323]: repository {repo.as_posix()} is being "
        "written by another pack publish or yank; gave up after 0 s\n"
        "  hint: wait for it to finish, then retry\n"
    )


def test_yank_in_a_file_names_the_repository(tmp_path: Path) -> None:
    # It said CD324 'Not a directory' where publish says CD325 'is a file'.
    (tmp_path / "repo").write_text("")
    code, out, err = _cli("pack", "yank", "alpha", "1.0.0", "--repo", str(tmp_path / "repo"))
    assert (code, out) == (1, "")
    assert err.startswith(f"error[CD325]: repository {(tmp_path / 'repo').as_posix()} is a file")
