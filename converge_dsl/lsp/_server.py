"""The language server: pygls over stdio, one `Workspace`, diagnostics as `validate` makes them.

Opening or changing a pipeline schedules its analysis after `debounce` seconds;
a change in the meantime starts the wait again, and the text analysed is the
one the editor holds when the wait ends (the latest only). Analyses run off the
event loop, in worker threads, so completion and hover answer while a large
pipeline is checked; those of one file run one at a time, those of different
files side by side (`_scheduler.Scheduler`), so a small document's diagnostics do
not wait for a large one's analysis to end. An analysis whose text has been
replaced before it ends does not run, or stops between two of its stages, and the
newer one publishes. A change to a file a
pipeline reads (its model script, cassette, the lock file; open, saved or
changed on disk) re-checks that pipeline; a model script or test opened
before its pipeline finds it in its folder. An open test file shows its own
findings, as `converge-dsl test` reads it (`_analysis.check_test`), with its
pipeline's text as the editor holds it when that is open; it is checked again
when its pipeline is opened, saved or changed on disk, and when an edit of the
pipeline changes what the test can name (its keys, inputs, models, invariants).

The editor's notifications reach it through `_sync.register_sync`; the editor
features (completion, hover, navigation, actions, symbols, rename, semantic
tokens) are registered by their own modules and read `Workspace.model`.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

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
from converge_dsl.lsp._scheduler import Scheduler, Superseded
from converge_dsl.lsp._wire import Frames, Output, read_frames
from converge_dsl.lsp._workspace import Workspace

if TYPE_CHECKING:
    from converge_dsl.frontend import Check

# The pause in typing an analysis waits for: long enough to take the changes an editor
# sends in one burst (a paste, a multi-cursor edit, a completion with its edits) as
# one text (they arrive within a few milliseconds of each other), short beside the
# analysis itself (about 75 ms for 1,000 suggestors). Keystrokes come further apart
# than any debounce worth having; a change during an analysis stops it at its next stage
# (`_scheduler`).
DEBOUNCE_S = 0.010

# A code's explanation (`converge-dsl explain`'s text), given by the command line.
Explain = Callable[[str], str | None]


_UNSEEN = object()


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
        # The environment every analysis reads (None: the process's).
        self.environ = environ
        self.state = Workspace(Path.cwd().resolve(), environ)
        self.scheduler = Scheduler(debounce)
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
        held = {*self.state.latest, *self.state.good, *self.state.found, *self.scheduler.pending}
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
        self.scheduler.drop(path)
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
        self.scheduler.replace(path, self._check(path))

    def schedule_test(self, path: Path) -> None:
        """Check the test file at `path` after the debounce (its own findings)."""
        self.scheduler.replace(path, self._check_test(path))

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
        await self.scheduler.pause(path)
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
            found = await self.scheduler.in_turn(
                path, functools.partial(check_test, path, text, display, open_texts, self.environ)
            )
        except Superseded:
            return  # replaced (the newer check publishes) or closed
        except Exception as exc:  # an editor keeps its server through any text
            self.window_log_message(
                lsp.LogMessageParams(
                    lsp.MessageType.Error, f"converge-dsl: {type(exc).__name__}: {exc}"
                )
            )
            return
        if not self.scheduler.ended(path):
            return  # replaced (the newer check publishes) or closed
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
        await self.scheduler.pause(path)
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
            analysis = await self.scheduler.in_turn(
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
                    stop_point=self.scheduler.stop_point(),
                ),
            )
            if not self.scheduler.is_pending(path) or self.state.text(path) != text:
                return  # a newer check publishes, or the file was closed
            self.publish(analysis)
            names = names_for_tests(analysis)
            self._analysed[path] = (text, names)
            for test in self.tests_of(path):  # those that read other names read these now
                if self._tests_saw.get(test, _UNSEEN) != names:
                    self.schedule_test(test)
            # The editor model after the diagnostics: they are what the user waits for.
            model = functools.partial(with_facts, analysis)
            analysis = await self.scheduler.in_turn(path, model, superseded_too=True)
        except Superseded:
            return  # a newer check publishes, or the file was closed
        except Exception as exc:  # an editor keeps its server through any text
            self.window_log_message(
                lsp.LogMessageParams(
                    lsp.MessageType.Error, f"converge-dsl: {type(exc).__name__}: {exc}"
                )
            )
            return
        if not self.scheduler.ended(path) and path not in self.scheduler.pending:
            return  # closed meanwhile and dropped: nothing of it is kept
        if self.state.text(path) == text:
            self.state.remember(analysis)
        else:  # typed on meanwhile: still the last good model until a newer one is
            self.state.keep_good(analysis)

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
