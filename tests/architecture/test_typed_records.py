"""The typed model of docs/architecture.md §4: its records hold no `Any`.

A record of what a pipeline, a test file or a pack declares (a class named
`...Spec`, `...Def`, `...Settings`, `...Declaration`, `...Manifest`,
`...Expectation(s)`, `TestCase`, `TestFile`, `...Requirement`, `...Policy`) types
every field: a JSON value the user wrote is a `JsonValue`, `JsonObject` or
`JsonSchema` (`converge_dsl._json_types`), never `Any`. `Mapping[str, Any]`
stays where the loaded document is read: the parsers' parameters and the
schema layer.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import converge_dsl

RECORD_NAMES = re.compile(
    r"(Spec|Def|Settings|Declaration|Manifest|Expectations?|TestCase|TestFile"
    r"|Requirement|Policy)$"
)
ANY = re.compile(r"\bAny\b")


def _modules() -> Iterator[Any]:
    for info in pkgutil.walk_packages(converge_dsl.__path__, "converge_dsl."):
        if not info.name.endswith("__main__"):
            yield importlib.import_module(info.name)


def _fields(cls: type) -> dict[str, str]:
    """Each field's annotation as written: the class's own and its `__init__`'s parameters."""
    found: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if base.__module__.startswith("converge_dsl"):
            found.update({k: str(v) for k, v in vars(base).get("__annotations__", {}).items()})
    init = vars(cls).get("__init__")
    if init is not None:
        annotations = getattr(init, "__annotations__", {})
        found.update({k: str(v) for k, v in annotations.items() if k != "return"})
    return found


def untyped_fields(cls: type) -> list[str]:
    return [f"{cls.__qualname__}.{name}: {t}" for name, t in _fields(cls).items() if ANY.search(t)]


def test_no_record_of_the_typed_model_holds_any() -> None:
    found = []
    records = 0
    for module in _modules():
        for name, cls in vars(module).items():
            if (
                inspect.isclass(cls)
                and cls.__module__ == module.__name__
                and RECORD_NAMES.search(name)
            ):
                records += 1
                found.extend(f"{module.__name__}: {line}" for line in untyped_fields(cls))
    assert records >= 40, records  # the scan sees the model (seeds, rules, packs, models, tests)
    assert found == []


def test_the_scan_sees_an_untyped_field() -> None:
    @dataclass(frozen=True)
    class LeakySpec:
        name: str
        body: Any

    assert untyped_fields(LeakySpec) == [
        "test_the_scan_sees_an_untyped_field.<locals>.LeakySpec.body: Any"
    ]
