"""Safe JSON Schema validators for pipeline and pack schemas.

Every schema a pipeline or pack supplies (`keys[].schema`, llm `output.schema`,
pack parameter and input schemas, tool inputs) is applied to data through this
module, so none of them can hang the process or reach outside the document:

- Regexes (`pattern`, `patternProperties`) run on RE2 (`_safe_regex`), whose matching
  is linear in the text; a pattern RE2 cannot compile (backreferences, lookaround) is
  refused with the reason (`regex_problem`), at validate time as a located diagnostic.
- `$ref` resolves only within the schema: the registries refuse to retrieve anything (no
  `file://`, no `http://`), `remote_refs` finds every non-local reference,
  `dangling_refs` every local one that names nothing (a pointer to no member, an anchor
  no subschema declares) and `misplaced_refs` every local pointer to a value no schema
  keyword holds (which the validators would apply as a schema out of reach of these
  checks), for validate to report.
- A schema wider than the documented limits (`converge_dsl.sandbox._schema_bounds`:
  members in all, `properties`, `enum`, `anyOf`/`oneOf`/`allOf` branches) is refused
  (`schema_problems` kind `size`), so no check of data costs in proportion to a huge
  schema.
- `python_validator` is python-jsonschema (Draft 2020-12 unless the schema says
  otherwise: `validator_class`) extended so `pattern`, `patternProperties` and
  `additionalProperties` use RE2, `uniqueItems`, `enum`, `const` and the `unevaluated*`
  keywords (read in the schema's draft) run in linear time (JSON equality through
  `canonical`); every keyword application charges the governor one step plus the
  width of its value, and each error it makes its message (then cut: `short_message`).
  Each validation is governed on its own (`SCHEMA_STEPS`, `SCHEMA_WORK`), draws on the
  run's total (`SCHEMA_RUN_STEPS`) and watches the run's deadline. A crossed bound
  raises the governor's `Exhausted`, located (schema, keyword and its pointer, the
  data's pointer) with a code: `CD970` one validation, `CD971` the run's total, `CD972`
  the deadline. `fast_validator` is jsonschema-rs with the linear `regex` crate and a
  refusing retriever: the fast yes/no where it is used, on schemas within the same limits.

A schema these rules refuse raises `UnsafeSchema` when a validator is built.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeGuard, TypeVar

from converge_dsl import codes
from converge_dsl._escapes import quoted
from converge_dsl._json_pointer import pointer, unescape
from converge_dsl._json_types import JsonSchema
from converge_dsl.diagnostics import suggestion
from converge_dsl.sandbox._governor import DeadlinePassed, Exhausted, governed, spend
from converge_dsl.sandbox._safe_regex import UnsafeSchema, regex_problem, search
from converge_dsl.sandbox._schema_bounds import canonical, short_message, size_problems, too_large
from converge_dsl.sandbox._schema_meta import validator_class
from converge_dsl.sandbox._schema_quick import NEVER, Fitted, QuickCheck
from converge_dsl.sandbox._schema_refs import (
    dangling_refs,
    misplaced_refs,
    remote_refs,
    schema_objects,
)

_T = TypeVar("_T")
_Loader = Callable[[], Any] | None  # a value parsed again from its JSON text, when needed
SCHEMA_STEPS = 1_000_000  # keyword applications of one validation
SCHEMA_WORK = 10_000_000  # items and characters scanned, matched or worded by one validation
SCHEMA_RUN_STEPS = 20_000_000  # keyword applications of every validation of one run
_ERROR_COST = 512  # the work charged for making one error (an object of some size), and its text
_UNWIDE = frozenset(("enum", "const"))  # hashed, not scanned: their width costs nothing per check


def _patterns(schema: Any) -> Iterator[tuple[Any, str]]:
    """(path, pattern) of every `pattern` value and `patternProperties` key in `schema`."""
    for node, where in schema_objects(schema):
        if isinstance(node.get("pattern"), str):
            yield (*where, "pattern"), node["pattern"]
        properties = node.get("patternProperties")
        if isinstance(properties, Mapping):
            yield from (
                ((*where, "patternProperties", p), p) for p in properties if isinstance(p, str)
            )


PROBLEM_CODES = {
    "ref": codes.KEY_SCHEMA_REMOTE_REF,
    "regex": codes.SCHEMA_REGEX_NOT_LINEAR,
    "size": codes.SCHEMA_TOO_LARGE,
    "dangling": codes.KEY_SCHEMA_DANGLING_REF,
}  # the diagnostic code of each kind of `schema_problems`


def schema_problems(schema: Any) -> list[tuple[tuple[str | int, ...], str, str]]:
    """Every reason this module refuses `schema`: (path inside it, kind, message).

    `kind` is `size` (wider than a documented limit; then the only kind
    looked for), `ref` (a reference outside the document), `dangling` (a
    local reference that names nothing in it, or a value that is not a schema)
    or `regex` (a pattern RE2 cannot run). Validate reports each as a located
    diagnostic.
    """
    sized = size_problems(schema)
    if sized:
        return [(where, "size", message) for where, message in sized]
    problems: list[tuple[tuple[str | int, ...], str, str]] = []
    for where in remote_refs(schema):
        outside = "points outside the schema; references resolve only within the schema"
        problems.append((where, "ref", f"{_reference(schema, where)} {outside}"))
    for where, guess in dangling_refs(schema):
        meant = "" if guess is None else f" ({suggestion(guess)})"
        nothing = f"points to nothing in the schema{meant}"
        problems.append((where, "dangling", f"{_reference(schema, where)} {nothing}"))
    for where in misplaced_refs(schema):
        problems.append(
            (
                where,
                "dangling",
                f"{_reference(schema, where)} points at a value that is not a schema (no schema "
                "keyword holds it), so no check of the schema reads it; put the schema under "
                "$defs and point there",
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


def _reference(schema: Any, where: tuple[str | int, ...]) -> str:
    """`$ref '#/x'`: the keyword at `where` in `schema` and the reference it holds, quoted."""
    value = schema
    for part in where:
        value = value[part]
    return f"{where[-1]} {quoted(value)}"


def check_safe(schema: Any, what: str = "the schema") -> None:
    """Raise `UnsafeSchema` for the first reason `schema` is refused (see `schema_problems`)."""
    problems = schema_problems(schema)
    if problems:
        where, _, message = problems[0]
        pointer = "".join(f"/{p}" for p in where) or "/"
        hint = (
            "make the schema smaller (see the limits of schemas in the reference)"
            if problems[0][1] == "size"
            else "use '#/$defs/NAME' references to definitions that exist and RE2 regexes "
            "(no backreferences or lookaround)"
        )
        raise UnsafeSchema(f"{what}: at {pointer}: {message}", hint=hint)


def _refuse_retrieval(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs-made __init__


def _refuse_rs(uri: str) -> Any:
    raise ValueError(f"{uri}: references resolve only within the schema")


def _width(name: str, value: Any) -> int:
    if name in _UNWIDE or not isinstance(value, list | tuple | Mapping):
        return 0
    return len(value)


def _metered(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """Keyword `name` charging one step plus the width of its value per application,
    and each error it makes; a crossed bound is located on the way out."""
    from jsonschema.exceptions import _unset

    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        try:
            spend(1, _width(name, value))
            errors = func(validator, value, instance, schema)
            if errors is not None:
                for error in errors:
                    if error.validator is _unset:  # made here, not passed up from below
                        spend(0, len(error.message) + _ERROR_COST)
                        error.message = short_message(error.message)
                    yield error
        except Exhausted as exc:
            _Trail.note(exc, name, value, instance, schema)
            raise

    return keyword


class _Trail:
    """Where a bound was crossed, gathered while the exception leaves the keywords.

    `schema` and `data` hold pointer parts innermost first; `anchor` is set
    by the innermost local `$ref` (the keyword's absolute place is inside its
    target). Parts are found by identity, and only on this failing path.
    """

    __slots__ = ("anchor", "data", "instance", "keyword", "schema", "subschema")

    def __init__(self, keyword: str, instance: Any, subschema: Any) -> None:
        self.keyword = keyword
        self.schema: list[str | int] = [keyword]
        self.data: list[str | int] = []
        self.anchor: list[str] | None = None
        self.instance = instance
        self.subschema = subschema

    @classmethod
    def note(cls, exc: Exhausted, name: str, value: Any, instance: Any, schema: Any) -> None:
        trail = exc.trail
        if not isinstance(trail, cls):
            exc.trail = cls(name, instance, schema)
            return
        if trail.anchor is None:
            if name in ("$ref", "$dynamicRef") and isinstance(value, str):
                parts = value.lstrip("#").split("/")
                trail.anchor = [unescape(p) for p in parts if p]
            else:
                trail.schema.extend((*_member_of(value, trail.subschema), name))
        trail.subschema = schema
        if isinstance(trail.instance, Mapping | list) and trail.instance is not instance:
            trail.data.extend(_member_of(instance, trail.instance))
        trail.instance = instance

    def pointers(self) -> tuple[str, str]:
        schema = [*(self.anchor or ()), *reversed(self.schema)]
        return _pointer(schema), _pointer(reversed(self.data))


def _member_of(container: Any, inner: Any) -> tuple[str | int, ...]:
    """The key or index under which `container` holds `inner` itself; () if none."""
    if isinstance(container, Mapping):
        for key, value in container.items():
            if value is inner:
                return (key,)
    elif isinstance(container, list | tuple):
        for index, value in enumerate(container):
            if value is inner:
                return (index,)
    return ()


def _pointer(parts: Any) -> str:
    return pointer(parts) or "/"


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if unique and validator.is_type(instance, "array"):
        seen: set[Any] = set()
        for item in instance:
            key = canonical(item)
            if key in seen:
                yield ValidationError(f"{instance!r} has non-unique elements")
                return
            seen.add(key)


# id(enum list) -> (the list, its canonical keys): the list is kept alive with its entry.
_ENUMS: dict[int, tuple[Any, frozenset[Any]]] = {}


def _enum_keys(enums: Any) -> frozenset[Any]:
    entry = _ENUMS.get(id(enums))
    if entry is None or entry[0] is not enums:
        if len(_ENUMS) > 4096:
            _ENUMS.clear()
        entry = (enums, frozenset(canonical(each) for each in enums))
        _ENUMS[id(enums)] = entry
    return entry[1]


def _enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if isinstance(enums, list | tuple) and canonical(instance) not in _enum_keys(enums):
        yield ValidationError(f"{instance!r} is not one of {enums!r}")


def _const(validator: Any, const: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if canonical(instance) != canonical(const):
        yield ValidationError(f"{const!r} was expected")


def _evaluated(draft_2019: bool) -> Any:
    """The module of python-jsonschema's `find_evaluated_*` of a draft: 2019-09's own
    (its `items` may be an array, with `additionalItems`), or 2020-12's."""
    from jsonschema import _legacy_keywords, _utils

    return _legacy_keywords if draft_2019 else _utils


def _unevaluated_items(
    validator: Any, extra: Any, instance: Any, schema: Any, *, draft_2019: bool = False
) -> Iterator[Any]:
    from jsonschema._utils import extras_msg
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "array"):
        return
    find = _evaluated(draft_2019).find_evaluated_item_indexes_by_schema
    evaluated = set(find(validator, instance, schema))
    spend(1, len(instance))
    unevaluated = [item for index, item in enumerate(instance) if index not in evaluated]
    if unevaluated:
        error = "Unevaluated items are not allowed (%s %s unexpected)"
        yield ValidationError(error % extras_msg(unevaluated))


def _unevaluated_properties(
    validator: Any, extra: Any, instance: Any, schema: Any, *, draft_2019: bool = False
) -> Iterator[Any]:
    from jsonschema._utils import extras_msg
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    find = _evaluated(draft_2019).find_evaluated_property_keys_by_schema
    evaluated = set(find(validator, instance, schema))
    spend(1, len(instance))
    bad = [
        key
        for key in instance
        if key not in evaluated
        and any(True for _ in validator.descend(instance[key], extra, path=key, schema_path=key))
    ]
    if bad and extra is False:
        error = "Unevaluated properties are not allowed (%s %s unexpected)"
        yield ValidationError(error % extras_msg(sorted(bad, key=str)))
    elif bad:
        error = (
            "Unevaluated properties are not valid under "
            "the given schema (%s %s unevaluated and invalid)"
        )
        yield ValidationError(error % extras_msg(bad))


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

    draft_2019 = "$recursiveRef" in base.VALIDATORS  # its `unevaluated*` read `items` arrays
    own: dict[str, Callable[..., Any]] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
        "enum": _enum,
        "const": _const,
        "unevaluatedItems": functools.partial(_unevaluated_items, draft_2019=draft_2019),
        "unevaluatedProperties": functools.partial(_unevaluated_properties, draft_2019=draft_2019),
    }
    keywords = {name: _metered(name, own.get(name, func)) for name, func in base.VALIDATORS.items()}
    return jsonschema.validators.extend(base, keywords)


def python_validator(schema: JsonSchema, what: str = "the schema") -> GovernedValidator:
    """A python-jsonschema validator for `schema`: RE2 regexes, local `$ref`s, governed.

    Raises `UnsafeSchema` for a refused schema (`check_safe`); the caller
    checks the schema against its meta-schema itself (`meta_error`).
    The python-jsonschema validator is immutable: one is built per distinct
    schema text and shared (a batch validates with the same schemas in every
    case); each call wraps it for its own `what`. It is built when first needed:
    data its `QuickCheck` answers never needs it (nor python-jsonschema).
    """
    if too_large(schema):  # refused before its text, of its size, is made
        check_safe(schema, what)
    try:
        key: str | None = json.dumps(schema, sort_keys=True, default=_unkeyable)
    except TypeError:
        key = None
    kept = None if key is None else _VALIDATORS.get(key)
    if kept is not None:
        return GovernedValidator(kept[0], what, kept[1])
    check_safe(schema, what)
    deferred, quick = _Deferred(schema), QuickCheck.of(schema)
    if key is not None:
        if len(_VALIDATORS) >= _KEEP_VALIDATORS:
            _VALIDATORS.clear()
        _VALIDATORS[key] = (deferred, quick)
    return GovernedValidator(deferred, what, quick)


class _Deferred:
    """The python-jsonschema validator of one (safe) schema, built on first use."""

    __slots__ = ("_built", "_schema")

    def __init__(self, schema: JsonSchema) -> None:
        self._schema, self._built = schema, None

    def get(self) -> Any:
        if self._built is None:
            from referencing import Registry

            base = validator_class(self._schema)
            registry: Any = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
            self._built = _safe_class(base)(self._schema, registry=registry)
        return self._built


class GovernedValidator:
    """A validator whose every check is one governed computation (see the module's doc).

    `iter_errors` gathers the errors under the governor and returns an
    iterator over them (the governor's work bound also bounds how many);
    `is_valid` stops at the first. Other attributes are the wrapped
    validator's. Raises the governor's `Exhausted`, located. `fits` (`_schema_quick`) answers first.
    """

    __slots__ = ("_held", "fits", "what")

    def __init__(self, validator: Any, what: str, fits: QuickCheck = NEVER) -> None:
        self._held = validator  # a python-jsonschema validator, or one `_Deferred`
        self.what = what
        self.fits = fits

    @property
    def validator(self) -> Any:  # the python-jsonschema validator (built now if deferred)
        held = self._held
        return held.get() if isinstance(held, _Deferred) else held

    def __getattr__(self, name: str) -> Any:
        return getattr(self.validator, name)

    def iter_errors(self, instance: Any) -> Iterator[Any]:
        return self._governed(lambda: iter(() if self.fits(instance) else self._all(instance)))

    def is_valid(self, instance: Any) -> bool:
        return self._governed(lambda: self.fits(instance) or not self._all(instance, 1))

    def best_error(self, instance: Any) -> Any:
        """The error python-jsonschema's `best_match` picks, or None when `instance` fits."""
        return self._governed(lambda: None if self.fits(instance) else self._best(instance))

    def judge(self, instance: Any) -> tuple[Any, Fitted | None]:
        """`best_error(instance)`, and the quick check's `Fitted` evidence when it said yes."""
        return self._governed(lambda: self._judged(instance))

    def best_error_of(self, value: Any, loaded: Callable[[], Any]) -> Any:
        """`best_error(loaded())` (`value` parsed from its JSON); the quick check reads `value`."""
        return self._governed(lambda: self._judged(value, loaded)[0])

    def vouches(self, fitted: object) -> TypeGuard[Fitted]:
        """Whether `fitted` is `Fitted` evidence of this schema: its value is JSON and fits."""
        return isinstance(fitted, Fitted) and fitted.check is self.fits

    def recharge(self, fitted: Fitted) -> None:
        """Charge a check of the value `fitted` vouches for again, raising what it would."""
        self._governed(lambda: spend(fitted.steps))

    def _judged(self, value: Any, loaded: _Loader = None) -> tuple[Any, Fitted | None]:
        values = self.fits.values(value)
        if values is not None and self.fits.admits(value, values):
            return None, Fitted(self.fits, values)
        instance = value if loaded is None else loaded()  # not plain: `instance` decides
        return None if values is None and self.fits(instance) else self._best(instance), None

    def _all(self, instance: Any, most: int | None = None) -> list[Any]:  # the first `most`
        return list(itertools.islice(self.validator.iter_errors(instance), most))

    def _best(self, instance: Any) -> Any:
        from jsonschema.exceptions import best_match

        return best_match(self.validator.iter_errors(instance))

    def _governed(self, check: Callable[[], _T]) -> _T:
        """`check()` as one governed computation (a call, not a generator: `bench/batch.py`)."""
        pool = ("schema validation", SCHEMA_RUN_STEPS)
        try:
            with governed(SCHEMA_STEPS, SCHEMA_WORK, f"checking data against {self.what}", pool):
                return check()
        except Exhausted as exc:
            raise located(exc, self.what) from None
        except RecursionError:
            raise Exhausted(
                f"checking data against {self.what}: the data nests too deeply to check",
                hint="give data that nests less deeply",
            ) from None


_HINTS = {
    codes.SCHEMA_WORK_EXCEEDED: "the data is too large or the schema too demanding for one "
    "check: give smaller data (fewer items) or a simpler schema",
    codes.SCHEMA_RUN_WORK_EXCEEDED: "the run checked more data than its total allows: "
    "give less data, or split the work over several runs",
    codes.SCHEMA_DEADLINE_PASSED: "raise budget.max_wall_s, or give less data to check",
}


def located(exc: Exhausted, what: str) -> Exhausted:
    """`exc` (a crossed bound of a validation against `what`) with its place and code.

    The message names the schema, the keyword and its pointer in the schema,
    and the pointer of the data it was checking; `exc.code` is CD970 (the
    bound of one validation), CD971 (the run's total) or CD972 (the deadline).
    A bound crossed by an enclosing computation (a template) is returned as is.
    """
    if exc.code is not None:
        return exc
    trail = exc.trail
    where = ""
    if isinstance(trail, _Trail):
        schema_at, data_at = trail.pointers()
        where = f" (the {trail.keyword} keyword at {schema_at}, data at {data_at})"
    if isinstance(exc, DeadlinePassed):
        code = codes.SCHEMA_DEADLINE_PASSED
        message = f"the run's deadline (max_wall_s) passed while checking data against {what}"
    else:
        code = codes.SCHEMA_RUN_WORK_EXCEEDED if exc.pooled else codes.SCHEMA_WORK_EXCEEDED
        message = exc.message
    exc.message = message + where
    exc.args = (exc.message,)
    exc.hint = _HINTS[code]
    exc.code = code
    return exc


# The validators built so far, by schema text (see `python_validator`).
_VALIDATORS: dict[str, tuple[Any, QuickCheck]] = {}
_KEEP_VALIDATORS = 256


def _unkeyable(value: object) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | list):
        return list(value)
    raise TypeError(type(value).__name__)


def fast_validator(schema: JsonSchema, what: str = "the schema") -> Any:
    """A jsonschema-rs validator: the linear `regex` crate, no retrieval. Raises `UnsafeSchema`."""
    import jsonschema_rs

    check_safe(schema, what)
    options: Any = jsonschema_rs.RegexOptions()
    validator_for: Callable[..., Any] = jsonschema_rs.validator_for
    return validator_for(schema, pattern_options=options, retriever=_refuse_rs)
