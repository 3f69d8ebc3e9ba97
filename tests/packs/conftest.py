"""Helpers for the pack tests: pack folders, repositories, a local HTTP server."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PACK_TEMPLATE = """\
apiVersion: converge-dsl/v1
kind: Pack
name: {name}
version: {version}
description: test pack {name}
requires:
  converge-dsl: ">=0.1"
  packs: {requires}
suggestors:
  note:
    kind: rule
    parameters:
      type: object
      additionalProperties: false
      properties:
        topic: {{type: string}}
    template:
      emit:
        - id: note
          content: "{{{{ params.topic }}}}"
"""


def make_pack(root: Path, name: str, version: str, requires: str = "{}") -> Path:
    folder = root / "src" / f"{name}-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pack.yaml").write_text(
        PACK_TEMPLATE.format(name=name, version=version, requires=requires), encoding="utf-8"
    )
    (folder / "prompts").mkdir(exist_ok=True)
    (folder / "prompts" / "readme.md").write_text(f"{name} {version}\n", encoding="utf-8")
    return folder


def write_pipeline(folder: Path, packs: str, repositories: str = "[{path: repo}]") -> Path:
    path = folder / "pipeline.yaml"
    path.write_text(
        "apiVersion: converge-dsl/v1\n"
        "kind: Pipeline\n"
        "name: demo\n"
        f"packs: {packs}\n"
        f"repositories: {repositories}\n"
        "suggestors:\n"
        "  - {name: noter, kind: pack, use: alpha/note, with: {topic: x},\n"
        "     input: seeds, output: strategies}\n",
        encoding="utf-8",
    )
    return path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[str] | None = None  # a list to record each request path in, if given

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send_head(self) -> Any:
        if self.requests is not None:
            self.requests.append(self.path)
        return super().send_head()


@pytest.fixture
def http_requests() -> list[str]:
    """The paths `http_root`'s server was asked for, in order (clear it to start counting)."""
    return []


@pytest.fixture
def http_root(tmp_path: Path, http_requests: list[str]) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on 127.0.0.1 (a real server, random port)."""
    root = tmp_path / "served"
    root.mkdir()
    recording = type("_Recording", (_QuietHandler,), {"requests": http_requests})
    handler = functools.partial(recording, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
