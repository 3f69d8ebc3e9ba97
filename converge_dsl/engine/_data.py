"""The promotion gate's checks of a proposal's `data`: JSON only, and the key's schema.

Engine-internal. `json_problem` says why a value is not JSON data (NaN or an
infinity, an integer of more digits than JSON readers take, a key that is
not a string, a Python object), naming the JSON
pointer of the offending value. `KeySchemas` compiles each key's JSON Schema
(Draft 2020-12) once, refusing one wider than the schema limits, and words the
best error of a failing value as
`data at /category: 'refund' is not one of ['billing', 'bug'] (enum)`; each
check is governed (its bound, the run's total, the deadline).
`same_fact` and `held_text` are admission's comparison and wording of a
fact's content and data (same id: no-op or conflict).

A `$ref` resolves only within its schema: the registry refuses to retrieve
anything (no file://, no http://), so checking data never touches the disk
or the network. jsonschema is imported only when some key has a schema.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from converge_dsl._json_pointer import pointer as pointer_of
from converge_dsl._json_types import JsonSchema
from converge_dsl.engine.types import FrozenDict, canonical_json
from converge_dsl.errors import RunError

if TYPE_CHECKING:
    from converge_dsl.engine.types import Fact, ProposedFact
    from converge_dsl.sandbox import GovernedValidator

_MAX_MESSAGE = 300
_PARSED: Any = object()  # `KeySchemas.problem`'s data when only its text is given
# The most digits Python writes or reads an integer with (`sys.get_int_max_str_digits()`,
# 4300 unless set otherwise; 0: no limit): `json.dumps` raises on one with more.
MAX_DIGITS = sys.get_int_max_str_digits()
TOO_LONG = 10**MAX_DIGITS if MAX_DIGITS else math.inf


def where(pointer: str) -> str:
    """`data at /x` for a pointer, `data` for the root."""
    return f"data at {pointer}" if pointer else "data"


def json_problem(value: Any) -> str | None:
    """Why `value` is not JSON data, or None if it is (the first problem in document order)."""
    if _plainly_json(value):
        return None
    return _first_problem(value)


def _plainly_json(value: Any) -> bool:
    """True when `value` is JSON made of the plain types alone (what the gate nearly always
    sees), walked without naming pointers; False when it holds anything else, which
    `_first_problem` then looks at."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if -TOO_LONG < item < TOO_LONG:
                continue
            return False
        if kind is float:
            if not math.isfinite(item):
                return False
        elif kind is FrozenDict or kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            stack.extend(item.values())
        elif kind is tuple or kind is list:
            stack.extend(item)
        else:
            return False
    return True


def _first_problem(value: Any) -> str | None:
    """`json_problem` in document order, naming the pointer of the first problem."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        pointer, item = stack.pop()
        if item is None or isinstance(item, str | bool):
            continue
        if isinstance(item, int):
            if -TOO_LONG < item < TOO_LONG:
                continue
            return (
                f"{where(pointer)}: an integer of more than {MAX_DIGITS} digits "
                "(JSON readers refuse it)"
            )
        if isinstance(item, float):
            if math.isfinite(item):
                continue
            return f"{where(pointer)}: {item!r} is not a JSON number"
        if isinstance(item, Mapping):
            children: list[tuple[str, Any]] = []
            for k, v in item.items():
                if not isinstance(k, str):
                    return f"{where(pointer)}: the key {k!r} is not a string"
                children.append((pointer + pointer_of((k,)), v))
            stack.extend(reversed(children))
        elif isinstance(item, tuple | list):
            stack.extend(reversed([(f"{pointer}/{i}", v) for i, v in enumerate(item)]))
        else:
            return f"{where(pointer)}: a {type(item).__name__} is not a JSON value"
    return None


def same_fact(a: ProposedFact | Fact, b: ProposedFact) -> bool:
    """Same content and same data (data compared as canonical JSON: 1 and 1.0 differ)."""
    if a.content != b.content:
        return False
    if a.data is None or b.data is None:
        return a.data is b.data
    return a.data == b.data and _data_text(a.data) == _data_text(b.data)


def _data_text(data: Any) -> str:
    try:
        return canonical_json(data)
    except (TypeError, ValueError):  # not JSON: the gate will say so
        return repr(data)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def held_text(item: ProposedFact | Fact) -> str:
    """What a fact holds, for a conflict message: its content, and its data if any."""
    held = repr(_clip(item.content))
    return held if item.data is None else f"{held} with data {_clip(_data_text(item.data))}"


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


class KeySchemas:
    """Each key's JSON Schema, compiled once; `problem(key, data)` checks one value.

    An invalid schema is a `RunError` when this is built, before any cycle.
    """

    __slots__ = ("_validators",)

    def __init__(self, schemas: Mapping[str, JsonSchema]) -> None:
        self._validators: dict[str, GovernedValidator] = {}
        if not schemas:
            return
        from converge_dsl.sandbox import UnsafeSchema, meta_error, python_validator

        for key, schema in schemas.items():
            plain = json.loads(canonical_json(schema))  # lists, not the frozen tuples
            what = f"the schema of key {key!r}"
            try:
                # Refuses an unsafe schema first (its one `check_safe`), so the meta
                # check below is linear; the validator itself is built on first use.
                validator = python_validator(plain, what)
            except UnsafeSchema as exc:
                raise RunError(exc.message, hint=exc.hint, code=exc.code) from None
            error = meta_error(plain)
            if error is not None:
                where_ = pointer_of(error.absolute_path) or "/"
                raise RunError(
                    f"{what} is not a valid JSON Schema: at {where_}: {_short(error.message)}",
                    hint="fix `keys[].schema` (JSON Schema, draft 2020-12)",
                )
            self._validators[str(key)] = validator

    def __bool__(self) -> bool:
        return bool(self._validators)

    def vouched(self, key: str, evidence: object) -> bool:
        """Whether `evidence` (a proposal's `checked`) says the data fits the key's schema
        (and so is JSON)."""
        validator = self._validators.get(key)
        return validator is not None and validator.vouches(evidence)

    def problem(
        self, key: str, data_text: str | None, data: Any = _PARSED, evidence: object = None
    ) -> str | None:
        """Why the data (given as its canonical JSON text, None for null; and as `data`
        itself, unless it is to be parsed from the text) breaks the key's schema, or None
        when it fits or the key has no schema.

        `evidence` (a proposal's `checked`) that this very data fits this schema
        stands for the check: the same steps are charged, so the same bounds
        hold. Governed (`converge_dsl.sandbox`): a check that crosses its bound,
        the run's total or the deadline raises the governor's `Exhausted`, located."""
        validator = self._validators.get(key)
        if validator is None:
            return None
        if evidence is not None and validator.vouches(evidence):
            validator.recharge(evidence)
            return None
        try:
            # The quick check reads the frozen data; python-jsonschema reads it as parsed
            # from its text (lists, keys in order), which its error wording depends on.
            loaded = (lambda: None) if data_text is None else (lambda: json.loads(data_text))
            if data is _PARSED:
                data = loaded()
            error = validator.best_error_of(data, loaded)
        except Exception as exc:  # the referencing library is imported once data did not fit
            from referencing.exceptions import Unresolvable

            if not isinstance(exc, Unresolvable):
                raise
            return f"the schema of key {key!r} has a $ref that does not resolve within it: {exc}"
        if error is None:
            return None
        pointer = pointer_of(error.absolute_path)
        return f"{where(pointer)}: {_short(error.message)} ({error.validator})"
