"""`same_json(a, b)`: whether two loaded JSON values are equal as JSON; `json_key`.

Python's `==` takes true for 1 and false for 0 (a bool is an int), which JSON
does not; 1, 1.0 and -0.0 and 0 are one number in both. `json_key(value)` is
that equality as a hashable form (what a set of JSON values holds: eval's `set`
measure), and `same_json` compares by it, so the measures that compare values
(`exact`, `subset`, `set`) and the run diff hold one rule.
"""

from __future__ import annotations


def is_number(value: object) -> bool:
    """Whether `value` is a JSON number (an int or a float, not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_key(value: object) -> tuple[str, object]:
    """`value` in a canonical hashable form, tagged with its kind: an integral float is
    its int (-0.0 is 0), an object's members are sorted by key."""
    if isinstance(value, bool | str) or value is None:
        return (type(value).__name__, value)
    if isinstance(value, float) and value.is_integer():
        return ("number", int(value))
    if is_number(value):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(json_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", tuple(sorted((str(k), json_key(v)) for k, v in value.items())))
    return ("other", repr(value))


def same_json(a: object, b: object) -> bool:
    """Whether `a` and `b` are equal as JSON values (see the module docstring)."""
    return json_key(a) == json_key(b)
