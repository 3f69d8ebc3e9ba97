"""The committed language reference is exactly what the schemas generate."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from converge_dsl._resources import schemas_folder

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "reference.md"
REGENERATE = "python docs/reference.py docs/reference.md"


def _generator() -> ModuleType:
    """docs/reference.py, the generator script beside the page (not part of the package)."""
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs" / "reference.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_REFERENCE = _generator()
DOCUMENTS = _REFERENCE.DOCUMENTS
main = _REFERENCE.main
render_reference = _REFERENCE.render_reference


def test_the_committed_reference_matches_the_schemas() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == render_reference(), (
        f"docs/reference.md is stale: run `{REGENERATE}`"
    )


def test_a_changed_description_changes_the_reference(tmp_path: Path) -> None:
    shutil.copytree(schemas_folder(), tmp_path, dirs_exist_ok=True)
    path = tmp_path / "pipeline.v1.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    budget = schema["properties"]["budget"]["properties"]
    budget["max_cycles"]["description"] = "Cycles | <at most>."
    path.write_text(json.dumps(schema), encoding="utf-8")
    changed = render_reference(tmp_path)
    assert changed != render_reference()
    assert "| `max_cycles` | integer |  | Cycles \\| &lt;at most&gt;. Default `100`." in changed


def test_every_document_kind_present_has_a_section() -> None:
    text = render_reference()
    for file, short, title in DOCUMENTS:
        present = (schemas_folder() / file).is_file()
        assert (f"## {title} {{#{short}}}" in text) is present, file


def test_every_link_in_the_reference_has_its_anchor_once() -> None:
    text = render_reference()
    anchors = re.findall(r"\{#([a-z0-9-]+)\}|<span id=\"([a-z0-9-]+)\">", text)
    defined = [a or b for a, b in anchors]
    assert len(defined) == len(set(defined))
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links
    assert links <= set(defined)


def test_every_field_of_the_pipeline_schema_is_listed() -> None:
    text = render_reference()
    schema = json.loads((schemas_folder() / "pipeline.v1.json").read_text(encoding="utf-8"))
    for field, node in schema["properties"].items():
        assert f"| `{field}` |" in text, field
        assert node["description"].split(".")[0] in text, field


def test_main_writes_the_reference(tmp_path: Path) -> None:
    out = tmp_path / "reference.md"
    assert main([str(out)]) == 0
    assert out.read_text(encoding="utf-8") == render_reference()
    assert main([]) == 3


def test_an_option_is_never_taken_for_the_file_to_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _generator().main(["--help"]) == 0
    assert _generator().main(["-o"]) == 3
    assert list(tmp_path.iterdir()) == []
    assert "usage: python docs/reference.py OUT.md" in capsys.readouterr().err
