"""`Record`: value semantics for small immutable classes, with no code generated.

The records of `validate`'s path are `Record`s rather than frozen dataclasses
because of start-up time (docs/architecture.md §5 gives the figure). A
record class names its fields in order in `_fields`, makes them its
`__slots__`, and writes its own `__init__` (plain attribute stores)::

    class Span(Record):
        _fields = ("file", "line")
        __slots__ = _fields

        def __init__(self, file: str, line: int) -> None:
            self.file = file
            self.line = line

`Record` gives it equality and a hash over the fields (for the same class
only), a `repr` naming them, and `_replace(**changes)`, a copy with some fields
changed. Records are immutable by convention: nothing assigns to one after its
`__init__`; a changed record is a `_replace`d copy.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self


class Record:
    """Base of the records; see the module docstring."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{self.__class__.__qualname__}({fields})"

    def _replace(self, **changes: Any) -> Self:
        """A copy of this record with the fields in `changes` replaced."""
        unknown = changes.keys() - set(self._fields)
        if unknown:
            raise TypeError(f"{self.__class__.__name__} has no field {sorted(unknown)[0]!r}")
        copy = object.__new__(self.__class__)
        for name in self._fields:
            setattr(copy, name, changes[name] if name in changes else getattr(self, name))
        return copy
