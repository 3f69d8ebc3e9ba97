"""The two readers of the template language agree wherever the fast one answers.

`validate` reads common templates with `_fastjinja` (no jinja2 import) and the
rest with Jinja's parser. Over generated templates and expressions, each
reading the fast path accepts must give what Jinja's gives: the verdict
(compiles or not), the free names, filters, tests and `inputs` reads, and the
data-field findings of the walk over its tree (`_datawalk`). The generator
also writes what the fast path refuses (conditionals, tests, slices, unknown
filters), so the hand-over stays exercised too.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converge_dsl.frontend import _fastjinja, _templates
from converge_dsl.frontend._datawalk import Walker
from converge_dsl.frontend._jinja_parse import parse

SCHEMAS: dict[str, Any] = {
    "tickets": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "category": {"enum": ["billing", "outage"]},
            "urgency": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
}

_NAMES = ["a", "cycle", "item", "inputs", "facts", "proposals", "range"]
_ATOMS = [
    "facts.tickets",
    "facts.tickets[0]",
    "facts.tickets[0].data",
    "facts.tickets[0].data.category",
    "facts.tickets[0].data.colour",
    "facts.tickets[0].data['urgency']",
    "facts.tickets[0].contents",
    "fact('tickets', 'x').data.urgency",
    "fact('tickets', 'x').data.size",
    "data_of('tickets')[0].urgency",
    "data_of('tickets')[0].nope",
    "count('tickets')",
    "has('tickets')",
    "inputs.market",
    "inputs['region']",
    "1",
    "2.5",
    "'billing'",
    "'outage'",
    "'x'",
    "true",
    "none",
]
_FILTERS = [
    "first",
    "last",
    "length",
    "join(', ')",
    "map(attribute='content')",
    "map(attribute='data')",
    "selectattr('id')",
    "sort",
    "unique",
    "list",
    "default('x')",
    "abs",
    "nosuchfilter",
]


def _combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    pair = st.tuples(children, children)
    return st.one_of(
        st.tuples(children, st.sampled_from(["category", "urgency", "data", "id", "zz"])).map(
            lambda p: f"{p[0]}.{p[1]}"
        ),
        st.tuples(children, st.sampled_from(["0", "'category'", "-1"])).map(
            lambda p: f"{p[0]}[{p[1]}]"
        ),
        st.tuples(children, st.sampled_from(_FILTERS)).map(lambda p: f"{p[0]} | {p[1]}"),
        st.tuples(pair, st.sampled_from(["==", "!=", "<", ">=", "in", "not in"])).map(
            lambda p: f"{p[0][0]} {p[1]} {p[0][1]}"
        ),
        st.tuples(pair, st.sampled_from(["and", "or", "+", "-", "~", "*", "//"])).map(
            lambda p: f"{p[0][0]} {p[1]} {p[0][1]}"
        ),
        children.map(lambda c: f"not {c}"),
        children.map(lambda c: f"-{c}"),
        children.map(lambda c: f"({c})"),
        pair.map(lambda p: f"[{p[0]}, {p[1]}]"),
        pair.map(lambda p: f"{{'k': {p[0]}, 'j': {p[1]}}}"),
        pair.map(lambda p: f"f({p[0]}, key={p[1]})"),
        # outside the fast path's subset: Jinja decides
        st.tuples(pair, children).map(lambda p: f"{p[0][0]} if {p[0][1]} else {p[1]}"),
        children.map(lambda c: f"{c} is defined"),
        children.map(lambda c: f"{c}[0:1]"),
    )


EXPRESSIONS = st.recursive(st.sampled_from(_NAMES + _ATOMS), _combine, max_leaves=6)
TEMPLATES = st.lists(
    st.one_of(
        st.sampled_from(["Text ", "a, ", "\n", "{ x }", "100%", "}"]),
        EXPRESSIONS.map(lambda e: "{{ " + e + " }}"),
        EXPRESSIONS.map(lambda e: "{% if " + e + " %}y{% endif %}"),
    ),
    min_size=1,
    max_size=4,
).map("".join)


# (text, whether it is a bare expression)
CASES = st.one_of(EXPRESSIONS.map(lambda e: (e, True)), TEMPLATES.map(lambda t: (t, False)))


def _jinja_only(monkeypatch: Any) -> None:
    monkeypatch.setattr(_templates, "analyse", lambda text, expression: None)


def _names(text: str, expression: bool, monkeypatch: Any) -> tuple[Any, Any] | None:
    """(fast reading, Jinja's reading) of `text`, or None when the fast path refuses it."""
    if _fastjinja.analyse(text, expression=expression) is None:
        return None
    fast = _templates._analyse.__wrapped__(text, expression)  # type: ignore[attr-defined]
    with monkeypatch.context() as patch:
        _jinja_only(patch)
        slow = _templates._analyse.__wrapped__(text, expression)  # type: ignore[attr-defined]
    return fast, slow


def _normal(reading: Any) -> Any:
    error, free, filters, inputs, tests = reading
    return (error is None, free, sorted(filters), sorted(inputs), sorted(tests))


def _findings(text: str, expression: bool) -> tuple[list[Any], list[Any]] | None:
    trees = _fastjinja.parsed(text, expression=expression)
    if trees is None:
        return None
    fast = Walker(SCHEMAS).walk_expressions(trees)
    ast, _ = parse(text, expression)
    assert ast is not None, f"the fast path accepted what Jinja cannot parse: {text!r}"
    slow = Walker(SCHEMAS).walk(ast)
    return fast, slow


_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_SETTINGS
@given(CASES)
def test_templates_and_expressions_read_alike(monkeypatch: Any, case: tuple[str, bool]) -> None:
    text, expression = case
    both = _names(text, expression, monkeypatch)
    if both is not None:
        assert _normal(both[0]) == _normal(both[1])


@_SETTINGS
@given(EXPRESSIONS)
def test_expression_verdicts_agree(monkeypatch: Any, text: str) -> None:
    fast = _templates.expression_error(text)
    with monkeypatch.context() as patch:
        _jinja_only(patch)
        slow = _templates.expression_error(text)
    assert fast == slow


@_SETTINGS
@given(CASES)
def test_data_findings_agree(case: tuple[str, bool]) -> None:
    text, expression = case
    both = _findings(text, expression)
    if both is not None:
        fast, slow = both
        assert [(f.code, f.message, f.lineno, f.needle) for f in fast] == [
            (f.code, f.message, f.lineno, f.needle) for f in slow
        ]


def test_the_generators_reach_both_readers() -> None:
    """Each property sees texts the fast path answers and texts it hands to Jinja."""
    accepted = refused = 0

    @settings(max_examples=200, deadline=None)
    @given(EXPRESSIONS)
    def count(text: str) -> None:
        nonlocal accepted, refused
        if _fastjinja.analyse(text, expression=True) is None:
            refused += 1
        else:
            accepted += 1

    count()
    assert accepted > 40
    assert refused > 20


def test_a_filter_jinja_would_fold_is_still_seen_on_jinja_s_path() -> None:
    """Found by the properties: Jinja's name analysis folded the shared parse in place."""
    text = "{% if a %}{{ f(key='x' | center) }}{% endif %}"  # outside the fast path
    assert _fastjinja.analyse(text, expression=False) is None
    assert _templates._analyse.__wrapped__(text, False)[2] == ("center",)  # type: ignore[attr-defined]
    ast, _ = parse(text, False)
    assert ast is not None
    assert "center" in repr(ast)  # the cached tree the data checks walk is unchanged
