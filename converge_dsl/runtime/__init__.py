"""The runtime: run orchestration, trace writer, checkpoints, result documents.

Public surface:
- `run_pipeline(options)` (async) -> `RunOutcome`: load, then the one run assembly.
  `RunOptions` is what makes a `converge-dsl run`;
  `RunOptions(resume=DIR, decisions={id: approve})` continues a run paused for a human
  (`decided_by={id: who}` says who gave each decision; the trace says `api` otherwise);
  `RunOptions(stop=StopRequest())` lets the caller stop the run with `cancelled`
  (`StopRequest.ask()`, the command line's first Ctrl-C).
- `assemble_run(plan)` (async) -> `RunOutcome`: the one run assembly every run goes
  through (single runs, batch cases, tests, the Python API); `RunPlan` is one run of a
  loaded pipeline, `Checkpointing` its checkpoint folder, `CompiledRuns` what the runs of
  one loaded pipeline share (compile once, run many).
- `RunSink`, the output interface (`Output` names a file it writes; `CompiledMemo` keeps
  what a sink works out once per compiled pipeline), and the outputs:
  `TraceSink` (`--trace`), `ReportSink` (`--report`), `RecordSink` (`--record`),
  `OtelSink` (OpenTelemetry, `OtelOptions`; `CallSpans`, its `CallSpan`s and
  `facts_of`: the spans of model calls outside a run, an evaluation's judges),
  `ListenerSink` (a live listener),
  `ResultSink` (the run-result document); `check_outputs(sinks, reads)` is their one
  same-file check.
- `build_engine(compiled, sink, clock, usage=None) -> Engine`,
  `build_models(settings, options, attempt_gate=None)`, `load_document(path)`,
  `model_builder(settings, env=, clock=, roots=, attempt_gate=)` (builds one run's
  declared models by name, all with the run's deadline; `build_models` and `batch` use it),
  `replayed_models(settings, cassette, option, clock=, attempt_gate=, orders=)` and
  `tool_replay(cassette, orders)` (a run's models and tool servers answered from one
  cassette: `--replay`, a batch case's own),
  `outcome(compiled, result, decided) -> RunOutcome` (every stop but `converged` with at
  least one located diagnostic), `run_error_diagnostic(error)`,
  `not_run_document(error, pipeline)` (the run result of a run stopped before the engine:
  stop reason `invalid`, `usage_error` or `error`).
- `AnswerCaching` (a run's answer cache: its store, mode, offline; `RunPlan.answers`,
  `RunOptions.answers`), `caching_from(flag=, offline=, cache_dir=, env=)` (from
  `--cache`/`--offline`/`--cache-dir` and the cache mode variable; docs/cache.md) and
  `cache_folder(cache_dir, env)` (where the store lives); `CacheSettings` (the same
  decision as plain values that pickle: a batch's workers open their own store from it)
  and `cache_settings(env=, cache=, offline=, explain=, cache_dir=, config=)` (flag, then
  environment, then run configuration, then default).
- `read_run_config(path)` -> `RunConfig` (`run --config FILE`: kind `RunConfig`, its
  `cache:` a `CacheConfig`; located diagnostics in `PipelineInvalid`), the front end's.
- `SUGGESTOR_KINDS`: every suggestor kind (`converge_dsl.validation.KINDS`: the front end's
  seed, rule, llm, tool plus agent and pack, imported on first use), the registry
  `compile_pipeline` is given.
- `TraceWriter` (JSONL event sink, flushed per event; `trace_line` lays out one line, for
  it and for the service's event streams; `wall_clock(clock)` is the time of day both
  stamp lines with); `read_trace(path)` reads its lines back
  and `find_cleared_span(path, reduction_id)` finds one `SpanCleared` event in them;
  `CheckpointStore` (the checkpoint journal: MAC-chained records, one per cycle),
  `Checkpoint` (a verified one, read back), `CheckpointRefused` (its CD95x refusals),
  `checkpoint_key(env)` (the per-user key), `StatefulSuggestor` (per-run state of a
  suggestor that checkpoints keep), `CHECKPOINT_FILE`, `pipeline_digest(text, inputs)`,
  `pipeline_text_digest(text)`;
  where a journal is kept is the port `JournalMedium`: `FolderJournal` (a
  `--checkpoint` folder) or `SqliteJournals` (one database of many runs' journals,
  each a `SqliteJournal`, as `converge-dsl serve` keeps them; `execute_all` runs
  statements in order, consecutive ones of one SQL as one `executemany`).
- `RunResultDocument` (with `pending`, a list of `PendingModel`, when paused),
  `DiagnosticModel`, `FactModel`, `UsageModel`, `TraceLine` (pydantic; `exported_schemas()` and
  `schema_text(...)` give `schemas/*.v1.json`).
- `render_report(trace)` and `write_report(trace, output)`: a trace as one
  self-contained HTML page (`converge-dsl report`); `check_report_output(output, option)`
  refuses an unusable output before a run; `write_page(page, output, option)` writes a
  page that starts with `REPORT_MARK` the same checked way (a batch's page);
  `is_report_line(first)` says whether an existing file's first line is a report's.
- `EXIT_BY_STOP`: stop reason -> exit code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_exports

if TYPE_CHECKING:
    from converge_dsl.frontend import *  # noqa: F403
    from converge_dsl.runtime._answer_cache import *  # noqa: F403
    from converge_dsl.runtime._assembly import *  # noqa: F403
    from converge_dsl.runtime._checkpoint import *  # noqa: F403
    from converge_dsl.runtime._checkpoint_key import *  # noqa: F403
    from converge_dsl.runtime._checkpoint_sqlite import *  # noqa: F403
    from converge_dsl.runtime._documents import *  # noqa: F403
    from converge_dsl.runtime._engine import *  # noqa: F403
    from converge_dsl.runtime._journal_media import *  # noqa: F403
    from converge_dsl.runtime._models import *  # noqa: F403
    from converge_dsl.runtime._options import *  # noqa: F403
    from converge_dsl.runtime._orchestrate import *  # noqa: F403
    from converge_dsl.runtime._otel_calls import *  # noqa: F403
    from converge_dsl.runtime._outcome import *  # noqa: F403
    from converge_dsl.runtime._outputs import *  # noqa: F403
    from converge_dsl.runtime._report_html import *  # noqa: F403
    from converge_dsl.runtime._reuse import *  # noqa: F403
    from converge_dsl.runtime._sinks import *  # noqa: F403
    from converge_dsl.runtime._suggestor_state import *  # noqa: F403
    from converge_dsl.runtime._telemetry import *  # noqa: F403
    from converge_dsl.runtime._trace import *  # noqa: F403
    from converge_dsl.runtime._trace_read import *  # noqa: F403
else:
    __all__, __getattr__ = lazy_exports(
        __name__,
        {
            "converge_dsl.frontend": (
                "CacheConfig",
                "RunConfig",
                "read_run_config",
            ),
            "converge_dsl.runtime._answer_cache": (
                "AnswerCaching",
                "CacheSettings",
                "cache_folder",
                "cache_settings",
                "caching_from",
            ),
            "converge_dsl.runtime._assembly": (
                "Checkpointing",
                "RunPlan",
                "assemble_run",
            ),
            "converge_dsl.runtime._checkpoint": (
                "CHECKPOINT_FILE",
                "Checkpoint",
                "CheckpointStore",
                "pipeline_digest",
                "pipeline_text_digest",
            ),
            "converge_dsl.runtime._checkpoint_key": (
                "CheckpointRefused",
                "checkpoint_key",
            ),
            "converge_dsl.runtime._checkpoint_sqlite": (
                "SqliteJournal",
                "SqliteJournals",
                "execute_all",
            ),
            "converge_dsl.runtime._documents": (
                "DiagnosticModel",
                "FactModel",
                "PendingModel",
                "RunResultDocument",
                "TraceLine",
                "UsageModel",
                "exported_schemas",
                "schema_text",
            ),
            "converge_dsl.runtime._engine": (
                "SUGGESTOR_KINDS",
                "build_engine",
            ),
            "converge_dsl.runtime._journal_media": (
                "FolderJournal",
                "JournalMedium",
            ),
            "converge_dsl.runtime._models": (
                "build_models",
                "model_builder",
                "replayed_models",
                "tool_replay",
            ),
            "converge_dsl.runtime._options": (
                "OtelOptions",
                "RunOptions",
                "StopRequest",
            ),
            "converge_dsl.runtime._orchestrate": (
                "load_document",
                "run_pipeline",
            ),
            "converge_dsl.runtime._otel_calls": (
                "CallSpan",
                "CallSpans",
            ),
            "converge_dsl.runtime._outcome": (
                "EXIT_BY_STOP",
                "RunOutcome",
                "not_run_document",
                "outcome",
                "run_error_diagnostic",
            ),
            "converge_dsl.runtime._outputs": ("check_outputs",),
            "converge_dsl.runtime._report_html": (
                "REPORT_MARK",
                "check_report_output",
                "is_report_line",
                "render_report",
                "write_page",
                "write_report",
            ),
            "converge_dsl.runtime._reuse": ("CompiledRuns",),
            "converge_dsl.runtime._sinks": (
                "CompiledMemo",
                "ListenerSink",
                "Output",
                "RecordSink",
                "ReportSink",
                "ResultSink",
                "RunSink",
                "TraceSink",
            ),
            "converge_dsl.runtime._suggestor_state": ("StatefulSuggestor",),
            "converge_dsl.runtime._telemetry": (
                "OtelSink",
                "facts_of",
            ),
            "converge_dsl.runtime._trace": (
                "TraceWriter",
                "trace_line",
                "wall_clock",
            ),
            "converge_dsl.runtime._trace_read": (
                "find_cleared_span",
                "read_trace",
            ),
        },
    )
