from __future__ import annotations

import json
from pathlib import Path

from converge_dsl.runtime import exported_schemas

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def test_committed_schemas_equal_the_generated_ones() -> None:
    for name, schema in exported_schemas().items():
        assert json.loads((SCHEMAS / name).read_text(encoding="utf-8")) == schema, name
