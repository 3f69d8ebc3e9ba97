"""What the HTML pages share: how they show text they did not write (`page_text`) and
the names and ids in it (`page_name`)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl import _page_assets
from converge_dsl._page_assets import (
    _CUT_LINES,
    _NAMED_CLASS,
    _ZWJ_RUN,
    html_text,
    page_asset,
    page_json,
    page_name,
    page_text,
    shown_cut,
)


def test_the_pages_script_rewrites_the_class_page_name_does() -> None:
    script = page_asset("names.js")
    assert "@NAMED@" not in script
    assert "@ZWJ_SEQUENCES@" not in script
    assert f"/{_NAMED_CLASS}/g" in script


def test_another_version_of_a_file_is_written_in_alike() -> None:
    # (what bench/page_scroll.py compares the tree's names.js with)
    text = 'var CUT_LINES = "@CUT_LINES@", NAMED = /@NAMED@/g;'
    assert page_asset("names.js", text) == (
        f'var CUT_LINES = "{_CUT_LINES}", NAMED = /{_NAMED_CLASS}/g;'
    )
    assert page_asset("page.css", "@CUT_LINES@{}") == _CUT_LINES + "{}"


def test_the_boxes_with_room_for_marks_are_named_once() -> None:
    # marks.css named its ten boxes in three rules (their room, their height, their scroll
    # timeline): a box added to one list and not the others had room and no height.
    rules = re.sub(r"/\*.*?\*/", "", page_asset("marks.css"), flags=re.S)
    boxes = "header h1,.pane h3,.card .name,.side td pre,.side .fact-name,td .id,td .few"
    assert rules.count(boxes) == 1
    for box in ("header h1", ".side td pre", "#details dd", ".detail dd"):
        assert rules.count(box) == 1, box


def test_the_lines_cut_with_an_ellipsis_are_listed_once() -> None:
    # page.css listed them twice and names.js a third time: a line added to page.css and
    # not to names.js was cut by the browser only, its start hidden.
    style, script = page_asset("page.css"), page_asset("names.js")
    assert "@CUT_LINES@" not in style + script
    rules = re.sub(r"/\*.*?\*/", "", style, flags=re.S)
    assert rules.count(_CUT_LINES + "{") == 1
    assert rules.count(f":where({_CUT_LINES})" + "{") == 1
    assert f'var CUT_LINES = "{_CUT_LINES}";' in script
    written = (Path(_page_assets.__file__).parent / "page.css").read_text(encoding="utf-8")
    assert ".matrix th" not in re.sub(r"/\*.*?\*/", "", written, flags=re.S)  # named once


def test_control_and_bidi_characters_show_as_their_escapes() -> None:
    text = "a\u202eb\x07c\x1b[31m\td\ne\u2066f\x00\x7f\x85"
    assert page_text(text) == "a\\u202eb\\x07c\\x1b[31m\td\ne\\u2066f\\x00\\x7f\\x85"
    assert page_text("plain, \u00e9t\u00e9 \u65e5\u672c") == "plain, \u00e9t\u00e9 \u65e5\u672c"


def test_a_name_shows_its_hidden_characters_apart_from_their_escape_text() -> None:
    # A fact id holding a real U+202E and one holding the six characters `\u202e`
    # looked the same on a page.
    assert page_name("r\u202eev") == "r\u27e8U+202E\u27e9ev"
    assert page_name("r\\u202eev") == "r\\u202eev"
    assert (
        page_name("a\x07\x00\x85\u2066b")
        == "a\u27e8U+0007\u27e9\u27e8U+0000\u27e9\u27e8U+0085\u27e9\u27e8U+2066\u27e9b"
    )
    assert page_name("plain, \u00e9t\u00e9 \u65e5\u672c") == "plain, \u00e9t\u00e9 \u65e5\u672c"


def _page_text_everywhere(value: Any) -> Any:
    if isinstance(value, str):
        return page_text(value)
    if isinstance(value, dict):
        return {page_text(k): _page_text_everywhere(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_page_text_everywhere(v) for v in value]
    return value


def test_every_string_of_a_json_value_keys_too() -> None:
    value = {"k\u202e": ["x\u202a", 1, 0.5, None, True, {"y": "\x01"}]}
    expected = {"k\\u202e": ["x\\u202a", 1, 0.5, None, True, {"y": "\\x01"}]}
    assert json.loads(page_json(value)) == expected


# Text rich in what page_json rewrites in its JSON text: backslashes before b, f, r and
# u00, controls, DEL, C1, bidi controls, and the characters a script element must not hold.
_TRICKY = st.text(
    alphabet=st.sampled_from('ab\\bfru01x<>&"\n\t\r\b\f\x00\x1b\x7f\x85\u202e\u2066\u00e9'),
    max_size=12,
)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | _TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TRICKY, inner, max_size=4),
    max_leaves=12,
)


@given(_VALUES)
def test_page_json_reads_back_as_page_text_of_every_string(value: Any) -> None:
    text = page_json(value)
    assert not set("<>&") & set(text)
    assert json.loads(text) == _page_text_everywhere(value)


def test_html_text_is_page_text_then_escaped() -> None:
    assert html_text('<b a="1">\u202e&') == "&lt;b a=&quot;1&quot;&gt;\\u202e&amp;"


def test_page_json_is_inert_in_a_script_element_and_escapes_what_page_text_does() -> None:
    value = {"a": "</script><!--&", "b": ["\u202e", "\x08\x0c\x0d\x01", "\\b kept", "\t\n"]}
    text = page_json(value)
    assert "<" not in text
    assert ">" not in text
    assert "&" not in text
    assert json.loads(text) == {
        "a": "</script><!--&",
        "b": ["\\u202e", "\\x08\\x0c\\x0d\\x01", "\\b kept", "\t\n"],
    }
    assert page_json({"plain": ["x", 1]}) == '{"plain":["x",1]}'


def test_a_name_holding_the_notations_text_shows_apart_from_the_character() -> None:
    # `r⟨U+202E⟩ev` typed as text showed as the id holding the real U+202E.
    literal = "r\u27e8U+202E\u27e9ev"
    assert page_name(literal) == "r\u27e8U+27E8\u27e9U+202E\u27e9ev"
    assert page_name(literal) != page_name("r\u202eev")


def test_a_name_is_one_line_and_shows_the_characters_that_show_as_nothing() -> None:
    # `a\nb` and `a\tb` both showed `a b`, `z\u200bz` and `zz` both `zz`.
    assert page_name("a\nb\tc") == "a\u27e8U+000A\u27e9b\u27e8U+0009\u27e9c"
    for hidden in "\u00ad\u061c\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u2060\ufeff":
        assert page_name(f"z{hidden}z") == f"z\u27e8U+{ord(hidden):04X}\u27e9z"
    assert page_name("caf\u00e9 \u00e0 z") == "caf\u00e9 \u00e0 z"
    # Messages and contents keep newline and tab (`page_text`).
    assert page_text("a\nb\tc\u200b") == "a\nb\tc\u200b"


MAN, WOMAN, GIRL = "\U0001f468", "\U0001f469", "\U0001f467"
ZWJ, SHOWN_ZWJ = "\u200d", "\u27e8U+200D\u27e9"
# A zero-width joiner inside one of Unicode's emoji ZWJ sequences is kept (drawn as one
# picture), marked anywhere else, between two emoji too (pizza, ZWJ, pizza looks as two
# pizzas do); the pages' `shownName` is checked against the same cases
# (tests/runtime/test_report_browser_names.py).
ZWJ_CASES = (
    (f"{MAN}{ZWJ}{WOMAN}{ZWJ}{GIRL}", f"{MAN}{ZWJ}{WOMAN}{ZWJ}{GIRL}"),  # a family
    ("\U0001f3f3\ufe0f\u200d\U0001f308", "\U0001f3f3\ufe0f\u200d\U0001f308"),  # rainbow flag
    ("\U0001f9d1\U0001f3fd\u200d\U0001f680", "\U0001f9d1\U0001f3fd\u200d\U0001f680"),  # skin tone
    ("\u2764\ufe0f\u200d\U0001f525", "\u2764\ufe0f\u200d\U0001f525"),  # from the BMP
    (
        f"team {MAN}{ZWJ}{WOMAN}{ZWJ}{GIRL} a{ZWJ}b",
        f"team {MAN}{ZWJ}{WOMAN}{ZWJ}{GIRL} a{SHOWN_ZWJ}b",
    ),
    (f"{MAN}{ZWJ}{WOMAN}", f"{MAN}{SHOWN_ZWJ}{WOMAN}"),  # a family of two adults is none
    (f"a{ZWJ}b", f"a{SHOWN_ZWJ}b"),  # between letters
    (f"{ZWJ}{WOMAN}", f"{SHOWN_ZWJ}{WOMAN}"),  # at the ends
    (f"{MAN}{ZWJ}", f"{MAN}{SHOWN_ZWJ}"),
    (ZWJ, SHOWN_ZWJ),
    (f"{MAN}{ZWJ}a", f"{MAN}{SHOWN_ZWJ}a"),  # an emoji and a letter
    (f"a{ZWJ}{WOMAN}", f"a{SHOWN_ZWJ}{WOMAN}"),
    (f"{MAN}{ZWJ}{ZWJ}{WOMAN}", f"{MAN}{SHOWN_ZWJ}{SHOWN_ZWJ}{WOMAN}"),  # two joiners
    (f"\ufe0f{ZWJ}{WOMAN}", f"\ufe0f{SHOWN_ZWJ}{WOMAN}"),  # a selector joined to nothing
    (f"{MAN}{ZWJ}\ufe0f{WOMAN}", f"{MAN}{SHOWN_ZWJ}\ufe0f{WOMAN}"),
    (f"{MAN}\u200b{WOMAN}", f"{MAN}\u27e8U+200B\u27e9{WOMAN}"),  # other hidden ones still shown
    (f"{MAN}{ZWJ}\u202e{WOMAN}", f"{MAN}{SHOWN_ZWJ}\u27e8U+202E\u27e9{WOMAN}"),
    # two emoji a joiner makes no sequence of: each would look as the pair without it
    ("\U0001f355\u200d\U0001f355", "\U0001f355\u27e8U+200D\u27e9\U0001f355"),
    ("\u00a9\u200d\u00a9", "\u00a9\u27e8U+200D\u27e9\u00a9"),
    ("\u2194\u200d\u2195", "\u2194\u27e8U+200D\u27e9\u2195"),
    ("\U0001f130\u200d\U0001f131", "\U0001f130\u27e8U+200D\u27e9\U0001f131"),
    ("\U0001f1fa\u200d\U0001f1f8", "\U0001f1fa\u27e8U+200D\u27e9\U0001f1f8"),
    ("ok\U0001f600\u200d\U0001f600", "ok\U0001f600\u27e8U+200D\u27e9\U0001f600"),
    # a sequence and one more joined face: the run is no sequence, each joiner is marked
    (
        f"{MAN}{ZWJ}{WOMAN}{ZWJ}{GIRL}{ZWJ}{GIRL}{ZWJ}{GIRL}",
        SHOWN_ZWJ.join([MAN, WOMAN, GIRL, GIRL, GIRL]),
    ),
    (f"a{ZWJ}{MAN}{ZWJ}{WOMAN}{ZWJ}{GIRL}", SHOWN_ZWJ.join(["a", MAN, WOMAN, GIRL])),
    # skin tones: any at each place of a sequence that takes them
    ("\U0001f469\U0001f3fb\u200d\U0001f9b0", "\U0001f469\U0001f3fb\u200d\U0001f9b0"),
    ("\U0001f9d1\U0001f3fb\u200d\U0001f91d\u200d\U0001f9d1\U0001f3ff",) * 2,
    # a lone surrogate (JSON may carry one) joined to an emoji
    ("\udc68\u200d\U0001f469", "\udc68\u27e8U+200D\u27e9\U0001f469"),
    ("\ud83d\u200d\U0001f469", "\ud83d\u27e8U+200D\u27e9\U0001f469"),
)


def test_a_joiner_in_an_emoji_sequence_shows_as_it_is_and_is_marked_elsewhere() -> None:
    # A family (man, ZWJ, woman, ZWJ, girl) showed as three faces and two ⟨U+200D⟩; then
    # any two emoji kept their joiner, so `🍕‍🍕` looked as `🍕🍕` does.
    for text, shown in ZWJ_CASES:
        assert page_name(text) == shown, text


# Where a shown name may be cut short (a graph node's label): (the text, a place in code
# points, what is kept). Between grapheme clusters only, and not inside a notation; the
# graph page's `shownCut` (names.js, Intl.Segmenter) is checked against the same cases
# (tests/graph/test_browser_scripts.py).
FAMILY = f"{MAN}{ZWJ}{WOMAN}{ZWJ}{GIRL}"
CUT_CASES = (
    ("abcdef", 3, "abc"),
    ("abcdef", 10, "abcdef"),
    (f"ab{FAMILY}c", 4, "ab"),  # a family, after its man and joiner
    (f"ab{FAMILY}c", 7, f"ab{FAMILY}"),
    ("\U0001f1fa\U0001f1f8\U0001f1eb\U0001f1f7", 3, "\U0001f1fa\U0001f1f8"),  # two flags
    ("\U0001f1fa\U0001f1f8", 1, ""),
    ("1\ufe0f\u20e32", 2, ""),  # a keycap
    ("1\ufe0f\u20e32", 3, "1\ufe0f\u20e3"),
    ("x\U0001f44d\U0001f3fd", 2, "x"),  # a skin tone
    ("x\U0001f9d1\U0001f3fd\u200d\U0001f680y", 4, "x"),  # an astronaut of a skin tone
    ("\u2764\ufe0fx", 1, ""),  # an emoji's presentation selector
    ("\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f!", 3, ""),
    ("\u0e17\u0e35\u0e48\u0e19\u0e31\u0e48\u0e07", 2, ""),  # Thai ที่นั่ง
    ("\u0e17\u0e35\u0e48\u0e19\u0e31\u0e48\u0e07", 5, "\u0e17\u0e35\u0e48"),
    ("\u0e01\u0e33x", 1, ""),  # Thai's sara am, a spacing mark
    ("\u0915\u094d\u0937\u0924", 2, ""),  # Devanagari's conjunct क्ष
    ("\u0915\u094d\u0937\u0924", 3, "\u0915\u094d\u0937"),
    ("\u1100\u1161\u11a8\u1100", 2, ""),  # Hangul's jamo
    ("a" + "\u0301" * 5 + "b", 3, ""),  # stacked marks
    ("a\u27e8U+200D\u27e9b", 5, "a"),  # not inside a notation
    ("a\u27e8U+200D\u27e9b", 9, "a\u27e8U+200D\u27e9"),
    ("\ud83dx", 1, "\ud83d"),  # a lone surrogate (JSON may carry one)
    # where hand-written rules over Python's own tables cut elsewhere than the browser:
    ("\u0600\u0628x", 1, ""),  # a prepended sign (Arabic's number sign) joins what follows
    ("\u06dd\u0661x", 1, ""),
    ("\uff76\uff9ex", 1, ""),  # a halfwidth voiced mark, not of category Mn, Mc, Me
    ("\u0c95\u0cf3x", 1, ""),  # a mark of Unicode 15 (Kannada's), unknown to Python 3.11
    ("\u1000\u1039\u1000", 2, ""),  # Myanmar's conjunct
    ("\u1780\u17d2\u1780", 2, ""),  # Khmer's
    ("\u0915\u094d\u0905", 2, "\u0915\u094d"),  # a vowel letter after a virama: apart
    ("a\r\nb", 2, "a"),  # CR LF, one cluster
    ("\U0001f600\u200d\u200d\U0001f600", 3, "\U0001f600\u200d\u200d"),  # two joiners join nothing
)


def test_a_shown_name_is_cut_between_grapheme_clusters() -> None:
    # A graph node's label cut at 47 characters split a family into a man and a joiner,
    # a flag into a letter, a keycap from its digit, a Thai letter from its marks.
    for text, at, kept in CUT_CASES:
        assert text[: shown_cut(text, at)] == kept, (text, at)


def test_the_table_of_emoji_sequences_is_the_emoji_package_s() -> None:
    # The table is written by bench/emoji_zwj_table.py from `emoji`, not a dependency.
    pytest.importorskip("emoji")
    path = Path(__file__).resolve().parent.parent / "bench" / "emoji_zwj_table.py"
    spec = importlib.util.spec_from_file_location("bench_emoji_zwj_table", path)
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    sequences = bench.rgi_zwj_sequences()
    assert bench.TABLE.read_text(encoding="utf-8") == bench.table_text(sequences)
    assert all(page_name(s) == s for s in sequences)
    assert all(_ZWJ_RUN.fullmatch(s) for s in sequences)


def test_the_dark_header_is_written_once_in_the_shared_style() -> None:
    from pathlib import Path

    import converge_dsl

    root = Path(converge_dsl.__file__).parent
    styles = [
        root / "batch" / "page.css",
        root / "runtime" / "_report_assets" / "report.css",
        root / "pipetest" / "_html_assets" / "page.css",
    ]
    rules = re.compile(
        r"header\{[^}]*background|header h1\{[^}]*font-size|header \.stat\{[^}]*color"
    )
    assert len(rules.findall(page_asset("page.css"))) == 3
    for style in styles:
        assert not rules.search(style.read_text(encoding="utf-8")), style


def test_names_is_its_joined_text_and_shows_each_name_as_names_show() -> None:
    import copy
    import pickle

    from converge_dsl._page_assets import Names

    found = Names(("a\u202e", "b"), before="model ", after=".")
    assert found == "model a\u202e, b."  # the text wherever text is read
    assert found.shown() == "model a\u27e8U+202E\u27e9, b."
    assert Names((), "no key").shown() == Names((), "no key") == "no key"
    for kept in (copy.deepcopy(found), pickle.loads(pickle.dumps(found))):
        assert (kept, kept.shown()) == (found, found.shown())
