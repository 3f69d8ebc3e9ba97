"""What the server knows: the open documents, each pipeline's latest and last good analysis.

A pipeline is analysed from the editor's text when it is open (its `Document`),
else from disk.
`latest` is the last analysis made; `good` the last one whose document loaded
and whose suggestors could be read (what completion, hover and navigation
read while the text is broken mid-edit). `related` indexes, for each model
script, cassette or lock file, the pipelines whose analysis reads it, so a
change there re-checks them. Diagnostics are kept per pipeline that found them
and published per file as the union over pipelines (a model script two
pipelines use shows both's findings).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lsprotocol import types as lsp

from converge_dsl._reading import read_bytes
from converge_dsl.errors import UsageError
from converge_dsl.lsp._analysis import Analysis, file_kind
from converge_dsl.lsp._document import Document
from converge_dsl.lsp._positions import Lines


class Workspace:
    """The state of one server session (one editor)."""

    def __init__(self, root: Path, environ: Mapping[str, str] | None = None) -> None:
        self.root = root
        # The environment whose file-size cap bounds a read from disk (None: the process's).
        self.environ = environ
        self.open: dict[Path, Document] = {}
        self.latest: dict[Path, Analysis] = {}
        self.good: dict[Path, Analysis] = {}
        self.related: dict[Path, set[Path]] = {}
        self.found: dict[Path, dict[Path, list[lsp.Diagnostic]]] = {}

    def display(self, path: Path) -> str:
        """How diagnostics name `path`: relative to the workspace root when inside it, as
        `validate` run from the root names it."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()

    def path_of(self, file: str) -> Path:
        """The file a diagnostic's `file` names (a display name of `display`)."""
        path = Path(file)
        return (path if path.is_absolute() else self.root / path).resolve()

    def text(self, path: Path) -> str | None:
        """The editor's text of `path` when it is open, else the file's; None if unreadable.

        A file on disk is read as `validate` reads it: only a regular file (a FIFO or a
        device would hang the server) and only up to the size cap of the environment; and
        as an editor holds it: without a byte order mark (Neovim and VS Code keep the mark
        out of the text they send), so the columns of its first line are the editor's."""
        if path in self.open:
            return self.open[path].text
        try:
            return self._read(path).decode("utf-8-sig")
        except (OSError, UnicodeDecodeError, UsageError):
            return None

    def kind(self, path: Path, text: str | None = None) -> str | None:
        """The kind of file `path` is (`_analysis.file_kind` of its `text`, or of `text` when
        the caller has just read it); None if unreadable. An open document's is read again
        only after a change that may change it (`Document.kind`)."""
        document = self.open.get(path)
        if document is None or (text is not None and text is not document.text):
            text = self.text(path) if text is None else text
            return None if text is None else file_kind(text)
        if document.kind is None:
            document.kind = file_kind(document.text)
        return document.kind

    def version(self, path: Path) -> int | None:
        """The editor's version of `path` when it is open."""
        document = self.open.get(path)
        return None if document is None else document.version

    def open_texts(self) -> dict[Path, str]:
        """The editor's text of each open document."""
        return {path: document.text for path, document in self.open.items()}

    def _read(self, path: Path) -> bytes:
        from converge_dsl.frontend import max_bytes

        return read_bytes(path, "file", cap=max_bytes(self.environ))

    def lines(self, file: str) -> Lines:
        """The lines positions in `file` are converted on: its `text`, or for a file on disk
        that is not UTF-8, its text as an editor shows it (each bad byte one U+FFFD, no byte
        order mark), so the places of its diagnostics keep their columns."""
        path = self.path_of(file)
        text = self.text(path)
        if text is None:
            try:
                text = self._read(path).decode("utf-8-sig", "replace")
            except (OSError, UsageError):
                text = ""
        return Lines(text)

    def remember(self, analysis: Analysis) -> None:
        """Keep `analysis` as the latest of its pipeline (and the last good one when it is)."""
        path = analysis.path
        self.latest[path] = analysis
        if analysis.facts is not None:
            self.good[path] = analysis
        for files in self.related.values():
            files.discard(path)
        for related in analysis.related_files():
            self.related.setdefault(related, set()).add(path)

    def loaded(self, path: Path) -> Analysis | None:
        """The latest analysis of `path` whose text loaded (the next analysis re-uses
        the entries an edit did not touch)."""
        for analysis in (self.latest.get(path), self.good.get(path)):
            if analysis is not None and analysis.document is not None:
                return analysis
        return None

    def keep_good(self, analysis: Analysis) -> None:
        """Keep `analysis` (of a text already edited) as the last good one, when it is."""
        if analysis.facts is not None:
            self.good[analysis.path] = analysis

    def model(self, path: Path) -> Analysis | None:
        """The analysis the editor features read: the latest when its text is the
        current one and its facts are readable, else the last good one."""
        latest = self.latest.get(path)
        if latest is not None and latest.facts is not None and latest.text == self.text(path):
            return latest
        return self.good.get(path) or latest

    def publishable(
        self, source: Path, found: dict[Path, list[lsp.Diagnostic]]
    ) -> dict[Path, list[lsp.Diagnostic]]:
        """Record what `source` found now; the union per file of every file that changed."""
        before = self.found.get(source, {})
        self.found[source] = found
        touched = set(before) | set(found)
        return {file: self.published(file) for file in sorted(touched)}

    def forget_found(self, source: Path) -> dict[Path, list[lsp.Diagnostic]]:
        """Forget what `source` found; the union per file of every file that changed."""
        before = self.found.pop(source, None)
        return {} if before is None else {file: self.published(file) for file in sorted(before)}

    def published(self, path: Path) -> list[lsp.Diagnostic]:
        """The diagnostics last published for `path`, from every pipeline."""
        return [d for per_source in self.found.values() for d in per_source.get(path, ())]

    def forget(self, path: Path) -> None:
        """Drop the analyses of `path` and what they read (its file is closed)."""
        self.latest.pop(path, None)
        self.good.pop(path, None)
        for related, pipelines in list(self.related.items()):
            pipelines.discard(path)
            if not pipelines:
                del self.related[related]

    def pipelines_reading(self, path: Path) -> set[Path]:
        return set(self.related.get(path, ()))
