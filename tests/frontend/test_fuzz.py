"""Random mutations of valid pipelines never produce a traceback."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import check_document, load_text
from converge_dsl.validation import CHECKS

VALID = Path(__file__).resolve().parent.parent / "data" / "valid" / "full.yaml"
TEXT = VALID.read_text(encoding="utf-8")
PIECES = [
    ":",
    "-",
    " ",
    "\n",
    "{",
    "}",
    "[",
    "]",
    "'",
    '"',
    "&a",
    "*a",
    "!!",
    "{{",
    "}}",
    "{%",
    "yes",
    "1.10",
    "\t",
    "#",
    "kind: ",
    "name: x",
    "model: fast",
    "0",
    "null",
    "|",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, len(TEXT)), st.integers(0, 8), st.sampled_from(PIECES)),
        min_size=1,
        max_size=4,
    )
)
def test_mutations_give_diagnostics_or_success(edits: list[tuple[int, int, str]]) -> None:
    text = TEXT
    for at, cut, piece in edits:
        text = text[:at] + piece + text[at + cut :]
    try:
        document = load_text(text, "fuzz.yaml")
    except PipelineInvalid as exc:
        diagnostics = exc.diagnostics
    else:
        diagnostics = check_document(document, VALID.parent, checks=CHECKS).diagnostics
    assert all(d.line >= 1 and d.code.startswith("CD") for d in diagnostics)
