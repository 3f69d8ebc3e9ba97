"""A real client over stdio: `python -m converge_dsl lsp` in a subprocess, driven by pytest-lsp.

`client` is initialised on a project folder (a copy of `tests/lsp/data` under
the test's temporary folder, the server's workspace root); `Session` opens,
edits and waits for the diagnostics of a given version.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

DATA = Path(__file__).parent / "data"
SERVER = [sys.executable, "-m", "converge_dsl", "lsp"]

if TYPE_CHECKING:
    from tests.lsp._wire_client import Wire


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    shutil.copytree(DATA, folder)
    return folder


class Session:
    """A client and the project it edits."""

    def __init__(self, client: LanguageClient, root: Path) -> None:
        self.client = client
        self.root = root
        self.versions: dict[str, int] = {}

    def uri(self, name: str) -> str:
        return (self.root / name).as_uri()

    def open(self, name: str, text: str | None = None) -> str:
        uri = self.uri(name)
        body = (self.root / name).read_text(encoding="utf-8") if text is None else text
        self.versions[uri] = 1
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "yaml", 1, body))
        )
        return uri

    def versions_by_name(self) -> set[str]:
        """The names of the files this session opened."""
        return {uri.rsplit("/", 1)[-1] for uri in self.versions}

    def replace(self, name: str, text: str) -> int:
        """Send the whole new text of `name`; the new version."""
        uri = self.uri(name)
        self.versions[uri] += 1
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                [lsp.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        return self.versions[uri]

    async def diagnostics(
        self, name: str, version: int | None = None, timeout: float = 30
    ) -> list[lsp.Diagnostic]:
        """The diagnostics published for `name` (for `version`, when given)."""
        return await self.diagnostics_at(self.uri(name), version, timeout)

    async def diagnostics_at(
        self, uri: str, version: int | None = None, timeout: float = 30
    ) -> list[lsp.Diagnostic]:
        """The diagnostics published under `uri` (for `version`, when given)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            published = self.client.diagnostics.get(uri)
            if published is not None and (
                version is None or VERSIONS[id(self.client)].get(uri) == version
            ):
                return list(published)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"no diagnostics for {uri} (version {version})")
            try:
                await asyncio.wait_for(
                    self.client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS),
                    remaining,
                )
            except TimeoutError:
                continue

    def position(self, name: str, needle: str, offset: int = 0) -> lsp.Position:
        """The position of the first `needle` in the file's text, plus `offset` characters."""
        text = (self.root / name).read_text(encoding="utf-8")
        return at(text, needle, offset)


def at(text: str, needle: str, offset: int = 0) -> lsp.Position:
    index = text.index(needle) + offset
    line = text.count("\n", 0, index)
    return lsp.Position(line, index - (text.rfind("\n", 0, index) + 1))


def large_pipeline(rules: int) -> str:
    """A valid pipeline of `rules` rules (about 8 lines each), `rule-0` to `rule-<rules - 1>`."""
    return _LARGE_HEAD + "".join(_LARGE_RULE.format(i=i) for i in range(rules))


_LARGE_HEAD = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: large
seeds:
  - {id: market, content: "Nordic logistics"}
suggestors:
"""
_LARGE_RULE = """\
  - name: rule-{i}
    kind: rule
    dependencies: [seeds]
    when: "count('seeds') >= {i} and not has('strategies')"
    emit:
      - key: strategies
        id: "strategy-{i}"
        content: "Act on {{{{ facts.seeds | map(attribute='content') | join(', ') }}}}"
"""


# The version each file's diagnostics were last published for, per client.
VERSIONS: dict[int, dict[str, int | None]] = {}
# Every publication, in the order it came, per client.
PUBLISHED: dict[int, list[lsp.PublishDiagnosticsParams]] = {}


def converter() -> Any:
    """pygls's converter, reading a code action that runs a command as a code action.

    lsprotocol's hook for `Command | CodeAction` takes anything with a `command` field
    for a bare Command, so a CodeAction whose `command` is a Command object came back
    as a Command whose name is that object's text: the wire is right, the test
    client's reading is not. A bare Command's `command` is a string.
    """
    made = default_converter()

    def command_or_action(value: Any, _: type) -> lsp.Command | lsp.CodeAction:
        is_command = isinstance(value.get("command"), str)
        found: lsp.Command | lsp.CodeAction = made.structure(
            value, lsp.Command if is_command else lsp.CodeAction
        )
        return found

    made.register_structure_hook(lsp.Command | lsp.CodeAction, command_or_action)
    made.register_structure_hook(Union[lsp.Command, lsp.CodeAction], command_or_action)  # noqa: UP007
    return made


def make_client() -> LanguageClient:
    """pytest-lsp's test client, also keeping the version of each publication."""
    client = LanguageClient(converter_factory=converter)
    features = dict(DEFAULT_CLIENT_FEATURES)
    keep = features.pop(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    register_lsp_features(client, features)
    versions = VERSIONS.setdefault(id(client), {})
    every = PUBLISHED.setdefault(id(client), [])

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(ls: LanguageClient, params: lsp.PublishDiagnosticsParams) -> None:
        versions[params.uri] = params.version
        every.append(params)
        keep(ls, params)

    return client


async def _in_session(lsp_client: LanguageClient, project: Path) -> AsyncIterator[None]:
    """`lsp_client` initialised on `project`, then shut down."""
    await lsp_client.initialize_session(
        lsp.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=project.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(project.as_uri(), "project")],
        )
    )
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, client_factory=make_client))
async def client(lsp_client: LanguageClient, project: Path) -> AsyncIterator[None]:
    async for _ in _in_session(lsp_client, project):
        yield


# The server with its analyses counted (`_counting_server`).
COUNTING_SERVER = [sys.executable, str(Path(__file__).parent / "_counting_server.py")]


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=COUNTING_SERVER, client_factory=make_client)
)
async def counting_client(lsp_client: LanguageClient, project: Path) -> AsyncIterator[None]:
    async for _ in _in_session(lsp_client, project):
        yield


@pytest.fixture
def session(client: LanguageClient, project: Path) -> Session:
    return Session(client, project)


def apply(text: str, edits: list[lsp.TextEdit]) -> str:
    """`text` with `edits` applied (ASCII texts: UTF-16 units are characters)."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)

    def offset(position: lsp.Position) -> int:
        return offsets[position.line] + position.character

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


@pytest.fixture
def wire(project: Path) -> Iterator[Wire]:
    """A real server over pipes, driven a byte at a time (`_wire_client.Wire`)."""
    from tests.lsp._wire_client import Wire

    running = Wire(project)
    yield running
    if running.process.poll() is None:
        running.process.kill()
        running.process.wait()
