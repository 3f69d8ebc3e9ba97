"""Checks of schemas against their meta-schema, each schema once per process.

`meta_error(schema)` is python-jsonschema's `SchemaError` of a schema that
breaks its meta-schema, or None; jsonschema-rs answers the common case (a valid
schema) and python-jsonschema is imported only to word an error. A schema found
valid is remembered by its text, so the front end, the compiler and the engine
do not check it again; `meta_valid_texts` and `remember_meta_valid` hand what
one process found valid to another (a batch's parent to its workers).

`validator_class(schema)` is the python-jsonschema class a schema is checked
with (its `$schema`'s draft, 2020-12 when it names none python-jsonschema
knows), here and when data is checked against it; `draft_of(schema)` names
that draft and the keywords it applies, for whoever restates the schema in
another draft (the service's OpenAPI document).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from converge_dsl._record import Record

_KEEP = 256


def _plain(value: object) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | list):
        return list(value)
    raise TypeError(type(value).__name__)


def meta_error(schema: Any) -> Any:
    """The python-jsonschema `SchemaError` of a schema that breaks its meta-schema, or None.

    jsonschema-rs answers the common case (a valid schema) in linear time;
    python-jsonschema words the error of an invalid one. Call it on schemas
    within the limits (`schema_problems`). A schema found valid once in this
    process (or named by `remember_meta_valid`) is not checked again.
    """
    try:
        key: str | None = json.dumps(schema, sort_keys=True, default=_plain)
    except TypeError:
        key = None
    if key is not None and key in _META_VALID:
        return None
    error = _meta_error(schema)
    if error is None and key is not None:
        if len(_META_VALID) >= _KEEP:
            _META_VALID.clear()
        _META_VALID.add(key)
    return error


class Draft(Record):
    """The draft a schema is checked in: `name` (`draft-04`, `draft-06`, `draft-07`,
    `2019-09`, `2020-12`, `draft-03`) and the keywords its checks apply (`then` and
    `else` apply through `if`, `minContains` and `maxContains` through `contains`)."""

    _fields = ("name", "keywords")
    __slots__ = _fields

    def __init__(self, name: str, keywords: frozenset[str]) -> None:
        self.name = name
        self.keywords = keywords


_DRAFT_NAMES = {
    "Draft3Validator": "draft-03",
    "Draft4Validator": "draft-04",
    "Draft6Validator": "draft-06",
    "Draft7Validator": "draft-07",
    "Draft201909Validator": "2019-09",
    "Draft202012Validator": "2020-12",
}


def validator_class(schema: Any) -> Any:
    """The python-jsonschema validator class `schema` is checked with: the draft its
    `$schema` names, else 2020-12."""
    import jsonschema

    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


def draft_of(schema: Any) -> Draft:
    """The draft `schema` is checked in (`validator_class`) and the keywords it applies."""
    base = validator_class(schema)
    keywords = frozenset(base.VALIDATORS)
    if "if" in keywords:
        keywords |= {"then", "else"}
    if "dependentRequired" in keywords:  # 2019-09 on: `contains` reads them
        keywords |= {"minContains", "maxContains"}
    return Draft(_DRAFT_NAMES.get(base.__name__, base.__name__), keywords)


# The drafts jsonschema-rs knows without fetching their meta-schema (it fetches others).
_RS_DRAFTS = frozenset(
    (
        "http://json-schema.org/draft-04/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    )
)


def _meta_error(schema: Any) -> Any:
    import jsonschema_rs

    draft = schema.get("$schema") if isinstance(schema, Mapping) else None
    if not isinstance(draft, str) or draft.rstrip("#") in _RS_DRAFTS:
        try:
            if jsonschema_rs.meta.is_valid(schema):
                return None
        except (ValueError, jsonschema_rs.ReferencingError):  # python-jsonschema words it
            pass
    import jsonschema

    base = validator_class(schema)
    try:
        base.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return exc
    return None


def meta_valid_texts(schemas: Iterable[Any]) -> tuple[str, ...]:
    """The texts by which `meta_error` knows `schemas` (each checked now if it was not)
    that are valid against their meta-schema: what `remember_meta_valid` takes in
    another process."""
    texts = []
    for schema in schemas:
        if meta_error(schema) is None:
            with contextlib.suppress(TypeError):
                texts.append(json.dumps(schema, sort_keys=True, default=_plain))
    return tuple(texts)


def remember_meta_valid(texts: Iterable[str]) -> None:
    """Take the schemas of `texts` (from `meta_valid_texts` in the process that checked
    them: a batch's parent) as valid against their meta-schema, unchecked."""
    for text in texts:
        if len(_META_VALID) >= _KEEP:
            _META_VALID.clear()
        _META_VALID.add(text)


# The texts of the schemas known to be valid against their meta-schema (`meta_error`).
_META_VALID: set[str] = set()
