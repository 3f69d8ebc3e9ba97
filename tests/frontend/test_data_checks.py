"""Static checks of structured data: what key schemas let templates read, located exactly."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.frontend import _checks_data, check_document, load_text
from converge_dsl.frontend._dataschema import DataShape
from converge_dsl.frontend._templates import template_problems

TICKETS = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
keys:
  - name: tickets
    schema:
      type: object
      additionalProperties: false
      properties:
        category: {enum: [billing, tech]}
        urgency: {type: integer}
        tags: {type: array, items: {$ref: "#/$defs/tag"}}
      $defs:
        tag: {type: object, properties: {name: {type: string}}, additionalProperties: false}
seeds:
  - {id: t1, key: tickets, content: c, data: {category: billing}}
suggestors:
"""


def _diagnostics(suggestors: str, header: str = TICKETS) -> list[Diagnostic]:
    document = load_text(header + suggestors, "p.yaml")
    return list(check_document(document, None).diagnostics)


def _rule(content: str, when: str = "true") -> str:
    return (
        "  - name: r\n    kind: rule\n    dependencies: [tickets]\n"
        f"    when: {when!r}\n"
        f"    emit: [{{key: strategies, id: s, content: {content!r}}}]\n"
    )


_DATA_CODES = (codes.UNKNOWN_DATA_FIELD, codes.UNKNOWN_FACT_ATTRIBUTE, codes.DATA_NOT_VALID)


def _found(diagnostics: list[Diagnostic]) -> list[tuple[str, int, int, str | None]]:
    return [(d.code, d.line, d.column, d.hint) for d in diagnostics if d.code in _DATA_CODES]


@pytest.mark.parametrize(
    "template",
    [
        "{{ facts.tickets[0].data.categry }}",
        "{{ proposals.tickets[0].data.categry }}",
        "{% for t in facts.tickets %}{{ t.data.categry }}{% endfor %}",
        "{% for d in data_of('tickets') %}{{ d.categry }}{% endfor %}",
        "{% set t = facts.tickets | first %}{{ t.data.categry }}",
        "{{ (facts.tickets | sort(attribute='id') | last).data.categry }}",
        "{{ facts.tickets | map(attribute='data.categry') | join }}",
        "{{ facts.tickets | selectattr('data.categry') | list }}",
        "{{ fact('tickets', 't1').data['categry'] }}",
        "{% if true %}{{ data_of('tickets')[0].categry }}{% endif %}",
        "{{ data_of('ti' ~ 'ckets')[0].categry }}",
        "{% for d in data_of('tick' + ('et' ~ 's')) %}{{ d.categry }}{% endfor %}",
        "{{ facts['ti' ~ 'ckets'][0].data.categry }}",
        "{{ fact('ti' ~ 'ckets', 't1').data.categry }}",
    ],
)
def test_an_unknown_field_is_found_through_every_path(template: str) -> None:
    found = _found(_diagnostics(_rule(template)))
    assert [(code, hint) for code, _, _, hint in found] == [
        (codes.UNKNOWN_DATA_FIELD, "did you mean 'category'?")
    ]
    line = (TICKETS + _rule(template)).splitlines()[found[0][1] - 1]
    # the field's name, or the attribute string naming it (`map(attribute='data.categry')`)
    assert line[found[0][2] - 1 :].startswith(("categry", "'data.categry'"))


@pytest.mark.parametrize(
    "template",
    [
        "{{ fact('tickets', 't1').data['cat' ~ 'egry'] }}",
        "{{ fact('tickets', 't1').data['cat' + 'egry'] }}",
        "{{ facts.tickets[0].data[('c' ~ 'at') ~ 'egry'] }}",
        "{% if true %}{{ fact('tickets', 't1').data['cat' ~ 'egry'] }}{% endif %}",  # Jinja's
    ],
)
def test_a_data_field_joined_from_string_literals_is_read_as_their_join(template: str) -> None:
    """Before, `data['cat' ~ 'egry']` was not read at all: no finding where
    `data['categry']` has one. The caret is on the joined literals."""
    found = _found(_diagnostics(_rule(template)))
    assert [(code, hint) for code, _, _, hint in found] == [
        (codes.UNKNOWN_DATA_FIELD, "did you mean 'category'?")
    ]
    line = (TICKETS + _rule(template)).splitlines()[found[0][1] - 1]
    joined = template.split("data[")[1].split("]", maxsplit=1)[0].lstrip("(")
    assert line[found[0][2] - 1 :].startswith(joined)


@pytest.mark.parametrize(
    "template",
    [
        "{{ fact('tickets', 't1').data['categ' ~ 'ory'] }}",
        "{{ fact('tickets', 't1').data['cat' ~ inputs.x] }}",  # not constant: not read
        "{{ fact('tickets', 't1').data['cat' ~ 1] }}",
    ],
)
def test_a_data_field_joined_to_a_known_one_or_not_constant_is_no_finding(template: str) -> None:
    assert _found(_diagnostics(_rule(template))) == []


def _columns(template: str) -> list[tuple[str, int, str]]:
    """(code, column, the text from the caret on, cut at its first space) of each finding."""
    found = _found(_diagnostics(_rule(template)))
    lines = (TICKETS + _rule(template)).splitlines()
    return [
        (code, column, lines[line - 1][column - 1 :].split()[0]) for code, line, column, _ in found
    ]


@pytest.mark.parametrize("wrap", ["{}", "{{% if true %}}{}{{% endif %}}"], ids=["fast", "jinja"])
def test_two_findings_on_one_line_each_have_their_own_caret(wrap: str) -> None:
    """Before, each finding's caret was on the first place its text had on the line:
    the second and third `urgncy` on the first."""
    template = wrap.format(
        "{{ facts.tickets[0].data.urgncy }} {{ facts.tickets[0].data.categry }}"
        " {{ facts.tickets[0].data.urgncy }} {{ fact('tickets', 't1').data['urgncy'] }}"
    )
    found = _columns(template)
    assert [(code, text) for code, _, text in found] == [
        (codes.UNKNOWN_DATA_FIELD, "urgncy"),
        (codes.UNKNOWN_DATA_FIELD, "categry"),
        (codes.UNKNOWN_DATA_FIELD, "urgncy"),
        (codes.UNKNOWN_DATA_FIELD, "urgncy']"),
    ]
    assert len({column for _, column, _ in found}) == 4
    assert [column for _, column, _ in found] == sorted(column for _, column, _ in found)


@pytest.mark.parametrize("wrap", ["{}", "{{% if true %}}{}{{% endif %}}"], ids=["fast", "jinja"])
def test_a_finding_after_a_valid_read_of_its_name_on_the_line_is_marked_itself(wrap: str) -> None:
    template = wrap.format(
        "{{ facts.tickets[0].data.tags[0].name }} {{ facts.tickets[0].data.name }}"
        " {{ facts.seeds[0].contnet.x }} {{ facts.seeds[0].contnet }}"
    )
    found = _columns(template)
    line = (TICKETS + _rule(template)).splitlines()[-1]
    assert found == [
        (codes.UNKNOWN_DATA_FIELD, line.index("data.name") + 6, "name"),
        (codes.UNKNOWN_FACT_ATTRIBUTE, line.index("contnet") + 1, "contnet.x"),
        (codes.UNKNOWN_FACT_ATTRIBUTE, line.rindex("contnet") + 1, "contnet"),
    ]


def test_reads_are_told_apart_in_the_order_written() -> None:
    """A conditional expression is walked as written (`a if b else c`), a loop's filter
    before its body, a method's object before its arguments."""
    data = "facts.tickets[0].data"
    template = (
        f"{{{{ {data}.urgncy if {data}.categry else {data}.urgncy }}}}"
        f"{{% for t in facts.tickets if t.data.urgncy %}}{{{{ t.data.urgncy }}}}{{% endfor %}}"
        f"{{{{ {data}.get({data}.urgncy) }}}}"
    )
    found = _columns(template)
    assert [text for *_, text in found] == ["urgncy", "categry", *["urgncy"] * 3, "urgncy)"]
    assert [column for _, column, _ in found] == sorted({column for _, column, _ in found})


def test_nested_arrays_and_objects_are_followed() -> None:
    found = _found(_diagnostics(_rule("{{ facts.tickets[0].data.tags[0].nme }}")))
    assert [hint for *_, hint in found] == ["did you mean 'name'?"]


@pytest.mark.parametrize(
    "schema",
    [
        "{type: object, properties: {category: {type: string}}}",  # open object
        "{type: object, additionalProperties: false, patternProperties: {x: {}}}",
        "{anyOf: [{properties: {categry: {}}, additionalProperties: false}, {type: object}]}",
        "{allOf: [{properties: {categry: {}}}, {additionalProperties: false}]}",
        "{$ref: '#/$defs/t', $defs: {t: {properties: {categry: {}}, additionalProperties: false}}}",
    ],
)
def test_what_the_schema_allows_is_not_an_error(schema: str) -> None:
    start = TICKETS.split("keys:", maxsplit=1)[0]
    header = f"{start}keys:\n  - name: tickets\n    schema: {schema}\nsuggestors:\n"
    assert _found(_diagnostics(_rule("{{ facts.tickets[0].data.categry }}"), header)) == []


def test_one_of_knows_a_field_if_any_branch_does() -> None:
    shape = DataShape(
        root := {
            "oneOf": [
                {"properties": {"a": {}}, "additionalProperties": False},
                {"properties": {"b": {}}, "additionalProperties": False},
            ]
        },
        root,
        "x",
    )
    assert shape.field("a")[0] is True
    assert shape.field("b")[0] is True
    assert shape.field("c")[0] is False


def test_fact_attributes_are_checked_even_without_schemas() -> None:
    found = _found(
        _diagnostics(_rule("{% for fact in facts.seeds %}{{ fact.contnet }}{% endfor %}"))
    )
    assert found[0][0] == codes.UNKNOWN_FACT_ATTRIBUTE
    assert found[0][3] is not None
    assert "'content'" in found[0][3]
    assert "Fact" not in found[0][3]


def test_literal_comparisons_warn() -> None:
    when = "facts.tickets[0].data.category == 'biling' or facts.tickets[0].data.urgency != '3'"
    found = _diagnostics(_rule("c", when=when))
    line = (TICKETS + _rule("c", when=when)).splitlines()[found[0].line - 1]
    warnings = [(d.code, d.column) for d in found if d.code in ("CD304", "CD305")]
    assert warnings == [
        (codes.OUTSIDE_ENUM, line.index("'biling'") + 1),
        (codes.MISMATCHED_LITERAL, line.index("'3'") + 1),
    ]


def test_llm_item_is_checked_against_output_schema_first() -> None:
    llm = (
        "  - name: ask\n    kind: llm\n    model: m\n    target: tickets\n"
        "    prompt: {user: hi}\n"
        "    output: {format: json, schema: {type: object, additionalProperties: false,"
        " properties: {label: {type: string}}}, content: '{{ item.category }}',"
        " data: \"{'category': item.label, 'x': item.lable}\"}\n"
    )
    header = TICKETS.replace("seeds:", "models:\n  m: {adapter: scripted, script: s.yaml}\nseeds:")
    found = [(c, h) for c, _, _, h in _found(_diagnostics(llm, header))]
    assert found == [
        (codes.UNKNOWN_DATA_FIELD, "its fields: label"),
        (codes.UNKNOWN_DATA_FIELD, "did you mean 'label'?"),
    ]


def test_constant_emit_data_is_checked_and_expressions_are_not() -> None:
    rule = (
        "  - name: r\n    kind: rule\n    emit:\n"
        "      - {key: tickets, id: a, content: c, data: \"{'category': 'bill'}\"}\n"
        "      - {key: tickets, id: b, content: c, data: \"{'category': fact('x', 'y').id}\"}\n"
    )
    found = [d for d in _diagnostics(rule) if d.code == codes.DATA_NOT_VALID]
    assert len(found) == 1
    assert "at /category" in found[0].message


def test_unknown_filters_and_tests_do_not_crash_jinja_templates() -> None:
    document = load_text("a: '{% if x is frob %}{{ y | nofilter }}{% endif %}'\n", "p.yaml")
    found = list(
        template_problems(
            document,
            ("a",),
            document.data["a"],
            expression=False,
            names=frozenset({"x", "y"}),
            inputs=None,
        )
    )
    assert [d.code for d in found] == [codes.UNKNOWN_FILTER, codes.UNKNOWN_TEST]


def test_fields_inside_block_scalars_are_located_on_their_line() -> None:
    rule = (
        "  - name: r\n    kind: rule\n    emit:\n      - key: strategies\n        id: s\n"
        "        content: |\n          first line\n"
        "          {% for t in facts.tickets %}\n            {{ t.data.urgncy }}\n"
        "          {% endfor %}\n"
    )
    found = _found(_diagnostics(rule))
    text: Any = (TICKETS + rule).splitlines()
    assert len(found) == 1
    assert text[found[0][1] - 1].strip() == "{{ t.data.urgncy }}"
    assert text[found[0][1] - 1][found[0][2] - 1 :].startswith("urgncy")


@pytest.mark.parametrize(
    ("schema", "code"),
    [
        ("{$dynamicRef: '#nowhere'}", codes.KEY_SCHEMA_DANGLING_REF),
        ("{$recursiveRef: 'https://x/y'}", codes.KEY_SCHEMA_REMOTE_REF),
        ("{$ref: '#nowhere'}", codes.KEY_SCHEMA_DANGLING_REF),
    ],
)
def test_a_key_schema_with_only_a_dynamic_or_recursive_reference_is_checked(
    schema: str, code: str
) -> None:
    start = TICKETS.split("keys:", maxsplit=1)[0]
    header = f"{start}keys:\n  - name: tickets\n    schema: {schema}\nsuggestors: []\n"
    assert [d.code for d in _diagnostics("", header) if d.severity == "error"] == [code]


@pytest.mark.parametrize(
    ("draft", "codes_found"),
    [
        ("http://json-schema.org/draft-03/schema#", []),
        ("http://json-schema.org/draft-04/schema#", [codes.DATA_NOT_VALID]),
    ],
)
def test_a_key_schema_of_an_older_draft_is_checked_in_it_and_nothing_is_fetched(
    draft: str, codes_found: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import jsonschema_rs

    def unknown(schema: Any) -> bool:  # jsonschema-rs would fetch a draft it lacks
        if "draft-03" in str(schema.get("$schema")):
            raise AssertionError("asked jsonschema-rs about a draft it would fetch")
        return bool(meta(schema))

    meta = jsonschema_rs.meta.is_valid
    monkeypatch.setattr(jsonschema_rs.meta, "is_valid", unknown)
    start = TICKETS.split("keys:", maxsplit=1)[0]
    schema = f"{{$schema: '{draft}', type: string, maxLength: 1}}"
    header = (
        f"{start}keys:\n  - name: tickets\n    schema: {schema}\n"
        "seeds:\n  - {id: t1, key: tickets, content: c, data: long}\nsuggestors: []\n"
    )
    found = [d.code for d in _diagnostics("", header) if d.severity == "error"]
    assert found == codes_found


LLM = """\
  - name: scan
    kind: llm
    model: m
    dependencies: [tickets]
    target: strategies
    prompt: {user: go}
    output:
      format: json
      schema:
        type: array
        items: {type: object, properties: {share: {type: numbr, minimum: x}}}
      id: "s-{{ index }}"
"""


def test_an_llm_output_schema_is_read_against_the_meta_schema() -> None:
    # It passed validate; the run then failed to compile it, located at the schema's root.
    header = TICKETS.replace("seeds:", "models: {m: {adapter: scripted, script: m.yaml}}\nseeds:")
    found = [
        (d.code, d.line, d.column, d.message, d.hint)
        for d in _diagnostics(LLM, header)
        if d.code == codes.KEY_SCHEMA_INVALID
    ]
    where = "output.schema: the schema is not valid JSON Schema 2020-12 at /items/properties/share"
    assert found == [
        (
            "CD109",
            29,
            58,
            f"{where}/type: 'numbr' is not valid under any of the given schemas",
            "did you mean 'number'?",
        ),
        (
            "CD109",
            29,
            74,
            f"{where}/minimum: 'x' is not of type 'number'",
            "see https://json-schema.org/draft/2020-12/json-schema-validation",
        ),
    ]


def test_a_place_the_meta_schema_reaches_by_several_paths_is_one_error() -> None:
    header = TICKETS.replace("urgency: {type: integer}", "urgency: {type: integer, items: 3}")
    found = [d for d in _diagnostics(_rule("x"), header) if d.code == codes.KEY_SCHEMA_INVALID]
    assert [(d.line, d.column) for d in found] == [(11, 41)]


@pytest.mark.parametrize("findings", [100, 400])
def test_locating_many_findings_of_one_line_reads_it_once(
    findings: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, each finding's caret read its line again from its start, up to its own
    occurrence: n findings of `['field']` on one line made n*n/2 reads of a subscript
    (4000 took 44 s). Now the marks of a line are found once: a few reads a finding."""
    from converge_dsl.frontend import _joined_keys

    real = _joined_keys.argument
    calls = []

    def counted(text: str, start: int) -> tuple[str, tuple[int, int]] | None:
        calls.append(start)
        return real(text, start)

    monkeypatch.setattr(_joined_keys, "argument", counted)
    template = " ".join(["{{ fact('tickets','t1').data['urgncy'] }}"] * findings)
    found = _found(_diagnostics(_rule(template)))
    assert len(found) == findings
    assert len({column for _, _, column, _ in found}) == findings
    assert len(calls) <= 2 * findings


@pytest.mark.parametrize("wrap", ["{}", "{{% if true %}}{}{{% endif %}}"])
def test_an_attribute_strings_finding_is_marked_on_it_and_takes_no_others_caret(
    wrap: str,
) -> None:
    """Before, a finding read through a filter's attribute string was not counted among
    the reads of its line and was found by the field's bare name: both findings below
    were marked inside `'data.urgncy'`. Now each has its own caret."""
    template = wrap.format(
        "{{ facts.tickets | map(attribute='data.urgncy') | list }} "
        "{{ facts.tickets[0].data.urgncy }} {{ facts.tickets | selectattr('data.urgncy') }}"
    )
    found = _columns(template)
    assert [text for _, _, text in found] == ["'data.urgncy')", "urgncy", "'data.urgncy')"]
    assert len({column for _, column, _ in found}) == 3


@pytest.mark.parametrize("wrap", ["{}", "{{% if true %}}{}{{% endif %}}"])
def test_each_literal_finding_on_one_line_has_its_own_caret(wrap: str) -> None:
    """Before, a literal's finding (CD304, CD305, CD255) was marked on the first text of
    that literal on its line: a second `== 'bill'`, or one after a `{{ 'bill' }}`, was
    marked on the first."""
    data = "facts.tickets[0].data"
    template = wrap.format(
        f"{{{{ 'bill' }}}} {{{{ {data}.category == 'bill' }}}} {{{{ {data}.category == 'bill' }}}}"
    )
    document = TICKETS + _rule(template)
    found = [d for d in _diagnostics(_rule(template)) if d.code == codes.OUTSIDE_ENUM]
    line = document.splitlines()[found[0].line - 1]
    first = line.index("'bill'")
    assert [d.column - 1 for d in found] == [
        line.index("'bill'", first + 1),
        line.rindex("'bill'"),
    ]


@pytest.mark.parametrize("wrap", ["{}", "{{% if true %}}{}{{% endif %}}"])
def test_a_field_joined_across_lines_is_marked_on_its_first_literal(wrap: str) -> None:
    """Before, `data['a' ~` and `'bx']` on two lines of a `|` block got a whole-line caret."""
    data = "fact('tickets','t1').data"
    template = wrap.format(f"{{{{ {data}['cat' ~\n 'egry'] }}}}")
    body = "\n".join("          " + line for line in template.split("\n"))
    assert _first_literal_marked(f"|\n{body}") == "'cat' ~"


def _first_literal_marked(content: str) -> str:
    """The text from the caret of the one data finding of `content` to its line's end."""
    rule = (
        "  - name: r\n    kind: rule\n    dependencies: [tickets]\n    when: 'true'\n"
        f"    emit:\n      - key: strategies\n        id: s\n        content: {content}\n"
    )
    (found,) = _found(_diagnostics(rule))
    return (TICKETS + rule).splitlines()[found[1] - 1][found[2] - 1 :]


@pytest.mark.parametrize(
    "literal", ["true", "True", "none", "2.50", "1_0", "0x10", "1e3", "1_0.2_5"]
)
@pytest.mark.parametrize("wrap", ["{}", "{{% if true %}}{}{{% endif %}}"], ids=["fast", "jinja"])
def test_a_literal_written_otherwise_than_python_writes_it_has_its_own_caret(
    wrap: str, literal: str
) -> None:
    """Before, `== true` or `== 2.50` (Python's `True`, `2.5`) was not found in the
    template, and the caret covered the whole template."""
    data = "facts.tickets[0].data"
    template = wrap.format(f"{{{{ {data}.urgency }}}} {{{{ {data}.category == {literal} }}}}")
    (found,) = [d for d in _diagnostics(_rule(template)) if d.code == codes.OUTSIDE_ENUM]
    line = (TICKETS + _rule(template)).splitlines()[found.line - 1]
    assert line[found.column - 1 : found.end_column - 1] == literal
    assert line[: found.column - 1].endswith("== ")


@pytest.mark.parametrize(
    "literal",
    ["'b\\x69ll'", '"bill"', "'b\\u0069ll'", "'bi\\154l'", "'b\\N{LATIN SMALL LETTER I}ll'"],
)
@pytest.mark.parametrize("wrap", ["{}", "{{% if true %}}{}{{% endif %}}"], ids=["fast", "jinja"])
def test_a_string_literal_written_with_escapes_has_its_own_caret(wrap: str, literal: str) -> None:
    """Before, `== 'b\\x69ll'` (Jinja's `'bill'`) was searched for as `'bill'`, not found,
    and the caret covered the whole template."""
    data = "facts.tickets[0].data"
    template = wrap.format(
        f"{{{{ {data}.category == 'x' }}}} {{{{ {data}.category == {literal} }}}}"
    )
    found, lines = _enum_findings_of_block(template)
    assert [lines[d.line - 1][d.column - 1 : d.end_column - 1] for d in found] == ["'x'", literal]


def _enum_findings_of_block(template: str) -> tuple[list[Diagnostic], list[str]]:
    """The CD304 findings of a rule emitting `template` as a `|` block, and the file's lines."""
    rule = (
        "  - name: r\n    kind: rule\n    dependencies: [tickets]\n    when: 'true'\n"
        "    emit:\n      - key: strategies\n        id: s\n"
        f"        content: |\n          {template}\n"
    )
    found = [d for d in _diagnostics(rule) if d.code == codes.OUTSIDE_ENUM]
    return found, (TICKETS + rule).splitlines()


class _Document:
    def template_span(self, path: Any, lineno: int) -> str:
        return "the line"


def test_a_needle_not_found_is_searched_for_once_whatever_the_findings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, each finding whose text was not on its line searched the whole template
    again: 4000 findings of one line took seconds."""
    searches: list[str] = []
    marks = _checks_data._marks

    def counted(text: str, needle: str, begin: int) -> Any:
        searches.append(needle)
        return marks(text, needle, begin)

    monkeypatch.setattr(_checks_data, "_marks", counted)
    facts = SimpleNamespace(document=_Document())
    site = SimpleNamespace(text="{{ x == 'a' }}\n" * 500, path=("p",), expression=False)
    locate = _checks_data._Locator(facts, site)  # type: ignore[arg-type]
    for occurrence in range(1000):
        for needle in ("'b'", "=True"):
            assert locate(1, needle, occurrence) == "the line"
    assert sorted(searches) == ["=True", "=True"]  # its line's, then all (a literal: none)


@pytest.mark.parametrize(
    "content",
    [
        ">\n          {{ fact('tickets','t1').data['cat' ~\n          'egry'] }}",
        "\"{{ fact('tickets','t1').data['cat' ~\n          'egry'] }}\"",
        "x {{ fact('tickets','t1').data['cat' ~\n          'egry'] }}",
    ],
    ids=["folded", "double-quoted", "plain"],
)
def test_a_field_joined_across_lines_of_a_folding_scalar_is_marked_on_its_first_literal(
    content: str,
) -> None:
    """Before, a folded or flow scalar's line break is a space of the template: the span
    from the first quote to the last crossed the file's lines, and the caret covered the
    whole first line."""
    assert _first_literal_marked(content) == "'cat' ~"


def test_many_literal_findings_of_one_line_read_its_literals_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, each literal's finding read every quote of its line again: 1,000
    `category == 'vN'` on one line made 1,000,000 reads of a literal (3,000 took 50 s).
    Now the template's literals are read once, and each finding looks its value up."""
    from converge_dsl.frontend import _jinja_strings

    real = _jinja_strings.unescape
    calls: list[str] = []

    def counted(literal: str) -> str | None:
        calls.append(literal)
        return real(literal)

    monkeypatch.setattr(_jinja_strings, "unescape", counted)
    when = " or ".join(f"facts.tickets[0].data.category == 'v{n}'" for n in range(1000))
    found = [d for d in _diagnostics(_rule("c", when=when)) if d.code == codes.OUTSIDE_ENUM]
    assert len({d.column for d in found}) == 1000
    assert len(calls) <= 2 * 1000


@pytest.mark.parametrize(
    ("template", "marked"),
    [
        ("{{ d.category == \"x 'bill' y\" or d.category == 'bill' }}", ["\"x 'b", "'bill' }"]),
        ("{{ d.category in ['tech', ', '] }}", ["', '] }"]),
        ("{# 'bill' #}{% raw %}'bill'{% endraw %}{{ d.category == 'bill' }}", ["'bill' }"]),
    ],
    ids=["inside-another", "between-two", "comment-and-raw"],
)
def test_a_literal_is_marked_where_jinja_reads_one(template: str, marked: list[str]) -> None:
    """Before, any quote opened a literal: `'bill'` inside `"x 'bill' y"`, the `', '`
    from the closing quote of `'tech'`, or a `'bill'` in a comment or a raw block got
    the caret of a later literal. Now the literals are Jinja's lexer's."""
    template = template.replace("d.", "facts.tickets[0].data.")
    found, lines = _enum_findings_of_block(template)
    assert len(found) == len(marked)
    shown = [lines[d.line - 1][d.column - 1 :] for d in found]
    assert [text[: len(m)] for text, m in zip(shown, marked, strict=True)] == marked
