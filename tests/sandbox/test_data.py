"""Data in the sandbox: `fromjson`, `data_of`, fact fields, frozen objects, the JSON check."""

from __future__ import annotations

from typing import Any

import pytest

from converge_dsl.compiler import RenderScopes
from converge_dsl.engine import Context, Fact, PromotionRecord, ProposedFact, Provenance
from converge_dsl.engine.types import freeze_json
from converge_dsl.sandbox._names import ALLOWED_FILTERS, CONTEXT_NAMES, FACT_FIELDS
from converge_dsl.sandbox._templating import (
    GLOBALS,
    MAX_SIZE,
    TemplateRenderError,
    as_json_data,
    compile_expression,
    compile_template,
    evaluate,
    render,
)


def _fact(fid: str, data: Any, key: str = "tickets") -> Fact:
    record = PromotionRecord("auto", "engine", 1)
    return Fact(key, fid, f"text {fid}", Provenance("s@t"), 0.9, record, data=freeze_json(data))


def _render(source: str, **scope: Any) -> str:
    return render(compile_template(source), {**GLOBALS, **scope})


def _error(source: str, **scope: Any) -> TemplateRenderError:
    with pytest.raises(TemplateRenderError) as caught:
        _render(source, **scope)
    return caught.value


def test_the_names_are_defined_once() -> None:
    assert "fromjson" in ALLOWED_FILTERS
    assert "data_of" in CONTEXT_NAMES
    assert FACT_FIELDS == ("id", "key", "content", "data", "confidence", "provenance")


def test_fromjson_parses_text_into_data() -> None:
    assert _render("{{ ('{\"a\": [1, 2]}' | fromjson).a | sum }}") == "3"
    value = evaluate(compile_expression("text | fromjson"), {**GLOBALS, "text": "[true, null]"})
    assert value == [True, None]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{'a': 1}", "fromjson: the text is not JSON: Expecting property name enclosed in"),
        ("[1, NaN]", "fromjson: the text is not JSON: NaN is not standard JSON"),
        (
            '["\\ud800"]',
            "fromjson: the text is not JSON: the text at /0 holds a lone surrogate (U+D800)",
        ),
        ("", "fromjson: the text is not JSON: Expecting value: line 1 column 1 (char 0)"),
    ],
)
def test_fromjson_of_bad_json_names_the_parser_error(text: str, message: str) -> None:
    error = _error("line one\n{{ text | fromjson }}", text=text)
    assert error.message.startswith(message)
    assert error.lineno == 2


def test_fromjson_is_bounded_and_wants_text() -> None:
    big = "[" + "1," * (MAX_SIZE // 2) + "1]"
    assert "JSON text of more than" in _error("{{ big | fromjson }}", big=big).message
    error = _error("{{ data | fromjson }}", data={"a": 1})
    assert error.message == "fromjson expects JSON text, got a dict"
    assert error.hint == "the value is already data: use it without fromjson"


def test_data_of_and_fact_fields_in_the_render_scope() -> None:
    facts = [_fact("t1", {"category": "bug"}), _fact("t2", None), _fact("t3", [1])]
    scope = RenderScopes(("tickets",)).scope(Context.from_facts(facts))
    assert "data_of" in RenderScopes(("tickets",)).names
    assert evaluate(compile_expression("data_of('tickets')"), scope) == [
        {"category": "bug"},
        None,
        (1,),
    ]
    assert evaluate(compile_expression("data_of('nothing')"), scope) == []
    source = (
        "{% for f in facts.tickets %}{{ f.id }}/{{ f.key }}/{{ f.content }}/{{ f.data }}/"
        "{{ f.confidence }}/{{ f.provenance.source }};{% endfor %}"
    )
    assert render(compile_template(source), scope) == (
        "t1/tickets/text t1/{'category': 'bug'}/0.9/s@t;"
        "t2/tickets/text t2/None/0.9/s@t;t3/tickets/text t3/(1,)/0.9/s@t;"
    )


def test_frozen_data_reads_by_attribute_and_by_item() -> None:
    item = freeze_json({"category": "bug", "tags": ["a"], "items": 3})
    assert _render("{{ item.category }} {{ item['category'] }} {{ item.tags[0] }}", item=item) == (
        "bug bug a"
    )
    assert _render("{{ item['items'] }} {{ item | tojson }}", item=item) == (
        '3 {"category": "bug", "items": 3, "tags": ["a"]}'
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "{{ f.contnet }}",
            "a fact has no field 'contnet' (did you mean 'content'?); "
            "fields: id, key, content, data, confidence, provenance",
        ),
        ("{{ f['dta'] }}", "a fact has no field 'dta' (did you mean 'data'?); fields: id,"),
        ("{{ [f] | map(attribute='nope') | join }}", "a fact has no field 'nope'; fields: id,"),
        ("{{ p.contnet }}", "a proposal has no field 'contnet' (did you mean 'content'?)"),
        (
            "{{ f.data.categroy }}",
            "the object has no field 'categroy' (did you mean 'category'?); fields: category",
        ),
    ],
)
def test_an_unknown_field_names_the_fields_not_the_class(source: str, message: str) -> None:
    proposal = ProposedFact("tickets", "p", "c")
    error = _error(source, f=_fact("t1", {"category": "bug"}), p=proposal)
    assert error.message.startswith(message)
    assert "converge_dsl" not in error.message


def test_missing_fields_stay_testable() -> None:
    f = _fact("t1", {"category": "bug"})
    source = "{{ f.contnet is defined }} {{ f.data.urgent | default('no') }}"
    assert _render(source, f=f) == "False no"


def test_as_json_data_converts_and_refuses() -> None:
    assert as_json_data(freeze_json({"a": [1, {"b": None}]})) == {"a": [1, {"b": None}]}
    with pytest.raises(TemplateRenderError, match=r"the key 1 at /x"):
        as_json_data({"x": {1: 2}})
    with pytest.raises(TemplateRenderError, match=r"a set at /a~1b/0"):
        as_json_data({"a/b": [{1}]})
    shared = ["x" * 1000] * 1000
    with pytest.raises(TemplateRenderError, match="data of more than"):
        as_json_data([shared] * 1000)  # a million references: refused before converting


def _two_walks(value: Any) -> Any:
    """What `json_data` gave before its plain walk: the size estimate, then the conversion."""
    from converge_dsl.sandbox._data import _convert
    from converge_dsl.sandbox._limits import MAX_SIZE, Limit, text_size

    if text_size(value, MAX_SIZE) > MAX_SIZE:
        raise Limit("too large")
    return _convert(value, "")


def _outcome(convert: Any, value: Any) -> tuple[str, Any]:
    try:
        result = convert(value)
    except Exception as exc:
        return type(exc).__name__, str(exc) if type(exc).__name__ != "Limit" else None
    return "ok", (type(result).__name__, result)


_NEAR = 1_000_000 - 2  # a string this long is exactly at the size bound


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, 2.5, None, True, "x"], "b": {"c": (1, 2)}},
        freeze_json({"tickets": ["T-1", "T-2"], "n": {"deep": [[{}]]}}),
        [1, float("nan")],
        {1: "key not text"},
        [{"a": object()}],
        "x" * _NEAR,
        "x" * (_NEAR + 1),
        ["x" * (_NEAR - 2)],
        ["x" * (_NEAR - 1)],
        [1.5] * 38_461,
        [1.5] * 38_462,
        [True, 2**100, -(2**64)],
    ],
)
def test_json_data_gives_what_the_two_walks_give(value: Any) -> None:
    from converge_dsl.sandbox._data import json_data

    assert _outcome(json_data, value) == _outcome(_two_walks, value)
