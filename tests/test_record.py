from __future__ import annotations

import pickle

import pytest

from converge_dsl._record import Record
from converge_dsl.diagnostics import Diagnostic, Severity, SourceSpan


class Pair(Record):
    _fields = ("left", "right")
    __slots__ = _fields

    def __init__(self, left: int, right: object = None) -> None:
        self.left = left
        self.right = right


def test_records_compare_and_hash_by_their_fields_within_one_class() -> None:
    assert Pair(1, "a") == Pair(1, "a")
    assert Pair(1, "a") != Pair(1, "b")
    assert hash(Pair(1, "a")) == hash(Pair(1, "a"))
    assert len({Pair(1), Pair(1), Pair(2)}) == 2
    assert Pair(1, 2) != (1, 2)  # not a tuple
    assert SourceSpan("f", 1, 2, 3, 4) != Pair(1, 2)


def test_a_record_names_its_fields_in_order_in_its_repr() -> None:
    assert repr(Pair(1, "a")) == "Pair(left=1, right='a')"


def test_replace_copies_with_some_fields_changed() -> None:
    first = Diagnostic.at("CD001", "m", SourceSpan("p.yaml", 2, 1, 2, 5), hint="h")
    quiet = first._replace(excerpt=False, hint=None)
    assert (quiet.excerpt, quiet.hint, first.excerpt, first.hint) == (False, None, True, "h")
    assert quiet._replace(excerpt=True, hint="h") == first
    assert quiet.severity is Severity.ERROR
    with pytest.raises(TypeError, match="no field 'colour'"):
        first._replace(colour=1)


def test_records_have_no_instance_dict_and_survive_pickling() -> None:
    span = SourceSpan("p.yaml", 1, 1, 1, 2)
    assert not hasattr(span, "__dict__")
    assert pickle.loads(pickle.dumps(span)) == span
    assert str(span) == "p.yaml:1:1"
