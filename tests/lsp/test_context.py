"""The cursor's context in a long pipeline is read from the entry at the cursor alone."""

from __future__ import annotations

from pathlib import Path

from converge_dsl.frontend import load_text
from converge_dsl.lsp._context import MARK, context_at

DATA = Path(__file__).parent / "data"


def _long() -> str:
    typed = (DATA / "typed.yaml").read_text(encoding="utf-8")
    head, rest = typed.split("suggestors:\n", 1)
    escalate, summarise = rest.split("  - name: summarise", 1)
    copies = "".join(escalate.replace("name: escalate", f"name: escalate-{i}") for i in range(60))
    return f"{head}suggestors:\n{copies}  - name: summarise{summarise}"


def test_a_key_typed_in_a_long_broken_text_is_found_in_its_entry() -> None:
    text = _long()
    good = load_text(text, "typed.yaml")
    middle = text.index("name: escalate-30")
    edited = text[:middle] + text[middle:].replace("    when:", "    de\n    when:", 1)
    broken = edited.replace("name: typed", "name: [typed", 1)  # the whole text does not load
    line = broken.count("\n", 0, broken.index("    de\n", middle)) + 1
    context = context_at(broken, (line, 7), good)
    assert context is not None
    assert context.on_key
    assert context.path == ("suggestors", 30, f"de{MARK}")
    assert context.prefix == "de"
    assert "dependencies" in context.siblings()
