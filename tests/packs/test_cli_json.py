"""`--format json` of `lock` and of every `pack` sub-command: one JSON object on stdout."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from converge_dsl.cli import run
from converge_dsl.packs import publish

from .conftest import make_pack
from .test_edit_and_cli import PIPELINE


def _json(*argv: str, code: int = 0) -> Any:
    out, err = io.StringIO(), io.StringIO()
    assert run([*argv, "--format", "json"], out, err, {}) == code, err.getvalue()
    return json.loads(out.getvalue())


def test_every_pack_sub_command_and_lock_print_one_json_object(tmp_path: Path) -> None:
    key = tmp_path / "signing.key"
    made = _json("pack", "keygen", str(key))
    assert made == {"public_key": made["public_key"], "key_file": str(key)}
    assert made["public_key"]
    repo = tmp_path / "repo"
    source = make_pack(tmp_path, "alpha", "1.4.0")
    published = _json("pack", "publish", str(source), "--repo", str(repo), "--sign-key", str(key))
    assert published["name"] == "alpha"
    assert published["version"] == "1.4.0"
    assert published["signed"] is True
    assert len(published["sha256"]) == 64
    listing = _json("pack", "list", "--repo", str(repo))
    assert listing == {
        "repository": f"path:{repo}",
        "packs": [{"name": "alpha", "latest": "1.4.0"}],
    }
    info = _json("pack", "info", "alpha", "--repo", str(repo))
    assert info["name"] == "alpha"
    assert [(v["version"], v["yanked"], v["signed"]) for v in info["versions"]] == [
        ("1.4.0", False, True)
    ]
    assert info["versions"][0]["sha256"] == published["sha256"]

    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE)
    cache = str(tmp_path / "cache")
    added = _json("pack", "add", "alpha", str(pipeline), "--cache", cache)
    assert added == {
        "name": "alpha",
        "specifier": ">=1.4,<2",
        "pipeline": str(pipeline),
        "locked": "1.4.0",
        "repository": "path:repo",
        "repository_added": None,
    }
    locked = _json("lock", str(pipeline), "--cache", cache)
    assert locked["pipeline"] == str(pipeline)
    assert locked["lock_file"] == str(tmp_path / "converge.lock")
    assert [(p["name"], p["version"], p["sha256"]) for p in locked["packs"]] == [
        ("alpha", "1.4.0", published["sha256"])
    ]
    fresh = str(tmp_path / "fresh-cache")
    fetched = _json("pack", "fetch", str(pipeline), "--cache", fresh)
    assert fetched["packs"] == [{"name": "alpha", "version": "1.4.0"}]
    assert (len(fetched["fetched"]), fetched["already_cached"]) == (1, 0)
    assert _json("pack", "fetch", str(pipeline), "--cache", fresh)["already_cached"] == 1
    verified = _json("pack", "verify", str(pipeline), "--cache", cache)
    assert (verified["ok"], verified["offline"]) == (True, False)
    assert [(p["name"], p["version"], p["ok"], p["problems"]) for p in verified["packs"]] == [
        ("alpha", "1.4.0", True, [])
    ]
    yanked = _json("pack", "yank", "alpha", "1.4.0", "--repo", str(repo))
    assert yanked == {"name": "alpha", "version": "1.4.0", "yanked": True}
    assert _json("pack", "yank", "alpha", "1.4.0", "--repo", str(repo), "--undo")["yanked"] is False


def test_an_error_is_a_json_object_too(tmp_path: Path) -> None:
    missing = _json("pack", "info", "nosuch", code=1)
    assert missing["error"]["message"] == "builtin has no pack 'nosuch'"
    assert set(missing["error"]) == {"code", "message", "hint"}
    no_file = _json("lock", str(tmp_path / "absent.yaml"), code=3)
    assert no_file["error"]["message"].startswith("no such pipeline file")
    no_file = _json("pack", "verify", str(tmp_path / "absent.yaml"), code=3)
    assert "error" in no_file


def test_a_folder_that_cannot_be_used_is_a_json_error_too(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    publish(make_pack(tmp_path, "alpha", "1.4.0"), repo)
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE)
    cache = str(tmp_path / "cache")
    added = run(
        ["pack", "add", "alpha", str(pipeline), "--cache", cache], io.StringIO(), io.StringIO()
    )
    assert added == 0
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("")
    for argv in (["lock"], ["pack", "fetch"], ["pack", "verify"]):
        failed = _json(*argv, str(pipeline), "--cache", str(a_file), code=1)
        assert failed["error"]["message"].startswith(f"cannot use '{a_file}"), argv
        assert set(failed["error"]) == {"code", "message", "hint"}


def test_an_invalid_pack_prints_its_diagnostics_as_json(tmp_path: Path) -> None:
    source = make_pack(tmp_path, "alpha", "1.0.0")
    (source / "pack.yaml").write_text("apiVersion: converge-dsl/v1\nkind: Pack\nname: [\n")
    found = _json("pack", "publish", str(source), "--repo", str(tmp_path / "repo"), code=2)
    assert found[0]["code"] == "CD001"


def test_human_output_is_unchanged_without_the_option(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run(["pack", "list"], out, err, {}) == 0
    assert out.getvalue() == "optimization  1.0.0\nstrategy  1.0.0\n"
