"""`build_server`: the server, its document synchronisation and every editor feature.

Each feature's handlers are registered here, from its own module.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcInvalidRequest

from converge_dsl.lsp._index import Place
from converge_dsl.lsp._lookup import Subject
from converge_dsl.lsp._server import DEBOUNCE_S, Explain, PipelineServer
from converge_dsl.lsp._sync import register_sync

TRIGGERS = [".", "'", '"', "|", " ", "[", ",", "("]


def build_server(
    explain: Explain | None = None,
    debounce: float = DEBOUNCE_S,
    environ: Mapping[str, str] | None = None,
) -> PipelineServer:
    """A server with every feature registered (not started), analysing in the environment
    `environ` (default: the process's)."""
    server = PipelineServer(explain, debounce, environ)
    register_sync(server)
    register(server)
    return server


def register(server: PipelineServer) -> None:
    """Every feature beyond diagnostics, each from its own module."""
    _register_actions(server)
    _register_outline(server)
    _register_rename(server)
    _register_tokens(server)

    @server.feature(
        lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=TRIGGERS)
    )
    def completion(ls: PipelineServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        from converge_dsl.lsp._completion import complete

        subject = Subject.of(ls, params.text_document.uri)
        items = [] if subject is None else complete(subject, params.position)
        return lsp.CompletionList(is_incomplete=False, items=items)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: PipelineServer, params: lsp.HoverParams) -> lsp.Hover | None:
        from converge_dsl.lsp._hover import hover

        subject = Subject.of(ls, params.text_document.uri)
        return None if subject is None else hover(subject, params.position)

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: PipelineServer, params: lsp.DefinitionParams) -> list[lsp.Location]:
        from converge_dsl.lsp._navigate import definitions

        subject = Subject.of(ls, params.text_document.uri, fresh=True)
        if subject is None:
            return []
        return _locations(ls, [place for _, place in definitions(subject, params.position)])

    @server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
    def references(ls: PipelineServer, params: lsp.ReferenceParams) -> list[lsp.Location]:
        from converge_dsl.lsp._navigate import occurrences, symbol_at

        subject = Subject.of(ls, params.text_document.uri, fresh=True)
        symbol = None if subject is None else symbol_at(subject, params.position)
        if subject is None or symbol is None:
            return []
        places = occurrences(subject, symbol)
        if not params.context.include_declaration:
            places = [p for p in places if not p.defines]
        return _locations(ls, places)


def _locations(server: PipelineServer, places: list[Place]) -> list[lsp.Location]:
    """Where each place is, in the editor's positions (each file's lines read once)."""
    lines = {path: server.state.lines(str(path)) for path in {place.path for place in places}}
    return [
        lsp.Location(server.uri(place.path), lines[place.path].range(place.span))
        for place in places
    ]


def _register_actions(server: PipelineServer) -> None:
    from converge_dsl.lsp._actions import LOCK_COMMAND

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]),
    )
    def code_action(ls: PipelineServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        from converge_dsl.lsp._actions import actions

        subject = Subject.of(ls, params.text_document.uri, fresh=True)
        return [] if subject is None else actions(subject, list(params.context.diagnostics))

    @server.command(LOCK_COMMAND)
    async def lock(ls: PipelineServer, *arguments: object) -> str:
        from converge_dsl.lsp._actions import run_lock

        # As sent: pygls would make a string of any value for a `str` parameter.
        uri = arguments[0] if len(arguments) == 1 else None
        if not isinstance(uri, str):
            raise JsonRpcInvalidParams(
                f"{LOCK_COMMAND} takes one argument, the pipeline's URI, "
                f"not {json.dumps(arguments)}"
            )
        path = ls.path(uri)
        if path is None or not path.is_file():
            raise JsonRpcInvalidParams(
                f"{uri} is not a file on disk: save the pipeline, then run converge-dsl lock"
            )
        loop = asyncio.get_running_loop()
        try:
            output = await loop.run_in_executor(None, run_lock, str(path), str(path.parent))
        except OSError as exc:
            raise JsonRpcInvalidRequest(
                f"converge-dsl lock could not start in {path.parent}: {exc.strerror or exc}"
            ) from None
        ls.changed(path)
        return output


def _register_outline(server: PipelineServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def document_symbol(
        ls: PipelineServer, params: lsp.DocumentSymbolParams
    ) -> list[lsp.DocumentSymbol]:
        from converge_dsl.lsp._outline import symbols

        subject = Subject.of(ls, params.text_document.uri, fresh=True)
        document = None if subject is None else subject.own_document
        if subject is None or document is None:
            return []
        return symbols(document, subject.lines)

    @server.feature(lsp.TEXT_DOCUMENT_FOLDING_RANGE)
    def folding_range(ls: PipelineServer, params: lsp.FoldingRangeParams) -> list[lsp.FoldingRange]:
        from converge_dsl.lsp._outline import folding

        subject = Subject.of(ls, params.text_document.uri, fresh=True)
        document = None if subject is None else subject.own_document
        return [] if document is None else folding(document)


def _register_rename(server: PipelineServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_PREPARE_RENAME)
    def prepare_rename(ls: PipelineServer, params: lsp.PrepareRenameParams) -> lsp.Range | None:
        from converge_dsl.lsp._rename import renameable

        subject = Subject.of(ls, params.text_document.uri, fresh=True)
        found = None if subject is None else renameable(subject, params.position)
        return None if found is None or subject is None else subject.lines.range(found[1].span)

    @server.feature(lsp.TEXT_DOCUMENT_RENAME)
    def rename(ls: PipelineServer, params: lsp.RenameParams) -> lsp.WorkspaceEdit | None:
        from converge_dsl.lsp._rename import RenameRefused, rename

        subject = Subject.of(ls, params.text_document.uri, fresh=True)
        if subject is None:
            return None
        try:
            by_file = rename(subject, params.position, params.new_name)
        except RenameRefused as exc:
            raise JsonRpcInvalidRequest(str(exc)) from None
        changes = {}
        for path, places in by_file.items():
            lines = ls.state.lines(str(path))  # once a file
            edits = [lsp.TextEdit(lines.range(p.span), params.new_name) for p in places]
            changes[ls.uri(path)] = edits
        return lsp.WorkspaceEdit(changes=changes)


def _register_tokens(server: PipelineServer) -> None:
    from converge_dsl.lsp._tokens import TYPES

    legend = lsp.SemanticTokensLegend(token_types=TYPES, token_modifiers=[])

    @server.feature(lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, legend)
    def semantic_tokens(ls: PipelineServer, params: lsp.SemanticTokensParams) -> lsp.SemanticTokens:
        from converge_dsl.lsp._tokens import encode, tokens

        subject = Subject.of(ls, params.text_document.uri, fresh=True)
        analysis = None if subject is None else subject.analysis
        if subject is None or analysis is None or analysis.text != subject.text:
            return lsp.SemanticTokens(data=[])
        if analysis.document is None or analysis.facts is None:
            return lsp.SemanticTokens(data=[])
        found = tokens(analysis.document, analysis.facts)
        return lsp.SemanticTokens(data=encode(found, subject.lines))
