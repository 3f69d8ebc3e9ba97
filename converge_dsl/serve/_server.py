"""Starting the service: load every pipeline, open the state, bind, serve until stopped.

`prepare(options)` does everything that can fail before a socket is bound:
each pipeline is loaded, validated and checked (`converge_dsl.load`) and its
key schemas compiled (an invalid one raises its `PipelineInvalid`, every
file's problems at once, which the command line prints as `validate` does;
suggestors compile at a pipeline's first run, then once per inputs), names
must be unique (CD994), and with `mcp` their MCP tool names too (CD436),
tokens are read (CD992; `_tokens.TokenFile` reads them again when the file
changes), a non-loopback host needs tokens, the executor's options fit
(CD433, CD999), and the state opens (CD993). `serve(options)` checks the
installed uvicorn (CD448), starts the workers of `--executor process|ray` (a
worker that cannot start stops it: CD999), binds the socket, runs uvicorn,
says where it listens once it serves, and returns after SIGINT or SIGTERM
(closing the workers); the runs in flight then continue at the next start on
the same state.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.clock import SystemClock
from converge_dsl.diagnostics import Diagnostic, best_first
from converge_dsl.errors import PipelineInvalid

from ._errors import ServeFailed, ServeRefused
from ._executors import Executor, workers
from ._executors import start as start_workers
from ._limits import Limits, Retention
from ._service import RunService
from ._stopping import FORCED_S, STOP_S
from ._store import RunStore
from ._tokens import TokenFile

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from converge_dsl.batch import Pipeline


# What a server stopped by a second Ctrl-C says (its one line).
FORCED_STOP = "stopped at once (a second Ctrl-C): the runs in flight continue at the next start"


@dataclass(frozen=True)
class ServeOptions:
    """What `converge-dsl serve` was asked for; `env` is the environment its pipelines
    are loaded and run in (their models' keys, their checks; default: the process's)."""

    pipelines: Sequence[Path]
    host: str = "127.0.0.1"
    port: int = 8080
    state: Path = Path(".converge-serve")
    token_file: Path | None = None
    limits: Limits = field(default_factory=Limits)
    body_cap: int = 1 << 20
    wait_s: float = 60.0
    retention: Retention = field(default_factory=Retention)
    executor: Executor = field(default_factory=Executor)
    mcp: bool = False
    env: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Prepared:
    """A service ready to bind: its application and what it serves."""

    app: Starlette
    service: RunService
    names: tuple[str, ...]


def _secrets(pipelines: Sequence[Pipeline]) -> tuple[str, ...]:
    """The models' API keys: values never to show in an error (as the tokens)."""
    out: list[str] = []
    for pipeline in pipelines:
        for model in pipeline.document.data.get("models", {}).values():
            if isinstance(model, dict):
                name = model.get("api_key_env")
                value = pipeline.env.get(name) if isinstance(name, str) else None
                if value:
                    out.append(value)
    return tuple(out)


def prepare(options: ServeOptions) -> Prepared:
    """Load and check everything before binding (see the module docstring)."""
    from converge_dsl.batch import load
    from converge_dsl.models import redact_text
    from converge_dsl.runtime import CacheSettings

    from ._app import HttpLimits, build_app

    options.executor.check()
    tokens = None if options.token_file is None else TokenFile(options.token_file)
    if tokens is None and not _loopback(options.host):
        raise ServeRefused(
            codes.SERVE_TOKEN_FILE,
            f"--host {options.host} listens beyond this machine without --token-file",
            hint="give --token-file FILE, or serve on 127.0.0.1",
        )
    loaded: dict[str, Pipeline] = {}
    invalid: list[Diagnostic] = []
    for path in options.pipelines:
        try:
            # Never the answer cache, whatever the environment says (docs/cache.md): a
            # server's stored answer to a sampled request would be served to everyone.
            pipeline = load(path, env=options.env, cache=CacheSettings(mode="off"))
            pipeline.key_schemas  # noqa: B018 (compiled now: a bad schema stops the start)
        except PipelineInvalid as exc:  # every file is checked: all their problems at once
            invalid.extend(exc.diagnostics)
            continue
        if pipeline.name in loaded:
            raise ServeRefused(
                codes.SERVE_DUPLICATE_PIPELINE,
                f"pipelines {str(loaded[pipeline.name].path)!r} and {str(path)!r} are both "
                f"named {pipeline.name!r}",
                hint="rename one (its `name:`): a run is started by the pipeline's name",
            )
        loaded[pipeline.name] = pipeline
    if invalid:
        raise PipelineInvalid(best_first(invalid))
    if not loaded:
        raise ServeRefused(
            codes.SERVE_NOT_FOUND,
            "no pipeline to serve",
            hint="name pipeline files or folders holding them",
        )
    if options.mcp:
        from ._mcp import tool_names

        tool_names(loaded)  # before the state opens: two pipelines as one tool stop the start
    secrets = _secrets(list(loaded.values()))
    store = RunStore(options.state)
    service = RunService(
        loaded,
        store,
        options.state,
        options.limits,
        clock=SystemClock(),
        new_id=lambda: os.urandom(16).hex(),  # 32 random hex digits, as `uuid4().hex`
        # the tokens the file holds now, and those it held (revoked ones stay secrets)
        redact=lambda text: redact_text(text, (*secrets, *(tokens.plain if tokens else ()))),
        retention=options.retention,
        workers=workers(options.executor, loaded, store.database),
        run_threads=options.executor.threads,
    )
    limits = HttpLimits(options.body_cap, options.wait_s)
    endpoint = None
    if options.mcp:
        from ._mcp import McpEndpoint

        endpoint = McpEndpoint(service, tokens, limits, loopback=_loopback(options.host))
    app = build_app(service, tokens, limits, endpoint)
    return Prepared(app, service, tuple(loaded))


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; `ServeFailed` when the address cannot be used."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ServeFailed(
            codes.SERVE_STATE_UNUSABLE,
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="choose another --port (0 picks a free one), or stop what uses it",
        ) from None
    sock.set_inheritable(True)
    return sock


def _server(
    config: Any, on_started: Callable[[], object], on_exit: Callable[[bool], object]
) -> Any:
    """uvicorn's server, telling `on_started` once it serves (signals handled, service
    started) and `on_exit` when a signal stops it (before its connections are drained:
    the runs then stop at their next checkpoint, `RunService.stopping`), with True when
    the signal forces the exit (a second SIGINT: no more waiting), and ending
    `serve` normally after a SIGINT or SIGTERM it shut down gracefully for. uvicorn's own
    `capture_signals` raises a caught signal again once the server stopped (exit 130 or
    -15); this one installs the same handler (`handle_exit`: a graceful shutdown, a
    second SIGINT forces it) and, once it served, ignores SIGINT and SIGTERM until
    `restore_signals` puts the previous handlers back (`serve`, once the state is
    closed): a late second Ctrl-C while the process closes ends it as one a moment
    earlier, exit 0, not as a `KeyboardInterrupt` (exit 130). A forced exit
    still runs the application's shutdown, which uvicorn then skips (the service's stop,
    at once), and says so in one line (`FORCED_STOP`). The stop contract:
    docs/architecture.md, "Stopping the service"."""
    import asyncio
    import logging
    import signal
    import threading
    from signal import SIGINT, SIGTERM

    import uvicorn

    class Server(uvicorn.Server):
        def __init__(self, config: Any) -> None:
            super().__init__(config)
            # The handlers before it served (not asyncio's, which `run` installs inside).
            self.previous: dict[int, Any] = {}
            if threading.current_thread() is threading.main_thread():
                self.previous = {sig: signal.getsignal(sig) for sig in (SIGINT, SIGTERM)}

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if not self.should_exit:
                on_started()

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await super().shutdown(sockets)
            if not self.force_exit:
                return
            # uvicorn skips the application's shutdown on a forced exit: the service would
            # not stop, and its lifespan, cancelled at the loop's end, logs a traceback.
            # Its stop, forced, takes no wait (docs/serve.md).
            if not self.lifespan.shutdown_event.is_set():
                await self.lifespan.shutdown()
            # The service's stop ended the event streams (without `end`, as a SIGTERM's):
            # their connections close now, none cancelled at the loop's end.
            tasks = set(self.server_state.tasks)
            if tasks:
                await asyncio.wait(tasks, timeout=FORCED_S)
            logging.getLogger("uvicorn.error").warning(FORCED_STOP)

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            on_exit(self.force_exit)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield  # signals reach the main thread only (as in uvicorn)
                return
            for sig in (SIGINT, SIGTERM):
                signal.signal(sig, self.handle_exit)
            try:
                yield
            finally:  # a late signal while the process closes: it stops already
                for sig in (SIGINT, SIGTERM):
                    signal.signal(sig, signal.SIG_IGN)

        def restore_signals(self) -> None:
            """Put back the handlers there before it served (`serve`, once closed)."""
            for sig, handler in self.previous.items():
                signal.signal(sig, handler)
            self.previous = {}

    return Server(config)


@contextlib.contextmanager
def own_stream_ends() -> Iterator[None]:
    """While `serve` runs its server (which owns the signal handlers and stops the service
    on one), leave the end of the event streams to the server: sse-starlette's `AppStatus`
    would end every stream of the process within half a second of any uvicorn server's
    stop on a signal, through a process-wide flag its wrap of uvicorn's `handle_exit`
    sets and nothing clears, before an MCP tool call in flight is answered (its client
    then waited for its own timeout). With its drain off, a stream ends when its call is
    answered: a stopping service answers every waiter by `ANSWER_S`, before uvicorn's
    drain ends. A flag set before (a server of the process stopped with the drain on) is
    cleared; the drain's setting is put back after, so that an application embedded in
    another's server keeps the library's default (docs/serve.md, "In your own server")."""
    try:
        from sse_starlette.sse import AppStatus
    except ImportError:  # without the `mcp` extra: no stream of sse-starlette's
        yield
        return
    before = AppStatus.enable_automatic_graceful_drain
    if before:
        AppStatus.enable_automatic_graceful_drain = False  # `disable_automatic_graceful_drain`
        AppStatus.should_exit = False
    try:
        yield
    finally:
        AppStatus.enable_automatic_graceful_drain = before


def serve(options: ServeOptions, on_ready: Callable[[str], object]) -> None:
    """Prepare, bind, serve; tell `on_ready` the base URL once requests are served (and
    signals handled); return when a signal has stopped it."""
    import uvicorn

    from ._heads import HEAD_CAP, protocol

    prepared = prepare(options)
    try:
        # A request's head bounded in size and time, refused as JSON (`_heads`); a uvicorn
        # lacking a part it takes stops the start here (CD448).
        http = protocol()
        if prepared.service.workers is not None:  # a worker that cannot start stops it now
            start_workers(prepared.service.workers, options.executor)
        sock = bind(options.host, options.port)
    except BaseException:
        if prepared.service.workers is not None:
            prepared.service.workers.close()
        prepared.service.store.close()
        raise
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    config = uvicorn.Config(
        prepared.app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_keep_alive=5,
        timeout_graceful_shutdown=STOP_S,
        # Connections at once: every run a pipeline may hold (running and waiting), and as
        # many again for event streams and reads; past that the answer is 503 (CD447).
        limit_concurrency=2
        * len(prepared.names)
        * (options.limits.concurrency + options.limits.queue)
        + 64,
        server_header=False,
        http=http,  # heads bounded, refusals and the 503 past the limit as JSON (`_heads`)
        h11_max_incomplete_event_size=HEAD_CAP,  # h11's own head bound no lower than `_heads`
    )
    service = prepared.service
    server = _server(config, lambda: on_ready(url), lambda forced: service.stopping(forced=forced))
    try:
        with own_stream_ends():
            server.run(sockets=[sock])
    finally:
        sock.close()
        try:
            if prepared.service.workers is not None:  # stopped by the service; killed if not
                prepared.service.workers.close()
            prepared.service.store.close()
        finally:
            server.restore_signals()
