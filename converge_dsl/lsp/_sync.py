"""The document synchronisation: what the editor says of its documents, handed to the server.

`register_sync(server)` registers the handlers of `initialized`, `didOpen`,
`didChange`, `didSave`, `didClose`, watched files and `shutdown` (which waits for
every pending analysis); each calls the `PipelineServer` method that takes it
(`opened`, `edited`, `changed`, `closed`, `pipeline_on_disk`, `schedule`).
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp

from converge_dsl.lsp._server import PipelineServer


def register_sync(server: PipelineServer) -> None:
    """The document synchronisation: open, change, save, close, watched files, shutdown."""

    @server.feature(lsp.INITIALIZED)
    def initialized(ls: PipelineServer, params: lsp.InitializedParams) -> None:
        root = ls.workspace.root_path
        if root and "\x00" not in root:  # else no folder: the server's own stays the root
            ls.state.root = Path(root).resolve()

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: PipelineServer, params: lsp.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        ls.opened(doc.uri, doc.text, doc.version)
        ls.pipeline_on_disk(doc.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: PipelineServer, params: lsp.DidChangeTextDocumentParams) -> None:
        doc = params.text_document
        ls.edited(doc.uri, doc.version, params.content_changes)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: PipelineServer, params: lsp.DidSaveTextDocumentParams) -> None:
        path = ls.path(params.text_document.uri)
        if path is not None:
            ls.changed(path)
        ls.pipeline_on_disk(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: PipelineServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.closed(params.text_document.uri)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: PipelineServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            ls.pipeline_on_disk(change.uri)
            path = ls.path(change.uri)
            if path is not None and path not in ls.state.open:
                for pipeline in ls.state.pipelines_reading(path) | _if_pipeline(ls, path):
                    ls.schedule(pipeline)

    @server.feature(lsp.SHUTDOWN)
    async def shutdown(ls: PipelineServer, params: None) -> None:
        await ls.scheduler.settle()
        ls.scheduler.shutdown()


def _if_pipeline(server: PipelineServer, path: Path) -> set[Path]:
    """{path} when it is a pipeline the server has analysed (changed on disk)."""
    return {path} if path in server.state.latest else set()
