"""What a feature needs about one open file: its text, kind, cursor context, pipeline facts, schema.

`Subject.of(server, uri)` gathers it once per request: for a pipeline, its
own analysis (`Workspace.model`: the latest, or the last good one while the
text is broken); for a model script, the analysis of a pipeline that reads
it; for a test file, the analysis of the pipeline it tests. The schemas are
the ones `validate` applies: the pipeline schema composed from every kind,
and the shipped model-script and pipeline-test schemas.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from converge_dsl.frontend import LoadedDocument, PipelineFacts
from converge_dsl.lsp._analysis import (
    PIPELINE,
    SCRIPT,
    TEST,
    Analysis,
    analyse,
    file_kind,
    with_facts,
)
from converge_dsl.lsp._context import Context, context_at
from converge_dsl.lsp._positions import Lines, Point

if TYPE_CHECKING:
    from converge_dsl.lsp._server import PipelineServer

_SCHEMA_FILES = {SCRIPT: "model-script.v1.json", TEST: "pipeline-test.v1.json"}


@cache
def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema `validate` checks a file of `kind` against."""
    if kind == PIPELINE:
        from converge_dsl.frontend import pipeline_schema
        from converge_dsl.validation import KINDS

        return pipeline_schema(KINDS.all())
    if kind in _SCHEMA_FILES:
        from converge_dsl._resources import read_schema_text

        loaded: dict[str, Any] = json.loads(read_schema_text(_SCHEMA_FILES[kind]))
        return loaded
    return {}


class Subject:
    """One file as a request sees it."""

    __slots__ = ("analysis", "kind", "lines", "path", "server", "text")

    def __init__(
        self, server: PipelineServer, path: Path, text: str, analysis: Analysis | None
    ) -> None:
        self.server = server
        self.path = path
        self.text = text
        self.kind = server.state.kind(path, text) or file_kind(text)  # kept across edits
        self.lines = Lines(text)
        self.analysis = analysis

    @classmethod
    def of(cls, server: PipelineServer, uri: str, *, fresh: bool = False) -> Subject | None:
        """The file at `uri`; with `fresh`, a pipeline whose latest analysis is of another
        text is analysed now (positions must be the text's own)."""
        path = server.path(uri)
        text = server.state.text(path) if path is not None else None
        if path is None or text is None:
            return None
        subject = cls(server, path, text, None)
        subject.analysis = subject._analysis(fresh)
        return subject

    def _analysis(self, fresh: bool) -> Analysis | None:
        state = self.server.state
        latest = state.latest.get(self.path)
        if fresh and self.kind == PIPELINE and (latest is None or latest.text != self.text):
            if latest is not None and latest.facts is None and latest.document is not None:
                state.keep_good(with_facts(latest))  # the last text's model, not made yet
            state.remember(
                analyse(
                    self.path,
                    self.text,
                    state.display(self.path),
                    env=self.server.environ,
                    checks=self.server.checks,
                )
            )
        elif (
            latest is not None
            and latest.facts is None
            and latest.document is not None
            and (fresh or self.path not in state.good)
        ):  # its editor model is still being made
            made = with_facts(latest)
            if latest.text == self.text:
                state.remember(made)
            else:
                state.keep_good(made)
        pipelines = [self.path] if self.kind == PIPELINE else []
        if self.kind != PIPELINE:
            pipelines = sorted(state.pipelines_reading(self.path))
        if self.kind == TEST or (self.kind == SCRIPT and not pipelines):
            pipelines = self.server.pipelines_naming(self.path, self.kind, self.text)
        for pipeline in pipelines:
            found = state.model(pipeline)
            if found is None:
                text = state.text(pipeline)
                found = (
                    analyse(
                        pipeline,
                        text,
                        state.display(pipeline),
                        env=self.server.environ,
                        checks=self.server.checks,
                    )
                    if text
                    else None
                )
                if found is not None:
                    state.remember(found)
            if found is not None and (found.facts is not None or self.kind == PIPELINE):
                return found
        return None

    @property
    def facts(self) -> PipelineFacts | None:
        return self.analysis.facts if self.analysis is not None else None

    @property
    def own_document(self) -> LoadedDocument | None:
        """The last good document of this file itself (a pipeline's; another file's loaded now)."""
        if self.kind == PIPELINE:
            return self.analysis.document if self.analysis is not None else None
        from converge_dsl.lsp._related import loaded

        document: LoadedDocument | None = loaded(self.path, self.text, self.server.environ)
        return document

    def point(self, position: lsp.Position) -> Point:
        return self.lines.point(position)

    def context(self, position: lsp.Position) -> Context | None:
        return context_at(self.text, self.point(position), self.own_document)

    @property
    def schema(self) -> dict[str, Any]:
        return schema_of(self.kind)
