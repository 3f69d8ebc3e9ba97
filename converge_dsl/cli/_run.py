"""`converge-dsl run PIPELINE`: run a pipeline to a fixed point and report what converged.

Exit codes: 0 converged, 2 invalid pipeline (the diagnostics of `validate`),
3 usage error, 4 a budget ran out, 5 an invariant was violated, 6 paused for a
human, 1 anything else. `--format json` prints one `RunResultDocument`.
Human output shows live progress per cycle (rich on a terminal, plain lines
otherwise), then the facts grouped by key, then the stop reason.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import BaseModel

from converge_dsl.errors import ConvergeError, PipelineInvalid, UsageError

if TYPE_CHECKING:
    from converge_dsl.cli import CommandIO
    from converge_dsl.runtime import RunOutcome


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", type=Path, help="the pipeline YAML file")
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an input value (JSON if it parses, else text); repeatable",
    )
    parser.add_argument("--inputs", type=Path, metavar="FILE.json", help="a JSON object of inputs")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=ADAPTER-OR-CASSETTE",
        help="answer model NAME from a cassette; repeatable",
    )
    parser.add_argument("--format", choices=("human", "json"), default="human")
    parser.add_argument("--trace", type=Path, metavar="FILE.jsonl", help="write events as JSONL")
    parser.add_argument(
        "--checkpoint", type=Path, metavar="DIR", help="checkpoint after every cycle"
    )
    parser.add_argument("--resume", type=Path, metavar="DIR", help="continue from a checkpoint")
    parser.add_argument("--record", type=Path, metavar="CASSETTE", help="record model calls")
    parser.add_argument(
        "--replay", type=Path, metavar="CASSETTE", help="answer every model from a cassette"
    )


def _pairs(values: list[str], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"{option} {value!r}: expected NAME=VALUE")
        out[name.strip()] = rest
    return out


def parse_inputs(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if args.inputs is not None:
        try:
            loaded = json.loads(args.inputs.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot read --inputs {args.inputs}: {exc.strerror}") from None
        except ValueError as exc:
            raise UsageError(f"--inputs {args.inputs} is not JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise UsageError(f"--inputs {args.inputs} must hold a JSON object")
        values.update(loaded)
    for name, text in _pairs(args.input, "--input").items():
        try:
            values[name] = json.loads(text)
        except ValueError:
            values[name] = text
    return values


class _Progress:
    """Per-cycle progress: a rich live line on a terminal, plain lines otherwise."""

    def __init__(self, stream: TextIO, live: bool) -> None:
        self._stream = stream
        self._console: Any = None
        self._status: Any = None
        if live:
            from rich.console import Console

            self._console = Console(file=stream)
            self._status = self._console.status("starting")
            self._status.start()

    def __call__(self, event: BaseModel) -> None:
        kind = getattr(event, "type", "")
        if kind == "cycle_started":
            text = f"cycle {event.cycle}: {len(event.candidates)} suggestor(s) running"  # type: ignore[attr-defined]
        elif kind == "cycle_finished":
            text = f"cycle {event.cycle}: {event.promoted} fact(s) promoted"  # type: ignore[attr-defined]
        else:
            return
        if self._status is not None:
            self._status.update(text)
            if kind == "cycle_finished":
                self._console.print(text)
        elif kind == "cycle_finished":
            self._stream.write(text + "\n")
            self._stream.flush()

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()


def _print_invalid(exc: PipelineInvalid, args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl import frontend

    if args.format == "json":
        io.stdout.write(
            json.dumps({"diagnostics": [d.as_json() for d in exc.diagnostics]}, indent=2) + "\n"
        )
        return exc.exit_code
    renderer = getattr(frontend, "render_human", None)
    if renderer is not None:
        sources = {}
        with contextlib.suppress(OSError):
            sources[str(args.pipeline)] = args.pipeline.read_text(encoding="utf-8")
        io.stderr.write(renderer(exc.diagnostics, sources, io.color))
    else:
        for d in exc.diagnostics:
            io.stderr.write(
                f"{d.file}:{d.line}:{d.column}: {d.severity.value}[{d.code}]: {d.message}\n"
            )
            if d.hint:
                io.stderr.write(f"  hint: {d.hint}\n")
    return exc.exit_code


def _print_human(out: RunOutcome, stream: TextIO) -> None:
    doc = out.document
    for key, facts in doc.facts.items():
        stream.write(f"\n{key} ({len(facts)})\n")
        for fact in facts:
            content = fact.content if isinstance(fact.content, str) else json.dumps(fact.content)
            prov = fact.provenance
            extra = "".join(
                f" {k}={v}" for k, v in (("model", prov.model_id), ("account", prov.account)) if v
            )
            stream.write(
                f"  - {fact.id}: {content}\n    confidence {fact.confidence:.2f}  from {prov.source}{extra}\n"
            )
    stream.write(f"\nstop: {doc.stop_reason} after {doc.cycles} cycle(s)")
    usage = doc.usage
    if usage.model_calls:
        stream.write(
            f"; {usage.model_calls} model call(s), "
            f"{usage.input_tokens + usage.output_tokens} token(s)"
        )
    stream.write("\n")


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.runtime import RunOptions, run_pipeline

    if args.resume is not None and args.checkpoint is None:
        args.checkpoint = args.resume
    if args.record is not None and args.replay is not None:
        raise UsageError("--record and --replay cannot be combined")
    human = args.format == "human"
    progress = _Progress(io.stderr, live=io.color) if human else None
    options = RunOptions(
        pipeline=args.pipeline,
        inputs=parse_inputs(args),
        model_overrides=_pairs(args.model, "--model"),
        trace=args.trace,
        checkpoint=args.checkpoint,
        resume=args.resume,
        record=args.record,
        replay=args.replay,
        listeners=() if progress is None else (progress,),
    )
    try:
        out = asyncio.run(run_pipeline(options))
    except PipelineInvalid as exc:
        return _print_invalid(exc, args, io)
    except ConvergeError as exc:
        if not human and not isinstance(exc, UsageError):
            io.stdout.write(json.dumps({"stop_reason": "error", "error": str(exc)}) + "\n")
        raise
    finally:
        if progress is not None:
            progress.stop()
    if out.error is not None:
        io.stderr.write(f"error: {out.error}\n")
    if human:
        _print_human(out, io.stdout)
    else:
        io.stdout.write(out.document.model_dump_json(indent=2) + "\n")
    return out.exit_code
