"""No branch on a suggestor kind's name outside that kind's own modules (docs/architecture.md §16).

Every layer reads a suggestor through its kind's object in the registry it is
handed (`spec.targets`, `spec.templates()`, `kind.builder()`...). A comparison
of a kind-name literal with anything, a subscript or `.get` of `"kind"`
compared with one, a mapping keyed by kind names or a `match` on them is a
branch on the name; it may appear only in the modules of that kind, listed here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from converge_dsl.validation import KINDS

PACKAGE = Path(__file__).resolve().parents[2] / "converge_dsl"

# Each built-in kind's own modules (paths under converge_dsl/).
OWN_MODULES: dict[str, frozenset[str]] = {
    "seed": frozenset({"frontend/_kind_seed.py", "compiler/_kinds.py"}),
    "rule": frozenset({"frontend/_kind_rule.py", "compiler/_kinds.py"}),
    "llm": frozenset({"frontend/_kind_llm.py", "compiler/_llm.py"}),
    "tool": frozenset({"frontend/_kind_tool.py", "compiler/_tool.py"}),
    "agent": frozenset(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "agents").glob("*.py")),
    "pack": frozenset(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "packs").glob("*.py")),
}
# Words that are kind names but mean something else in these modules (not a suggestor kind).
OTHER_MEANINGS: dict[str, frozenset[str]] = {
    # graph node kinds: a pack *source* node, not a pack suggestor
    "pack": frozenset(
        {
            "graph/_mermaid.py",
            "graph/_dot.py",
            "graph/_html.py",
            "graph/_svg.py",
            "graph/_text.py",
            "graph/_layout.py",
            "graph/_model.py",
            "graph/_build.py",
            "cli/__init__.py",
            "cli/_schema.py",
        }
    ),
    # a scheduling solver's `rule` parameter; a pack definition's template kind
    # (`solver`, `rule`...), which the pack's own modules read
    "rule": frozenset({"solvers/scheduling.py", "packs/_bind.py", "packs/_info.py"}),
    "agent": frozenset({"solvers/assignment.py"}),
    # SARIF's `tool` object; a message role `tool` (a tool result in the wire formats);
    # the tool a cassette's line records a call of
    "tool": frozenset(
        {"frontend/_sarif.py", "models/_common.py", "models/_openai.py", "tools/_cassette.py"}
    ),
    "seed": frozenset(
        {"engine/reference.py", "engine/_admission.py", "engine/_explain.py", "graph/_svg.py"}
    ),
}

# The registrations: mappings from kind names to kinds (or their references).
REGISTRATIONS = frozenset({"frontend/_registry.py", "validation.py", "packs/_lint.py"})


def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def kind_branches(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, kind name) of each comparison with, mapping keyed by or case on a kind name."""
    names = set(OWN_MODULES)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for part in (node.left, *node.comparators):
                values = part.elts if isinstance(part, ast.Tuple | ast.Set | ast.List) else [part]
                found += [(node.lineno, v) for v in map(_literal, values) if v in names]
        elif isinstance(node, ast.Dict):
            found += [
                (node.lineno, k) for k in map(_literal, filter(None, node.keys)) if k in names
            ]
        elif isinstance(node, ast.MatchValue):
            value = _literal(node.value)
            if value in names:
                found.append((node.lineno, value))
    return found


def _offences() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = str(path.relative_to(PACKAGE))
        for line, name in kind_branches(ast.parse(path.read_text(encoding="utf-8"))):
            if relative in OWN_MODULES[name] | REGISTRATIONS | OTHER_MEANINGS.get(name, set()):
                continue
            out.append(f"{relative}:{line}: branches on kind {name!r}")
    return out


def test_no_module_branches_on_a_kind_name_outside_the_kinds_own() -> None:
    assert _offences() == []


def test_the_listed_kinds_are_the_registered_ones() -> None:
    assert tuple(OWN_MODULES) == KINDS.names


@pytest.mark.parametrize(
    "source",
    [
        'if s["kind"] == "agent": pass',
        'if spec.get("kind") != "llm": pass',
        'x = "pack" == kind',
        'ok = kind in ("seed", "rule")',
        'table = {"seed": 1, "llm": 2}',
        'match kind:\n    case "agent":\n        pass',
    ],
)
def test_the_check_sees_a_branch(source: str) -> None:
    """The check has teeth: each form of a branch on a kind name is found."""
    assert kind_branches(ast.parse(source))


def test_the_check_leaves_other_text_alone() -> None:
    assert kind_branches(ast.parse('print("agent"); name = "rule of thumb"')) == []
