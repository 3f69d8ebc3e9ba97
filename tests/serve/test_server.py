"""Preparing a service: every pipeline checked first, names unique, secrets redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from converge_dsl.errors import PipelineInvalid
from converge_dsl.serve import ServeOptions, prepare
from converge_dsl.serve._errors import ServeRefused

from .conftest import DATA

TOKEN = "a-secret-token-0123456789"


def test_errors_are_redacted(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN + "\n")
    prepared = prepare(ServeOptions([DATA / "echo.yaml"], state=tmp_path / "s", token_file=tokens))
    assert prepared.names == ("echo",)
    assert TOKEN not in prepared.service.redact(f"upstream said: Bearer {TOKEN}")
    prepared.service.store.close()


def test_every_invalid_pipeline_is_reported_at_once(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(
            (DATA / "gated.yaml").read_text().replace("kind: rule", "kind: rulez", 1)
        )
    with pytest.raises(PipelineInvalid) as caught:
        prepare(ServeOptions([tmp_path / "a.yaml", tmp_path / "b.yaml"], state=tmp_path / "s"))
    files = {Path(d.span.file).name for d in caught.value.diagnostics if d.span is not None}
    assert files == {"a.yaml", "b.yaml"}


def test_two_pipelines_of_one_name(tmp_path: Path) -> None:
    copy = tmp_path / "copy.yaml"
    copy.write_text((DATA / "gated.yaml").read_text())
    both = r"^\[CD994\] serve: pipelines .* are both named 'gated'"
    with pytest.raises(ServeRefused, match=both):
        prepare(ServeOptions([DATA / "gated.yaml", copy], state=tmp_path / "s"))


def test_a_server_never_uses_the_answer_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cache.md: `serve` is off whatever the environment says."""
    monkeypatch.setenv("CONVERGE_DSL_CACHE_MODE", "read-write")
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cache"))
    prepared = prepare(ServeOptions([DATA / "echo.yaml"], state=tmp_path / "s"))
    assert [p.cache.mode for p in prepared.service.pipelines.values()] == ["off"]
