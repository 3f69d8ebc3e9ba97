"""Safe JSON Schema validators and linear-time regexes for pipeline and pack schemas.

Every schema a pipeline or pack supplies (`keys[].schema`, llm `output.schema`,
pack parameter and input schemas, tool inputs) is applied to data through this
module, so none of them can hang the process or reach outside the document:

- Regexes (`pattern`, `patternProperties`, model-script `match.regex`) run on
  RE2 (`google-re2`), whose matching is linear in the text; a pattern RE2
  cannot compile (backreferences, lookaround) is refused with the reason
  (`regex_problem`), at validate time as a located diagnostic.
- `$ref` resolves only within the schema: the registries refuse to retrieve
  anything (no `file://`, no `http://`), and `remote_refs` finds every
  non-local reference for validate to report.
- `python_validator` is python-jsonschema (Draft 2020-12 unless the schema
  says otherwise) extended so `pattern`, `patternProperties` and
  `additionalProperties` use RE2 and every keyword charges one step to the
  governor (`converge_dsl._governor`): validation observes the run's deadline.
  `fast_validator` is jsonschema-rs with the linear `regex` crate and a
  refusing retriever: the fast yes/no where it is used.

A schema these rules refuse raises `UnsafeSchema` when a validator is built.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from converge_dsl._governor import spend
from converge_dsl.errors import RunError

SCHEMA_STEPS = 1_000_000  # keyword applications of one governed validation
SCHEMA_WORK = 10_000_000  # characters matched by regexes in one governed validation
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


class UnsafeSchema(RunError):
    """A schema refers outside itself or holds a regex RE2 cannot run."""


def regex_problem(pattern: str) -> str | None:
    """Why RE2 cannot run `pattern` (backreferences, lookaround, syntax), or None."""
    try:
        _re2(pattern)
    except UnsafeSchema as exc:
        return exc.message
    return None


@functools.lru_cache(maxsize=1024)
def _re2(pattern: str) -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False
    options.max_mem = 64 << 20
    try:
        return re2.compile(pattern, options)
    except (re2.error, TypeError, ValueError) as exc:
        detail = exc.args[0] if exc.args else ""
        reason = detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
        raise UnsafeSchema(
            f"the regex {pattern!r} cannot run in linear time ({reason})",
            hint="backreferences (\\1) and lookaround ((?=, (?!, (?<=, (?<!) are not supported",
        ) from None


def compile_regex(pattern: str) -> Any:
    """A compiled RE2 regex (`search`, `match`, `fullmatch`); raises `UnsafeSchema`."""
    return _re2(pattern)


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` (RE2) matches somewhere in `text`; charges the text to the governor."""
    spend(1, len(text))
    return _re2(pattern).search(text) is not None


def remote_refs(schema: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Paths (inside `schema`) of every `$ref`-like keyword that does not start with `#`."""
    found: list[tuple[str | int, ...]] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(schema, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in _REF_KEYWORDS and isinstance(value, str):
                    if not value.startswith("#"):
                        found.append((*where, key))
                else:
                    stack.append((value, (*where, key)))
        elif isinstance(node, list | tuple):
            stack.extend((value, (*where, i)) for i, value in enumerate(node))
    return sorted(found, key=lambda p: [str(x) for x in p])


def _patterns(schema: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[Any, str]]:
    """(path, pattern) of every `pattern` value and `patternProperties` key in `schema`."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(schema, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    yield (*where, key), value
                elif key == "patternProperties" and isinstance(value, Mapping):
                    yield from (((*where, key, p), p) for p in value if isinstance(p, str))
                if key not in ("enum", "const", "examples", "default"):
                    stack.append((value, (*where, key)))
        elif isinstance(node, list | tuple):
            stack.extend((value, (*where, i)) for i, value in enumerate(node))


def schema_problems(schema: Any) -> list[tuple[tuple[str | int, ...], str, str]]:
    """Every reason this module refuses `schema`: (path inside it, kind, message).

    `kind` is `ref` (a reference outside the document) or `regex` (a pattern
    RE2 cannot run). Validate reports each as a located diagnostic.
    """
    problems: list[tuple[tuple[str | int, ...], str, str]] = []
    for where in remote_refs(schema):
        value = _at(schema, where)
        problems.append(
            (
                where,
                "ref",
                f"{where[-1]} {value!r} points outside the schema; "
                "references resolve only within the schema",
            )
        )
    patterns = list(_patterns(schema))
    for where, pattern in patterns:
        problem = regex_problem(pattern)
        if problem is not None:
            problems.append((where, "regex", problem))
    if patterns and '"unevaluatedProperties"' in json.dumps(schema):
        # jsonschema would match those patterns with Python's backtracking `re`.
        message = "unevaluatedProperties cannot be combined with patternProperties or pattern"
        problems.append((patterns[0][0], "regex", message))
    return problems


def _at(schema: Any, where: tuple[str | int, ...]) -> Any:
    for part in where:
        schema = schema[part]
    return schema


def check_safe(schema: Any, what: str = "the schema") -> None:
    """Raise `UnsafeSchema` for the first reason `schema` is refused (see `schema_problems`)."""
    problems = schema_problems(schema)
    if problems:
        where, _, message = problems[0]
        pointer = "".join(f"/{p}" for p in where) or "/"
        raise UnsafeSchema(
            f"{what}: at {pointer}: {message}",
            hint="use '#/$defs/NAME' references and RE2 regexes (no backreferences or lookaround)",
        )


def _refuse_retrieval(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs-made __init__


def _refuse_rs(uri: str) -> Any:
    raise ValueError(f"{uri}: references resolve only within the schema")


def _metered(func: Callable[..., Any]) -> Callable[..., Any]:
    """A keyword function that charges one step (and checks the deadline) per application."""

    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        spend()
        errors = func(validator, value, instance, schema)
        if errors is not None:
            yield from errors

    return keyword


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, extra_schema: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key
        for key in instance
        if key not in properties and not any(search(p, key) for p in patterns)
    ]
    if validator.is_type(extra_schema, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], extra_schema, path=extra)
    elif extra_schema is False and extras:  # worded as python-jsonschema words it
        joined = ", ".join(repr(each) for each in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            listed = ", ".join(repr(each) for each in sorted(patterns))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({joined} {verb} unexpected)"
            )


@functools.lru_cache(maxsize=8)
def _safe_class(base: Any) -> Any:
    import jsonschema.validators

    keywords = {name: _metered(func) for name, func in base.VALIDATORS.items()}
    keywords["pattern"] = _metered(_pattern)
    keywords["patternProperties"] = _metered(_pattern_properties)
    keywords["additionalProperties"] = _metered(_additional_properties)
    return jsonschema.validators.extend(base, keywords)


def python_validator(schema: Mapping[str, Any], what: str = "the schema") -> Any:
    """A python-jsonschema validator for `schema`: RE2 regexes, local `$ref`s, metered.

    Raises `UnsafeSchema` for a refused schema (`check_safe`); the caller
    checks the schema against its meta-schema itself (`check_schema`).
    Validators are immutable: one is built per distinct schema text and
    shared (a batch validates with the same schemas in every case).
    """
    import jsonschema.validators
    from referencing import Registry

    try:
        key: str | None = json.dumps(schema, sort_keys=True, default=_unkeyable)
    except TypeError:
        key = None
    kept = None if key is None else _VALIDATORS.get(key)
    if kept is not None:
        return kept
    check_safe(schema, what)
    base = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    registry: Any = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
    validator = _safe_class(base)(schema, registry=registry)
    if key is not None:
        if len(_VALIDATORS) >= _KEEP_VALIDATORS:
            _VALIDATORS.clear()
        _VALIDATORS[key] = validator
    return validator


# The validators built so far, by schema text (see `python_validator`).
_VALIDATORS: dict[str, Any] = {}
_KEEP_VALIDATORS = 256


def _unkeyable(value: object) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | list):
        return list(value)
    raise TypeError(type(value).__name__)


def fast_validator(schema: Mapping[str, Any], what: str = "the schema") -> Any:
    """A jsonschema-rs validator: the linear `regex` crate, no retrieval. Raises `UnsafeSchema`."""
    import jsonschema_rs

    check_safe(schema, what)
    options: Any = jsonschema_rs.RegexOptions()
    validator_for: Callable[..., Any] = jsonschema_rs.validator_for
    return validator_for(schema, pattern_options=options, retriever=_refuse_rs)
