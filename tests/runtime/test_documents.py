from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl.engine import Fact, PromotionRecord, Provenance
from converge_dsl.engine.types import freeze_json
from converge_dsl.runtime import RunResultDocument, exported_schemas
from converge_dsl.runtime import _documents as documents
from converge_dsl.runtime._documents import FactModel, UsageModel, write_run_result

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def test_committed_schemas_equal_the_generated_ones() -> None:
    for name, schema in exported_schemas().items():
        assert json.loads((SCHEMAS / name).read_text(encoding="utf-8")) == schema, name


# -- the streaming writer -------------------------------------------------------------

_ODD_DATA = {
    "z": [1, 2.5, 1e-07, 1e16, -0.0, True, None],
    "a": {"nested": ["ü", "\u2028", "tab\there", 'quote"back\\slash', "\x00\x1f\x7f"]},
}


def _facts(count: int, key: str = "signals", *, data: bool = True) -> list[Fact]:
    shared = Provenance("writer@p", "model-x", None)
    return [
        Fact(
            key,
            f"f{i}",
            f"line {i}\nsecond ∑ line" if i % 3 else "plain",
            shared if i % 2 else Provenance(f"s{i}@p"),
            [1.0, 0.5, 1e-05, 0.30000000000000004][i % 4],
            PromotionRecord("auto", "engine", 1, (), None, i + 1),
            freeze_json(_ODD_DATA) if data and i % 5 == 0 else None,
        )
        for i in range(count)
    ]


def _summary(**extra: Any) -> RunResultDocument:
    return RunResultDocument.build(
        stop_reason="converged",
        cycles=2,
        facts=(),
        diagnostics=[],
        usage=UsageModel(model_calls=1),
        **extra,
    )


def _streamed(groups: list[tuple[str, list[Fact]]], summary: RunResultDocument) -> str:
    out = io.StringIO()
    write_run_result(summary, groups, out)
    return out.getvalue()


def _whole(groups: list[tuple[str, list[Fact]]], summary: RunResultDocument) -> str:
    facts = {key: [FactModel.of(f) for f in items] for key, items in groups if items}
    return summary.model_copy(update={"facts": facts}).model_dump_json(indent=2)


@pytest.mark.parametrize("chunk", [1, 2, 7, 1024])
def test_streamed_facts_are_byte_identical_to_the_whole_document(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(documents, "_CHUNK", chunk)
    groups = [("seeds", _facts(3, "seeds")), ("votes", []), ("signals", _facts(11))]
    summary = _summary()
    text = _streamed(groups, summary)
    assert text == _whole(groups, summary)
    parsed = json.loads(text)
    jsonschema.validate(parsed, json.loads((SCHEMAS / "run-result.v1.json").read_text("utf-8")))
    assert list(parsed["facts"]) == ["seeds", "signals"]


def test_a_document_without_facts_streams_as_it_dumps() -> None:
    summary = _summary(held={"b": False, "a": True})
    assert _streamed([], summary) == summary.model_dump_json(indent=2)
    assert '"facts": {}' in _streamed([("signals", [])], summary)


def test_a_document_that_already_holds_facts_is_refused() -> None:
    summary = _summary()
    full = summary.model_copy(update={"facts": {"seeds": [FactModel.of(_facts(1)[0])]}})
    with pytest.raises(ValueError, match="without facts"):
        _streamed([], full)


def test_no_write_holds_more_than_one_chunk_of_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bounded resource: the largest single write, for 5,000 facts in chunks of 100."""
    monkeypatch.setattr(documents, "_CHUNK", 100)
    writes: list[int] = []

    class Recorder(io.StringIO):
        def write(self, text: str) -> int:
            writes.append(len(text))
            return super().write(text)

    facts = _facts(5_000, data=False)
    out = Recorder()
    write_run_result(_summary(), [("signals", facts)], out)
    per_fact = len(out.getvalue()) / len(facts)
    assert max(writes) < 100 * per_fact * 1.5
    assert len(json.loads(out.getvalue())["facts"]["signals"]) == 5_000


def test_a_run_document_is_built_unvalidated_yet_validates_and_shares_provenances() -> None:
    seed, rule = Provenance("seeds@p"), Provenance("r@p", model_id="m")
    record = PromotionRecord("auto", "engine", 1)
    facts = tuple(
        Fact("signals", f"f{i}", f"text {i}", seed if i % 2 else rule, 0.5, record, {"n": i})
        for i in range(6)
    )
    document = RunResultDocument.build(
        stop_reason="converged", cycles=1, facts=facts, diagnostics=[], usage=UsageModel()
    )
    built = document.facts["signals"]
    # One provenance model per provenance, shared by its facts (they are frozen).
    assert built[1].provenance is built[3].provenance
    assert built[0].provenance is not built[1].provenance
    # The schema is the contract: validating what was built unvalidated changes nothing.
    again = RunResultDocument.model_validate(document.model_dump())
    assert again == document
    assert again.model_dump_json() == document.model_dump_json()
    assert (
        built[0].model_fields_set
        == FactModel.model_validate(built[0].model_dump()).model_fields_set
    )


def _shaped(shape: str) -> tuple[Fact, ...]:
    """Facts of one shape: plain text, odd data, model provenances, many keys, none."""
    record = PromotionRecord("auto", "engine", 3, ("suggestor:r",), "cycle/3/r", 7)
    if shape == "none":
        return ()
    if shape == "many keys":
        return tuple(
            Fact(f"k{i}", "only", "t", Provenance(f"r{i}@p"), 1.0, record) for i in range(40)
        )
    model = Provenance("llm@p", model_id="m-1", account="acct")
    return tuple(
        Fact(
            "hypotheses" if i % 2 else "signals",
            f"id-{i}",
            "" if i == 0 else f"text ∑ {i}\nline",
            model if shape == "models" and i % 3 else Provenance("seeds@p"),
            [0.0, 1.0, 0.25, 1e-09][i % 4],
            record,
            freeze_json(_ODD_DATA) if shape == "data" and i % 2 else None,
        )
        for i in range(9)
    )


@pytest.mark.parametrize("shape", ["text", "data", "models", "many keys", "none"])
def test_documents_built_unvalidated_are_what_validating_them_gives(shape: str) -> None:
    """The schema is the contract: the models built without validation, for several shapes,
    are those the schema validates from their own dump and JSON (values, field sets, text)."""
    facts = _shaped(shape)
    document = RunResultDocument.build(
        stop_reason="converged", cycles=2, facts=facts, diagnostics=[], usage=UsageModel()
    )
    grouped: dict[str, list[Fact]] = {}
    for fact in facts:
        grouped.setdefault(fact.key, []).append(fact)
    made = documents.fact_models(grouped.items())
    for again in (
        RunResultDocument.model_validate(document.model_dump()),
        RunResultDocument.model_validate_json(document.model_dump_json()),
    ):
        assert again == document
        assert again.model_dump_json() == document.model_dump_json()
        assert again.facts == made
    for items in made.values():
        for built in items:
            checked = FactModel.model_validate(built.model_dump())
            assert checked == built
            assert checked.model_fields_set == built.model_fields_set
            assert checked.provenance.model_fields_set == built.provenance.model_fields_set
            assert built.__pydantic_extra__ is None
            assert built.__pydantic_private__ is None
            with pytest.raises(ValueError, match="frozen"):
                built.id = "other"  # type: ignore[misc]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)


@given(_JSON)
def test_plain_data_is_the_canonical_json_read_back(value: object) -> None:
    from converge_dsl.engine.types import canonical_json

    frozen = freeze_json(value)
    expected = json.loads(canonical_json(frozen))
    assert documents._plain(frozen) == expected
    assert json.dumps(documents._plain(frozen)) == json.dumps(expected)  # the same key order too


def test_plain_data_that_is_not_json_is_walked_as_it_is() -> None:
    import datetime

    day = datetime.date(2026, 1, 2)
    frozen = freeze_json({"b": [day], "a": 1})
    assert documents._plain(frozen) == {"a": 1, "b": [day]}
    assert list(documents._plain(frozen)) == ["a", "b"]


def test_fact_models_are_those_fact_model_of_builds() -> None:
    groups = [("signals", _facts(12)), ("seeds", _facts(3, "seeds", data=False))]
    made = documents.fact_models(groups)
    expected = {key: [FactModel.of(fact) for fact in items] for key, items in groups}
    assert made == expected
    assert list(made) == ["signals", "seeds"]  # the order given
    pairs = [(a, b) for key in made for a, b in zip(made[key], expected[key], strict=True)]
    assert all(a.model_dump_json() == b.model_dump_json() for a, b in pairs)
    assert all(a.model_fields_set == b.model_fields_set for a, b in pairs)
    assert all(a.provenance.model_fields_set == b.provenance.model_fields_set for a, b in pairs)


def test_one_provenance_model_per_provenance_value_for_every_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = documents.ProvenanceModel.of
    first, again = made(Provenance("r@p")), made(Provenance("r@p"))
    assert first is again  # equal provenances, not only the same object
    assert made(Provenance("r@p", model_id="m")) is not first
    assert made(Provenance("r@p", model_id="m")).model_id == "m"
    monkeypatch.setattr(documents, "_PROVENANCES", {})
    monkeypatch.setattr(documents, "_KEEP_PROVENANCES", 2)
    for name in ("a", "b", "c", "d", "e"):
        assert made(Provenance(f"{name}@p")).source == f"{name}@p"
        assert len(documents._PROVENANCES) <= 2  # bounded, whatever the run proposes


def test_fact_models_are_built_with_the_older_objects_frozen(
    monkeypatch: pytest.MonkeyPatch, unfrozen_collector: None
) -> None:
    """Its collections walk only the models it makes, as a run's walk only what it made."""
    import gc

    seen: list[int] = []
    made = FactModel.of

    def counted(fact: Fact) -> FactModel:
        seen.append(gc.get_freeze_count())
        return made(fact)

    monkeypatch.setattr(FactModel, "of", counted)
    documents.fact_models([("signals", _facts(3))])
    assert len(seen) == 3
    assert all(frozen > 0 for frozen in seen)
    assert gc.get_freeze_count() == 0  # given back


def test_a_documents_repr_counts_its_facts_instead_of_listing_them() -> None:
    facts = tuple(_facts(2_000))
    document = RunResultDocument.build(
        stop_reason="converged", cycles=2, facts=facts, diagnostics=[], usage=UsageModel()
    )
    shown = repr(document)
    assert "stop_reason='converged'" in shown
    assert "'signals': '<2000 facts>'" in shown
    assert len(shown) < 400
    assert len(document.model_dump_json()) > 100_000  # the document itself holds them all


def test_fact_models_key_their_facts_by_plain_str() -> None:
    """A run's keys are `ContextKey`s (a `str` subclass); the document's are plain `str`, so
    its `model_dump()` is plain data (`yaml.safe_dump` refuses a subclass)."""
    import yaml

    from converge_dsl.engine.types import ContextKey

    made = documents.fact_models([(ContextKey("signals"), _facts(2))])
    assert [type(key) for key in made] == [str]
    document = RunResultDocument.build(
        stop_reason="converged", cycles=1, facts=(), diagnostics=[], usage=UsageModel()
    ).model_copy(update={"facts": made})
    yaml.safe_dump(document.model_dump())
