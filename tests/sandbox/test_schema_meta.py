from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from converge_dsl.sandbox import _schema_meta, meta_error, meta_valid_texts, remember_meta_valid

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checks(
    monkeypatch: pytest.MonkeyPatch, first_arguments: Callable[[ModuleType, str], list[Any]]
) -> list[Any]:
    """The schemas `meta_error` really checks (its memory starts empty)."""
    monkeypatch.setattr(_schema_meta, "_META_VALID", set())
    return first_arguments(_schema_meta, "_meta_error")


def test_a_valid_schema_is_checked_once(checks: list[Any]) -> None:
    schema = {"type": "object", "properties": {"id": {"type": "string"}}}
    assert meta_error(schema) is None
    assert meta_error(dict(reversed(list(schema.items())))) is None  # the same text
    assert len(checks) == 1


def test_an_invalid_schema_is_worded_every_time(checks: list[Any]) -> None:
    schema = {"type": "strnig"}
    first, second = meta_error(schema), meta_error(schema)
    assert first is not None
    assert second is not None
    assert "is not valid under any of the given schemas" in first.message
    assert len(checks) == 2


def test_what_one_process_found_valid_another_takes_unchecked(checks: list[Any]) -> None:
    valid, invalid = {"type": "integer", "minimum": 1}, {"type": 3}
    texts = meta_valid_texts([valid, invalid])
    assert len(texts) == 1
    checks.clear()
    _schema_meta._META_VALID.clear()
    remember_meta_valid(texts)
    assert meta_error(valid) is None
    assert meta_error(invalid) is not None
    assert checks == [invalid]


def test_a_loaded_pipeline_pickles_with_its_checked_key_schemas() -> None:
    from converge_dsl.batch import load

    pipeline = load(ROOT / "pipelines" / "support-triage.yaml")
    _, arguments = pipeline.__reduce__()
    checked = arguments[-2]  # before the locked packs its validation read
    assert meta_valid_texts(pipeline.key_schemas.values()) == checked
    assert len(checked) == 1
    assert pickle.loads(pickle.dumps(pipeline)).name == "support-triage"


def test_data_that_fits_needs_no_python_jsonschema() -> None:
    code = (
        "import sys\n"
        "from converge_dsl.sandbox import python_validator\n"
        "v = python_validator({'type': 'object', 'required': ['id']}, 'the schema')\n"
        "assert v.best_error({'id': 1}) is None and v.is_valid({'id': 1})\n"
        "assert 'jsonschema' not in sys.modules\n"
        "assert v.best_error({}) is not None\n"
        "assert 'jsonschema' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
