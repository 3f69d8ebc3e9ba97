"""`same_json(a, b)`: whether two loaded JSON values are equal as JSON.

Python's `==` takes true for 1 and false for 0 (a bool is an int), which JSON
does not; 1 and 1.0 are one number in both.
"""

from __future__ import annotations


def is_number(value: object) -> bool:
    """Whether `value` is a JSON number (an int or a float, not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def same_json(a: object, b: object) -> bool:
    """Whether `a` and `b` are equal as JSON values (see the module docstring)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if is_number(a) and is_number(b):
        return a == b
    return type(a) is type(b) and a == b
