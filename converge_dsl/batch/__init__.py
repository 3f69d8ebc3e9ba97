"""The Python API and batch runs: load a pipeline once, run it over many inputs.

Public surface:
- `load(path, *, env=None, clock=None, allow_roots=(), on_fetch=None,
  max_connections=64) -> Pipeline`: load, validate and check once
  (`PipelineInvalid`, `UsageError`, `PackError` as `converge-dsl run` reports them).
- `Pipeline`: immutable, safe to run concurrently. `run(inputs)` and
  `await arun(inputs)` return the `RunResultDocument` of one run (`models=`
  replaces declared models by name for that run, e.g. a scripted one in a test);
  `keys`, `models`, `invariants` name what the pipeline declares (`declared_inputs`,
  `key_schemas`, `budget`, `document` and `env` give the rest, e.g. to a service);
  `run_many(cases, concurrency=16)` and `arun_many(...)` yield one per case in
  input order (an input the cases give that it does not declare: `CasesRefused`
  before any case runs); `outcome(inputs, meter=None, sinks=(), checkpoint=None, budget=None)`
  gives the `RunOutcome` (`sinks`: the run's outputs, `converge_dsl.runtime.RunSink`;
  `checkpoint`: a journal folder to write or resume, `converge_dsl.runtime.Checkpointing`;
  `budget`: the run's budget made from the pipeline's).
- `Case`, `CaseResult` (a finished case: index, id, run result as plain JSON `body`
  and as a `document`, exit code, the `pipeline` that ran it when a batch stamped it,
  and its result `line()`), `read_cases(path)`, `read_done(path)` -> `Done` (the
  cases a results file holds, their usage and the pipelines its lines name; a torn
  last line is cut).
- `BatchLimits`, `BudgetPool`, `LocalPool`, `SharedPool`, `PooledMeter`: the
  batch-wide `--max-model-calls` / `--max-tokens` over every case.
- `BatchOptions` and `run_batch(options, on_result)` -> `BatchSummary`: a whole
  batch on an executor (`local`, `process`, `ray`), resumable, one line per case;
  `CaseOutputs` says what each case's run writes (a trace, a report, OpenTelemetry).
- `EXECUTORS`: the executor names.
- `ordered(pipeline, cases, concurrency=N)` and `drive(pipeline, stream)`: the local
  scheduler under `run_many`, for callers that score each case as it finishes (an
  evaluation). A case given as a `Case` carries its own `models` (`ModelOverride`:
  a model declared anew for its run) and `budget` (`CaseBudget`: lower limits);
  each `CaseResult` holds its wall time (`seconds`, never in its result line).
- `run_cases(options, cases)`: such cases on any executor (`process`, `ray` too),
  results as they finish, with no cases or results file (`CasesRefused` as
  `run_many`).
- `undeclared_inputs(pipeline, declared, given, label=, place=, path=)`: the located CD802 of
  each input cases give that a pipeline does not declare, before any runs (`run_batch`,
  `run_cases` and `Pipeline.run_many` raise `CasesRefused` with them, exit 3; an
  evaluation's dataset); `key_at(line, path)`: where a key of a JSONL line is.
- `cassette_name(id, index)`, `safe_name(text)`, `check_cassettes(cases, folder, ...)`,
  `replaying(cases, folder)`: one cassette per case (`--record DIR`, `--replay DIR`;
  `Case.replay`, `CaseOutputs.record`).
- One run at a time on workers that hold the pipelines (a service's runs):
  `run_workers(executor, pipelines, database, workers=N, ray_address=None)` ->
  `RunWorkers` (`ProcessWorkers`, `RayWorkers`; `WorkerError`, CD999, when they
  cannot start); `submit(OneRun, sinks, on_checkpoint)` -> `RunTicket` whose
  future gives the `RunEnd`, the sinks hearing the run's events as they happen;
  `cancel(run)`. `OneRun` carries the inputs, lower budget limits, decisions and
  the SQLite database of the checkpoint journal, which the worker opens by path
  (`open_journals`); `execute_one` is what a worker does with it, sealing the
  journal with the pipeline's key read once (`CheckpointKeys`, which a service
  running runs itself uses too);
  `lowered_budget(budget, asked)` applies a request's lower limits (never higher).

Names are imported on first use (PEP 562): `import converge_dsl` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_exports

if TYPE_CHECKING:  # the table's modules, for type checkers
    from converge_dsl.batch._budget import *  # noqa: F403
    from converge_dsl.batch._cases import *  # noqa: F403
    from converge_dsl.batch._cassettes import *  # noqa: F403
    from converge_dsl.batch._one import *  # noqa: F403
    from converge_dsl.batch._one_ray import *  # noqa: F403
    from converge_dsl.batch._one_workers import *  # noqa: F403
    from converge_dsl.batch._options import *  # noqa: F403
    from converge_dsl.batch._outputs import *  # noqa: F403
    from converge_dsl.batch._pipeline import *  # noqa: F403
    from converge_dsl.batch._run import *  # noqa: F403
    from converge_dsl.batch._schedule import *  # noqa: F403
    from converge_dsl.batch._undeclared import *  # noqa: F403
else:
    __all__, __getattr__ = lazy_exports(
        __name__,
        {
            "converge_dsl.batch._budget": (
                "BatchLimits",
                "BudgetPool",
                "LocalPool",
                "PooledMeter",
                "SharedPool",
            ),
            "converge_dsl.batch._cassettes": (
                "cassette_name",
                "check_cassettes",
                "replaying",
                "safe_name",
            ),
            "converge_dsl.batch._cases": (
                "Case",
                "CaseBudget",
                "CaseResult",
                "Done",
                "ModelOverride",
                "read_cases",
                "read_done",
            ),
            "converge_dsl.batch._options": ("BatchOptions", "EXECUTORS"),
            "converge_dsl.batch._outputs": ("CaseOutputs",),
            "converge_dsl.batch._one": (
                "CheckpointKeys",
                "OneRun",
                "RunEnd",
                "RunTicket",
                "RunWorkers",
                "WorkerError",
                "execute_one",
                "lowered_budget",
                "open_journals",
            ),
            "converge_dsl.batch._one_ray": ("RayWorkers",),
            "converge_dsl.batch._one_workers": ("ProcessWorkers", "run_workers"),
            "converge_dsl.batch._pipeline": ("Pipeline", "load"),
            "converge_dsl.batch._run": ("BatchSummary", "run_batch", "run_cases"),
            "converge_dsl.batch._schedule": ("drive", "ordered"),
            "converge_dsl.batch._undeclared": (
                "CasesRefused",
                "key_at",
                "undeclared_inputs",
            ),
        },
    )
