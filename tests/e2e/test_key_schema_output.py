"""A key-schema rejection as the user reads it: the `run --format json` document and human output.

The pipeline language compiles `keys[].schema` and `seeds[].data` in another
part of this work; until then the run is driven through the engine API with
`PromotionPolicy(key_schemas=...)`, and the two outputs are rendered exactly
as `converge-dsl run` renders them. Regenerate with `UPDATE_EXPECTED=1`.
"""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path
from types import SimpleNamespace

from converge_dsl.cli._run import _print_human
from converge_dsl.engine import Engine, PromotionPolicy, ProposedFact, Provenance, SeedSuggestor
from converge_dsl.engine.testing import FnSuggestor
from converge_dsl.runtime._documents import RunResultDocument, UsageModel

EXPECTED = Path(__file__).parent / "expected"
SCHEMA = {
    "type": "object",
    "properties": {
        "category": {"enum": ["billing", "bug"]},
        "urgency": {"type": "integer", "minimum": 1, "maximum": 3},
    },
    "required": ["category", "urgency"],
}
ANSWERS = [
    ("t1", "Card charged twice", {"category": "billing", "urgency": 2}),
    ("t2", "Refund for order 1234", {"category": "refund", "urgency": 1}),
    (
        "t3",
        "App crashes on login" + " again" * 30,
        {"category": "bug", "urgency": 3, "note": "x" * 120},
    ),
]


def _document() -> RunResultDocument:
    engine = Engine(
        policy=PromotionPolicy(key_schemas={"tickets": SCHEMA}), declared_keys=("tickets",)
    )
    engine.register(SeedSuggestor("inbox", [("inbox", "three tickets", {"count": 3})]))
    source = Provenance("triage@support", model_id="scripted:triage")
    engine.register(
        FnSuggestor(
            "triage",
            ["seeds"],
            lambda ctx: [ProposedFact("tickets", i, c, 0.9, source, d) for i, c, d in ANSWERS],
        )
    )
    result = asyncio.run(engine.run())
    return RunResultDocument.build(
        stop_reason=str(result.stop_reason),
        cycles=result.cycles,
        facts=tuple(result.context),
        diagnostics=[],
        usage=UsageModel(),
    )


def _compare(name: str, text: str) -> None:
    path = EXPECTED / name
    if os.environ.get("UPDATE_EXPECTED"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_schema_rejection_in_the_json_document() -> None:
    _compare("key-schema-rejection.json", _document().model_dump_json(indent=2) + "\n")


def test_schema_rejection_in_the_human_output() -> None:
    out = io.StringIO()
    _print_human(SimpleNamespace(document=_document()), out)  # type: ignore[arg-type]
    _compare("key-schema-rejection.txt", out.getvalue())
