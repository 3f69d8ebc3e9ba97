"""Completion over stdio: schema keys at any depth, declared names where they fit, template
names inside expressions, and the last good analysis while the text is broken mid-edit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lsprotocol import types as lsp

from tests.lsp.conftest import at

if TYPE_CHECKING:
    from tests.lsp.conftest import Session

pytestmark = pytest.mark.asyncio

BUILTIN = {"seeds", "strategies", "competitors", "evaluations", "diagnostic"}


async def _labels(session: Session, name: str, text: str, needle: str, offset: int) -> list[str]:
    version = session.replace(name, text)
    del version
    result = await session.client.text_document_completion_async(
        lsp.CompletionParams(
            lsp.TextDocumentIdentifier(session.uri(name)), at(text, needle, offset)
        )
    )
    assert isinstance(result, lsp.CompletionList)
    return [item.label for item in result.items]


@pytest.fixture
def typed(session: Session, project: Path) -> str:
    text = (project / "typed.yaml").read_text(encoding="utf-8")
    session.open("typed.yaml", text)
    return text


async def test_schema_keys_of_a_suggestor_by_its_kind(session: Session, typed: str) -> None:
    text = typed.replace('    when: "count', '    de\n    when: "count')
    labels = await _labels(session, "typed.yaml", text, "    de\n", 6)
    assert labels == ["description"]  # `dependencies` is already there; a rule has no `model`
    text = typed.replace("    target: evaluations\n", "    target: evaluations\n    \n")
    labels = await _labels(session, "typed.yaml", text, "evaluations\n    \n", 16)
    assert {"description", "max_tokens", "temperature"} <= set(labels)
    assert "emit" not in labels
    assert "model" not in labels


async def test_schema_keys_deep_inside(session: Session, typed: str) -> None:
    text = typed.replace("      format: json\n", "      format: json\n      \n")
    labels = await _labels(session, "typed.yaml", text, "format: json\n      \n", 19)
    assert "data" in labels
    assert "format" not in labels
    text = typed.replace("models:\n", "budget:\n  max_\nmodels:\n")
    labels = await _labels(session, "typed.yaml", text, "  max_\n", 6)
    assert {"max_cycles", "max_facts", "max_tokens", "max_wall_s"} <= set(labels)


async def test_context_keys_where_a_key_is_named(session: Session, typed: str) -> None:
    text = typed.replace("dependencies: [strategies]", "dependencies: [strategies, ]")
    labels = await _labels(session, "typed.yaml", text, "[strategies, ]", 13)
    assert {"tickets", *BUILTIN} <= set(labels)
    text = typed.replace("target: evaluations", "target: ti")
    assert await _labels(session, "typed.yaml", text, "target: ti", 10) == ["tickets"]
    text = typed.replace("      - key: strategies\n", "      - key: \n")
    assert "tickets" in await _labels(session, "typed.yaml", text, "      - key: \n", 13)


async def test_models_and_enum_values(session: Session, typed: str) -> None:
    text = typed.replace("    model: default\n", "    model: \n")
    assert await _labels(session, "typed.yaml", text, "    model: \n", 11) == ["default"]
    assert await _labels(session, "typed.yaml", typed, "format: json", 8) == [
        "text",
        "lines",
        "json",
    ]


async def test_inside_expressions_and_templates(session: Session, typed: str) -> None:
    text = typed.replace("count('tickets') > 0", "count('t")
    assert await _labels(session, "typed.yaml", text, "count('t", 8) == ["tickets"]
    text = typed.replace("count('tickets') > 0", "facts.")
    assert "tickets" in await _labels(session, "typed.yaml", text, 'facts."', 6)
    text = typed.replace("{{ inputs.queue }}", "{{ inputs. }}")
    assert await _labels(session, "typed.yaml", text, "{{ inputs. }}", 10) == ["queue"]
    text = typed.replace("{{ item.verdict }}", "{{ item. }}")
    assert await _labels(session, "typed.yaml", text, "{{ item. }}", 8) == ["id", "verdict"]
    text = typed.replace("'data.category'", "'data.'")
    assert await _labels(session, "typed.yaml", text, "'data.'", 6) == ["category", "priority"]
    text = typed.replace("| list | length", "| le")
    assert await _labels(session, "typed.yaml", text, "| le", 4) == ["length"]
    labels = await _labels(session, "typed.yaml", typed, "{{ facts.tickets", 3)
    assert {"facts", "count", "has", "fact", "inputs", "range"} <= set(labels)


async def test_broken_text_keeps_the_last_good_analysis(session: Session, typed: str) -> None:
    await session.diagnostics("typed.yaml", 1)
    broken = typed.replace("name: escalate", "name: [escalate").replace(
        "count('tickets') > 0", "count('"
    )
    version = session.replace("typed.yaml", broken)
    assert [d.code for d in await session.diagnostics("typed.yaml", version)] == ["CD001"]
    labels = await _labels(session, "typed.yaml", broken, "count('", 7)
    assert "tickets" in labels


async def test_names_in_a_model_script_and_a_test(session: Session, project: Path) -> None:
    session.open("typed.yaml")
    script = (project / "typed.script.yaml").read_text(encoding="utf-8")
    session.open("typed.script.yaml", script)
    text = script.replace("{suggestor: summarise}", "{suggestor: }")
    assert await _labels(session, "typed.script.yaml", text, "{suggestor: }", 12) == [
        "escalate",
        "summarise",
    ]
    test = (project / "typed.test.yaml").read_text(encoding="utf-8")
    session.open("typed.test.yaml", test)
    text = test.replace("[has-strategy]", "[]")
    assert await _labels(session, "typed.test.yaml", text, "invariants: [", 13) == ["has-strategy"]


async def test_completion_in_a_long_pipeline_reads_the_entry_at_the_cursor(
    session: Session, project: Path
) -> None:
    typed = (project / "typed.yaml").read_text(encoding="utf-8")
    head, rest = typed.split("suggestors:\n", 1)
    escalate = rest.split("  - name: summarise", 1)[0]
    copies = "".join(escalate.replace("name: escalate", f"name: escalate-{i}") for i in range(60))
    text = (
        f"{head}suggestors:\n{copies}  - name: summarise{rest.split('  - name: summarise', 1)[1]}"
    )
    assert text.count("\n") > 400  # past the size under which the whole text is loaded
    session.open("typed.yaml", text)
    await session.diagnostics("typed.yaml", 1)
    middle = text.index("name: escalate-30")
    edited = text[:middle] + text[middle:].replace("    when:", "    de\n    when:", 1)
    spot = edited.index("    de\n", middle) + 6
    session.replace("typed.yaml", edited)
    result = await session.client.text_document_completion_async(
        lsp.CompletionParams(
            lsp.TextDocumentIdentifier(session.uri("typed.yaml")), _pos(edited, spot)
        )
    )
    assert isinstance(result, lsp.CompletionList)
    assert [i.label for i in result.items] == ["description"]
    # Broken far above the cursor: the entry at the cursor still loads on its own.
    broken = edited.replace("name: typed", "name: [typed", 1)
    version = session.replace("typed.yaml", broken)
    assert [d.code for d in await session.diagnostics("typed.yaml", version)] == ["CD001"]
    spot = broken.index("    de\n", broken.index("name: escalate-30")) + 6
    result = await session.client.text_document_completion_async(
        lsp.CompletionParams(
            lsp.TextDocumentIdentifier(session.uri("typed.yaml")), _pos(broken, spot)
        )
    )
    assert isinstance(result, lsp.CompletionList)
    assert [i.label for i in result.items] == ["description"]


def _pos(text: str, index: int) -> lsp.Position:
    return lsp.Position(text.count("\n", 0, index), index - (text.rfind("\n", 0, index) + 1))


async def test_match_fields_in_a_model_script(session: Session, project: Path) -> None:
    session.open("typed.yaml")
    script = (project / "typed.script.yaml").read_text(encoding="utf-8")
    session.open("typed.script.yaml", script)
    text = script.replace(
        "  - match: {suggestor: summarise}\n", "  - match:\n      suggestor: summarise\n      \n"
    )
    labels = await _labels(session, "typed.script.yaml", text, "summarise\n      \n", 16)
    assert labels == ["contains", "turn", "regex"]  # `suggestor` is there already


async def test_context_keys_in_a_contributors_keys(session: Session, project: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "pipelines" / "agent-review.yaml").read_text(
        encoding="utf-8"
    )
    (project / "agent-review.yaml").write_text(text, encoding="utf-8")
    session.open("agent-review.yaml", text)
    edited = text.replace("keys: [constraints], persist", "keys: [constraints, ], persist")
    labels = await _labels(session, "agent-review.yaml", edited, "[constraints, ]", 14)
    assert {"strategies", "evaluations", "seeds"} <= set(labels)
