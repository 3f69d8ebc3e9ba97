"""The pipeline JSON Schema documents the defaults the engine's dataclasses really have.

The compiler hands `budget:` and `promotion:` to the engine's `Budget` and
`PromotionPolicy` and `on_error:` to the engine as is, so those dataclasses
(and the engine's `on_error` default) are the one home of every default. The
schema's `default` of each property, and any "(default X)" its description
states, must agree with them; a field without a default (None: unlimited, off)
has no `default` in the schema.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import typing
from typing import Any

import pytest

from converge_dsl._resources import read_schema_text
from converge_dsl.engine import Budget, Engine, OnError, PromotionPolicy

SCHEMA = json.loads(read_schema_text("pipeline.v1.json"))
STATED = re.compile(r"\(default ([^)]+)\)")


# Dataclass fields that a section does not set: the key schemas come from `keys[].schema`.
NOT_IN_SECTION = frozenset({"key_schemas"})


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _stated(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(_json(value))


def _check(prop: dict[str, Any], default: Any, where: str) -> None:
    stated = STATED.findall(str(prop.get("description", "")))
    if default is None:
        assert "default" not in prop, f"{where}: no default in the engine, one in the schema"
        assert not stated, f"{where}: the description states a default the engine lacks"
        return
    assert "default" in prop, f"{where}: the engine's default {default!r} is not documented"
    assert prop["default"] == _json(default), where
    assert type(prop["default"]) is type(_json(default)), where
    assert all(text == _stated(default) for text in stated), f"{where}: description says {stated}"


@pytest.mark.parametrize(("section", "cls"), [("budget", Budget), ("promotion", PromotionPolicy)])
def test_section_defaults_match_the_engine_dataclass(section: str, cls: type) -> None:
    properties = SCHEMA["properties"][section]["properties"]
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in NOT_IN_SECTION}
    assert set(properties) == set(fields), "the YAML sets exactly the dataclass fields"
    for name, field in fields.items():
        default = field.default
        assert default is not dataclasses.MISSING, f"{cls.__name__}.{name} has no default"
        _check(properties[name], default, f"{section}.{name}")


def test_on_error_default_and_values_match_the_engine() -> None:
    prop = SCHEMA["properties"]["on_error"]
    default = inspect.signature(Engine.__init__).parameters["on_error"].default
    _check(prop, default, "on_error")
    assert tuple(prop["enum"]) == typing.get_args(OnError)
