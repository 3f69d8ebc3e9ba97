"""`converge-dsl run PIPELINE`: run a pipeline to a fixed point and report what converged.

Exit codes: 0 converged, 2 invalid pipeline (the diagnostics of `validate`),
3 usage error, 4 a budget ran out, 5 an invariant was violated, 6 paused for a
human, 1 anything else, 130 interrupted (Ctrl-C, SIGINT). `--format json`
always prints one `RunResultDocument`: every stop but `converged` has at least
one diagnostic saying why (code, message, suggestor, location); a run that
never started has stop reason `invalid` (the diagnostics of `validate`),
`usage_error` or `error` and no facts. A first Ctrl-C stops the run with
`cancelled` and prints its result, what it had reached; exit 130 (`_interrupts`
says what a Ctrl-C does when, and what is printed then).
Human output shows the same diagnostics on stderr (exit 2: as `converge-dsl
validate` prints them). Packs the cache lacks are fetched first, one line on
stderr for each.

Human in the loop: a run that pauses (exit 6) lists the pending proposals (id,
key, content, confidence, suggestor, why gated; `pending` in JSON). With
`--checkpoint DIR` the pause is saved; without it nothing can be continued and
the run says to re-run with `--checkpoint DIR`. `--resume DIR --approve ID...
--reject ID...` (or `--decisions FILE.json`, id -> true/false) continues it;
ids left undecided keep it paused; an unknown id is a usage error. The
checkpoint keeps the run's inputs, so `--resume DIR` needs no `--input`; the
command printed at a pause works as printed.
With `--cases CASES.jsonl --out RESULTS.jsonl` the command is a batch run
over many inputs (`converge_dsl.cli._batch`; `--resume` then takes no folder).
Every output is a sink of the one run assembly (docs/architecture.md §12):
`--report`, `--trace`, `--record`, the progress and the result document.
Human output shows live progress per cycle (rich on a terminal, plain lines
otherwise), then the facts grouped by key (id and content, a compact one-line
`data` when the fact has data, confidence and source), then the stop reason.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from dataclasses import replace
from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import BaseModel

from converge_dsl import codes
from converge_dsl._escapes import shell_join
from converge_dsl.cli import EXIT_INTERRUPTED, QUIET, environment_error
from converge_dsl.cli._inputs import add_input_arguments, json_file, pairs, parse_inputs
from converge_dsl.cli._interrupts import interrupted_document, interrupts_held, run_stoppable
from converge_dsl.errors import ConvergeError, PipelineInvalid, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from converge_dsl.cli import CommandIO
    from converge_dsl.diagnostics import Diagnostic
    from converge_dsl.engine import Fact, Provenance
    from converge_dsl.runtime import RunOptions, RunOutcome


_JSON_HELP = "json: one run-result document on standard output (converge-dsl schema run-result)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", type=Path, metavar="PIPELINE", help="the pipeline YAML file")
    add_input_arguments(parser)
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=CASSETTE",
        help="answer model NAME from a cassette recorded with --record; repeatable",
    )
    parser.add_argument("--format", choices=("human", "json"), default="human", help=_JSON_HELP)
    parser.add_argument(
        "--checkpoint", type=Path, metavar="DIR", help="checkpoint after every cycle"
    )
    parser.add_argument(
        "--resume",
        type=Path,
        nargs="?",
        const=True,
        metavar="DIR",
        help="continue from a checkpoint (with --cases: continue the batch in --out)",
    )
    parser.add_argument(
        "--approve",
        action="extend",
        nargs="+",
        default=[],
        metavar="ID",
        help="with --resume: approve these pending proposals of a paused run",
    )
    parser.add_argument(
        "--reject",
        action="extend",
        nargs="+",
        default=[],
        metavar="ID",
        help="with --resume: reject these pending proposals (dropped if proposed again)",
    )
    parser.add_argument(
        "--decisions",
        type=Path,
        metavar="FILE.json",
        help="with --resume: a JSON object mapping pending ids to true (approve) or false",
    )
    parser.add_argument(
        "--record",
        type=Path,
        metavar="CASSETTE",
        help="record model calls (with --cases: a folder, one cassette per case)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="with --record: replace a cassette already there (else it is refused)",
    )
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="CASSETTE",
        help="answer every model from a cassette (with --cases: a folder of them, one per case)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="compile without the on-disk compile cache (also: CONVERGE_DSL_NO_CACHE=1)",
    )
    from converge_dsl.cli._cache_options import add_cache_arguments

    add_cache_arguments(parser)
    _add_output_arguments(parser)
    from converge_dsl.cli._batch import add_batch_arguments
    from converge_dsl.cli._validate import add_allow_root

    add_allow_root(parser)
    add_batch_arguments(parser)


def explain_cache(out: RunOutcome, args: argparse.Namespace, io: CommandIO) -> None:
    """`--explain-cache`: each cached call, hit or miss and why, on standard error."""
    if not args.explain_cache:
        return
    if args.format == "json":
        document = {"calls": [record.as_json() for record in out.cache_calls]}
        io.stderr.write(json.dumps(document, indent=2) + "\n")
        return
    io.stderr.write(f"answer cache: {len(out.cache_calls)} call(s)\n")
    for record in out.cache_calls:
        io.stderr.write(
            f"  {record.outcome:4}  {record.suggestor or '-'} ({record.kind} {record.model}, "
            f"key {record.key[:16]})\n"
        )
        if record.why is not None:
            io.stderr.write("".join(f"        {line}\n" for line in record.why.split("\n")))


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a run's events go: a trace, a report, OpenTelemetry."""
    parser.add_argument(
        "--trace",
        type=Path,
        metavar="FILE.jsonl",
        help="write events as JSONL (with --cases: a folder, one trace per case)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        metavar="FILE.html",
        help="write an HTML report (with --cases: a page linking one report per case)",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="export OpenTelemetry traces (OTLP/HTTP; OTEL_* variables configure it; "
        "needs pip install 'converge-dsl[otel]')",
    )
    parser.add_argument(
        "--otel-content",
        action="store_true",
        help="with OpenTelemetry export: record prompts and answers (secrets masked)",
    )


def parse_decisions(args: argparse.Namespace) -> dict[str, bool]:
    """`--decisions FILE.json`, `--approve ID...`, `--reject ID...`: id -> approve.

    An id decided both ways (across the sources, or twice in the file) is a `UsageError`.
    """
    decisions: dict[str, bool] = {}
    if args.decisions is not None:
        loaded = json_file(args.decisions, "--decisions")
        if not isinstance(loaded, dict) or not all(isinstance(v, bool) for v in loaded.values()):
            raise UsageError(
                f"--decisions {args.decisions} must map proposal ids to true or false",
                hint='e.g. {"s1": true, "h1": false}',
                code=codes.INPUT_REFUSED,
            )
        decisions.update(loaded)
    for ids, approve in ((args.approve, True), (args.reject, False)):
        for item in ids:
            if decisions.setdefault(item, approve) != approve:
                raise UsageError(
                    f"proposal {item!r} is both approved and rejected",
                    hint="give one decision per id (--approve, --reject and --decisions together)",
                    code=codes.INPUT_REFUSED,
                )
    return decisions


def decision_sources(args: argparse.Namespace, decisions: dict[str, bool]) -> dict[str, str]:
    """Who gave each decision: `cli` (`--approve`, `--reject`), else `file:NAME` (`--decisions`)."""
    typed = {*args.approve, *args.reject}
    named = f"file:{Path(args.decisions).name}" if args.decisions is not None else "cli"
    return {item: "cli" if item in typed else named for item in decisions}


class _Progress:
    """Per-cycle progress: a rich live line on a terminal, plain lines otherwise."""

    def __init__(self, io: CommandIO) -> None:
        from converge_dsl.cli import VERBOSE

        self._stream = io.stderr
        self._console: Any = None
        self._status: Any = None
        self._verbose = io.verbosity >= VERBOSE
        style = io.style(io.stderr)
        if style.live:
            from converge_dsl.cli._terminal import console

            self._console = console(io.stderr, style, io.environ)
            self._status = self._console.status("starting")
            self._status.start()

    def __call__(self, event: BaseModel) -> None:
        kind = getattr(event, "type", "")
        if kind == "cycle_started":
            names: list[str] = list(event.candidates)  # type: ignore[attr-defined]
            text = f"cycle {event.cycle}: {len(names)} suggestor(s) running"  # type: ignore[attr-defined]
            if self._verbose:
                self.say(f"{text}: {', '.join(names)}")
        elif kind == "cycle_finished":
            text = f"cycle {event.cycle}: {event.promoted} fact(s) promoted"  # type: ignore[attr-defined]
        else:
            return
        if self._status is not None:
            self._status.update(text)
            if kind == "cycle_finished":
                self._console.print(text, markup=False, highlight=False)
        elif kind == "cycle_finished":
            self._stream.write(text + "\n")
            self._stream.flush()

    def say(self, text: str) -> None:
        """One line on standard error, above the live line when there is one."""
        if self._console is not None:
            self._console.print(text, markup=False, highlight=False)
        else:
            self._stream.write(text + "\n")

    def stop(self) -> None:
        status, self._status = self._status, None
        if status is not None:
            status.stop()


_DATA_WIDTH = 100


def _data_line(data: Any) -> str:
    """`    data {...}` (compact JSON, cut at `_DATA_WIDTH` characters with `…`), or nothing."""
    if data is None:
        return ""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if len(text) > _DATA_WIDTH:
        text = text[: _DATA_WIDTH - 1] + "…"
    return f"    data {text}\n"


def _text(content: str) -> str:
    """Content as it reads in the listing: continuation lines indented under the first."""
    return content.rstrip("\n").replace("\n", "\n      ")


# Facts listed per write: the listing of a huge run is never one string (or one document).
_LISTED = 1000


def _print_human(out: RunOutcome, stream: TextIO) -> None:
    """The human listing, written to `stream` a chunk of facts at a time, terminal-safe.

    The facts are read from the result one chunk at a time, never through the
    whole `document`: a run that stopped at its deadline holding millions of
    facts lists them in a time of the order of writing them.
    """
    from converge_dsl.frontend import terminal_safe

    sources: dict[Provenance, str] = {}
    for key, facts in out.facts_by_key():
        stream.write(terminal_safe(f"\n{key} ({len(facts)})\n"))
        for start in range(0, len(facts), _LISTED):
            chunk = facts[start : start + _LISTED]
            stream.write(terminal_safe("".join(_listed(fact, sources) for fact in chunk)))
    buffer = StringIO()
    _print_tail(out, buffer)
    stream.write(terminal_safe(buffer.getvalue()))


def _listed(fact: Fact, sources: dict[Provenance, str]) -> str:
    """One fact of the listing; `sources` keeps each provenance's text, made once."""
    source = sources.get(fact.provenance)
    if source is None:
        prov = fact.provenance
        pairs = (("model", prov.model_id), ("account", prov.account))
        source = sources[prov] = prov.source + "".join(f" {k}={v}" for k, v in pairs if v)
    data = "" if fact.data is None else _data_line(_plain_data(fact))
    return (
        f"  - {fact.id}: {_text(fact.content)}\n{data}"
        f"    confidence {fact.confidence:.2f}  from {source}\n"
    )


def _plain_data(fact: Fact) -> Any:
    from converge_dsl.runtime import FactModel

    return FactModel.of(fact).data


def _print_tail(out: RunOutcome, stream: TextIO) -> None:
    """What the listing ends with: pending and held decisions, the stop, the usage."""
    doc = out.summary
    if doc.pending:
        stream.write(f"\nawaiting a human decision ({len(doc.pending)})\n")
        for item in doc.pending:
            stream.write(
                f"  - {item.id} [{item.key}]: {_text(item.content)}\n{_data_line(item.data)}"
                f"    confidence {item.confidence:.2f}  from {item.suggestor} "
                f"(cycle {item.cycle})  gated: {item.reason}\n"
            )
    if doc.held:
        stream.write(f"\ndecided, held until every pending proposal is decided ({len(doc.held)})\n")
        for item_id, approve in doc.held.items():
            stream.write(f"  - {item_id}: {'approved' if approve else 'rejected'}\n")
    stream.write(f"\nstop: {doc.stop_reason} after {doc.cycles} cycle(s)")
    usage = doc.usage
    if usage.model_calls:
        stream.write(
            f"; {usage.model_calls} model call(s), "
            f"{usage.input_tokens + usage.output_tokens} token(s)"
        )
    if usage.cached_calls:
        stream.write(f"; {usage.cached_calls} cached answer(s), counted toward no budget")
    stream.write("\n")


def _error_text(out: RunOutcome) -> str:
    """Why the run stopped: its diagnostics rendered like `validate` renders them."""
    from converge_dsl.cli._render import render

    located = [d for d in out.diagnostics if d.file]
    if not located:
        return "" if out.error is None else f"{out.error.printed()}\n"
    text = StringIO()
    render(located, "human", text, summary=False)
    return text.getvalue() + "\n"


def _resume_command(args: argparse.Namespace, folder: Path, first: str) -> str:
    """The command line that continues the paused run, quoted for a POSIX shell.

    The checkpoint keeps the inputs, so none are repeated; the models the run
    was answered by (`--model`, `--replay`) are.
    """
    words = ["converge-dsl", "run", str(args.pipeline), "--resume", str(folder)]
    words += [w for value in args.model for w in ("--model", value)]
    if args.replay is not None:
        words += ["--replay", str(args.replay)]
    words += ["--approve", first]
    return shell_join(words)


def _pause_hint(out: RunOutcome, args: argparse.Namespace) -> str:
    """How to continue a paused run (or how to make it continuable)."""
    folder = args.checkpoint
    if folder is None:
        again = shell_join(["converge-dsl", "run", str(args.pipeline), "--checkpoint", "DIR"])
        return (
            "paused for a human, but no --checkpoint was given: nothing was saved to continue "
            f"from; re-run with `{again}`, then "
            "continue with --resume DIR --approve ID... --reject ID...\n"
        )
    first = out.summary.pending[0].id if out.summary.pending else "ID"
    return (
        f"paused for a human: continue with `{_resume_command(args, folder, first)}` "
        "(or --reject ID, or --decisions FILE.json); ids left undecided keep the run paused\n"
    )


def _options(
    args: argparse.Namespace,
    io: CommandIO,
    progress: _Progress | None,
    closing: contextlib.ExitStack,
) -> RunOptions:
    """The run's options from the command line (a `UsageError` when they do not fit)."""
    from converge_dsl._entry import ENTRY
    from converge_dsl.cli._cache_options import caching
    from converge_dsl.runtime import OtelOptions, RunOptions

    if args.resume is True:
        raise UsageError(
            "--resume needs DIR (the --checkpoint folder of the run to continue)",
            code=codes.ARGUMENTS_REFUSED,
        )
    if args.resume is not None and args.checkpoint is None:
        args.checkpoint = args.resume
    if args.record is not None and args.replay is not None:
        raise UsageError("--record and --replay cannot be combined", code=codes.ARGUMENTS_REFUSED)
    if args.overwrite and args.record is None:
        raise UsageError(
            "--overwrite only applies to --record",
            hint="add --record CASSETTE",
            code=codes.ARGUMENTS_REFUSED,
        )
    return RunOptions(
        pipeline=args.pipeline,
        inputs=parse_inputs(args),
        env=dict(io.environ),
        model_overrides=pairs(args.model, "--model"),
        checkpoint=args.checkpoint,
        resume=args.resume,
        replay=args.replay,
        decisions=(decisions := parse_decisions(args)),
        decided_by=decision_sources(args, decisions),
        on_fetch=io.note,
        on_warning=_warner(io),
        allow_roots=tuple(args.allow_root),
        compile_cache=not args.no_cache,
        answers=caching(args, io),
        freeze_compiled=ENTRY.ends_process,  # the console entry point: one run, no teardown
        otel=OtelOptions(
            flag=args.otel,
            content=args.otel_content,
            on_warning=lambda line: io.stderr.write(line + "\n"),
        ),
        sinks=_sinks(args, io, progress, closing),
    )


def _warner(io: CommandIO) -> Callable[[Diagnostic], None]:
    """Each warning of the pipeline's validation, on standard error as `validate` shows it."""
    from converge_dsl.cli._render import render

    def warn(diagnostic: Diagnostic) -> None:
        render([diagnostic], "human", io.stderr, color=io.color, summary=False)
        io.stderr.write("\n")

    return warn


def _sinks(
    args: argparse.Namespace,
    io: CommandIO,
    progress: _Progress | None,
    closing: contextlib.ExitStack,
) -> tuple[Any, ...]:
    """The run's outputs, in the order they hear it: report, trace, cassette, progress."""
    from converge_dsl.cli._output import shown, sink_stream
    from converge_dsl.runtime import ListenerSink, RecordSink, ReportSink, TraceSink

    sinks: list[Any] = []
    trace = sink_stream(io, args.trace, "--trace", closing)
    if args.report is not None:
        sinks.append(
            ReportSink(
                args.report,
                trace=args.trace if trace is None else None,  # a stream is not read back
                on_written=lambda path: io.stderr.write(f"report written to {shown(path)}\n"),
                stream=sink_stream(io, args.report, "--report", closing),
            )
        )
    if args.trace is not None:
        sinks.append(TraceSink(args.trace, stream=trace))
    if args.record is not None:
        sinks.append(RecordSink(args.record, overwrite=args.overwrite))
    if progress is not None:
        sinks.append(ListenerSink(progress))
    return tuple(sinks)


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    """Run; print the result. A run that never started prints its run result too (JSON)."""
    if args.cases is not None:
        from converge_dsl.cli._batch import execute_batch

        return execute_batch(args, io)
    human = args.format == "human"
    # Under --quiet no listener at all: with none, the engine builds no events.
    progress = _Progress(io) if human and io.verbosity != QUIET else None
    printed: list[RunOutcome] = []
    closing = contextlib.ExitStack()  # the devices and pipes the run's outputs opened

    def show(out: RunOutcome) -> None:
        with interrupts_held():  # the result is written whole
            printed.append(out)
            if progress is not None:
                progress.stop()
            _show(out, args, io)

    try:
        # Imported here: a Ctrl-C meanwhile is a run interrupted as any other.
        from converge_dsl.runtime import ResultSink, StopRequest, run_pipeline

        stop = StopRequest()
        # The options' own files (--inputs, --decisions, --config...) are read here:
        # one that is refused is a run that never started, as one the run refuses.
        options = _options(args, io, progress, closing)
        options = replace(options, sinks=(*options.sinks, ResultSink(show)), stop=stop)
        say = progress.say if progress is not None else _line(io.stderr)
        out = run_stoppable(lambda: run_pipeline(options), stop, say)
    except (ConvergeError, OSError) as exc:
        # Human: an invalid pipeline is rendered like `validate` renders it, anything
        # else as one error line, by the command line. JSON: the run-result document,
        # unless the result sink has begun to print it.
        if human or printed:
            raise
        from converge_dsl.runtime import not_run_document

        error = exc if isinstance(exc, ConvergeError) else environment_error(exc)
        io.stdout.write(not_run_document(error, args.pipeline).model_dump_json(indent=2) + "\n")
        if isinstance(exc, PipelineInvalid):
            return exc.exit_code  # its diagnostics are the document's
        raise
    finally:
        if progress is not None:
            progress.stop()
        closing.close()
    if stop.asked and str(out.result.stop_reason) == "cancelled":
        return EXIT_INTERRUPTED  # its result is printed: what it had reached
    return out.exit_code


def refused(
    error: ConvergeError, parser: argparse.ArgumentParser, argv: Sequence[str], io: CommandIO
) -> bool:
    """A command line argparse refused under `--format json`: its run-result document
    (`usage_error`, the error its diagnostic), naming the pipeline when it can be read
    (the first word that is no option's). False for a batch (`--cases`), whose document
    is the JSON error object."""
    if "--cases" in argv or any(word.startswith("--cases=") for word in argv):
        return False
    from converge_dsl.runtime import not_run_document

    try:
        pipeline = str(parser.parse_known_args(list(argv))[0].pipeline)
    except (ConvergeError, SystemExit, AttributeError):
        from converge_dsl.cli._arguments import first_operand

        pipeline = first_operand(parser, argv)
    io.stdout.write(not_run_document(error, pipeline).model_dump_json(indent=2) + "\n")
    return True


def interrupted(args: argparse.Namespace, io: CommandIO) -> None:
    """A Ctrl-C before the run's result was printed (the command line then says
    `interrupted` and exits 130): under `--format json` a program reading standard
    output still gets its document (`interrupted_document`), written whole."""
    if args.format == "json" and args.cases is None:
        with interrupts_held():
            io.stdout.write(interrupted_document(args.pipeline).model_dump_json(indent=2) + "\n")


def _line(stream: TextIO) -> Callable[[str], None]:
    """`text` as a line of `stream`."""

    def say(text: str) -> None:
        stream.write(text + "\n")

    return say


def _show(out: RunOutcome, args: argparse.Namespace, io: CommandIO) -> None:
    """The result sink of the command line: the diagnostics on standard error, the result
    (human text or the JSON document) on standard output, how to continue a pause."""
    from converge_dsl.frontend import terminal_safe

    io.stderr.write(terminal_safe(_error_text(out)))
    explain_cache(out, args, io)
    if args.format == "human":
        _print_human(out, io.stdout)
    else:
        out.write_json(io.stdout)  # facts streamed: no one giant string
        io.stdout.write("\n")
    if out.result.pause is not None:
        io.stderr.write(terminal_safe(_pause_hint(out, args)))
