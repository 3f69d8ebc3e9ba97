from __future__ import annotations

import io
from pathlib import Path

from converge_dsl.cli import run
from converge_dsl.packs import BuiltinRepository, add_pack_requirement, read_lock

from .conftest import make_pack

PIPELINE = """\
# yaml-language-server: $schema=../schemas/pipeline.v1.json
apiVersion: converge-dsl/v1
kind: Pipeline
name: demo   # the name
repositories:
  - builtin
  - {path: repo}
suggestors:
  - name: greet      # keep me
    kind: seed
    facts: [{id: hi, content: "hello"}]
"""


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


def test_add_keeps_comments_order_and_layout() -> None:
    edited = add_pack_requirement(PIPELINE, "alpha", ">=1,<2")
    expected = PIPELINE.replace(
        "name: demo   # the name\n", "name: demo   # the name\npacks:\n  alpha: '>=1,<2'\n"
    )
    assert edited == expected
    again = add_pack_requirement(edited, "alpha", ">=1.5,<2")
    assert again == expected.replace("'>=1,<2'", "'>=1.5,<2'")


def test_cli_publish_add_lock_verify(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code, out, err = _cli(
        "pack", "publish", str(make_pack(tmp_path, "alpha", "1.4.0")), "--repo", str(repo)
    )
    assert code == 0, err
    assert out.startswith("published alpha 1.4.0 sha256:")  # the name in pack.yaml
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE)
    cache = str(tmp_path / "cache")
    code, out, err = _cli("pack", "add", "alpha", str(pipeline), "--cache", cache)
    assert code == 0, err
    assert "packs:\n  alpha: '>=1.4,<2'\n" in pipeline.read_text()
    lock = read_lock(pipeline)
    assert lock is not None
    assert lock.packs["alpha"].version == "1.4.0"
    code, out, _ = _cli("pack", "verify", str(pipeline), "--cache", cache)
    assert (code, out) == (0, "ok  alpha 1.4.0\n1 pack(s) verified\n")
    code, out, _ = _cli("pack", "info", "alpha", "--repo", str(repo))
    assert code == 0
    assert "1.4.0" in out
    code, out, _ = _cli("lock", str(pipeline), "--cache", cache)
    assert code == 0
    assert out.startswith("locked 1 pack(s) of pipeline.yaml into converge.lock")


def test_cli_add_of_an_unknown_pack_leaves_the_pipeline_untouched(tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE)
    (tmp_path / "repo").mkdir()
    code, _, err = _cli(
        "pack", "add", "nosuch", ">=1", str(pipeline), "--cache", str(tmp_path / "c")
    )
    assert code == 1
    assert "no repository has pack 'nosuch'" in err
    assert pipeline.read_text() == PIPELINE


def test_builtin_repository_serves_the_shipped_packs() -> None:
    repository = BuiltinRepository()
    assert {"optimization", "strategy"} <= set(repository.names())
    index = repository.fetch_index("strategy")
    assert index is not None
    again = BuiltinRepository().fetch_index("strategy")
    assert again is not None
    assert again.entries[0].sha256 == index.entries[0].sha256
    code, out, _ = _cli("pack", "list")
    assert code == 0
    assert "strategy  1.0.0" in out
