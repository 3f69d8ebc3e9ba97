"""`converge-dsl serve PIPELINE|FOLDER...`: the pipelines as an HTTP service.

A folder serves the files `validate` checks as pipelines in it (`served_pipelines`):
not its pack manifests, evaluation files or run configurations.

Only reads the options and starts it: the service is `converge_dsl.serve`
(docs/serve.md). Needs the `serve` extra; without it, a usage error says so
(CD995), and `--mcp` the `mcp` extra (CD438). Exit codes: 0 after
SIGINT/SIGTERM; 2 an invalid pipeline (its diagnostics printed as `validate`
prints them, nothing served); 3 a usage error (options, token file); 1 the
state or the address cannot be used.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from converge_dsl import codes
from converge_dsl.cli import EXIT_OK, CommandIO
from converge_dsl.errors import UsageError


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535)")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number of seconds")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PIPELINE|FOLDER",
        help="pipeline files, or folders holding them",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, this machine only)",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=8080,
        help="port to listen on (default: 8080; 0 picks a free one)",
    )
    parser.add_argument(
        "--state",
        type=Path,
        default=Path(".converge-serve"),
        metavar="DIR",
        help="folder of the runs, events and checkpoints (SQLite, WAL)",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="bearer tokens, one a line (or sha256:HEX); needed beyond loopback",
    )
    parser.add_argument(
        "--workers",
        type=_positive,
        default=4,
        metavar="N",
        help="runs of one pipeline at once (default: 4)",
    )
    parser.add_argument(
        "--queue",
        type=_positive,
        default=64,
        metavar="N",
        help="runs of one pipeline waiting; more are refused with 429 (default: 64)",
    )
    parser.add_argument(
        "--body-cap",
        type=_positive,
        default=1 << 20,
        metavar="BYTES",
        help="largest request body (default: 1 MiB)",
    )
    parser.add_argument(
        "--wait-timeout",
        type=_seconds,
        default=60.0,
        metavar="S",
        help=(
            "longest ?wait=true, and longest a DELETE or MCP cancelRun waits for a running"
            " run to stop, before the answer is 202 (default: 60)"
        ),
    )
    parser.add_argument(
        "--max-run-seconds", type=_seconds, metavar="S", help="lower every run's max_wall_s to this"
    )
    parser.add_argument(
        "--mcp",
        action="store_true",
        help="also serve each pipeline as an MCP tool at /mcp (streamable HTTP; the mcp extra)",
    )
    _retention_options(parser)
    _executor_options(parser)


def _executor_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor",
        choices=("local", "process", "ray"),
        default="local",
        help="where runs execute: a thread of the server (local, the default), worker "
        "processes (process) or Ray actors (ray); the server then only queues and streams",
    )
    parser.add_argument(
        "--processes",
        type=_positive,
        metavar="N",
        help="worker processes (process) or Ray actors (ray) (default: one per CPU)",
    )
    parser.add_argument(
        "--run-threads",
        type=_positive,
        metavar="N",
        help="threads the server runs its runs on with --executor local (default: 1; more "
        "help only runs that spend long in code releasing the interpreter's lock)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="the Ray cluster to join with --executor ray (default: start a local Ray)",
    )


def _retention_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keep-runs",
        type=_positive,
        metavar="N",
        help="keep the newest N finished runs; older ones are deleted with their events "
        "(paused runs are never deleted)",
    )
    parser.add_argument(
        "--retention-days",
        type=_seconds,
        metavar="D",
        help="delete finished runs that ended more than D days ago, with their events",
    )
    parser.add_argument(
        "--retention-interval",
        type=_seconds,
        default=60.0,
        metavar="S",
        help="how often the retention is applied (default: 60 seconds)",
    )


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise UsageError(
            f"serve: serve needs the serve extra ({exc.name} is not installed)",
            hint="pip install 'converge-dsl[serve]'",
            code=codes.SERVE_NOT_INSTALLED,
        ) from None
    if args.mcp:
        try:
            import mcp  # noqa: F401
        except ImportError:
            raise UsageError(
                "serve: --mcp needs the mcp extra (mcp is not installed)",
                hint="pip install 'converge-dsl[serve,mcp]'",
                code=codes.SERVE_MCP_NOT_INSTALLED,
            ) from None
    from converge_dsl.cli._discovery import served_pipelines
    from converge_dsl.serve import Executor, Limits, Retention, ServeOptions, serve

    files = served_pipelines(list(args.paths))
    options = ServeOptions(
        pipelines=files,
        host=args.host,
        port=args.port,
        state=args.state,
        token_file=args.token_file,
        limits=Limits(args.workers, args.queue, args.max_run_seconds),
        body_cap=args.body_cap,
        wait_s=args.wait_timeout,
        retention=Retention(args.keep_runs, args.retention_days, args.retention_interval),
        executor=Executor(args.executor, args.processes, args.ray_address, args.run_threads),
        mcp=args.mcp,
        env=dict(io.environ),
    )
    serve(options, lambda url: io.note(f"serving {len(files)} pipeline(s) on {url}"))
    return EXIT_OK
