"""`converge-dsl serve`: loaded pipelines as a durable HTTP service (docs/serve.md).

Public surface:
- `ServeOptions` (what the command was asked for), `Limits` (per pipeline:
  runs at once, runs waiting, longest run), `Retention` (which finished runs
  are deleted, and how often that is looked at), `serve(options, on_ready)` (load,
  validate, bind, serve until a signal) and `prepare(options)` -> `Prepared`
  (everything but binding: the Starlette application and its `RunService`).
- `RunService`: queues, runs, pauses, cancels and recovers runs through the
  Python API's run (`Pipeline.outcome`, the one run assembly), with
  `RunStore`, the SQLite state (runs, events, results) of `--state DIR`.
- `document(pipelines)`: the OpenAPI document made from the pipelines' inputs.
- `Executor` (`--executor local|process|ray`, `--processes`, `--ray-address`):
  where the runs execute; with `process` or `ray` they run on the batch
  package's `RunWorkers` and the HTTP process only queues, stores and streams.
- With `ServeOptions(mcp=True)`, the same application also serves each
  pipeline as an MCP tool at `/mcp` (`_mcp`, streamable HTTP), every call a
  run of the same `RunService`.

Layered above `converge_dsl.batch` and `converge_dsl.runtime`: the service is
no second run machinery, only queues, state and HTTP around them. Needs the
`serve` extra (Starlette, uvicorn) for `_app` and `_server`, and the `mcp`
extra for `_mcp`.
"""

from __future__ import annotations

from ._executors import Executor
from ._limits import Limits, Retention
from ._openapi import document
from ._server import Prepared, ServeOptions, prepare, serve
from ._service import RunService
from ._store import RunStore

__all__ = [
    "Executor",
    "Limits",
    "Prepared",
    "Retention",
    "RunService",
    "RunStore",
    "ServeOptions",
    "document",
    "prepare",
    "serve",
]
