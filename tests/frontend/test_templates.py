"""`template_problems`: an item of a number, boolean or none literal is CD287, a warning.

Before, `{{ 2[0] }}` passed validate in silence and the run failed with "int
object has no element 0".
"""

from __future__ import annotations

import pytest

from converge_dsl import codes
from converge_dsl.diagnostics import Severity
from converge_dsl.frontend import check_document, load_text

HEAD = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: items
seeds: [{id: s, content: go}]
suggestors:
  - name: echo
    kind: rule
    dependencies: [seeds]
    emit:
      - key: seeds
        id: e
        content: """


def _found(content: str) -> list[tuple[str, str, int]]:
    diagnostics = check_document(load_text(HEAD + content + "\n", "items.yaml")).diagnostics
    return [(d.severity, d.message, d.line) for d in diagnostics if d.code == codes.LITERAL_INDEX]


@pytest.mark.parametrize(
    ("content", "shown"),
    [
        ('"{{ 2[0] }}"', "2"),
        ('"{{ 1.5[0:1] }}"', "1.5"),
        ("\"{{ (none)['x'] }}\"", "none"),
        ('"{{ true[0] | default(1) }}"', "true"),
        ("|\n          one\n          {{ 3[0] }}", "3"),
    ],
)
def test_an_item_of_a_literal_without_items_is_a_warning(content: str, shown: str) -> None:
    found = _found(content)
    assert [(s, m.split(",")[0]) for s, m, _ in found] == [
        (Severity.WARNING, f"template takes an item of the literal {shown}")
    ]
    assert found[0][2] == (14 if content.startswith("|") else 12)


@pytest.mark.parametrize(
    "content",
    ['"{{ [1][0] }}"', "\"{{ 'ab'[1] }}\"", '"{{ facts.seeds[0].id }} {{ 2 }}[0]"', '"x2[0]"'],
)
def test_items_of_lists_texts_and_facts_are_fine(content: str) -> None:
    assert _found(content) == []
