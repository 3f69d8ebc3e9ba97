"""The Python API and batch runs: load a pipeline once, run it over many inputs.

Public surface:
- `load(path, *, env=None, clock=None, allow_roots=(), on_fetch=None,
  max_connections=64) -> Pipeline`: load, validate and check once
  (`PipelineInvalid`, `UsageError`, `PackError` as `converge-dsl run` reports them).
- `Pipeline`: immutable, safe to run concurrently. `run(inputs)` and
  `await arun(inputs)` return the `RunResultDocument` of one run (`models=`
  replaces declared models by name for that run, e.g. a scripted one in a test);
  `keys`, `models`, `invariants` name what the pipeline declares;
  `run_many(cases, concurrency=16)` and `arun_many(...)` yield one per case in
  input order; `outcome(inputs, meter=None, sinks=())` gives the `RunOutcome`
  (`sinks`: the run's outputs, `converge_dsl.runtime.RunSink`).
- `Case`, `CaseResult` (a finished case: index, id, run result, exit code, and its
  result `line()`), `read_cases(path)`, `read_done(path)` -> `Done` (the cases a
  results file holds and their usage; a torn last line is cut).
- `BatchLimits`, `BudgetPool`, `LocalPool`, `SharedPool`, `PooledMeter`: the
  batch-wide `--max-model-calls` / `--max-tokens` over every case.
- `BatchOptions` and `run_batch(options, on_result)` -> `BatchSummary`: a whole
  batch on an executor (`local`, `process`, `ray`), resumable, one line per case;
  `CaseOutputs` says what each case's run writes (a trace, a report, OpenTelemetry).
- `EXECUTORS`: the executor names.

Names are imported on first use (PEP 562): `import converge_dsl` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_names

if TYPE_CHECKING:
    from converge_dsl.batch._budget import (
        BatchLimits,
        BudgetPool,
        LocalPool,
        PooledMeter,
        SharedPool,
    )
    from converge_dsl.batch._cases import Case, CaseResult, Done, read_cases, read_done
    from converge_dsl.batch._options import EXECUTORS, BatchOptions
    from converge_dsl.batch._outputs import CaseOutputs
    from converge_dsl.batch._pipeline import Pipeline, load
    from converge_dsl.batch._run import BatchSummary, run_batch

_WHERE: dict[str, str] = {
    "BatchLimits": "converge_dsl.batch._budget",
    "BudgetPool": "converge_dsl.batch._budget",
    "LocalPool": "converge_dsl.batch._budget",
    "PooledMeter": "converge_dsl.batch._budget",
    "SharedPool": "converge_dsl.batch._budget",
    "Case": "converge_dsl.batch._cases",
    "CaseResult": "converge_dsl.batch._cases",
    "Done": "converge_dsl.batch._cases",
    "read_cases": "converge_dsl.batch._cases",
    "read_done": "converge_dsl.batch._cases",
    "Pipeline": "converge_dsl.batch._pipeline",
    "load": "converge_dsl.batch._pipeline",
    "EXECUTORS": "converge_dsl.batch._options",
    "BatchOptions": "converge_dsl.batch._options",
    "CaseOutputs": "converge_dsl.batch._outputs",
    "BatchSummary": "converge_dsl.batch._run",
    "run_batch": "converge_dsl.batch._run",
}
__getattr__ = lazy_names(__name__, _WHERE)

__all__ = [
    "EXECUTORS",
    "BatchLimits",
    "BatchOptions",
    "BatchSummary",
    "BudgetPool",
    "Case",
    "CaseOutputs",
    "CaseResult",
    "Done",
    "LocalPool",
    "Pipeline",
    "PooledMeter",
    "SharedPool",
    "load",
    "read_cases",
    "read_done",
    "run_batch",
]
