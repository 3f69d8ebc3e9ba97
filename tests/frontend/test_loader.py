from __future__ import annotations

from pathlib import Path

import pytest

from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import _loader, load_file, load_text


def _codes(text: str) -> list[str]:
    with pytest.raises(PipelineInvalid) as caught:
        load_text(text, "f.yaml")
    return [d.code for d in caught.value.diagnostics]


def test_data_and_source_map_are_built_together() -> None:
    doc = load_text("a:\n  b: [1, 'x', true, null, 2.5]\n  c: |\n    line\n", "f.yaml")
    assert doc.data == {"a": {"b": [1, "x", True, None, 2.5], "c": "line\n"}}
    location = doc.source_map.get(("a", "b", 1))
    assert location is not None
    assert (location.span.line, location.span.column, location.style) == (2, 10, "'")
    assert doc.source_map.key_span(("a", "c")).line == 3
    assert doc.source_map.get(("a", "c")).style == "|"  # type: ignore[union-attr]
    assert doc.source_map.span(("a", "missing", 3)) == doc.source_map.span(("a",))


def test_every_problem_is_reported_not_only_the_first() -> None:
    assert _codes("a: yes\nb: 010\nb: 1\nc: !!binary eA==\n") == [
        "CD007",
        "CD008",
        "CD002",
        "CD004",
    ]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("a: [1\n", "CD001"),
        ("a:\n\t- 1\n", "CD003"),
        ("a: 1\n---\nb: 2\n", "CD005"),
        ("a: &x [1, *x]\n", "CD009"),
        ("", "CD013"),
        ("[1, 2]: x\n", "CD012"),
        ("a: .nan\n", "CD008"),
        # libyaml's own depth bound (1000 flow levels) is met before the loader's
        ("a: " + "[" * 1200 + "]" * 1200 + "\n", "CD010"),
        ("a: " + "{b: " * 1200 + "1" + "}" * 1200 + "\n", "CD010"),
    ],
    ids=lambda value: value[:12] if isinstance(value, str) else value,
)
def test_located_load_errors(text: str, code: str) -> None:
    assert _codes(text) == [code]


def test_files_over_the_size_limit_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_loader, "MAX_BYTES", 10)
    path = tmp_path / "big.yaml"
    path.write_text("a: 1234567890\n", encoding="utf-8")
    with pytest.raises(PipelineInvalid) as caught:
        load_file(path, display="big.yaml")
    assert caught.value.diagnostics[0].code == "CD011"


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(PipelineInvalid) as caught:
        load_file(tmp_path / "nope.yaml")
    assert caught.value.diagnostics[0].code == "CD014"


def test_bom_and_quoted_traps_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_bytes("\ufeffa: 'yes'\nb: \"010\"\nc: 2024-01-01\n".encode())
    assert load_file(path).data == {"a": "yes", "b": "010", "c": "2024-01-01"}


def test_tag_resolution_agrees_with_pyyaml() -> None:
    """Plain, quoted and block scalars mean what PyYAML's own (composing) loader reads."""
    import yaml

    text = "a: [1, '1', 1.5, x, ~, true, '', 2001-01-01, \"yes\", 2.5]\nb: |\n  z\n"
    expected = yaml.load(text, Loader=yaml.CSafeLoader)
    expected["a"][7] = "2001-01-01"  # a timestamp is text in YAML 1.2
    assert load_text(text, "f.yaml").data == expected


def test_a_written_tag_is_read_against_the_whole_document() -> None:
    """`!!int 000123` is a decimal, unless the same text is also written untagged (a trap)."""
    assert load_text("a: !!int 000123\n", "f.yaml").data == {"a": 123}
    assert _codes("a: !!int 000123\nb: 000123\n") == ["CD008", "CD008"]
    assert _codes("a: [0x1F, !!int 0x1F]\n") == ["CD008", "CD008"]


def test_source_map_covers_aliases_sequences_and_mappings() -> None:
    doc = load_text("base: &b {k: v}\nitems:\n  - *b\n  - name: nn\n", "f.yaml")
    assert doc.source_map.span(("items", 0, "k")).line == 1  # the alias points at its anchor
    assert doc.source_map.key_span(("items", 1, "name")).column == 5
    assert doc.source_map.get(("items", 5)) is None
    assert doc.source_map.get(("items", "x")) is None
    assert doc.source_map.locate(("items", 1, "name", 0)).span.line == 4


def test_the_size_cap_is_a_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`CONVERGE_DSL_MAX_FILE_BYTES` moves the cap both ways; the hint names it."""
    path = tmp_path / "big.yaml"
    path.write_text("a: 1234567890\n", encoding="utf-8")
    monkeypatch.setenv(_loader.MAX_BYTES_VARIABLE, "10")
    with pytest.raises(PipelineInvalid) as caught:
        load_file(path, display="big.yaml")
    problem = caught.value.diagnostics[0]
    assert (problem.code, problem.message) == ("CD011", "file is 14 bytes; the limit is 10")
    assert "CONVERGE_DSL_MAX_FILE_BYTES" in (problem.hint or "")
    with pytest.raises(PipelineInvalid):
        load_text("a: 1234567890\n", "t.yaml")
    monkeypatch.setattr(_loader, "MAX_BYTES", 10)
    monkeypatch.setenv(_loader.MAX_BYTES_VARIABLE, "100")
    assert load_file(path).data == {"a": 1234567890}


@pytest.mark.parametrize("value", ["0", "-5", "8M", "1.5"])
def test_a_size_cap_that_is_not_a_number_of_bytes_is_a_usage_error(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge_dsl.errors import UsageError

    monkeypatch.setenv(_loader.MAX_BYTES_VARIABLE, value)
    with pytest.raises(UsageError, match="CONVERGE_DSL_MAX_FILE_BYTES"):
        load_text("a: 1\n", "t.yaml")
