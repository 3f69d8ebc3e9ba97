"""`converge_dsl._escapes`: the classes of characters a reader does not see, and how a
message quotes a text holding them."""

from __future__ import annotations

import re
import sys

import pytest

from converge_dsl._escapes import HIDDEN, quoted, written
from converge_dsl._fact_ids import id_refusal


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("kept\n\n", "kept\\x0a\\x0a"),  # the gate's notation, never Python's \n
        ("a\tb", "a\\x09b"),
        ("left\u202eright", "left\\u202eright"),
        ("back\\slash", "back\\\\slash"),
        ("no\xa0break", "no\\xa0break"),  # not hidden, but not a plain space either
        ("em\u2003space", "em\\u2003space"),
        ("it's\"\u202e", 'it\\x27s"\\u202e'),  # the quote around it, escaped
        ("plain", "plain"),
    ],
)
def test_written_escapes_hidden_characters_as_the_gate_does(text: str, shown: str) -> None:
    assert written(text) == shown
    refusal = id_refusal(text)  # the promotion gate's reason quotes a refused id so
    assert refusal is None or refusal.startswith(f"id '{shown}' ")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("no\xa0break", "no\\xa0break"),
        ("it's", "it\\x27s"),
        ("em\u2003space", "em\\u2003space"),
        ("a\nb", "a\\x0ab"),
        ("caf\xe9 \u0444\u0430\u0439\u043b", "caf\xe9 \u0444\u0430\u0439\u043b"),
        # above U+FFFF, eight digits: `\ue0041` would read as U+E004 and a `1`
        ("tag\U000e0041z", "tag\\U000e0041z"),
    ],
)
def test_written_with_unprintable_escapes_what_python_does_not_print(text: str, shown: str) -> None:
    assert written(text, unprintable=True) == shown


def test_every_hidden_character_is_unprintable() -> None:
    """`written(..., unprintable=True)` escapes a superset of `HIDDEN`."""
    hidden = re.findall(HIDDEN, "".join(map(chr, range(sys.maxunicode + 1))))
    assert "\ufeff" in hidden
    assert not any(char.isprintable() for char in hidden)


# Unicode's Bidi_Control characters (PropList.txt): each reorders or marks text unseen.
BIDI_CONTROLS = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
# The other characters that show as nothing: soft hyphen, zero-width space, line and
# paragraph separators, word joiner and invisible operators, byte-order mark.
INVISIBLE = [0xAD, 0x200B, 0x2028, 0x2029, *range(0x2060, 0x2065), 0xFEFF]
# Characters that spell words: Persian and Indic (ZWNJ), emoji sequences (ZWJ), Mongolian.
SPELLING = [0x200C, 0x200D, 0x180E]


@pytest.mark.parametrize("code", BIDI_CONTROLS + INVISIBLE, ids=lambda c: f"U+{c:04X}")
def test_every_bidi_control_and_invisible_character_is_hidden(code: int) -> None:
    assert re.fullmatch(HIDDEN, chr(code))
    assert written(chr(code)) == (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


@pytest.mark.parametrize("code", SPELLING, ids=lambda c: f"U+{c:04X}")
def test_characters_that_spell_words_are_not_hidden(code: int) -> None:
    assert re.fullmatch(HIDDEN, chr(code)) is None


SCOTLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\U000e0041b", "a\\U000e0041b"),  # a lone tag character shows as nothing
        ("\U000e007f", "\\U000e007f"),
        (f"flag {SCOTLAND}!", f"flag {SCOTLAND}!"),  # a flag is spelled with them
        (SCOTLAND[:-1], "\U0001f3f4\\U000e0067\\U000e0062\\U000e0073\\U000e0063\\U000e0074"),
        ("\U0001f3f4\U000e007f", "\U0001f3f4\\U000e007f"),  # no tag between: not a flag
        (SCOTLAND + "\U000e007f", SCOTLAND + "\\U000e007f"),  # a cancel tag past the flag
        ("x\U000e0041" + SCOTLAND, "x\\U000e0041" + SCOTLAND),
        # a tag run spelling a text is not one of Unicode's three recommended flags
        ("\U0001f3f4\U000e0068\U000e0069\U000e007f", "\U0001f3f4\\U000e0068\\U000e0069\\U000e007f"),
    ],
)
def test_tag_characters_are_hidden_but_in_a_flag(text: str, shown: str) -> None:
    assert written(text) == shown


def test_hidden_is_one_group() -> None:
    """`HIDDEN` keeps its meaning inside a larger pattern: `f"{HIDDEN}+"` repeats it all."""
    assert re.fullmatch(f"{HIDDEN}+", "\u202e\u202e")
    assert re.fullmatch(f"a{HIDDEN}", "a\u202e")


def test_what_the_pages_show_as_invisible_is_hidden() -> None:
    """Every character `page_name` writes as `⟨U+...⟩` but its own bracket and the
    joiners (which the pages keep inside an emoji sequence) is `HIDDEN`."""
    from converge_dsl._page_assets import _NAMED_RANGES

    named = {code for start, end in _NAMED_RANGES for code in range(start, end + 1)}
    missing = sorted(
        named - {0x27E8, 0x200C, 0x200D} - {c for c in named if re.fullmatch(HIDDEN, chr(c))}
    )
    assert [f"U+{code:04X}" for code in missing] == []


@pytest.mark.parametrize(
    "text", ["it's \\", 'say "q"', "a: b", "#c", "1", "null", "-x", "", "caf\xe9", "k\U000e0041"]
)
def test_a_yaml_scalar_reads_back_as_its_text(text: str) -> None:
    import yaml

    from converge_dsl._escapes import yaml_scalar

    assert yaml.safe_load(f"[{{name: {yaml_scalar(text)}}}]") == [{"name": text}]


def test_quoted_is_written_between_single_quotes() -> None:
    assert quoted("it's\ta\\b") == "'it\\x27s\\x09a\\\\b'"


def test_a_quoted_text_cut_to_a_limit_is_cut_at_an_escape_edge_and_closed() -> None:
    """Before, a long value in a schema message was cut at 60 characters of its quoted
    form: in the middle of an escape (`\\U000e...`), its quote left open."""
    from converge_dsl._escapes import quoted

    cut = quoted("a" * 20 + "\U000e0041" * 20, 60)
    assert cut == "'" + "a" * 20 + "\\U000e0041" * 3 + "...'"
    assert quoted("ab", 60) == "'ab'"


def test_a_name_is_written_one_way_whatever_the_message() -> None:
    """Before, `quoted` kept a flag Unicode recommends whole and CD250's form (which
    escapes every unprintable character) wrote its tags as escapes: one name, two ways."""
    from converge_dsl._escapes import written

    england = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
    name = f"k{england}\U000e0041"
    assert written(name, unprintable=True) == written(name) == f"k{england}\\U000e0041"


def test_a_literal_and_a_schemas_values_are_quoted_as_messages_quote_text() -> None:
    """Before, CD304's literal and value list were Python's repr (`"it's"`, `None`)."""
    from converge_dsl.frontend._dataschema import DataShape

    schema = {"enum": ["it's", None, 2]}
    shape = DataShape(schema, schema, "field", "the schema")
    assert shape.literal_problem("b\u200b") == (
        "enum",
        "'b\\u200b' is not one of its values ('it\\x27s', null, 2)",
    )
