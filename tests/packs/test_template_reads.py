"""A pack's template suggestor is held to the data-flow rules as the pipeline binds it."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: bound
packs: {strategy: ">=1.0"}
repositories: [builtin]
seeds:
  - {id: h, key: hypotheses, content: a hypothesis}
suggestors:
  - name: position
    kind: pack
    use: strategy/positioning
    with: {product: tea}
    input: INPUT
    output: strategies
"""


def _validate(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text(text, encoding="utf-8")
    assert run(["lock", "p.yaml"], io.StringIO(), io.StringIO()) == 0
    out = io.StringIO()
    run(["validate", "p.yaml"], out, io.StringIO())
    return out.getvalue()


def test_a_key_the_pack_template_reads_and_nothing_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = _validate(tmp_path, PIPELINE.replace("INPUT", "hypotheses"), monkeypatch)
    assert output.startswith(
        "warning[CD253]: 'position' (strategy/positioning) reads 'competitors' in its pack "
        "template (count('competitors')), which no seed or suggestor writes\n"
        "  --> p.yaml:11:10\n"
    )


def test_a_key_the_pack_template_reads_and_its_binding_is_not_re_run_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = PIPELINE.replace("INPUT", "hypotheses").replace(
        "  - {id: h,", "  - {id: c, key: competitors, content: a rival}\n  - {id: h,"
    )
    output = _validate(tmp_path, text, monkeypatch)
    assert "warning[CD252]: 'position' (strategy/positioning) reads 'competitors'" in output
    assert "hint: give it dependencies: [hypotheses, competitors]" in output
    fixed = text.replace("input: hypotheses", "input: competitors")
    assert _validate(tmp_path, fixed, monkeypatch) == "1 file valid\n"


def test_an_unknown_key_in_a_pack_template_is_located_in_the_pack(tmp_path: Path) -> None:
    from converge_dsl.frontend import TemplateSite, load_text, unknown_reads

    document = load_text("template:\n  when: \"count('competitor') > 0\"\n", "pack.yaml")
    site = TemplateSite(("template", "when"), document.data["template"]["when"], True, frozenset())
    (found,) = unknown_reads(document, site, frozenset({"competitors"}))
    assert (found.code, found.line, found.column, found.end_column) == ("CD250", 2, 17, 27)
    assert found.hint == "did you mean 'competitors'?"


def test_validate_builds_each_pack_template_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads check and the pack tool check take the same built template."""
    import converge_dsl.packs._bind as bind

    built: list[str] = []
    instantiate = bind.instantiate_template

    def counted(spec: Any, definition: Any) -> dict[str, Any]:
        built.append(spec.name)
        return instantiate(spec, definition)

    text = PIPELINE.replace("INPUT", "hypotheses")
    monkeypatch.setattr(bind, "instantiate_template", counted)
    output = _validate(tmp_path, text, monkeypatch)
    assert "warning[CD253]: 'position' (strategy/positioning) reads 'competitors'" in output
    assert built == ["position"]
