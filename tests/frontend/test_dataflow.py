"""What templates read (`_dataflow`), where a read is in the file
(`LoadedDocument.offset_span`), and the checks of the data flow (`_checks_dataflow`) on
the cases the corpus does not show."""

from __future__ import annotations

import io
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.frontend import _fastjinja, check_document, load_text
from converge_dsl.frontend._dataflow import KeyRead, read_span, reads, stop_guards

HEAD = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
keys: [{name: tickets}, {name: notes}]
seeds:
  - {id: t1, key: tickets, content: a ticket}
suggestors:
"""


def _found(suggestors: str, head: str = HEAD) -> list[Diagnostic]:
    return list(check_document(load_text(head + suggestors, "p.yaml"), None).diagnostics)


def _codes(suggestors: str, head: str = HEAD) -> list[str]:
    return [d.code for d in _found(suggestors, head)]


@pytest.mark.parametrize(
    ("text", "expression", "found"),
    [
        ("count('a') > 0 and has('b')", True, [("a", "count", "("), ("b", "has", "(")]),
        ("facts.a[0].data.x == 'z'", True, [("a", "facts", ".")]),
        ("facts['a'] | length", True, [("a", "facts", "[")]),
        ("facts.get('a')", True, [("a", "facts", "get")]),
        ("proposals.a | length == 0", True, [("a", "proposals", ".")]),
        ("fact('a', 'x').content", True, [("a", "fact", "(")]),
        ("{{ data_of('a') | map(attribute='x') | join }}", False, [("a", "data_of", "(")]),
        ("count(inputs.key)", True, [(None, "count", "(")]),
        ("facts[name]", True, [(None, "facts", "[")]),
        ("{{ facts | tojson }}", False, [(None, "facts", "")]),
        ("{{ facts.items() | list }}", False, [(None, "facts", "")]),
        ("facts[0]", True, []),  # no key at all: the run fails, not this analysis
        # names the template binds are its own
        ("{% for fact in facts.a %}{{ fact.content }}{{ fact('b') }}{% endfor %}", False,
         [("a", "facts", ".")]),
        ("{% set count = 3 %}{{ count('a') }}", False, []),
        ("{% if x %}{{ has('a') }}{% endif %}", False, [("a", "has", "(")]),
        ("plain text with the word facts", False, []),
    ],
)  # fmt: skip
def test_reads_lists_every_key_read_in_order(
    text: str, expression: bool, found: list[tuple[Any, str, str]]
) -> None:
    assert [tuple(read) for read in reads(text, expression)] == found


def test_a_read_compares_and_says_how_it_is_written() -> None:
    read = KeyRead("a", "fact", "(")
    assert read == ("a", "fact", "(")
    assert (read.key, read.via, read.style, read.written) == ("a", "fact", "(", "fact('a', ...)")
    assert KeyRead(None, "facts", "[").written == "facts[...]"


@pytest.mark.parametrize(
    ("text", "stops"),
    [
        ("not has('a')", {"a"}),
        ("count('a') == 0 and count('b') < 3 and 2 >= count('c')", {"a", "b", "c"}),
        ("has('a')", set()),
        ("count('a') > 0", set()),
        ("count('a') == 2", set()),
        ("not (has('a') and not has('b'))", {"a"}),
        ("not has('a') and facts.a | length > 1", set()),  # read another way too
        ("not count('a')", {"a"}),
    ],
)
def test_stop_guards_are_the_keys_that_can_only_turn_a_when_off(text: str, stops: set[str]) -> None:
    assert stop_guards(text) == stops


_ATOMS = ["count('a')", "has('b')", "facts.c", "facts['d']", "fact('e', 'x')", "data_of('f')",
          "proposals.g", "facts[x]", "count(inputs.k)", "1", "'z'", "x"]  # fmt: skip
EXPRESSIONS = st.recursive(
    st.sampled_from(_ATOMS),
    lambda inner: st.one_of(
        st.tuples(inner, inner, st.sampled_from(["and", "or", "==", "<", "+", "~", "*"])).map(
            lambda t: f"{t[0]} {t[2]} {t[1]}"
        ),
        inner.map(lambda e: f"not {e}"),
        inner.map(lambda e: f"-{e}"),
        inner.map(lambda e: f"({e})"),
        inner.map(lambda e: f"{e} | length"),
        st.tuples(inner, inner).map(lambda t: f"[{t[0]}, {t[1]}]"),
    ),
    max_leaves=5,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS)
def test_the_fast_path_and_jinja_read_the_same_keys(text: str) -> None:
    """What the fast path's tree gives is what Jinja's gives (the stop guards too)."""
    if _fastjinja.parsed(text, expression=True) is None:
        return
    fast, guards = reads.__wrapped__(text, True), stop_guards.__wrapped__(text)
    original = _fastjinja.parsed
    try:
        _fastjinja.parsed = lambda *a, **k: None  # type: ignore[assignment]
        assert reads.__wrapped__(text, True) == fast
        assert stop_guards.__wrapped__(text) == guards
    finally:
        _fastjinja.parsed = original  # type: ignore[assignment]


@pytest.mark.parametrize(
    "scalar",
    [
        'x: "say \\"hi\\" {{ count(\'zz\') }}"',
        "x: 'it''s {{ count(\"zz\") }}'",
        "x: plain {{ count('zz') }}\n  more",
        "x: |\n  first\n    {{ count('zz') }}\n",
        "x: >-\n  folded\n  text {{ count('zz') }}\n  end\n",
        "x: \"line \\n then {{ count('zz') }}\"",
    ],
)
def test_a_template_offset_is_found_in_the_file_whatever_the_style(scalar: str) -> None:
    document = load_text(scalar + "\n", "p.yaml")
    text = document.data["x"]
    start = text.index("zz")
    span = document.offset_span(("x",), text, start, start + 2)
    assert span is not None
    line = document.text.splitlines()[span.line - 1]
    assert line[span.column - 1 : span.end_column - 1] == "zz"


def test_an_escaped_character_is_its_escape_in_the_file() -> None:
    document = load_text("x: \"\\x41{{ count('zz') }}\"\n", "p.yaml")
    text = document.data["x"]  # the escape is one character of the value, four of the source
    span = document.offset_span(("x",), text, 0, 1)
    assert span is not None
    assert (span.line, span.column, span.end_column) == (1, 5, 9)


def test_an_offset_the_source_cannot_hold_is_none() -> None:
    document = load_text('x: "ab\n  cd"\n', "p.yaml")
    text = document.data["x"]  # "ab cd": the space is a line break of the file
    assert document.offset_span(("x",), text, 1, 4) is None


@pytest.mark.parametrize(
    "scalar",
    [
        "x: >\n  {{ count('tri' ~\n  'agx') }}\n",
        "x: \"{{ count('tri' ~\n  'agx') }}\"\n",
        "x: a {{ count('tri' ~\n  'agx') }}\n",
        "x: |\n  {{ count('tri' ~\n  'agx') }}\n",
        "x: >\n  {{ count('tri' ~ 'agx') }}\n",
    ],
    ids=["folded", "double-quoted", "plain", "literal", "one-line"],
)
def test_a_key_joined_across_lines_is_marked_on_its_first_literal(scalar: str) -> None:
    """Before, a folded or flow scalar's line break is a space of the template: the span
    from the first quote to the last crossed the file's lines, and the caret covered the
    whole first line. Joined literals on one line are marked whole."""
    document = load_text(scalar, "p.yaml")
    text = document.data["x"]
    span = read_span(document, ("x",), text, reads(text, False)[0])
    line = document.text.splitlines()[span.line - 1]
    marked = line[span.column - 1 : span.end_column - 1]
    assert marked == ("'tri' ~ 'agx'" if "~ 'agx'" in line else "'tri'")


def _rule(name: str, deps: str, when: str | None, emit: str) -> str:
    guard = f"    when: {when!r}\n" if when else ""
    return (
        f"  - name: {name}\n    kind: rule\n    dependencies: {deps}\n{guard}    emit: [{emit}]\n"
    )


def test_the_guard_on_the_key_a_suggestor_writes_is_no_missing_dependency() -> None:
    rule = _rule("r", "[tickets]", "not has('notes')", "{key: notes, id: nn, content: c}")
    assert _codes(rule) == []


def test_a_stop_on_another_key_is_no_missing_dependency_but_a_positive_read_is() -> None:
    writer = _rule("w", "[tickets]", None, "{key: strategies, id: s, content: c}")
    stop = _rule("r", "[tickets]", "not has('strategies')", "{key: notes, id: nn, content: c}")
    assert _codes(writer + stop) == []
    go = _rule("r", "[tickets]", "has('strategies')", "{key: notes, id: nn, content: c}")
    assert _codes(writer + go) == [codes.READ_NOT_DEPENDENCY]


def test_dependencies_auto_are_what_the_templates_read_less_what_it_writes() -> None:
    writer = _rule("w", "[tickets]", None, "{key: strategies, id: s, content: c}")
    auto = _rule(
        "r", "auto", "has('strategies') and not has('notes')",
        "{key: notes, id: nn, content: \"{{ count('tickets') }}\"}",
    )  # fmt: skip
    document = load_text(HEAD + writer + auto, "p.yaml")
    checked = check_document(document, None)
    assert checked.diagnostics == ()
    from converge_dsl.frontend import KINDS

    spec = KINDS.spec(("suggestors", 1), document.data["suggestors"][1])
    assert spec.dependencies == ("strategies", "tickets")
    assert spec.key_references() == ((("suggestors", 1, "emit", 0, "key"), "notes"),)


def test_dependencies_auto_reach_the_engine(tmp_path: Any) -> None:
    from converge_dsl.cli import run

    pipeline = tmp_path / "p.yaml"
    auto = _rule(
        "r", "auto", "has('tickets') and not has('notes')",
        "{key: notes, id: nn, content: \"{{ count('tickets') }} tickets\"}",
    )  # fmt: skip
    pipeline.write_text(HEAD + auto, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    assert run(["run", str(pipeline), "--format", "json"], out, err) == 0
    assert '"1 tickets"' in out.getvalue()


def test_a_literal_id_with_the_same_content_is_no_conflict() -> None:
    a = _rule("a", "[tickets]", None, "{key: notes, id: x, content: same}")
    b = _rule("b", "[tickets]", None, "{key: notes, id: x, content: same}")
    c = _rule(
        "c", "[tickets]", None, "{key: notes, id: \"{{ 'x' if cycle else 'y' }}\", content: o}"
    )
    assert _codes(a + b + c) == []


def test_a_template_that_renders_a_constant_id_is_read_as_its_text() -> None:
    # `{{ 'x' }}` is always 'x': the run stops on the conflict, so validate says so.
    a = _rule("a", "[tickets]", None, "{key: notes, id: x, content: same}")
    c = _rule("c", "[tickets]", None, "{key: notes, id: \"{{ 'x' }}\", content: other}")
    d = _rule("d", "[tickets]", None, '{key: notes, id: "n-{{ 1 }}", content: "{{ 2 }}"}')
    e = _rule("e", "[tickets]", None, "{key: notes, id: n-1, content: '2'}")
    assert _codes(a + c + d + e) == [codes.SAME_ID_OTHER_CONTENT]


SEED_AND_SUGGESTOR = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
keys: [{name: notes}]
seeds:
  - id: n1
    key: notes
    content: CONTENT
suggestors:
  - name: again
    kind: seed
    target: notes
    facts: [{id: n1, content: hello}]
"""


@pytest.mark.parametrize(
    ("content", "conflict"),
    [
        ("|\n      hello\n", True),  # `|` keeps the last line break: 'hello\n'
        ("|-\n      hello\n", False),
        ("'{{ \"hello\" }}'", True),  # the run does not render a pipeline seed
        ("hello", False),
    ],
)
def test_validate_reads_a_pipeline_seed_as_the_run_proposes_it(
    tmp_path: Any, content: str, conflict: bool
) -> None:
    """A pipeline seed's content is the text as YAML gives it: validate warns of the
    conflict (CD256) exactly when the run stops on it (CD909)."""
    from converge_dsl.cli import run

    text = SEED_AND_SUGGESTOR.replace("CONTENT", content)
    found = _found("", text)
    assert [d.code for d in found] == ([codes.SAME_ID_OTHER_CONTENT] if conflict else [])
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    run(["run", str(pipeline)], out, err)
    assert ("CD909" in err.getvalue()) is conflict
    if conflict and "{{" in content:
        assert found[0].hint is not None
        assert found[0].hint.endswith(
            "; a pipeline seed is never rendered: its content at line 8 is proposed as "
            "written, `{{ }}` and all (a seed suggestor's is rendered)"
        )
    if conflict and "|" in content:
        assert found[0].hint is not None
        assert found[0].hint.endswith(
            "; the content at line 8 ends in a line break the other lacks"
            " (a block scalar `|` keeps its last line break; `|-` drops it)"
        )


OBJECT_SEEDS = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
keys: [{name: notes}]
seeds:
  - {id: n1, key: notes, content: {a: 1}}
  - {id: n1, key: notes, content: SECOND}
"""


@pytest.mark.parametrize(
    ("second", "conflict"),
    [
        ("{a: 2}", True),
        ("{a: 1}", False),
        ("'{\"a\":1}'", True),  # the same text, but no data: the run compares the data too
    ],
)
def test_validate_reads_an_object_seed_as_the_run_proposes_it(
    tmp_path: Any, second: str, conflict: bool
) -> None:
    """A seed whose content is an object is proposed as its JSON text and data: validate
    warns of two such seeds of one id (CD256) exactly when the run stops on them."""
    from converge_dsl.cli import run

    text = OBJECT_SEEDS.replace("SECOND", second)
    found = [d.code for d in _found("", text) if d.code != codes.OBJECT_CONTENT]
    assert found == ([codes.SAME_ID_OTHER_CONTENT] if conflict else [])
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    run(["run", str(pipeline)], out, err)
    assert ("CD909" in err.getvalue()) is conflict


def test_a_rule_bounded_by_cycle_or_guarded_does_not_refire() -> None:
    bounded = _rule(
        "r", "[notes]", "cycle < 3", "{key: notes, id: \"n-{{ count('notes') }}\", content: c}"
    )
    guarded = _rule(
        "g",
        "[notes]",
        "count('notes') < 3",
        "{key: notes, id: \"n-{{ count('notes') }}\", content: c}",
    )
    idempotent = _rule(
        "i", "[notes]", None, "{key: notes, id: \"{{ count('notes') }}\", content: c}"
    )
    assert codes.REFIRES_ON_OWN_OUTPUT not in _codes(bounded + guarded + idempotent)


def test_a_note_never_fails_validate(tmp_path: Any) -> None:
    from converge_dsl.cli import run

    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        HEAD.replace("seeds:", "inputs: {k: {default: tickets}}\nseeds:")
        + _rule("r", "[tickets]", None, '{key: notes, id: nn, content: "{{ count(inputs.k) }}"}'),
        encoding="utf-8",
    )
    for fmt, marker in (("human", "note[CD251]"), ("github", "::notice "), ("sarif", '"note"')):
        out = io.StringIO()
        assert (
            run(["validate", "--strict", "--format", fmt, str(pipeline)], out, io.StringIO()) == 0
        )
        assert marker in out.getvalue()
    out = io.StringIO()
    run(["validate", str(pipeline)], out, io.StringIO())
    assert out.getvalue().endswith("1 file valid, 1 note\n")


class _Counted:
    """A pattern that counts its `match` calls: the work of locating reads."""

    def __init__(self, pattern: Any) -> None:
        self.pattern, self.calls = pattern, 0

    def match(self, text: str, position: int) -> Any:
        self.calls += 1
        return self.pattern.match(text, position)


@pytest.mark.parametrize(
    "read",
    [
        "count('k{i}x') > 0",
        "count('k{i}' ~ 'x') > 0",
        "count('no' ~ 'tez') > 0",
        "facts.get('k{i}x')",
        "facts.k{i}x",
        "count(inputs.k{i}) > 0",
    ],
    ids=["plain", "joined", "same", "get", "attribute", "named-later"],
)
def test_thousands_of_reads_in_one_template_are_located_in_linear_work(
    monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    # before, each reported read parsed every argument of its template again: 3000 reads
    # took tens of seconds
    from converge_dsl.frontend import _joined_keys

    many = 3000
    counted = _Counted(_joined_keys._PIECE)
    monkeypatch.setattr(_joined_keys, "_PIECE", counted)
    when = " and ".join(read.format(i=i) for i in range(many))
    started = time.process_time()
    found = _found(_rule("r", "[tickets]", when, "{key: notes, id: x, content: c}"))
    spent = time.process_time() - started
    assert found
    assert counted.calls <= 10 * many
    assert spent < 3.0  # linear work takes a tenth of it; the quadratic took 10 s and more


@pytest.mark.parametrize(
    ("written_in_yaml", "key"),
    [
        ("a\\tb", "a\tb"),
        ("k\\U000e0041", "k\U000e0041"),  # a tag character, invisible
        ("r\\u202el", "r\u202el"),
        ("no\\u00a0break", "no\xa0break"),
        ('say \\"q\\"', 'say "q"'),
        ("true", "true"),  # a word YAML reads as a boolean
        ("plain_key", "plain_key"),
    ],
)
def test_the_hint_declaring_an_unknown_key_declares_exactly_that_key(
    written_in_yaml: str, key: str
) -> None:
    """CD250's copyable `keys: [{name: ...}]` reads back, as YAML, as the key read, and
    shows no character a reader does not see (a tab, a bidi control, a tag character)."""
    import yaml

    read = f"{{key: notes, id: x, content: \"{{{{ count('{written_in_yaml}') }}}}\"}}"
    (found,) = _found(_rule("r", "[tickets]", None, read))
    assert found.code == codes.UNKNOWN_READ_KEY
    assert found.hint is not None
    assert found.hint.isprintable()
    declared = yaml.safe_load(found.hint.removeprefix("declare it: "))
    assert declared == {"keys": [{"name": key}]}


def test_two_contents_of_one_id_are_quoted_as_every_message_quotes() -> None:
    """CD256 quotes the suggestors, the id and the key with `written` (a quote escaped),
    as CD250 and CD272 do, not with Python's repr (`"it's"`)."""
    a = _rule("a", "[tickets]", None, '{key: notes, id: "n\'1", content: one}')
    b = _rule("b", "[tickets]", None, '{key: notes, id: "n\'1", content: two}')
    (found,) = _found(a + b)
    assert found.code == codes.SAME_ID_OTHER_CONTENT
    assert found.message.startswith(
        "'b' proposes id 'n\\x271' to key 'notes' as 'a' does (line 11), with other content"
    )


def test_an_unknown_keys_note_names_a_flag_as_one_piece() -> None:
    """CD250's note lists the characters its message shows escaped: a flag's tags are
    part of the flag, shown as it is, and not listed one by one (a bidi control is)."""
    read = (
        "{key: notes, id: x, content: \"{{ count('k\\U0001F3F4\\U000E0067\\U000E0062"
        "\\U000E0073\\U000E0063\\U000E0074\\U000E007F\\u202E') }}\"}"
    )
    (found,) = _found(_rule("r", "[tickets]", None, read))
    assert found.code == codes.UNKNOWN_READ_KEY
    assert found.message.endswith("(U+202E is written as \\u202E)")
