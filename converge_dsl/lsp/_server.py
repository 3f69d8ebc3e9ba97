"""The language server: pygls over stdio, one `Workspace`, diagnostics as `validate` makes them.

Opening or changing a pipeline schedules its analysis after `debounce` seconds;
a change in the meantime starts the wait again, and the text analysed is the
one the editor holds when the wait ends (the latest only). Analyses run off the
event loop, in worker threads, so completion and hover answer while a large
pipeline is checked; those of one file run one at a time, those of different
files side by side (`ANALYSES_AT_ONCE`), so a small document's diagnostics do
not wait for a large one's analysis to end. An analysis whose text has been
replaced by the time it ends is dropped, and the newer one publishes. A change to a file a
pipeline reads (its model script, cassette, the lock file; open, saved or
changed on disk) re-checks that pipeline; a model script or test opened
before its pipeline finds it in its folder. An open test file shows its own
findings, as `converge-dsl test` reads it (`_analysis.check_test`), with its
pipeline's text as the editor holds it when that is open; it is checked again
when its pipeline is opened, saved or changed on disk, and when an edit of the
pipeline changes what the test can name (its keys, inputs, models, invariants).

The editor features (completion, hover, navigation, actions, symbols,
rename, semantic tokens) are registered by their own modules and read
`Workspace.model`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeVar

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from converge_dsl._version import __version__
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.lsp._analysis import (
    PIPELINE,
    SCRIPT,
    TEST,
    Analysis,
    analyse,
    check_test,
    names_for_tests,
    with_facts,
)
from converge_dsl.lsp._diagnostics import by_file
from converge_dsl.lsp._document import Document
from converge_dsl.lsp._params import strict_converter
from converge_dsl.lsp._protocol import PipelineProtocol
from converge_dsl.lsp._wire import Frames, Output, read_frames
from converge_dsl.lsp._workspace import Workspace

if TYPE_CHECKING:
    from converge_dsl.frontend import Check

# The pause in typing an analysis waits for: long enough to take the changes an editor
# sends in one burst (a paste, a multi-cursor edit, a completion with its edits) as
# one text (they arrive within a few milliseconds of each other), short beside the
# analysis itself (about 75 ms for 1,000 suggestors). Keystrokes come further apart
# than any debounce worth having; a change during an analysis waits for it to end.
DEBOUNCE_S = 0.010

# How many files are analysed at once, each in a worker thread: a small pipeline's check
# (tens of milliseconds) then takes its share of the interpreter beside a large one's
# (seconds near the file-size cap) instead of waiting for its end.
ANALYSES_AT_ONCE = 4

# A code's explanation (`converge-dsl explain`'s text), given by the command line.
Explain = Callable[[str], str | None]


_UNSEEN = object()
_T = TypeVar("_T")


class PipelineServer(LanguageServer):
    """pygls's server plus the converge-dsl workspace and the analysis scheduler."""

    def __init__(
        self,
        explain: Explain | None = None,
        debounce: float = DEBOUNCE_S,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            "converge-dsl",
            __version__,
            protocol_cls=PipelineProtocol,
            converter_factory=strict_converter,
        )
        self.explain: Explain = explain or (lambda code: None)
        self.debounce = debounce
        # The environment every analysis reads (None: the process's).
        self.environ = environ
        self.state = Workspace(Path.cwd().resolve(), environ)
        self._pending: dict[Path, asyncio.Task[None]] = {}
        self._waiting: set[Path] = set()  # whose pending check still waits for the pause
        self._finishing: set[asyncio.Task[None]] = set()  # replaced checks past their wait
        self._worker = ThreadPoolExecutor(
            max_workers=ANALYSES_AT_ONCE, thread_name_prefix="converge-dsl-check"
        )
        # One file's checks run one at a time: its lock, and how many checks hold or wait for it.
        self._turns: dict[Path, tuple[asyncio.Lock, int]] = {}
        # Which names an open test's last check read of its pipeline, so that a pipeline's
        # analysis re-checks the tests that read other names (`_UNSEEN`: not known, as when
        # the test read an editor's text no analysis has named yet).
        self._analysed: dict[Path, tuple[str, object]] = {}  # pipeline -> (text, names)
        self._tests_saw: dict[Path, object] = {}
        # Each open URI's buffer, the last opened or edited last: two URIs may name one
        # file (a link), each its own editor buffer; the file's text is the last edited.
        self._buffers: dict[str, Document] = {}
        self._opened_as: dict[str, Path] = {}  # each open URI's file
        self._uris: dict[Path, str] = {}  # each open file's URI: its text's buffer's
        # The URIs each file's diagnostics show under (published and not taken back since),
        # so that a URI no longer open is cleared rather than left with stale diagnostics.
        self._published: dict[Path, set[str]] = {}
        # The pipeline each test file names, by the text it was read from (a YAML load).
        self._tested: dict[Path, tuple[str, Path | None]] = {}

    protocol: PipelineProtocol

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve `stdin` and `stdout` (`_wire.read_frames`) until `exit`, the end of
        the input or the client no longer reading `stdout` (`protocol.shut_down` says whether
        the client asked for `shutdown`); `stdout` is closed then, its unread bytes dropped."""
        if stdin is None or stdout is None:
            raise ValueError("the server serves the streams it is given")
        self._stop_event = stop = threading.Event()
        output = Output(stdout, stop)
        self.protocol.set_writer(output)
        frames = Frames(stdin, self.thread_pool)
        try:
            asyncio.run(read_frames(frames, self.protocol, stop, self.message_limit()))
        except SystemExit:
            pass  # `exit`
        finally:
            self.shutdown()  # type: ignore[no-untyped-call]
            if output.gone:
                output.close()

    def message_limit(self) -> int:
        """The largest message body read: a document of the file-size cap, each character
        escaped in JSON (up to 12 bytes), and room for the rest of the message."""
        from converge_dsl.errors import UsageError
        from converge_dsl.frontend import max_bytes

        try:
            cap = max_bytes(self.environ)
        except UsageError:  # each analysis says so; the wire reads as by default
            cap = max_bytes({})
        return 12 * cap + 1024 * 1024

    @functools.cached_property
    def checks(self) -> tuple[Check, ...]:
        """`validate`'s checks in the server's environment (`validation.checks_in`), made
        on the first analysis for every analysis after."""
        from converge_dsl.validation import checks_in

        return checks_in(self.environ)

    # --- files ------------------------------------------------------------------

    def path(self, uri: str) -> Path | None:
        """The file `uri` names; None for one that names no file (an editor's `untitled:`
        buffer, a path no file can have: a NUL byte in it)."""
        path = to_fs_path(uri)
        if not path or "\x00" in path:
            return None
        return Path(path).resolve()

    def uri(self, path: Path) -> str:
        """The URI the server names `path` by: while it is open, the URI (as the client spelt
        it) of the buffer its text is, so diagnostics, locations and edits land in that
        buffer; else its file URI."""
        return self._uris.get(path) or from_fs_path(str(path)) or path.as_uri()

    def published_as(self, path: Path) -> list[tuple[str, int | None]]:
        """The URIs and versions the diagnostics of `path` are published under: each open
        buffer of it whose text is the file's (the last edited one, and any other holding
        the same text), else its file URI."""
        document = self.state.open.get(path)
        if document is None:
            return [(self.uri(path), None)]
        return [
            (uri, buffer.version)
            for uri, buffer in self._buffers.items()
            if self._opened_as[uri] == path and (buffer is document or buffer.text == document.text)
        ]

    def _hold(self, uri: str, path: Path, document: Document) -> None:
        """`document`, the buffer at `uri`, is the text of `path` (opened or edited last)."""
        self._buffers.pop(uri, None)
        self._buffers[uri] = document
        self._opened_as[uri] = path
        self._uris[path] = uri
        self.state.open[path] = document

    def opened(self, uri: str, text: str, version: int | None) -> None:
        path = self.path(uri)
        if path is None:
            return
        self._hold(uri, path, Document(text, version))
        self.changed(path)

    def edited(
        self, uri: str, version: int, changes: Sequence[lsp.TextDocumentContentChangeEvent]
    ) -> None:
        """Apply a `didChange` to the open document at `uri` and schedule what it changes;
        a change to a document not open is said in the log and ignored. A version that does
        not increase is said in the log, and the change applied all the same: it is the
        editor's next edit whatever its number, and leaving it out would part the texts."""
        path = self.path(uri)
        if path is None:
            return  # not a file (an editor's `untitled:` buffer): never analysed
        document = self._buffers.pop(uri, None)
        if document is None:
            self.protocol.log(
                f"{lsp.TEXT_DOCUMENT_DID_CHANGE}: {uri} is not open: "
                "send 'textDocument/didOpen' first; ignored"
            )
            return
        self._hold(uri, path, document)  # the last edited
        for change in changes:
            document.apply(change)
        if document.version is not None and version <= document.version:
            self.protocol.log(
                f"{lsp.TEXT_DOCUMENT_DID_CHANGE}: {uri} is at version {document.version}; "
                f"version {version} does not increase it (each change must): applied"
            )
        document.version = version
        self.changed(path)

    def closed(self, uri: str) -> None:
        """Close `uri`'s buffer; its file stays open, at the buffer another URI of it
        edited last, while there is one. Once it is closed, what the server holds for it is
        dropped, and for each pipeline no open document needs any more (`release`)."""
        self._buffers.pop(uri, None)
        path = self._opened_as.pop(uri, None)
        if path is None:
            return
        others = [other for other in self._buffers if self._opened_as[other] == path]
        if others:
            self._hold(others[-1], path, self._buffers[others[-1]])
            self.changed(path)
        else:
            self._uris.pop(path, None)
            self.state.open.pop(path, None)
            self.release()
        if path in self._published:  # still found in: shown under the URIs it has now
            self.send(path, self.state.published(path))

    def needed(self) -> set[Path]:
        """The files whose analyses the open documents read: themselves, the pipelines that
        read one (a model script's findings are its pipeline's), and those an open model
        script or test names (looked for as `changed` does: only when none reads it)."""
        needed = set(self.state.open)
        for path, document in self.state.open.items():
            reading = self.state.pipelines_reading(path)
            needed |= reading
            kind = self.state.kind(path)
            if kind in (SCRIPT, TEST) and not reading:
                needed.update(self.pipelines_naming(path, kind, document.text))
        return needed

    def release(self) -> None:
        """Drop everything held for a file no open document needs: its pending check, its
        analyses (their texts), what it found (taken back from the files it was published
        in) and the files it read."""
        needed = self.needed()
        held = {*self.state.latest, *self.state.good, *self.state.found, *self._pending}
        for path in sorted({*held, *self._analysed, *self._tests_saw} - needed):
            self.unpublish(path)
            self.state.forget(path)
            self._analysed.pop(path, None)
            self._tests_saw.pop(path, None)
        for path in set(self._tested) - set(self.state.open):
            del self._tested[path]

    def changed(self, path: Path) -> None:
        """`path` has new text: schedule the analyses it changes."""
        kind = self.state.kind(path)
        if kind is None:
            return
        if kind != PIPELINE and not (kind == TEST and path in self.state.open):
            self.unpublish(path)
        if kind == PIPELINE:
            self.schedule(path)
        if kind == TEST and path in self.state.open:
            self.schedule_test(path)
        for pipeline in self.state.pipelines_reading(path):
            self.schedule(pipeline)
        text = self.state.text(path) if kind in (SCRIPT, TEST) else None
        if text is not None and not self.state.pipelines_reading(path):
            for pipeline in self.pipelines_naming(path, kind, text):
                self.schedule(pipeline)

    def unpublish(self, path: Path) -> None:
        """`path` no longer has findings of its own (a pipeline or test edited into another
        kind of file, or emptied): its pending check is dropped and what it found is taken
        back from every file it was published in (a check past its wait runs on, and
        neither publishes nor keeps what it finds)."""
        self._drop_pending(path)
        for file, items in self.state.forget_found(path).items():
            self.send(file, items)

    def pipelines_naming(self, path: Path, kind: str, text: str) -> list[Path]:
        """The pipelines beside a model script that name it, or the one a test names."""
        if kind == TEST:
            named = self.tested_pipeline(path, text)
            return [named] if named is not None else []
        found = []
        for candidate in sorted(path.parent.glob("*.y*ml")):
            resolved = candidate.resolve()
            other = self.state.text(resolved)
            if other and path.name in other and self.state.kind(resolved, other) == PIPELINE:
                found.append(resolved)
        return found

    # --- analysis ---------------------------------------------------------------

    def schedule(self, path: Path) -> None:
        """Analyse `path` after the debounce; an earlier wait for it is cancelled."""
        self._replace_pending(path, self._check(path))

    def schedule_test(self, path: Path) -> None:
        """Check the test file at `path` after the debounce (its own findings)."""
        self._replace_pending(path, self._check_test(path))

    def _replace_pending(self, path: Path, check: Coroutine[None, None, None]) -> None:
        """Make `check` the pending check of `path`. An earlier one still waiting for the
        pause is cancelled; one past it runs to its end, unpublished when its text is
        replaced, so the editor model it makes is kept as the last good one."""
        self._drop_pending(path)
        self._waiting.add(path)
        self._pending[path] = asyncio.get_running_loop().create_task(check)

    def _drop_pending(self, path: Path) -> None:
        """`path` has no pending check: one still waiting for the pause is cancelled; one
        past it runs to its end (`settle` waits for it), no longer the pending one."""
        pending = self._pending.pop(path, None)
        if pending is not None and path in self._waiting:
            pending.cancel()
        elif pending is not None and not pending.done():
            self._finishing.add(pending)
            pending.add_done_callback(self._finishing.discard)
        self._waiting.discard(path)

    def _is_pending(self, path: Path) -> bool:
        """Whether the running check is still the pending check of `path` (not replaced by a
        newer one, nor dropped when its file was closed or stopped being a pipeline or test)."""
        return self._pending.get(path) is asyncio.current_task()

    async def _pause(self, path: Path) -> None:
        """Wait for the pause in typing; after it, the check is no longer cancelled."""
        await asyncio.sleep(self.debounce)
        self._waiting.discard(path)

    def tested_pipeline(self, test: Path, text: str) -> Path | None:
        """The pipeline the test file `test` names in `text` (`_related.tested_pipeline`),
        read once a text: the scheduler asks after every check."""
        from converge_dsl.lsp._related import tested_pipeline

        cached = self._tested.get(test)
        if cached is not None and (cached[0] is text or cached[0] == text):
            return cached[1]
        named = tested_pipeline(test, text, self.environ)
        self._tested[test] = (text, named)
        return named

    def tests_of(self, pipeline: Path) -> list[Path]:
        """The open test files that test `pipeline`."""
        return [
            path
            for path, text in sorted(self.state.open_texts().items())
            if self.state.kind(path) == TEST and self.tested_pipeline(path, text) == pipeline
        ]

    def pipeline_on_disk(self, uri: str) -> None:
        """The file at `uri` was opened, saved or changed on disk: the open tests of it
        are checked again (a test reads its pipeline from the editor's text while it is
        open, else from disk, and an edit re-checks them when the names they read change)."""
        path = self.path(uri)
        for test in [] if path is None else self.tests_of(path):
            self.schedule_test(test)

    async def _check_test(self, path: Path) -> None:
        """Check the open test file at `path` and publish what it finds while it is still
        open at that text; once closed, what is held for it is dropped (`release`)."""
        await self._pause(path)
        try:
            await self._test_findings(path)
        finally:
            if path not in self.state.open:
                self.release()

    async def _test_findings(self, path: Path) -> None:
        text = self.state.text(path)
        if text is None:
            return
        display = self.state.display(path)
        open_texts = self.state.open_texts()
        try:
            found = await self._in_turn(
                path, functools.partial(check_test, path, text, display, open_texts, self.environ)
            )
        except Exception as exc:  # an editor keeps its server through any text
            self.window_log_message(
                lsp.LogMessageParams(
                    lsp.MessageType.Error, f"converge-dsl: {type(exc).__name__}: {exc}"
                )
            )
            return
        if not self._is_pending(path):
            return  # replaced (the newer check publishes) or closed
        del self._pending[path]
        if path in self.state.open and self.state.text(path) == text:
            self._tests_saw[path] = self._names_read(path, text, open_texts)
            self.publish_found(path, found)

    def _names_read(self, test: Path, text: str, open_texts: Mapping[Path, str]) -> object:
        """The names of its pipeline that the check of `test` read (see `_tests_saw`)."""
        pipeline = self.tested_pipeline(test, text)
        read = None if pipeline is None else open_texts.get(pipeline)
        analysed = None if pipeline is None else self._analysed.get(pipeline)
        if read is None or analysed is None or analysed[0] != read:
            return _UNSEEN
        return analysed[1]

    async def _check(self, path: Path) -> None:
        """Analyse the pipeline at `path`, publish its diagnostics, then make its editor
        model; a check no longer pending (replaced, or its file closed and no longer needed)
        publishes nothing, and what a file no open document needs is dropped at its end."""
        await self._pause(path)
        try:
            await self._analyse(path)
        finally:
            if path not in self.state.open:
                self.release()  # closed meanwhile, or checked for an open script or test

    async def _analyse(self, path: Path) -> None:
        text = self.state.text(path)
        if text is None:
            return
        display = self.state.display(path)
        previous = self.state.loaded(path)
        try:
            analysis = await self._in_turn(
                path,
                functools.partial(
                    analyse,
                    path,
                    text,
                    display,
                    facts=False,
                    previous=previous,
                    env=self.environ,
                    checks=self.checks,
                ),
            )
            if not self._is_pending(path) or self.state.text(path) != text:
                return  # a newer check publishes, or the file was closed
            self.publish(analysis)
            names = names_for_tests(analysis)
            self._analysed[path] = (text, names)
            for test in self.tests_of(path):  # those that read other names read these now
                if self._tests_saw.get(test, _UNSEEN) != names:
                    self.schedule_test(test)
            # The editor model after the diagnostics: they are what the user waits for.
            analysis = await self._in_turn(path, functools.partial(with_facts, analysis))
        except Exception as exc:  # an editor keeps its server through any text
            self.window_log_message(
                lsp.LogMessageParams(
                    lsp.MessageType.Error, f"converge-dsl: {type(exc).__name__}: {exc}"
                )
            )
            return
        if self._is_pending(path):
            del self._pending[path]
        elif path not in self._pending:
            return  # closed meanwhile and dropped: nothing of it is kept
        if self.state.text(path) == text:
            self.state.remember(analysis)
        else:  # typed on meanwhile: still the last good model until a newer one is
            self.state.keep_good(analysis)

    async def _in_turn(self, path: Path, call: Callable[[], _T]) -> _T:
        """`call()` in a worker thread once the checks of `path` before it have ended. The
        lock of `path` is kept while a check holds or waits for it, and dropped after the
        last (a lock's `locked()` is false between its release and the next waiter's turn)."""
        lock, users = self._turns.get(path, (asyncio.Lock(), 0))
        self._turns[path] = (lock, users + 1)
        try:
            async with lock:
                return await asyncio.get_running_loop().run_in_executor(self._worker, call)
        finally:
            lock, users = self._turns[path]
            if users == 1:
                del self._turns[path]
            else:
                self._turns[path] = (lock, users - 1)

    def publish(self, analysis: Analysis) -> None:
        """Keep `analysis` and publish the diagnostics of every file it changes."""
        self.state.remember(analysis)
        self.publish_found(analysis.path, analysis.diagnostics)

    def publish_found(self, source: Path, diagnostics: tuple[Diagnostic, ...]) -> None:
        """Publish what the check of `source` found, in every file it changes."""
        grouped = by_file(diagnostics, self.state.lines)
        found = {self.state.path_of(file): items for file, items in grouped.items()}
        found.setdefault(source, [])
        for file, items in self.state.publishable(source, found).items():
            self.send(file, items)

    def send(self, file: Path, items: list[lsp.Diagnostic]) -> None:
        """Publish `items`, the diagnostics of `file`, under the URIs of `published_as`, and
        clear them under each URI they showed under that is no longer open as `file`. A
        file not open that shows nothing is sent nothing: no editor waits for its version."""
        targets = self.published_as(file)
        named = {uri for uri, _ in targets}
        shown = self._published.pop(file, set())
        still_open = {uri for uri in shown if self._opened_as.get(uri) == file}
        for uri in sorted(shown - still_open - named):
            self.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[], version=None)
            )
        if not items and file not in self.state.open:
            targets = [(uri, version) for uri, version in targets if uri in shown]
        for uri, version in targets:
            self.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=uri, diagnostics=items, version=version)
            )
        kept = (still_open - named) | (named if items else set())
        if kept:
            self._published[file] = kept

    async def settle(self) -> None:
        """Wait until no analysis is pending (for `shutdown`)."""
        while self._pending or self._finishing:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(
                    *self._pending.values(), *self._finishing, return_exceptions=True
                )
            self._pending = {p: t for p, t in self._pending.items() if not t.done()}


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
        await ls.settle()
        ls._worker.shutdown(wait=False)


def _if_pipeline(server: PipelineServer, path: Path) -> set[Path]:
    """{path} when it is a pipeline the server has analysed (changed on disk)."""
    return {path} if path in server.state.latest else set()
