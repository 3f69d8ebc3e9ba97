"""Packs in the editor, over stdio: names and versions from the pipeline's folder repository,
`PACK/SUGGESTOR` after `use:`, and a pack suggestor's definition in the pack cache.

The project publishes `tests/data/docs/my-pack` at 1.0.0 and 1.1.0 to `./pack-repo`
(1.0.0 yanked in one test), locks it and fetches it into the suite's pack cache
(`CONVERGE_DSL_CACHE`, which the server inherits): all offline, as an editor is.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lsprotocol import types as lsp

from converge_dsl.cli import run

if TYPE_CHECKING:
    from tests.lsp.conftest import Session

pytestmark = pytest.mark.asyncio

MY_PACK = Path(__file__).resolve().parents[1] / "data" / "docs" / "my-pack"
PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: packed
packs: {my-pack: ">=1.0,<2"}
repositories: [{path: ./pack-repo}]
models: {default: {adapter: scripted, script: packed.script.yaml}}
seeds:
  - {id: plan, content: "Alice does the docs"}
suggestors:
  - {name: check, kind: pack, use: my-pack/review, input: seeds, output: evaluations,
     with: {team: docs}}
"""
SCRIPT = "apiVersion: converge-dsl/v1\nkind: ModelScript\ndefault: {reply: fine}\n"


def _cli(*argv: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run(list(argv), out, err) == 0, err.getvalue()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    pack = folder / "my-pack"
    shutil.copytree(MY_PACK, pack)
    _cli("pack", "publish", "my-pack", "--repo", "pack-repo")
    manifest = pack / "pack.yaml"
    manifest.write_text(manifest.read_text().replace("version: 1.0.0", "version: 1.1.0"))
    _cli("pack", "publish", "my-pack", "--repo", "pack-repo")
    (folder / "packed.yaml").write_text(PIPELINE)
    (folder / "packed.script.yaml").write_text(SCRIPT)
    _cli("lock", "packed.yaml")
    _cli("pack", "fetch", "packed.yaml")
    return folder


async def _completion(session: Session, text: str, needle: str, offset: int) -> dict[str, str]:
    """The completion at `needle` + `offset` of `text`, typed over the pipeline as it was."""
    session.open("packed.yaml", PIPELINE)
    await session.diagnostics("packed.yaml", 1)
    session.replace("packed.yaml", text)
    result = await session.client.text_document_completion_async(
        lsp.CompletionParams(
            lsp.TextDocumentIdentifier(session.uri("packed.yaml")),
            _at(text, needle, offset),
        )
    )
    items = result.items if isinstance(result, lsp.CompletionList) else result or []
    return {item.label: item.detail or "" for item in items}


def _at(text: str, needle: str, offset: int) -> lsp.Position:
    index = text.index(needle) + offset
    line = text.count("\n", 0, index)
    return lsp.Position(line, index - (text.rfind("\n", 0, index) + 1))


async def test_pack_names_under_packs(session: Session) -> None:
    text = PIPELINE.replace('packs: {my-pack: ">=1.0,<2"}', "packs:\n  m")
    labels = await _completion(session, text, "packs:\n  m", len("packs:\n  m"))
    assert labels == {"my-pack": "pack my-pack, newest 1.1.0 (path:./pack-repo)"}


async def test_versions_of_a_pack_as_specifiers(session: Session) -> None:
    text = PIPELINE.replace('packs: {my-pack: ">=1.0,<2"}', "packs:\n  my-pack: ")
    labels = await _completion(session, text, "my-pack: \n", len("my-pack: "))
    assert labels == {
        ">=1.1,<2": "compatible with 1.1.0",
        "==1.1.0": "exactly 1.1.0 from path:./pack-repo (locked)",
        "==1.0.0": "exactly 1.0.0 from path:./pack-repo",
    }


async def test_a_yanked_version_is_not_offered(session: Session) -> None:
    _cli("pack", "yank", "my-pack", "1.0.0", "--repo", "pack-repo")
    text = PIPELINE.replace('packs: {my-pack: ">=1.0,<2"}', "packs:\n  my-pack: ")
    labels = await _completion(session, text, "my-pack: \n", len("my-pack: "))
    assert sorted(labels) == ["==1.1.0", ">=1.1,<2"]


async def test_pack_suggestors_after_use(session: Session) -> None:
    text = PIPELINE.replace("use: my-pack/review", "use: my")
    labels = await _completion(session, text, "use: my", len("use: my"))
    assert labels == {
        "my-pack/plan-tasks": "my-pack 1.1.0: Assign tasks to people at least total cost.",
        "my-pack/review": "my-pack 1.1.0: Ask a model to review a plan.",
    }


async def test_definition_of_a_pack_suggestor_is_in_the_pack_cache(session: Session) -> None:
    session.open("packed.yaml", PIPELINE)
    await session.diagnostics("packed.yaml", 1)
    found = await session.client.text_document_definition_async(
        lsp.DefinitionParams(
            lsp.TextDocumentIdentifier(session.uri("packed.yaml")),
            _at(PIPELINE, "my-pack/review", 9),
        )
    )
    assert isinstance(found, list)
    (location,) = found
    assert isinstance(location, lsp.Location)
    file = Path(lsp_path(location.uri))
    assert file.is_relative_to(os.environ["CONVERGE_DSL_CACHE"])
    assert file.name == "pack.yaml"
    line = file.read_text(encoding="utf-8").splitlines()[location.range.start.line]
    assert line[location.range.start.character :].startswith("review:")


def lsp_path(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path)


async def test_a_stale_lock_offers_to_run_lock_and_the_command_refreshes_it(
    session: Session, project: Path
) -> None:
    pinned = PIPELINE.replace('">=1.0,<2"', '"==1.0.0"')  # the lock holds 1.1.0
    (project / "packed.yaml").write_text(pinned, encoding="utf-8")
    session.open("packed.yaml", pinned)
    stale = [d for d in await session.diagnostics("packed.yaml", 1) if d.code == "CD501"]
    assert len(stale) == 1, stale
    found = await session.client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(session.uri("packed.yaml")),
            range=stale[0].range,
            context=lsp.CodeActionContext(diagnostics=stale),
        )
    )
    actions = [a for a in found or () if isinstance(a, lsp.CodeAction)]
    assert [a.title for a in actions] == ["Run converge-dsl lock"]
    command = actions[0].command
    assert command is not None
    before = (project / "converge.lock").read_text(encoding="utf-8")
    session.client.diagnostics.pop(session.uri("packed.yaml"))
    await session.client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command.command, command.arguments)
    )
    after = (project / "converge.lock").read_text(encoding="utf-8")
    assert after != before
    assert "1.0.0" in after
    assert "CD501" not in {d.code for d in await session.diagnostics("packed.yaml", 1)}


async def test_a_lock_written_on_disk_checks_the_pipeline_again(
    session: Session, project: Path
) -> None:
    pinned = PIPELINE.replace('">=1.0,<2"', '"==1.0.0"')
    (project / "packed.yaml").write_text(pinned, encoding="utf-8")
    session.open("packed.yaml", pinned)
    assert "CD501" in {d.code for d in await session.diagnostics("packed.yaml", 1)}
    _cli("lock", "packed.yaml")  # as in a terminal beside the editor
    session.client.diagnostics.pop(session.uri("packed.yaml"))
    session.client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams(
            [lsp.FileEvent((project / "converge.lock").as_uri(), lsp.FileChangeType.Changed)]
        )
    )
    assert "CD501" not in {d.code for d in await session.diagnostics("packed.yaml", 1)}


async def test_pack_suggestors_are_read_from_the_pack_cache_of_the_server_environment(
    project: Path, tmp_path: Path
) -> None:
    """The editor's pack offers and definitions read the cache of the environment the
    server was given, as its analyses do, not the process's."""
    from converge_dsl.lsp import _packs
    from converge_dsl.lsp._analysis import analyse

    path = project / "packed.yaml"
    facts = analyse(path, PIPELINE, "packed.yaml").facts
    assert facts is not None
    empty = {**os.environ, "CONVERGE_DSL_CACHE": str(tmp_path / "empty-cache")}
    assert _packs.uses(facts, path, None)  # the process's cache holds the fetched pack
    assert _packs.uses(facts, path, empty) == []
    assert _packs.suggestor_source(facts, path, "my-pack/review", None) is not None
    assert _packs.suggestor_source(facts, path, "my-pack/review", empty) is None
