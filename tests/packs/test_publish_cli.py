"""`pack publish` says "(signed)" only when it signed, and "nothing changed" on a re-publish."""

from __future__ import annotations

import io
from pathlib import Path

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
