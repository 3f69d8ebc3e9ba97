"""The fast path agrees with Jinja on every template and expression it accepts."""

from __future__ import annotations

import jinja2.meta
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import nodes
from jinja2.parser import Parser

from converge_dsl.frontend import _fastjinja
from converge_dsl.frontend._templates import expression_error
from converge_dsl.sandbox._templating import (
    TemplateCompileError,
    compile_expression,
    environment,
    undeclared_names,
)

SAMPLES = [
    ("Act on {{ facts.hypotheses | map(attribute='content') | join(', ') }}", False),
    ("count('hypotheses') >= 3 and not has('risks') or cycle > 2", True),
    ("c-{{ item.id }}-{{ index + 1 }}", False),
    ("{{ inputs.market }}", False),
    ("fact('seeds', 'a') and true", True),
]


@pytest.mark.parametrize(("text", "expression"), SAMPLES)
def test_fast_path_matches_jinja(text: str, expression: bool) -> None:
    quick = _fastjinja.analyse(text, expression=expression)
    assert quick is not None
    assert quick[0] == undeclared_names(text, expression=expression)


@pytest.mark.parametrize(
    "text", ["{{ x", "{% if x %}y{% endif %}", "{{ a == and }}", "{{ x is defined }}"]
)
def test_anything_else_goes_to_jinja(text: str) -> None:
    assert _fastjinja.analyse(text, expression=False) is None


# Pack invariants and richer expressions: parentheses, lists, keyword arguments, `not in`.
RICHER = [
    "plan.routes | map(attribute='stops') | sum(start=[]) | map(attribute='stop') | unique"
    " | list | length == plan.served",
    "(input.on_late | default('reject')) == 'allow' or plan.late_jobs | length == 0",
    "plan.makespan + 0.000001 >= plan.lower_bound",
    "a not in [b, 'c', 1] and not not d",
    "-x ** 2 // y ~ z",
    "f(a, b=c) | join(d)",
    "facts.tickets[0].data['category'] == 'billing' and inputs['market'] != 1",
    "{'queue': 'billing', 'ticket': facts.tickets[0].id, 'n': [1, {}]}",
    "data_of('tickets')[0].urgency >= 3 or not (fact('t', 'a').data.x in ['a', 'b'])",
]


@pytest.mark.parametrize("text", RICHER)
def test_richer_expressions_match_jinja(text: str) -> None:
    quick = _fastjinja.analyse(text, expression=True)
    assert quick is not None
    assert quick[0] == undeclared_names(text, expression=True) | ({"range"} & quick[0])


@pytest.mark.parametrize(
    "text",
    [
        "a == not b",  # `not` only opens an expression or follows and/or
        "f(b=c, a)",  # positional after keyword
        "f(a=1, a=2)",  # repeated keyword
        "01",  # Jinja reads two integers
        "a.1",  # subscript by dot
        "1.x",  # a literal the skeleton keeps
        "a[1.5.m]",
        "a[0:1]",  # slices
        "a[]",
        "a[0, 1]",
        "{'a': 1,}",
        "()",
        "[a,]",
        "x if y else z",
        "'a\\'b'",
        "a\n and b",
        "[0]['m'] and a",  # Jinja folds a lookup on a literal as it compiles
        "{'a': 1}.b",
        "'s'.upper()",
    ],
)
def test_outside_the_subset_goes_to_jinja(text: str) -> None:
    assert _fastjinja.analyse(text, expression=True) is None


_WORDS = ["a", "inputs", ".", "m", "(", ")", "[", "]", ",", "|", "length", "join", "count"]
_WORDS += ["{", "}", ":", "[0]", "['m']"]
_OPERATORS = ["not", "and", "or", "in", "==", "-", "+", "1", "01", "1.5", "'s'", "=", "true"]
_TOKENS = st.sampled_from([*_WORDS, *_OPERATORS, "is", "**"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_TOKENS, st.sampled_from(["", " "])), min_size=1, max_size=9))
def test_whatever_the_fast_path_accepts_jinja_accepts_alike(parts: list[tuple[str, str]]) -> None:
    text = "".join(token + space for token, space in parts)
    quick = _fastjinja.analyse(text, expression=True)
    if quick is None:
        return
    env = environment()
    parser = Parser(env, text, state="variable")
    body = parser.parse_expression()  # raises if the fast path accepted invalid syntax
    assert parser.stream.eos
    ast = nodes.Template([nodes.Output([body], lineno=1)], lineno=1)
    ast.set_environment(env)
    trees = _fastjinja.parsed(text, expression=True)
    assert trees is not None
    assert _shape(trees[0][1], trees[0][2]) == _shape(body)
    assert sorted(quick[1]) == sorted(n.name for n in ast.find_all(nodes.Filter))
    if set(quick[1]) <= set(env.filters):  # Jinja's name analysis refuses unknown filters
        assert quick[0] == jinja2.meta.find_undeclared_variables(ast)
        compile_expression(text)  # and the compiler, folding constants, accepts it too
    reads = [
        n.attr
        for n in ast.find_all(nodes.Getattr)
        if isinstance(n.node, nodes.Name) and n.node.name == "inputs"
    ] + [
        n.arg.value
        for n in ast.find_all(nodes.Getitem)
        if isinstance(n.node, nodes.Name)
        and n.node.name == "inputs"
        and isinstance(n.arg, nodes.Const)
        and isinstance(n.arg.value, str)
    ]
    assert sorted(quick[2]) == sorted(reads)


@pytest.mark.parametrize(
    "text", ["count('x') > 1", "a | nosuchfilter", "(a", "a is defined", "a | sum(start=[])"]
)
def test_expression_error_agrees_with_compile_expression(text: str) -> None:
    try:
        compile_expression(text)
        expected = None
    except TemplateCompileError as exc:
        expected = exc.message
    assert expression_error(text) == expected


_BOOLEAN = ("And", "Or")
_ARITHMETIC = ("Add", "Sub", "Mul", "Div", "FloorDiv", "Mod", "Pow", "Concat")


def _operands(node: object, group: tuple[str, ...]) -> list[object]:
    """The operands of a chain of `group` operators, flattened (as the fast path builds them)."""
    if type(node).__name__ not in group:
        return [node]
    children = node.nodes if type(node).__name__ == "Concat" else [node.left, node.right]  # type: ignore[attr-defined]
    return [leaf for child in children for leaf in _operands(child, group)]


def _shape(node: object, literals: tuple[object, ...] = ()) -> object:
    """A node as nested tuples of class name and fields, operator chains flattened to `Op`.

    The fast path's `Const` nodes hold a slot into `literals`.
    """
    name = type(node).__name__
    if name == "Slot":
        return literals[node.index]  # type: ignore[attr-defined]
    for group in (_BOOLEAN, _ARITHMETIC):
        if name in group:
            return ("Op", [_shape(x, literals) for x in _operands(node, group)])
    if name in ("Not", "Neg", "Pos"):
        return ("Op", [_shape(node.node, literals)])  # type: ignore[attr-defined]
    if name == "Op":
        return ("Op", [_shape(x, literals) for x in node.nodes])  # type: ignore[attr-defined]
    if isinstance(node, list):
        return [_shape(x, literals) for x in node]
    fields = getattr(node, "fields", None)
    if not fields:
        return node
    keep = [f for f in fields if f not in ("ctx", "dyn_args", "dyn_kwargs")]
    return (name, *[_shape(getattr(node, f), literals) for f in keep])


TREES = [
    "facts.tickets[0].data.category == 'billing'",
    "a == b != 'c' and not d or e in [1, 2.5] and f not in g",
    "{'q': x.y | first, 'r': f(1, k=true)}",
    "x.data.urgency > 2",
    "-a.b ** 2 + c ~ d * e // f | abs - g",
    "a or b and c or not d",
]


@pytest.mark.parametrize("text", TREES)
def test_fast_trees_have_jinja_shapes(text: str) -> None:
    quick = _fastjinja.parsed(text, expression=True)
    assert quick is not None
    body = Parser(environment(), text, state="variable").parse_expression()
    assert _shape(quick[0][1], quick[0][2]) == _shape(body)


@pytest.mark.parametrize(
    ("text", "literals"),
    [
        ("a['x'] == 3 and b != \"y\"", ("x", 3, "y")),
        ("f(1.5, k='s{')", None),  # a brace in a string: Jinja decides
        ("x1 + 2", (2,)),
        ("inputs[0] ~ inputs['a']", (0, "a")),
    ],
)
def test_expressions_share_a_skeleton_and_keep_their_literals(
    text: str, literals: tuple[object, ...] | None
) -> None:
    found = _fastjinja.parsed(text, expression=True)
    assert (found[0][2] if found else None) == literals
