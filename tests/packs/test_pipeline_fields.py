"""`lock` and `pack` check the pipeline's `packs:` and `repositories:` against the schema."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from converge_dsl.cli import run

from .conftest import make_pack
from .test_info import expect

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: demo
packs: {{alpha: ">=1"}}
repositories:
  - {repository}
suggestors:
  - {{name: greet, kind: seed, facts: [{{id: hi, content: hello}}]}}
"""


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err, {}), out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "repository",
    [
        "{url: 'http://127.0.0.1:9', redirect_hosts: 5}",
        "{url: 5}",
        "{path: repo, url: 'http://127.0.0.1:9'}",
        "{path: repo, trusted_keys: not-a-list}",
    ],
)
def test_a_malformed_repository_is_a_located_diagnostic(tmp_path: Path, repository: str) -> None:
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE.format(repository=repository))
    cache = str(tmp_path / "cache")
    for argv in (
        ["lock", str(pipeline), "--cache", cache],
        ["pack", "add", "beta", ">=1", str(pipeline), "--cache", cache],
        ["pack", "fetch", str(pipeline), "--cache", cache],
        ["pack", "verify", str(pipeline), "--cache", cache],
    ):
        code, out, err = _cli(*argv)
        assert (code, out) == (2, ""), argv
        assert err.startswith("error[CD107]: repositories[0]: "), argv
        assert " --> pipeline.yaml:6:5\n" in err or f" --> {pipeline}:6:5\n" in err, err
    assert pipeline.read_text() == PIPELINE.format(repository=repository)


def test_the_diagnostic_reads_as_validate_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("pipeline.yaml").write_text(
        PIPELINE.format(repository="{url: 'http://127.0.0.1:9', redirect_hosts: 5}")
    )
    code, _, err = _cli("lock", "pipeline.yaml", "--cache", "cache")
    assert code == 2
    expect("lock-malformed-repository.txt", err)


def test_a_folder_repository_may_list_trusted_keys(tmp_path: Path) -> None:
    key = tmp_path / "signing.key"
    code, public, _ = _cli("pack", "keygen", str(key))
    assert code == 0
    source = make_pack(tmp_path, "alpha", "1.0.0")
    assert (
        _cli(
            "pack", "publish", str(source), "--repo", str(tmp_path / "repo"), "--sign-key", str(key)
        )[0]
        == 0
    )
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        PIPELINE.format(repository=f"{{path: repo, trusted_keys: ['{public.strip()}']}}")
    )
    cache = str(tmp_path / "cache")
    assert _cli("lock", str(pipeline), "--cache", cache)[0] == 0
    code, _, err = _cli("validate", str(pipeline))
    assert "CD107" not in err
