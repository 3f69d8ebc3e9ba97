"""The quick yes of a governed schema check: jsonschema-rs, for plain schemas and small data.

`converge_dsl.sandbox.GovernedValidator` checks data on python-jsonschema,
every keyword application charged to the governor. Nearly every check passes,
against a small schema of plain keywords (a key's schema, a pack's input
schema), and there python-jsonschema costs some 50 µs where jsonschema-rs
takes under one. `QuickCheck.of(schema)` is a jsonschema-rs validator for a
schema that

- uses only the keywords of `_VALUES`, `_SUBSCHEMAS`, `_SCHEMA_LISTS` and
  `_SCHEMA_MAPS`, and at its root `$id` and draft 2020-12's `$schema`: no
  `$ref` (so the schema is a finite tree), no regex, `format`, `multipleOf` or
  `unevaluated*` (whose meaning the two libraries compute or word differently);

and `check(instance)` is true only when jsonschema-rs says the instance fits
and it is small and plain: only JSON types (objects with text keys), every
integer within ±2^53 (where both libraries compare numbers exactly), and its
values times the schema's members at most `QUICK_PRODUCT`. In a tree-shaped
schema each keyword applies at most once to each value, so python-jsonschema
would make at most that many keyword applications and could cross none of
its bounds (1,000,000 steps, 10,000,000 items): its verdict is the same one.
The check charges the current budget (the caller's governed computation,
hence the run's pool) one step per value of the instance, what jsonschema-rs
walks. Anything else (a failing instance, a large one) is python-jsonschema's
to decide and word. `tests/test_schema_quick.py` holds the two libraries to the
same verdicts over generated schemas and data; `bench/schema_quick.py` shows
what a check costs each way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from converge_dsl.sandbox._governor import spend

QUICK_PRODUCT = 100_000  # values of the instance times members of the schema
_EXACT = 2**53  # integers beyond it: python compares exactly, jsonschema-rs may not
_DRAFT = "https://json-schema.org/draft/2020-12/schema"
# Keywords whose values are data or numbers, not schemas.
_VALUES = frozenset(
    (
        "type",
        "enum",
        "const",
        "required",
        "dependentRequired",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
    )
)
_SUBSCHEMAS = frozenset(
    ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
)
_SCHEMA_LISTS = frozenset(("prefixItems", "allOf", "anyOf", "oneOf"))
_SCHEMA_MAPS = frozenset(("properties", "dependentSchemas", "$defs"))


class QuickCheck:
    """jsonschema-rs for one plain schema (see the module docstring)."""

    __slots__ = ("_members", "_validator")

    def __init__(self, validator: Any, members: int) -> None:
        self._validator = validator
        self._members = members

    @classmethod
    def of(cls, schema: Any) -> QuickCheck:
        """The quick check of `schema`; `NEVER` when it is not plain (or jsonschema-rs
        refuses it). Call it on a schema `_safe_schema` accepted."""
        members = _plain_members(schema)
        if members is None:
            return NEVER
        import jsonschema_rs

        try:
            return cls(jsonschema_rs.validator_for(schema), max(members, 1))
        except (ValueError, jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError):
            return NEVER

    def __call__(self, instance: Any) -> bool:
        """True when `instance` is small, plain and fits (charging one step per value);
        False means python-jsonschema decides."""
        values = self.values(instance)
        return values is not None and self.admits(instance, values)

    def values(self, instance: Any) -> int | None:
        """The values of `instance` when this check can answer for it (small and plain),
        charging nothing; None when it cannot (python-jsonschema decides)."""
        if self._validator is None:
            return None
        return _plain_values(instance, QUICK_PRODUCT // self._members)

    def admits(self, instance: Any, values: int) -> bool:
        """Whether `instance`, whose `values` this check counted, fits (charging one step
        per value, as the whole check does)."""
        spend(values)
        try:
            return bool(self._validator.is_valid(instance))
        except ValueError:  # a value jsonschema-rs does not take
            return False


class Fitted:
    """Evidence that a value fits a schema: that schema's `QuickCheck` said yes to it,
    charging `steps`. The value is JSON (the check takes nothing else), and checking
    it against the same schema again says yes again, charging the same."""

    __slots__ = ("check", "steps")

    def __init__(self, check: QuickCheck, steps: int) -> None:
        self.check = check
        self.steps = steps


NEVER = QuickCheck(None, 1)  # the quick check of a schema that is not plain: never answers


def _plain_members(schema: Any) -> int | None:
    """The members of `schema` (objects' members, arrays' items, nested ones too) when it
    is plain, else None."""
    members = 0
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, Mapping):
            return None
        members += len(node)
        for keyword, value in node.items():
            if keyword in ("$schema", "$id"):  # the draft, and a name no `$ref` reads
                known = value == _DRAFT if keyword == "$schema" else isinstance(value, str)
                if node is not schema or not known:
                    return None
            elif keyword in _SUBSCHEMAS:
                stack.append(value)
            elif keyword in _SCHEMA_LISTS:
                if not isinstance(value, list | tuple):
                    return None
                members += len(value)
                stack.extend(value)
            elif keyword in _SCHEMA_MAPS:
                if not isinstance(value, Mapping):
                    return None
                members += len(value)
                stack.extend(value.values())
            elif keyword in _VALUES:
                members += _size(value)
            else:
                return None
    return members


def _size(value: Any) -> int:
    """The items and members of a data value, nested ones too."""
    size = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            size += len(item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            size += len(item)
            stack.extend(item)
    return size


def _plain_values(instance: Any, limit: int) -> int | None:
    """How many values `instance` holds (itself and every nested one) when they are at
    most `limit` and all plain JSON (see the module docstring), else None."""
    count = 0
    stack = [instance]
    while stack:
        item = stack.pop()
        count += 1
        if count > limit:
            return None
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if not -_EXACT <= item <= _EXACT:
                return None
        elif kind is float:
            if not math.isfinite(item):
                return None
        elif isinstance(item, dict):  # a FrozenDict too
            for key in item:
                if type(key) is not str:
                    return None
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        else:
            return None
    return count
