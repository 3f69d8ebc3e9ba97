"""The workspace's reads from disk: only regular files, only up to the size cap."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from converge_dsl.lsp import _related
from converge_dsl.lsp._document import Document
from converge_dsl.lsp._workspace import Workspace


def test_a_file_on_disk_is_read_and_an_open_one_comes_from_the_editor(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("name: café\n", encoding="utf-8")
    workspace = Workspace(tmp_path)
    assert workspace.text(path) == "name: café\n"
    workspace.open[path] = Document("name: edited\n")
    assert workspace.text(path) == "name: edited\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_not_read_so_the_server_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "tests.yaml"
    os.mkfifo(fifo)
    found: list[str | None] = []
    reader = threading.Thread(target=lambda: found.append(Workspace(tmp_path).text(fifo)))
    reader.daemon = True
    reader.start()
    reader.join(10)
    assert found == [None]


def test_a_file_over_the_environments_cap_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("x: " + "y" * 100 + "\n")
    assert Workspace(tmp_path, {"CONVERGE_DSL_MAX_FILE_BYTES": "50"}).text(path) is None
    assert Workspace(tmp_path, {"CONVERGE_DSL_MAX_FILE_BYTES": "500"}).text(path) is not None
    assert Workspace(tmp_path, {"CONVERGE_DSL_MAX_FILE_BYTES": "many"}).text(path) is None


def test_a_related_file_loads_under_the_servers_cap(tmp_path: Path) -> None:
    test = tmp_path / "t.yaml"
    text = "kind: Test\npipeline: p.yaml\n# " + "padding " * 20 + "\n"
    assert _related.tested_pipeline(test, text, {}) == (tmp_path / "p.yaml").resolve()
    assert _related.tested_pipeline(test, text, {"CONVERGE_DSL_MAX_FILE_BYTES": "40"}) is None
    assert _related.loaded(test, text, {"CONVERGE_DSL_MAX_FILE_BYTES": "not a number"}) is None


def test_the_columns_of_a_file_not_utf8_on_disk_are_kept(tmp_path: Path) -> None:
    (tmp_path / "latin.yaml").write_bytes(b"name: ok\n# caf\xe9 \xe9\n")
    lines = Workspace(tmp_path).lines("latin.yaml")
    # `validate` places the first bad byte at 2:6 and the second at 2:8.
    assert lines.position(2, 6) == lsp.Position(1, 5)
    assert lines.position(2, 8) == lsp.Position(1, 7)


@pytest.mark.parametrize("body", [b"bogus: 1\n", b"bogus: 1\n# caf\xe9\n"], ids=["utf8", "bad"])
def test_a_file_on_disk_is_read_without_its_byte_order_mark(tmp_path: Path, body: bytes) -> None:
    """A file saved with a byte order mark was read with it: the columns of its first line,
    places of its diagnostics and a rename's edits there, were one right of the editor's
    (which holds the file without the mark)."""
    path = tmp_path / "marked.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + body)
    workspace = Workspace(tmp_path)
    text = workspace.text(path)
    assert text is None or text == body.decode()
    lines = workspace.lines("marked.yaml")
    assert lines.position(1, 1) == lsp.Position(0, 0)
    assert lines.point(lsp.Position(0, 5)) == (1, 6)
