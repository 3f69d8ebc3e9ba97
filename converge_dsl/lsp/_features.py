"""Registers each editor feature's handlers on the server (one module a feature)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from converge_dsl.lsp._lookup import Subject

if TYPE_CHECKING:
    from converge_dsl.lsp._server import PipelineServer

TRIGGERS = [".", "'", '"', "|", " ", "[", ",", "("]


def register(server: PipelineServer) -> None:
    """Every feature beyond diagnostics, each from its own module."""

    @server.feature(
        lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=TRIGGERS)
    )
    def completion(ls: PipelineServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        from converge_dsl.lsp._completion import complete

        subject = Subject.of(ls, params.text_document.uri)
        items = [] if subject is None else complete(subject, params.position)
        return lsp.CompletionList(is_incomplete=False, items=items)
