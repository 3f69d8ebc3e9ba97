"""What the HTML pages share: how they show text they did not write (`page_text`)."""

from __future__ import annotations

from converge_dsl._page_assets import html_text, page_data, page_text


def test_control_and_bidi_characters_show_as_their_escapes() -> None:
    text = "a\u202eb\x07c\x1b[31m\td\ne\u2066f\x00\x7f\x85"
    assert page_text(text) == "a\\u202eb\\x07c\\x1b[31m\td\ne\\u2066f\\x00\\x7f\\x85"
    assert page_text("plain, \u00e9t\u00e9 \u65e5\u672c") == "plain, \u00e9t\u00e9 \u65e5\u672c"


def test_every_string_of_a_json_value_keys_too() -> None:
    value = {"k\u202e": ["x\u202a", 1, 0.5, None, True, {"y": "\x01"}]}
    assert page_data(value) == {"k\\u202e": ["x\\u202a", 1, 0.5, None, True, {"y": "\\x01"}]}


def test_html_text_is_page_text_then_escaped() -> None:
    assert html_text('<b a="1">\u202e&') == "&lt;b a=&quot;1&quot;&gt;\\u202e&amp;"


def test_page_json_is_inert_in_a_script_element_and_escapes_what_page_text_does() -> None:
    import json

    from converge_dsl._page_assets import page_json

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
