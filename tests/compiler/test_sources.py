"""One compilation per distinct template source (`compiler._sources`), literals without Jinja."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl import codes
from converge_dsl.compiler import _sources, compile_context, compile_pipeline
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import load_text
from converge_dsl.sandbox import _templating as templating
from converge_dsl.sandbox._codegen import literal_text

HEADER = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: t\n"


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[_sources.SourceCache]:
    """A fresh process-wide source table (the one every compile uses) for one test."""
    table = _sources.SourceCache()
    monkeypatch.setattr(_sources, "SOURCES", table)
    from converge_dsl.compiler import _compile_cache, _context, _template

    for module in (_context, _template, _compile_cache):
        monkeypatch.setattr(module, "SOURCES", table)
    return table


def _fan(n: int, content: str, ident: str = "f{i}") -> str:
    lines = [HEADER + "keys: [{name: out}]\nsuggestors:"]
    for i in range(n):
        lines.append(
            f"  - {{name: r{i}, kind: rule, when: \"count('out') < 100\", "
            f"emit: [{{key: out, id: '{ident.format(i=i)}', content: '{content}'}}]}}"
        )
    return "\n".join(lines) + "\n"


def _compile(text: str) -> Any:
    document = load_text(text, "p.yaml")
    return compile_pipeline(document, inputs={}, models={}, usage=None)  # type: ignore[arg-type]


class _Counting:
    """Counts Jinja parses (`Environment._parse` and expression parsers)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.parses = 0
        original = templating.parse

        def parse(env: Any, source: str, *, expression: bool) -> Any:
            self.parses += 1
            return original(env, source, expression=expression)

        monkeypatch.setattr(templating, "parse", parse)


def test_a_template_shared_by_many_suggestors_is_parsed_once(
    fresh: _sources.SourceCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = _Counting(monkeypatch)
    compiled = _compile(_fan(200, '{{ cycle }} of {{ count("out") }}'))
    assert len(compiled.suggestors) == 200
    # One template, one expression (the shared `when`); the ids are literals.
    assert counter.parses == 2
    assert fresh.compiled == 2


def test_names_come_from_the_compiled_ast_not_a_second_analysis(
    fresh: _sources.SourceCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jinja2.meta

    def refuse(ast: Any) -> Any:
        raise AssertionError("no second analysis of the template")

    monkeypatch.setattr(jinja2.meta, "find_undeclared_variables", refuse)
    source = fresh.get("{% for x in facts.out %}{{ x.content ~ y }}{% endfor %}{{ cycle }}")
    assert source.names == {"facts", "y", "cycle"}
    assert fresh.get("count('a') > n", expression=True).names == {"count", "n"}
    assert fresh.get("{{ range(3) | join }}").names == frozenset()  # globals are not free


def test_literal_templates_never_reach_jinja(
    fresh: _sources.SourceCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a literal went through Jinja")

    monkeypatch.setattr(_sources, "generated", refuse)
    compiled = _compile(
        _fan(50, "plain text, 100% literal {x}").replace("when: \"count('out') < 100\", ", "")
    )
    assert fresh.compiled == 0
    facts = [s.core.targets for s in compiled.suggestors]
    assert facts[0] == ("out",)
    source = fresh.get("f12")
    assert source.literal == "f12"
    assert source.compiled is None
    assert source.names == frozenset()


@given(st.text(alphabet=st.sampled_from("ab {}%#\n\r-+\t"), max_size=20))
def test_literal_text_is_what_jinja_renders(text: str) -> None:
    literal = literal_text(text, templating.MAX_OUTPUT)
    if literal is None:
        return
    assert literal == templating.render(templating.compile_template(text), dict(templating.GLOBALS))


def test_literal_text_leaves_templates_and_carriage_returns_to_jinja() -> None:
    assert literal_text("a\n", 10) == "a"
    assert literal_text("a\n\n", 10) == "a\n"
    for text in ("{{ x }}", "{% if x %}{% endif %}", "a {# note #}", "a\r\nb"):
        assert literal_text(text, 100) is None
    assert literal_text("x" * 11, 10) is None  # past the output bound: Jinja refuses it


def test_a_compiled_literal_renders_its_text(fresh: _sources.SourceCache) -> None:
    compiled = _compile(_fan(1, "hello").replace("when: \"count('out') < 100\", ", ""))
    rule = compiled.suggestors[0]
    emission = rule.emissions[0] if hasattr(rule, "emissions") else None
    assert emission is not None
    assert emission.content.render({}) == "hello"
    assert emission.content.template is None


def test_an_unknown_name_is_reported_before_an_unknown_filter(
    fresh: _sources.SourceCache,
) -> None:
    document = load_text(HEADER + "keys: [{name: out}]\n", "p.yaml")
    ctx = compile_context(document, inputs={}, models={}, usage=None)  # type: ignore[arg-type]
    with pytest.raises(PipelineInvalid) as caught:
        ctx.template("{{ nope | nofilter }}", ("x",))
    assert caught.value.diagnostics[0].code == codes.COMPILE_UNKNOWN_NAME
    with pytest.raises(PipelineInvalid) as caught:
        ctx.template("{{ cycle | nofilter }}", ("x",))
    assert caught.value.diagnostics[0].code == codes.COMPILE_TEMPLATE_SYNTAX
    assert "nofilter" in caught.value.diagnostics[0].message
    with pytest.raises(PipelineInvalid) as caught:
        ctx.expression("count('out') >", ("x",))
    assert caught.value.diagnostics[0].code == codes.COMPILE_TEMPLATE_SYNTAX


def test_the_table_is_bounded_and_keyed_by_the_sandbox_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = _sources.SourceCache(max_entries=3)
    for i in range(10):
        table.get(f"{{{{ {i} }}}}")
    assert len(table._entries) == 3
    first = table.get("{{ 1 + 1 }}")
    assert table.get("{{ 1 + 1 }}") is first
    monkeypatch.setattr(_sources, "sandbox_settings", lambda: "other sandbox")
    assert table.get("{{ 1 + 1 }}") is not first


def test_compiled_expressions_and_templates_behave_as_before(fresh: _sources.SourceCache) -> None:
    template = fresh.get("{{ a ~ b }}").compiled
    assert isinstance(template, jinja2.Template)
    assert templating.render(template, {"a": "x", "b": "y", **templating.GLOBALS}) == "xy"
    expression = fresh.get("a + 1 == 3", expression=True).compiled
    assert templating.evaluate(expression, {"a": 2, **templating.GLOBALS}) is True


def test_the_code_generators_revision_is_part_of_the_sandbox_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A compile cache file written before the generator changed is not found again.
    from converge_dsl.sandbox._codegen import BoundedCodeGenerator

    settings = _sources.sandbox_settings.__wrapped__  # not the process's cached digest
    before = settings()
    monkeypatch.setattr(BoundedCodeGenerator, "revision", BoundedCodeGenerator.revision + 1)
    assert settings() != before
