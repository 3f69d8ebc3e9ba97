"""The locked packs read for a loaded document serve its compiles while the lock is unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

import converge_dsl
import converge_dsl.packs._compile as compiling
from converge_dsl.packs import handed_packs, keep_packs
from converge_dsl.packs._loaded import KEEP, kept_packs

SUPPORT_TRIAGE = Path(__file__).parents[2] / "pipelines" / "support-triage.yaml"


def test_packs_are_given_back_for_their_document_while_its_lock_is_unchanged(
    tmp_path: Path,
) -> None:
    pipeline = tmp_path / "pipeline.yaml"
    (tmp_path / "converge.lock").write_bytes(b"first")
    document, packs = object(), {}
    keep_packs(document, b"first", packs)
    assert kept_packs(document, pipeline) is packs
    assert handed_packs(document) == (b"first", packs)
    assert kept_packs(object(), pipeline) is None  # another load of the file
    (tmp_path / "converge.lock").write_bytes(b"edited")
    assert kept_packs(document, pipeline) is None  # read again


def test_only_the_last_documents_are_kept(tmp_path: Path) -> None:
    documents = [object() for _ in range(KEEP + 1)]
    for document in documents:
        keep_packs(document, None, {})
    assert handed_packs(documents[0]) is None
    assert all(handed_packs(document) is not None for document in documents[1:])


def test_a_run_compiles_with_the_packs_its_validation_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[Path] = []
    real = compiling.load_locked_packs
    monkeypatch.setattr(
        compiling, "load_locked_packs", lambda path: reads.append(path) or real(path)
    )
    pipeline = converge_dsl.load(SUPPORT_TRIAGE)
    assert handed_packs(pipeline.document) is not None
    assert pipeline.run().stop_reason == "converged"
    assert reads == []
