"""What a scalar means: numbers JSON can hold, tags that match their text, YAML 1.1/1.2 traps."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from converge_dsl import codes
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import load_text
from converge_dsl.frontend._scalars import MAX_INT, MIN_INT, text_lost


def _problems(text: str) -> list[tuple[str, int, int]]:
    """(code, line, column) of every load problem of `text`."""
    with pytest.raises(PipelineInvalid) as caught:
        load_text(text, "f.yaml")
    return [(d.code, d.line, d.column) for d in caught.value.diagnostics]


def _value(text: str) -> Any:
    return load_text(f"a: {text}\n", "f.yaml").data["a"]


# --- numbers JSON can hold ----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "9" * 4301,  # the payload: Python's int-str limit was a traceback
        "1" + "0" * 100_000,
        "-" + "9" * 5000,
        str(MAX_INT + 1),
        str(MIN_INT - 1),
        "1.0e+400",  # the payload: silently infinity
        "-1.5e308000",
        "1.5e-400",  # underflow: silently 0
        "!!float .inf",
        "!!float -.Inf",
        "!!float .nan",
        "-1e+999",  # a YAML 1.2 number out of range (YAML 1.1 text)
    ],
)
def test_numbers_json_cannot_hold_are_located_errors(text: str) -> None:
    assert _problems(f"ok: 1\na: {text}\n") == [(codes.NUMBER_OUT_OF_RANGE, 2, 4)]


def test_a_huge_integer_is_refused_without_conversion() -> None:
    """Refused by its length, even with Python's own limit lifted: no quadratic conversion."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        start = time.process_time()  # CPU time: a loaded machine does not fail it
        assert _problems("a: " + "7" * 2_000_000 + "\n") == [(codes.NUMBER_OUT_OF_RANGE, 1, 4)]
        assert time.process_time() - start < 5
    finally:
        sys.set_int_max_str_digits(before)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (str(MAX_INT), MAX_INT),
        (str(MIN_INT), MIN_INT),
        ("-0", 0),
        ("1.7976931348623157e+308", 1.7976931348623157e308),
        ("0.0", 0.0),
        ("-0.0e-999", -0.0),  # zero written as zero is not an underflow
        ("!!int 000123", 123),
        ("!!float 1", 1.0),
        ("!!float '1e3'", 1000.0),
    ],
)
def test_numbers_at_the_edges_load(text: str, value: Any) -> None:
    loaded = _value(text)
    assert (loaded, type(loaded)) == (value, type(value))


# --- explicit tags ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "!!null 'x'",  # the payload: silently null
        "!!null 0",
        "!!null false",
        "!!bool yes",
        "!!bool 'maybe'",
        "!!bool 1",
        "!!int 1.5",
        "!!int '0x1F'",
        "!!int ''",
        "!!int abc",
        "!!float abc",
        "!!float ''",
        "!!float '1.2.3'",
    ],
)
def test_a_core_tag_must_match_its_text(text: str) -> None:
    assert _problems(f"a: {text}\n") == [(codes.TAG_MISMATCH, 1, 4)]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("!!null ''", None),
        ("!!null ~", None),
        ("!!null 'NULL'", None),
        ("!!bool 'true'", True),
        ("!!bool False", False),
        ("!!int '12'", 12),
        ("!!int -7", -7),
        ("!!float '0.5'", 0.5),
        ("!!str 5", "5"),
        ("!!str 1.10", "1.10"),
        ("!!str null", "null"),
        ("!!str", ""),
    ],
)
def test_a_core_tag_that_matches_gives_its_type(text: str, value: Any) -> None:
    loaded = _value(text)
    assert (loaded, type(loaded)) == (value, type(value))


def test_a_tag_mismatch_in_a_key_is_located_at_the_key() -> None:
    assert _problems("ok: 1\n!!int x: 1\n") == [(codes.TAG_MISMATCH, 2, 1)]


# --- characters YAML does not allow ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("apiVersion: v\ndescription: a\x00b\n", 2, 15),  # the payload: was 1:1
        ("a: 1\nk\x00ey: 2\n", 2, 2),  # in a key
        ("a: 1\n# a comment \x00\n", 2, 13),  # in a comment
        ("a: ééé\x07\n", 1, 7),  # columns count characters, not bytes
        ("a: 'x\x1b[31m'\n", 1, 6),  # ESC in a quoted string
        ("a: x\x7f\n", 1, 5),
        ("a:\n  - 1\n  - 2\x0c\n", 3, 6),
    ],
)
def test_a_forbidden_character_is_reported_where_it_is(text: str, line: int, column: int) -> None:
    assert _problems(text) == [(codes.FORBIDDEN_CHARACTER, line, column)]


def test_the_forbidden_character_is_named() -> None:
    with pytest.raises(PipelineInvalid) as caught:
        load_text("a: b\x00\n", "f.yaml")
    assert "U+0000 (NUL)" in caught.value.diagnostics[0].message


def test_an_escaped_nul_in_a_double_quoted_string_is_text() -> None:
    assert _value('"a\\0b"') == "a\x00b"


# --- keys are read like values ----------------------------------------------------------


@pytest.mark.parametrize("key", ["y", "Y", "n", "N", "yes", "No", "on", "OFF"])
def test_yaml11_booleans_as_keys_are_errors_like_values(key: str) -> None:
    assert _problems(f"ok: 1\n{key}: 1\n") == [(codes.YAML11_BOOLEAN, 2, 1)]
    assert _problems(f"ok: {key}\n") == [(codes.YAML11_BOOLEAN, 1, 5)]


def test_quoted_yaml11_words_are_text_as_keys_and_values() -> None:
    assert load_text("'y': \"n\"\nx: 1\n", "f.yaml").data == {"y": "n", "x": 1}


# --- one rule for non-decimal numbers -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "decimal"),
    [
        ("0x1F", "31"),  # the payload: was 31
        ("-0x10", "-16"),
        ("0o10", "8"),  # the payload: was text
        ("+0o17", "15"),
        ("1e3", "1000.0"),
        ("2E-2", "0.02"),
        ("1.5e3", "1500.0"),  # YAML 1.1 wants a sign in the exponent
    ],
)
def test_hexadecimal_octal_and_dotless_exponents_are_refused_alike(text: str, decimal: str) -> None:
    with pytest.raises(PipelineInvalid) as caught:
        load_text(f"a: [{text}]\n", "f.yaml")
    (found,) = caught.value.diagnostics
    assert (found.code, found.line, found.column) == (codes.YAML11_NUMBER, 1, 5)
    assert found.hint is not None
    assert f"write {decimal}" in found.hint or f"decimal ({decimal})" in found.hint
    assert f"'{text}'" in found.hint


@pytest.mark.parametrize("text", ["'0x1F'", '"0o10"', "'1e3'", "0x", "0o8", "x0o1", "1.5e+3"])
def test_quoted_or_other_forms_are_not_refused(text: str) -> None:
    load_text(f"a: {text}\n", "f.yaml")


# --- floats whose text is lost ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lost"),
    [
        ("1.10", True),
        ("2.50", True),
        ("1.00", True),
        ("0.1000000000000000000001", True),
        ("3.141592653589793238462643", True),
        ("1." + "1" * 500, True),
        ("1.0", False),
        ("1.", False),
        ("100.", False),
        (".5", False),
        ("+2.5", False),
        ("1.5E3", False),
        ("1e3", False),
        ("-0.25", False),
    ],
)
def test_text_lost(text: str, lost: bool) -> None:
    assert text_lost(text, float(text)) is lost


def test_the_loader_records_inexact_floats_but_not_keys() -> None:
    doc = load_text("a: 1.10\nb: [1.5, 2.50]\nc: {x: 1.0}\n", "f.yaml")
    assert doc.inexact == ((("a",), "1.10"), (("b", 1), "2.50"))
    assert doc.data == {"a": 1.1, "b": [1.5, 2.5], "c": {"x": 1.0}}
