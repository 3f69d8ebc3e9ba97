"""A batch's outputs: sinks of the whole batch, and the sinks each case's run gets.

Every output of a batch is a `converge_dsl.runtime.RunSink` (docs/architecture.md
§12), so the batch checks them with the runtime's one same-file check before
any case runs. Of the whole batch (in the parent process):

- `OutLinesSink`: `--out RESULTS.jsonl`, one flushed result line per case;
- `BatchReportSink`: `--report R.html`, one page listing every case run (stop
  reason, cycles, model calls) that links each case's own report; styled as the
  other pages are (`_page_assets`' `page.css`, then this folder's `page.css`).

Of each case (`CaseOutputs.sinks(case)`, made where the case runs: a worker
process or a Ray actor too, so `CaseOutputs` is plain, picklable data):

- `--trace DIR`: the case's trace, `DIR/<index>.jsonl` (`TraceSink`);
- `--report R.html`: the case's report, `R/<index>.html` (the folder is the
  page's name without its suffix; `ReportSink`, over the case's trace);
- `--otel`: the case's run exported as its own OpenTelemetry trace (`OtelSink`);
- `--record DIR`: the case's model calls (and tool servers') in its own cassette,
  `DIR/<id>.jsonl` (`RecordSink`; named by `_cassettes.cassette_name`).
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from converge_dsl import codes
from converge_dsl.clock import Clock
from converge_dsl.errors import UsageError
from converge_dsl.runtime import Output, RunSink

from ._cases import Case, CaseResult, recognise

_FOLDER = Path(__file__).resolve().parent  # the batch page's own style, page.css


def case_folder(report: Path) -> Path:
    """The folder of the per-case reports of the batch page `report` (`R.html` -> `R`)."""
    folder = report.with_suffix("")
    return folder if folder != report else report.with_name(report.name + ".cases")


@dataclass(frozen=True)
class CaseOutputs:
    """What each case's run writes (see the module docstring); empty: nothing."""

    trace: Path | None = None
    report: Path | None = None
    otel: bool = False
    otel_content: bool = False
    # `--record DIR`: one cassette per case; `overwrite` records over one already there.
    record: Path | None = None
    overwrite: bool = True
    # The environment OpenTelemetry reads its `OTEL_*` settings from.
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    @property
    def any(self) -> bool:
        return (
            self.trace is not None
            or self.report is not None
            or self.otel
            or self.record is not None
        )

    def resolved(self) -> CaseOutputs:
        """The same outputs with absolute paths (for a process in another folder)."""
        return replace(
            self,
            trace=None if self.trace is None else self.trace.resolve(),
            report=None if self.report is None else self.report.resolve(),
            record=None if self.record is None else self.record.resolve(),
        )

    def folders(self) -> tuple[Output, ...]:
        """The folders the cases write into, as outputs of the batch (for the checks)."""
        found = []
        if self.trace is not None:
            found.append(Output(self.trace, "--trace", "folder of traces"))
        if self.report is not None:
            found.append(Output(case_folder(self.report), "--report", "folder of reports"))
        if self.record is not None:
            found.append(Output(self.record, "--record", "folder of cassettes"))
        return tuple(found)

    def make_folders(self) -> None:
        """Create the folders (a path that is a file, or a link, is a `UsageError`)."""
        for output in self.folders():
            folder = output.path
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                raise UsageError(
                    f"{output.option} {str(folder)!r} is not a folder; with --cases "
                    f"{output.option} writes one file per case into a folder",
                    hint=f"give {output.option} a new or empty folder",
                    code=codes.OUTPUT_REFUSED,
                )
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(
                    f"cannot make the folder {str(folder)!r} ({output.option}): "
                    f"{exc.strerror or exc}",
                    code=codes.OUTPUT_REFUSED,
                ) from None

    def check_otel(self, clock: Clock) -> None:
        """`--otel` without the SDK is refused once, before any case (`OtelRefused`)."""
        if self.otel:
            sink = self._otel(clock)
            if sink is not None:
                sink.close()

    def sinks(self, case: Case, clock: Clock) -> tuple[RunSink, ...]:
        """The sinks of one case's run, in the order they hear it."""
        from converge_dsl.runtime import RecordSink, ReportSink, TraceSink

        from ._cassettes import cassette_of

        found: list[RunSink] = []
        trace = None if self.trace is None else self.trace / f"{case.index}.jsonl"
        if self.report is not None:
            page = case_folder(self.report) / f"{case.index}.html"
            found.append(ReportSink(page, trace=trace))
        if trace is not None:
            found.append(TraceSink(trace))
        if self.record is not None:
            found.append(RecordSink(cassette_of(self.record, case), overwrite=self.overwrite))
        otel = self._otel(clock) if self.otel else None
        if otel is not None:
            found.append(otel)
        return tuple(found)

    def _otel(self, clock: Clock) -> RunSink | None:
        from converge_dsl.runtime import OtelOptions, OtelSink

        return OtelSink.start(OtelOptions(flag=True, content=self.otel_content), self.env, clock)


class BatchSink(RunSink):
    """A sink of the whole batch: it hears each case's result (`on_case`) as it finishes."""

    def on_case(self, result: CaseResult) -> None:
        """One finished case."""


class FolderSink(BatchSink):
    """The folders a batch's cases write into: outputs of the batch, for its checks."""

    def __init__(self, folders: tuple[Output, ...]) -> None:
        self._folders = folders

    def outputs(self) -> tuple[Output, ...]:
        return self._folders


class OutLinesSink(BatchSink):
    """`--out RESULTS.jsonl`: each case's result line, written and flushed as it finishes."""

    def __init__(self, path: Path, append: bool) -> None:
        self.path = path
        self._append = append
        self._file: IO[str] | None = None
        self._label = f"--out {path}"  # what a failed write names, made once: not per case

    def outputs(self) -> tuple[Output, ...]:
        return (Output(self.path, "--out", "results file"),)

    def open(self, clock: Clock) -> None:
        """Open (`--resume`: append to) the file; a foreign file is refused."""
        from converge_dsl._files import open_output

        self._file = open_output(
            self.path, "--out", "results file", recognise=recognise, append=self._append
        )

    def on_case(self, result: CaseResult) -> None:
        from converge_dsl._files import flush_checked, write_all

        if self._file is not None:
            write_all(self._file, result.line(), self._label)
            flush_checked(self._file, self._label)

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()


class BatchReportSink(BatchSink):
    """`--report R.html` of a batch: one page that links the report of each case run."""

    def __init__(self, path: Path, pipeline: Path) -> None:
        self.path = path
        self._pipeline = pipeline
        self._rows: list[CaseResult] = []

    def outputs(self) -> tuple[Output, ...]:
        return (Output(self.path, "--report", "report file"),)

    def check(self) -> None:
        from converge_dsl.runtime import check_report_output

        check_report_output(self.path, "--report")

    def on_case(self, result: CaseResult) -> None:
        self._rows.append(result)

    def close(self) -> None:
        """Write the page, once every case is in (or the batch stopped)."""
        from converge_dsl.runtime import write_page

        write_page(self.page(), self.path, "--report")

    def page(self) -> str:
        """The batch page: a table of the cases, by index, each linking its report."""
        from urllib.parse import quote

        from converge_dsl._page_assets import (
            CONTENT_SECURITY_POLICY,
            html_name,
            html_text,
            page_asset,
        )
        from converge_dsl.runtime import REPORT_MARK

        folder = case_folder(self.path)
        # A relative address: the folder's name, its bytes, as a path segment (`#`, `?`,
        # `%` and spaces are an address's own characters; a name need not be UTF-8).
        address = html.escape(quote(os.fsencode(folder.name)))
        # The name as a terminal shows it: a byte that is not UTF-8 as U+FFFD.
        shown = os.fsencode(folder.name).decode("utf-8", "replace")
        rows = []
        for result in sorted(self._rows, key=lambda r: r.index):
            body = result.body
            own = folder / f"{result.index}.html"
            label = html.escape(str(result.index))
            link = f'<a href="{address}/{result.index}.html">{label}</a>'
            case_id = html_name("" if result.id is None else str(result.id))
            cells = (
                link if own.is_file() else label,
                # in a box of a few lines, which scrolls (page.css: an id of 10,000 characters)
                f'<div class="id">{case_id}</div>',
                html_text(result.stop_reason),
                str(body["cycles"]),
                str(result.usage["model_calls"]),
                str(result.exit_code),
            )
            rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
        pipeline = os.fsencode(self._pipeline.name).decode("utf-8", "replace")
        title = html_text(f"converge-dsl batch: {pipeline}")
        head = "".join(
            f"<th>{name}</th>"
            for name in ("case", "id", "stop reason", "cycles", "model calls", "exit")
        )
        # The style the other pages start from (`page.css`), this page's own, the room for marks.
        css = (
            page_asset("page.css")
            + (_FOLDER / "page.css").read_text(encoding="utf-8")
            + page_asset("marks.css")
        )
        return (
            f'{REPORT_MARK}\n<html lang="en"><head><meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<meta http-equiv="Content-Security-Policy" '
            f'content="{html.escape(CONTENT_SECURITY_POLICY)}">\n'
            f"<title>{title}</title><style>{css}</style></head>\n"
            f"<body><header><h1>{title}</h1>"
            f"<p>{len(rows)} case(s) run; each case's report is in "
            f"{html_text(shown)}/</p></header>\n<main><section><div class='cases'>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            "</div></section></main></body></html>\n"
        )
