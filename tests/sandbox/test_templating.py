from __future__ import annotations

import copy
import warnings
from typing import Any

import pytest

from converge_dsl.sandbox._templating import (
    GLOBALS,
    MAX_INT_BITS,
    MAX_WORK,
    TemplateRenderError,
    compile_expression,
    compile_template,
    render,
)

ATTACKS = [
    "{{ ''.__class__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ self._TemplateReference__context }}",
    "{{ lipsum() }}",
    "{{ range(100000000) | list }}",
    "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
    "{{ 'a' * 100000000 }}",
    "{{ 2 ** 100000000 }}",
    "{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('ab') }}",
    "{{ 'x'.ljust(1000000000) }}",
    "{% set f = '%0999999999d' %}{{ f % 1 }}",  # a literal's is refused as it compiles
    "{{ [1] | batch(1000000000, 'x') | list }}",
    "{% for i in range(9000) %}{{ 'x' * 200 }}{% endfor %}",
    "{% set l = ('x' * 9000) | list %}{% for i in l %}{% for j in l %}{% endfor %}{% endfor %}",
    "{% set l = ('x' * 9000) | list %}{% for i in l if i %}{% for j in l %}{% endfor %}"
    "{% endfor %}",
]


@pytest.mark.parametrize("source", ATTACKS)
def test_attack_is_refused_or_bounded(source: str) -> None:
    with pytest.raises(TemplateRenderError):
        render(compile_template(source), dict(GLOBALS))


def test_error_carries_the_template_line() -> None:
    with pytest.raises(TemplateRenderError) as info:
        render(compile_template("ok\nok\n{{ ''.__class__ }}"), dict(GLOBALS))
    assert info.value.lineno == 3
    assert "unsafe" in info.value.message


def test_ordinary_templates_still_work() -> None:
    scope = {**GLOBALS, "xs": [3, 1, 2]}
    assert (
        render(compile_template("{{ xs | sort | join(',') }} {{ 'ab' * 2 }} {{ 2 ** 10 }}"), scope)
        == "1,2,3 abab 1024"
    )


def _refusal(source: str) -> str:
    with pytest.raises(TemplateRenderError) as info:
        render(compile_template(source), dict(GLOBALS))
    return info.value.message


SQUARINGS = "{% set a0 = 10**999 %}" + "".join(
    f"{{% set a{i} = a{i - 1}*a{i - 1} %}}" for i in range(1, 19)
)

NEAR_BOUND = "{% set b = ('9' * 3840) | int * 2**40 %}"  # 12,796 bits, under MAX_INT_BITS


@pytest.mark.parametrize(
    "source",
    [
        SQUARINGS + "{{ a18 > 5 }}",  # the tester's repeated squaring: refused at a3
        "{% set a = 10**999 %}{{ a*a*a*a*a*a*a*a*a*a }}",
        "{% set a = 10**999 %}{{ a*a*a*a + a*a*a*a }}",
        NEAR_BOUND + "{% set c = b * 8 %}{{ c - (0 - c) - (0 - c) }}",
        "{{ 123456789 ** 1000 }}",
        NEAR_BOUND + "{{ ([b] * 1000) | sum }}",
    ],
)
def test_integer_growth_is_refused_before_it_is_computed(source: str) -> None:
    assert f"more than {MAX_INT_BITS} bits" in _refusal(source)


def test_large_integers_within_the_bound_still_print() -> None:
    out = render(compile_template("{% set a = 10**999 %}{{ a*a*a }}"), dict(GLOBALS))
    assert out == "1" + "0" * 2997


def test_int_of_a_huge_number_is_a_clean_refusal() -> None:
    assert "more than 3840 digits" in _refusal("{{ ('1' * 5000) | int }}")
    assert render(compile_template("{{ ('9' * 3800) | int * 10 > 0 }}"), dict(GLOBALS)) == "True"


# Repeating a big value is refused up front (its nested size counts), so the
# values below hold shared references through list literals instead.
SHARED = (
    "{% set s = 'x' * 999999 %}{% set l = [1] * 999999 %}"
    "{% set big = [s, s, s, s, s, s, s, s, s, s, s, s] %}"
    "{% set ls = [l, l, l, l, l, l, l, l, l, l, l, l] %}"
)
BIG = "big"
VALUE_BOMBS = [
    (BIG + " | join", "join() of more than"),
    ("([" + BIG + "]) | tojson | length", "JSON text of more than"),
    ("([1] * 999999) | tojson(indent=1000) | length", "JSON text of more than"),
    ("([" + BIG + "]) | string | length", "text of more than"),
    ("ls | sum(start=[]) | length", "sum() of more than"),
    (BIG, "template output exceeded"),
    (BIG + " ~ ''", "of more than"),
    ("''.join(" + BIG + ")", "join() of more than"),
    ("('x' * 999).replace('x', 'x' * 999999)", "replace() would exceed"),
    ("('x' * 999) | replace('x', 'x' * 999999)", "replace() would exceed"),
    (BIG + " | map('upper') | list | length", "built or scanned more than"),
    (BIG + " | batch(3) | map('join') | list | length", "join() of more than"),
    (BIG + " | wordcount", "text of more than"),
    (BIG + " | upper", "text of more than"),
    (BIG + " | indent", "text of more than"),
    (BIG + " | truncate(5)", "text of more than"),
]


@pytest.mark.parametrize(("expression", "expected"), VALUE_BOMBS)
def test_values_built_from_shared_references_are_bounded(expression: str, expected: str) -> None:
    assert expected in _refusal(SHARED + "{{ " + expression + " }}")


@pytest.mark.parametrize(
    "source",
    [
        "{% for i in range(10000) %}{% set s = 'x' * 999999 %}{% endfor %}",
        "{% set l = [''] * 999999 %}{% for i in range(10000) %}{{ l | join }}{% endfor %}",
        "{% set l = [1] * 999999 %}{% for i in range(10000) %}{{ l | sum }}{% endfor %}",
        "{% set l = [1] * 999999 %}{% for i in range(10000) %}{{ l | sort | length }}{% endfor %}",
        "{% set s %}{% for i in range(10000) %}{{ 'x' * 999999 }}{% endfor %}{% endset %}",
    ],
)
def test_work_per_render_is_bounded(source: str) -> None:
    assert f"more than {MAX_WORK} characters or items" in _refusal(source)


def test_ordinary_filters_keep_their_results() -> None:
    scope = {**GLOBALS, "d": {"b": 2, "a": [1, "x"]}, "xs": [{"n": "p"}, {"n": "q"}]}
    source = (
        "{{ [1, 2, 3] | sum }} {{ [[1], [2]] | sum(start=[]) }} {{ xs | join('-', 'n') }} "
        "{{ d | tojson }} {{ d | dictsort | first }} {{ d | items | list | length }} "
        "{{ [3, 1, 1] | unique | sort | list }} {{ 'a b' | replace('a', 'c') | upper }} "
        "{{ 7 - 2 }} {{ ['a', 'b'] | map('upper') | join }} {{ 'ab cd' | wordcount }}"
    )
    assert render(compile_template(source), scope) == (
        '6 [1, 2] p-q {"a": [1, "x"], "b": 2} (\'a\', [1, \'x\']) 2 [1, 3] C B 5 AB 2'
    )


def test_loops_over_lists_still_render() -> None:
    source = (
        "{% for x in items %}{{ loop.index }}:{{ x }}{% if not loop.last %},{% endif %}{% endfor %}"
    )
    assert render(compile_template(source), {**GLOBALS, "items": ["a", "b"]}) == "1:a,2:b"


class _Record:
    """A record type for the field tests: `name` is a field, `secret` is not listed."""

    __slots__ = ("_hidden", "name", "secret")

    def __init__(self, name: str) -> None:
        self.name = name
        self.secret = "s"
        self._hidden = "h"


def test_a_records_fields_pass_the_attribute_rules_once_then_are_read_directly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from converge_dsl.sandbox import _templating

    _templating.register_record(_Record, "a record", ("name", "_hidden"))
    checked: list[str] = []
    rules = _templating._Environment.is_safe_attribute

    def counted(self: object, obj: object, attr: str, value: object) -> bool:
        checked.append(attr)
        return rules(self, obj, attr, value)  # type: ignore[arg-type]

    monkeypatch.setattr(_templating._Environment, "is_safe_attribute", counted)
    template = compile_template("{{ r.name }} {{ r['name'] }} {{ r.secret }}")
    scope = {**GLOBALS, "r": _Record("a")}
    assert render(template, scope) == "a a s"
    assert render(template, {**scope, "r": _Record("b")}) == "b b s"
    assert checked == ["name", "secret", "secret"]  # a field's rules once, the others each time
    # A listed name the rules refuse stays refused, however often it is read.
    for _ in range(2):
        with pytest.raises(TemplateRenderError):
            render(compile_template("{{ r._hidden }}"), scope)


def test_a_render_opens_its_budget_as_governed_does_or_joins_the_open_one() -> None:
    from converge_dsl.sandbox._governor import BUDGET, governed
    from converge_dsl.sandbox._templating import MAX_STEPS

    template = compile_template("{{ x.y }}{{ x.y }}")
    scope = {**GLOBALS, "x": {"y": "ab"}}
    assert render(template, scope) == "abab"
    assert BUDGET.get() is None  # closed again
    with governed(100, 100) as outer:
        assert render(template, scope) == "abab"
        assert BUDGET.get() is outer
    assert (outer.steps, outer.work) == (98, 96)  # a step per read, the output's size
    with governed(1, 100), pytest.raises(TemplateRenderError, match="budget of 1 steps"):
        render(template, scope)
    loops = "{% for i in range(10000) %}{% for j in range(100) %}{% endfor %}{% endfor %}"
    with pytest.raises(TemplateRenderError, match=f"budget of {MAX_STEPS} steps"):
        render(compile_template(loops), dict(GLOBALS))  # its own budget, the render's bound
    assert BUDGET.get() is None


def test_plain_functions_are_called_as_jinjas_checks_would_call_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scope's helpers (plain functions, no attributes) skip Jinja's checks; what the
    checks would do to them, and to every other callable, stays the same."""
    import jinja2
    import jinja2.sandbox

    from converge_dsl.sandbox._governor import governed

    def stops() -> None:
        raise StopIteration

    def unsafe() -> str:
        return "ran"

    unsafe.unsafe_callable = True  # type: ignore[attr-defined]

    @jinja2.pass_context
    def with_context(context: jinja2.runtime.Context, key: str) -> str:
        return f"{key}={context['n']}"

    scope = {
        **GLOBALS,
        "count": lambda key: len(key),  # noqa: PLW0108 - a lambda, as the scope's helpers are
        "n": 7,
        "stops": stops,
        "unsafe": unsafe,
        "with_context": with_context,
        "words": "a b",
    }
    source = (
        "{{ count('abc') }} {{ stops() is defined }} {{ with_context('k') }}"
        " {{ words.split() | length }} {{ range(3) | list | length }}"
    )
    checked: list[object] = []
    jinja_call = jinja2.sandbox.SandboxedEnvironment.call

    def counted(self: object, context: object, obj: object, *args: object, **kw: object) -> object:
        checked.append(obj)
        return jinja_call(self, context, obj, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(jinja2.sandbox.SandboxedEnvironment, "call", counted)
    with governed(1_000, 1_000) as budget:
        assert render(compile_template(source), scope) == "3 False k=7 2 3"
    assert (budget.steps, budget.work) == (990, 976)  # the charges of the checked path
    assert checked == [with_context, scope["words"].split]  # the plain ones skip the checks
    with pytest.raises(TemplateRenderError, match="is not safely callable"):
        render(compile_template("{{ unsafe() }}"), scope)


def _jinja_calls(monkeypatch: pytest.MonkeyPatch, *names: str) -> list[object]:
    """Record the names (or items) each of Jinja's own sandbox methods `names` is asked for."""
    import jinja2.sandbox

    seen: list[object] = []
    for name in names:
        jinja = getattr(jinja2.sandbox.SandboxedEnvironment, name)

        def counted(self: object, obj: object, key: object, _jinja: Any = jinja) -> object:
            seen.append(key)
            return _jinja(self, obj, key)

        monkeypatch.setattr(jinja2.sandbox.SandboxedEnvironment, name, counted)
    return seen


def test_a_plain_dicts_items_and_a_lists_indexes_skip_jinjas_rules_as_they_would_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jinja2.sandbox

    scope = {**GLOBALS, "d": {"a": 1, "keys": 2, "l": [5, 6]}, "s": "ab"}
    source = (
        "{{ d.a }} {{ d['a'] }} {{ d.l[1] }} {{ d.l.0 }} {{ d['keys'] }} {{ s[1] }}"
        " {{ d.keys is callable }} {{ d.missing is defined }} {{ d.l[5] is defined }}"
        " {{ s.upper() }}"
    )
    plain = jinja2.sandbox.ImmutableSandboxedEnvironment().from_string(source).render(scope)
    seen = _jinja_calls(monkeypatch, "getattr", "getitem")
    assert render(compile_template(source), scope) == plain == "1 1 6 5 2 b True False False AB"
    # Only what is not an item (a dict's method, a missing key or index, a str method).
    assert seen == ["keys", "missing", 5, "upper"]
    with pytest.raises(TemplateRenderError, match="has no attribute 'nope'"):
        render(compile_template("{{ d.nope }}"), scope)


class _Mapping(dict[str, Any]):
    """A JSON object type registered with the sandbox, as the engine's frozen data is."""


class _Odd(dict[str, Any]):
    def __getitem__(self, key: str) -> Any:
        return "odd"


@pytest.fixture
def own_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox's registries of types, copied for one test: what it registers is undone
    (they are the process's)."""
    from converge_dsl.sandbox import _templating

    for name in ("_RECORDS", "_PLAIN_INDEX", "_HIDDEN_SLOTS", "_MAPPING_ATTRIBUTES"):
        monkeypatch.setattr(_templating, name, copy.copy(getattr(_templating, name)))


def test_a_registered_mapping_is_indexed_directly_unless_it_changes_indexing(
    monkeypatch: pytest.MonkeyPatch, own_registries: None
) -> None:
    from converge_dsl.sandbox import _templating

    _templating.register_record(_Mapping, "the object")
    _templating.register_record(_Odd, "the odd object")
    assert _Mapping in _templating._PLAIN_INDEX
    assert _Odd not in _templating._PLAIN_INDEX
    seen = _jinja_calls(monkeypatch, "getitem")
    scope = {**GLOBALS, "m": _Mapping(a=1), "o": _Odd(a=1)}
    assert render(compile_template("{{ m['a'] }} {{ o['a'] }}"), scope) == "1 odd"
    assert seen == ["a"]  # the odd one's, through Jinja's rules


def test_a_registered_mappings_items_are_read_as_attributes_as_jinjas_rules_would_end(
    monkeypatch: pytest.MonkeyPatch, own_registries: None
) -> None:
    import jinja2.sandbox

    from converge_dsl.sandbox import _templating

    _templating.register_record(_Mapping, "the object")
    _templating.register_record(_Odd, "the odd object")
    assert set(_templating._MAPPING_ATTRIBUTES) >= {_Mapping}
    assert _Odd not in _templating._MAPPING_ATTRIBUTES
    m = _Mapping(a=1, keys=2, own=3, o=_Odd(b=4))
    m.own = "attribute"  # type: ignore[attr-defined]
    scope = {**GLOBALS, "m": m}
    source = "{{ m.a }} {{ m.keys is callable }} {{ m.own }} {{ m.o.b }} {{ m.nope is defined }}"
    plain = jinja2.sandbox.ImmutableSandboxedEnvironment().from_string(source).render(scope)
    seen = _jinja_calls(monkeypatch, "getattr")
    assert render(compile_template(source), scope) == plain == "1 True attribute odd False"
    # Only a name of the type or the object, an unregistered type's, and a missing one.
    assert seen == ["keys", "own", "b", "nope"]


class _OneSlot(dict[str, Any]):
    __slots__ = "_kept"  # noqa: PLC0205 (one name, as a string: what is tested)


def test_a_slot_declared_as_one_string_is_hidden_as_one_name(own_registries: None) -> None:
    from converge_dsl.sandbox import _templating

    _templating.register_record(_OneSlot, "the object")
    assert _templating._HIDDEN_SLOTS[_OneSlot] == frozenset({"_kept"})


def test_fact_data_items_are_read_as_attributes_without_jinjas_lookup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The frozen JSON objects of facts' data (slotted: no `__dict__`) take the shortcut."""
    import converge_dsl.compiler  # registers the frozen JSON object  # noqa: F401
    from converge_dsl.engine.types import freeze_json

    data = freeze_json({"engineers": [{"id": "ana"}], "keys": 1})
    source = "{{ d.engineers[0].id }} {{ d.keys is callable }} {{ d.nope is defined }}"
    seen = _jinja_calls(monkeypatch, "getattr")
    assert render(compile_template(source), {**GLOBALS, "d": data}) == "ana True False"
    assert seen == ["keys", "nope"]  # a method's name, and a missing one: Jinja's rules


@pytest.mark.parametrize("read", ["d._text", "d['_text']", "d._text is defined"])
def test_a_frozen_objects_kept_text_is_never_what_a_template_reads(read: str) -> None:
    """Its item of that name if it has one, else missing: kept or not, the same answer."""
    import converge_dsl.compiler  # registers the frozen JSON object  # noqa: F401
    from converge_dsl.engine.types import canonical_json, freeze_json

    template = compile_template("{{ " + read + " }}")
    for data in (freeze_json({"_text": "item", "a": 1}), freeze_json({"a": 1})):
        outcomes = []
        for _ in range(2):  # before its text is kept, then after
            try:
                outcomes.append(render(template, {**GLOBALS, "d": data}))
            except TemplateRenderError as exc:
                outcomes.append(exc.message)
            canonical_json(data)
        assert outcomes[0] == outcomes[1]
        assert outcomes[0] in ("item", "True", "False") or "has no field '_text'" in outcomes[0]


def test_a_test_that_takes_no_context_is_called_as_jinja_would_call_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jinja2

    source = (
        "{{ [1, 2, 3] | select('ge', 2) | list }} {{ [1, 2, 3] | reject('odd') | list }}"
        " {{ [4, 6] | select('divisibleby', num=3) | list }}"
        " {{ ['upper', 'x'] | select('filter') | list }}"
    )
    common: list[object] = []
    jinja = jinja2.Environment._filter_test_common

    def counted(self: jinja2.Environment, name: object, *args: Any) -> Any:
        common.append(name)
        return jinja(self, name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(jinja2.Environment, "_filter_test_common", counted)
    assert render(compile_template(source), dict(GLOBALS)) == "[2, 3] [2] [6] ['upper']"
    # A keyword or an environment argument goes through Jinja's bookkeeping.
    assert common == ["divisibleby", "divisibleby", "filter", "filter"]
    with pytest.raises(TemplateRenderError, match="No test named 'nope'"):
        render(compile_template("{{ [1] | select('nope') | list }}"), dict(GLOBALS))


def test_a_renders_context_shares_what_its_template_cannot_change() -> None:
    """Each render's context shares its template's evaluation context and globals' names,
    unless the template's code can change the evaluation context or it has blocks."""
    from converge_dsl.sandbox._templating import _render_chunks, compile_expression, evaluate

    scope = {**GLOBALS, "a": "<a>"}
    plain = compile_template("{{ a }}{% for i in range(2) %}{{ loop.index }}{% endfor %}")
    first, text = _render_chunks(plain, scope)
    second, _ = _render_chunks(plain, scope)
    assert text == "<a>12"
    assert first is not second
    assert first.vars is not second.vars
    assert first.eval_ctx is second.eval_ctx
    assert first.globals_keys == {"range"}
    escaping = "{% autoescape true %}{{ a }}{% endautoescape %}{{ a }}"
    for source in (escaping, "{% block b %}{{ a }}{% endblock %}", "{% macro m() %}{% endmacro %}"):
        template = compile_template(source)
        assert _render_chunks(template, scope)[0].eval_ctx is not (
            _render_chunks(template, scope)[0].eval_ctx
        )
    for _ in range(2):  # the escaping block does not leak into the next render
        assert render(compile_template(escaping), scope) == "&lt;a&gt;<a>"
    assert evaluate(compile_expression("a ~ 'b'"), scope) == "<a>b"


def test_a_test_is_charged_as_its_guard_charges_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test called without Jinja's bookkeeping is charged as its guard (`guard_test`)
    charges it: a comparison's walk, or a step; a test put in its place is called."""
    from converge_dsl.sandbox._governor import governed
    from converge_dsl.sandbox._templating import environment

    source = (
        "{{ [1, 2, 3] | select('ge', 2) | list }} {{ [[1], [2, 3]] | select('eq', [2, 3]) | list }}"
        " {{ ['a', 'bc'] | select('in', 'abc') | list }} {{ [1, 2] | reject('odd') | list }}"
        " {{ 2 is ge 1 }}"
    )
    with governed(10_000, 10_000) as budget:
        assert render(compile_template(source), dict(GLOBALS)) == (
            "[2, 3] [[2, 3]] ['a', 'bc'] [2] True"
        )
    assert (budget.steps, budget.work) == (9_990, 9_945)  # as the guarded tests charged
    monkeypatch.setitem(environment().tests, "odd", lambda value: value == 2)
    assert render(compile_template("{{ [1, 2] | select('odd') | list }}"), dict(GLOBALS)) == "[2]"


def test_a_slice_of_a_constant_compiles_without_a_warning_and_fails_when_rendered() -> None:
    # Jinja wrote `1[0:1]` as Python's own slice: Python's compiler printed a
    # SyntaxWarning on the process's stderr, naming a line of generated code.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        template = compile_template("{{ x if x else 1[0:1] }}")
        compile_expression("(-1)[0:1]")  # Python folds `-1` as Jinja does
        sliced = compile_template("{{ 'abcdef'[1:5:2] }}{{ 'abc'[:-1] }}{{ (1, 2, 3)[1:] }}")
    assert render(template, {"x": "kept", **GLOBALS}) == "kept"
    with pytest.raises(TemplateRenderError, match=r"int object has no element slice\(0, 1, None\)"):
        render(template, {"x": "", **GLOBALS})
    assert render(sliced, dict(GLOBALS)) == "bdab(2, 3)"


@pytest.mark.parametrize("source", ["cycle.__class__", "'a'.format", "cycle.real.__class__"])
def test_an_expression_that_gives_an_unsafe_attribute_fails_as_a_template_error(
    source: str,
) -> None:
    # Its value was Jinja's undefined of an unsafe attribute: testing it for truth
    # raised Jinja's SecurityError out of `evaluate`, which a run showed as a crash
    # of the suggestor (CD912) rather than the template's error.
    from converge_dsl.sandbox._templating import compile_expression, evaluate

    with pytest.raises(TemplateRenderError) as info:
        evaluate(compile_expression(source), {"cycle": 2, **GLOBALS})
    assert "is unsafe" in info.value.message
    assert info.value.lineno == 1
    assert info.value.hint is not None
    assert "nothing of Python" in info.value.hint
