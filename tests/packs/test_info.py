"""`pack info NAME[@VERSION]`: suggestors, parameters, input outline, output, invariants."""

from __future__ import annotations

import io
import json
import os
import socket
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.packs import (
    FolderRepository,
    HttpRepository,
    build_archive,
    describe_pack,
    publish,
    sha256_hex,
    yank,
)
from converge_dsl.packs._index import archive_path, index_path
from converge_dsl.packs._outline import MAX_LINES, outline, type_summary

from .conftest import make_pack

EXPECTED = Path(__file__).parent / "expected"
PUBLISHED = "2026-01-02T03:04:05Z"

SOLVER_PACK = """\
apiVersion: converge-dsl/v1
kind: Pack
name: routes
version: {version}
description: >-
  Test routes: a solver and a rule.
requires: {{converge-dsl: ">=0.1"}}
suggestors:
  plan:
    kind: solver
    solver: optimization.routing
    description: Plan the routes.
    complexity: "O(n^2)"
    parameters:
      type: object
      additionalProperties: false
      properties:
        speed: {{type: number, exclusiveMinimum: 0, default: 1, description: Km per minute.}}
    input_schema: schemas/plan.input.json
  note:
    kind: rule
    description: Write a note.
    parameters: {{type: object, properties: {{}}, additionalProperties: false}}
    template:
      emit:
        - {{id: note, content: "routes planned"}}
        - {{id: audit, key: diagnostic, content: "audited"}}
invariants:
  - name: every-stop-once
    suggestor: plan
    check: "plan.stops | length == input.stops | length"
    message: A stop is missing or repeated.
  - name: short
    check: "true"
    critical: false
"""

INPUT_SCHEMA = {
    "type": "object",
    "description": "Stops and vehicles.",
    "required": ["stops"],
    "properties": {
        "stops": {
            "type": "array",
            "minItems": 1,
            "items": {"$ref": "#/$defs/stop"},
        },
        "mode": {"enum": ["fast", "cheap"], "default": "fast"},
        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "$defs": {
        "stop": {
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "string", "minLength": 1, "description": "Unique."},
                "next": {"$ref": "#/$defs/stop"},
            },
        }
    },
}


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


def expect(name: str, actual: str) -> None:
    """`actual` equals the file `name` (`UPDATE_EXPECTED=1` rewrites it: read the diff)."""
    path = EXPECTED / name
    if os.environ.get("UPDATE_EXPECTED") == "1":
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8")


def _publish(root: Path, version: str) -> None:
    folder = root / "src" / f"routes-{version}"
    (folder / "schemas").mkdir(parents=True)
    (folder / "pack.yaml").write_text(SOLVER_PACK.format(version=version), encoding="utf-8")
    (folder / "schemas" / "plan.input.json").write_text(json.dumps(INPUT_SCHEMA))
    publish(folder, root / "repo", published=PUBLISHED)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for version in ("1.0.0", "1.1.0", "2.0.0"):
        _publish(tmp_path, version)
    yank(tmp_path / "repo", "routes", "2.0.0")
    return tmp_path / "repo"


def test_info_lists_suggestors_parameters_input_output_and_invariants(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo.parent)
    code, out, err = _cli("pack", "info", "routes", "--repo", "repo")
    assert (code, err) == (0, "")
    expect("info-routes.txt", out)


def test_info_without_a_version_picks_the_newest_live_one(repo: Path) -> None:
    info = describe_pack(FolderRepository(repo), "routes")
    assert str(info.version) == "1.1.0"  # 2.0.0 is yanked
    assert [str(e.version) for e in info.versions] == ["2.0.0", "1.1.0", "1.0.0"]


def test_info_of_a_named_version_even_a_yanked_one(repo: Path) -> None:
    code, out, _ = _cli("pack", "info", "routes@2.0.0", "--repo", str(repo))
    assert code == 0
    assert out.startswith("routes 2.0.0  (path:")
    assert " *2.0.0  2026-01-02T03:04:05Z  sha256:" in out
    assert out.splitlines()[4].endswith(" yanked")


def test_info_as_json_names_every_part(repo: Path) -> None:
    info = describe_pack(FolderRepository(repo), "routes@1.0.0").as_json()
    plan = info["suggestors"][0]
    assert plan["input_schema"] == "schemas/plan.input.json"
    assert plan["input"][0] == {
        "depth": 0,
        "text": "stops (required): array of object, at least 1 item",
    }
    assert [i["name"] for i in plan["invariants"]] == ["every-stop-once", "short"]
    assert plan["invariants"][1]["applies_to"] == "every suggestor"
    assert json.loads(json.dumps(info)) == info  # plain JSON


def test_unknown_pack_is_coded_with_a_suggestion(repo: Path) -> None:
    code, out, err = _cli("pack", "info", "route", "--repo", str(repo))
    assert (code, out) == (1, "")
    assert err.startswith(f"error[CD574]: path:{repo} has no pack 'route'\n")
    assert "did you mean 'routes'?" in err


def test_a_name_that_is_not_a_pack_name_never_reaches_the_repository(repo: Path) -> None:
    code, _, err = _cli("pack", "info", "../repo/index/routes", "--repo", str(repo))
    assert code == 1
    assert err.startswith("error[CD574]: '../repo/index/routes' is not a pack name")


def test_unknown_version_lists_the_published_ones(repo: Path) -> None:
    assert str(describe_pack(FolderRepository(repo), "routes@1.1").version) == "1.1.0"  # PEP 440
    code, _, err = _cli("pack", "info", "routes@1.2", "--repo", str(repo))
    assert code == 1
    assert err.startswith(
        f"error[CD573]: path:{repo} has no version '1.2' of routes "
        "(published: 2.0.0, 1.1.0, 1.0.0)\n"
    )
    assert "hint: ask for a published one, e.g. routes@1.1.0" in err
    code, _, err = _cli("pack", "info", "routes@1.1.1", "--repo", str(repo))
    assert "hint: did you mean routes@1.1.0?" in err
    code, _, err = _cli("pack", "info", "routes@banana", "--repo", str(repo))
    assert (code, err.startswith("error[CD573]:")) == (1, True)


def test_a_tampered_archive_in_the_repository_is_refused(repo: Path) -> None:
    archive = repo / "archives" / "routes" / "routes-1.1.0.tar.gz"
    archive.write_bytes(archive.read_bytes() + b"\0")
    code, out, err = _cli("pack", "info", "routes", "--repo", str(repo))
    assert (code, out) == (1, "")
    assert err.startswith(f"error[CD570]: the archive of routes 1.1.0 in path:{repo} has sha256 ")
    assert "it was altered after publishing; nothing was unpacked" in err


def test_a_missing_archive_is_reported(repo: Path) -> None:
    (repo / "archives" / "routes" / "routes-1.0.0.tar.gz").unlink()
    code, _, err = _cli("pack", "info", "routes@1.0.0", "--repo", str(repo))
    assert code == 1
    assert err == f"error[CD573]: path:{repo} has no archive for routes 1.0.0\n"


def test_an_unreachable_repository_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    code, _, err = _cli("pack", "info", "routes", "--repo", str(tmp_path / "nowhere"))
    assert code == 1
    assert err.startswith(f"error[CD325]: repository {tmp_path / 'nowhere'} does not exist")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, _, err = _cli("pack", "info", "routes", "--repo", f"http://127.0.0.1:{port}/repo")
    assert code == 1
    assert err.startswith("error[CD327]: ")
    assert "Traceback" not in err


def test_info_over_http(repo: Path, http_root: tuple[Path, str]) -> None:
    served, url = http_root
    for path in repo.rglob("*"):
        if path.is_file():
            target = served / path.relative_to(repo)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    info = describe_pack(HttpRepository(url), "routes@1.0.0")
    assert [s.name for s in info.suggestors] == ["plan", "note"]


def test_builtin_packs_describe_their_suggestors() -> None:
    code, out, _ = _cli("pack", "info", "optimization")
    assert code == 0
    assert "  assignment  (solver optimization.assignment)\n" in out
    assert "      (exactly one of: {cost_matrix} or {agents, tasks, costs})\n" in out
    code, out, _ = _cli("pack", "info", "strategy")
    assert "      market (required): string, at least 1 character  # The market to scan.\n" in out
    prompts = "system prompts/market-scan.system.md, user prompts/market-scan.user.md"
    assert f"    prompts: {prompts}\n" in out


def test_outline_follows_refs_and_stops_at_recursion() -> None:
    lines = [str(line) for line in outline(INPUT_SCHEMA)]
    assert lines == [
        "stops (required): array of object, at least 1 item",
        "  id (required): string, at least 1 character  # Unique.",
        "  next: (recursive: #/$defs/stop)",
        'mode: "fast" | "cheap", default "fast"',
        "tags: object of NAME -> string",
    ]
    assert type_summary({"type": ["string", "null"], "maxLength": 2}) == (
        "string | null, at most 2 characters"
    )


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": "nope"},
        {"type": 7, "items": [1], "required": "x"},
        {"properties": {"a": 5, "b": {"$ref": "#/nowhere"}, "c": {"$ref": "http://x/y"}}},
        {"properties": {"a": {"anyOf": "x", "oneOf": [3, None]}}},
        {"$ref": "#"},
    ],
)
def test_outline_of_malformed_schemas_never_crashes(schema: dict[str, object]) -> None:
    for line in outline(schema):
        assert isinstance(line.text, str)
    assert isinstance(type_summary(schema), str)


def test_outline_is_bounded_in_depth_and_lines() -> None:
    deep: dict[str, object] = {"type": "string"}
    for level in range(50):
        deep = {"type": "object", "properties": {f"f{level}": deep}}
    assert max(line.depth for line in outline(deep)) <= 7
    wide = {"type": "object", "properties": {f"f{i}": {"type": "integer"} for i in range(1000)}}
    lines = outline(wide)
    assert len(lines) == MAX_LINES + 1
    assert lines[-1].text == f"... (cut at {MAX_LINES} lines)"


def test_undescribed_parameters_are_not_shown_as_none(tmp_path: Path) -> None:
    folder = make_pack(tmp_path, "open", "1.0.0")
    text = (folder / "pack.yaml").read_text()
    start = text.index("    parameters:")
    end = text.index("    template:")
    (folder / "pack.yaml").write_text(text[:start] + text[end:])
    publish(folder, tmp_path / "repo")
    info = describe_pack(FolderRepository(tmp_path / "repo"), "open")
    assert [line.text for line in info.suggestors[0].parameters] == [
        "(any: the pack does not describe them)"
    ]


def test_an_archive_whose_pack_yaml_is_broken_is_refused(repo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "pack.yaml").write_text("apiVersion: converge-dsl/v1\nkind: Pack\nname: routes\n")
    archive = build_archive(folder)
    (repo / archive_path("routes", "1.1.0")).write_bytes(archive)
    index_file = repo / index_path("routes")
    index = json.loads(index_file.read_text())
    for entry in index["versions"]:
        if entry["version"] == "1.1.0":
            entry["sha256"] = sha256_hex(archive)
    index_file.write_text(json.dumps(index))
    code, _, err = _cli("pack", "info", "routes", "--repo", str(repo))
    assert code == 1
    assert err.startswith(
        f"error[CD570]: the archive of routes 1.1.0 in path:{repo} holds an invalid pack.yaml: "
    )


def test_terminal_controls_in_a_pack_are_shown_not_sent(tmp_path: Path) -> None:
    folder = make_pack(tmp_path, "alpha", "1.0.0")
    text = (folder / "pack.yaml").read_text(encoding="utf-8")
    hostile = '"\\e]0;owned\\a\\e[2J\\u202Edone\\x9b"'
    (folder / "pack.yaml").write_text(
        text.replace("description: test pack alpha", f"description: {hostile}"), encoding="utf-8"
    )
    publish(folder, tmp_path / "repo")
    out, err = io.StringIO(), io.StringIO()
    assert run(["pack", "info", "alpha", "--repo", str(tmp_path / "repo")], out, err, {}) == 0
    second = out.getvalue().splitlines()[1]
    assert second == "  \\x1b]0;owned\\x07\\x1b[2J\\u202edone\\x9b"
