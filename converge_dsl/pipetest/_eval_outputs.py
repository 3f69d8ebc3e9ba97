"""Where an evaluation's runs write besides its result: cassettes and OpenTelemetry.

`cassette_folders(DIR)`: `eval --record DIR` / `--replay DIR` keep the judges'
calls in `DIR/judges.jsonl` and each case's pipeline models in its own cassette
under `DIR/cases/` (`cassettes_of`: `<case>.jsonl`, or `<configuration>/<case>.jsonl`
for a configuration the file declares; names made safe by
`converge_dsl.batch.safe_name`). `case_outputs` says what each case's run writes
(its cassette, its own trace under `--otel`), `case_sinks` makes them for the local
executor; `evaluation_spans` opens the evaluation's span, which the judges' calls go
under (`converge_dsl.runtime.CallSpans`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl.clock import SystemClock

from ._eval_spec import DEFAULT_CONFIGURATION, Configuration, EvalFile

if TYPE_CHECKING:
    from converge_dsl.batch import Case, CaseOutputs
    from converge_dsl.runtime import CallSpans, OtelOptions, RunSink


def cassette_folders(folder: Path) -> tuple[Path, Path]:
    """The judges' cassette and the folder of the cases' cassettes of an evaluation
    recorded into (or replayed from) `folder`: `judges.jsonl` and `cases/`."""
    return folder / "judges.jsonl", folder / "cases"


def cassettes_of(root: Path | None, configuration: Configuration) -> Path | None:
    """The folder of `configuration`'s case cassettes under `root` (None: none)."""
    if root is None:
        return None
    if configuration.name == DEFAULT_CONFIGURATION:
        return root
    from converge_dsl.batch import safe_name

    return root / safe_name(configuration.name)


def case_outputs(
    record: Path | None, otel: OtelOptions | None, env: Mapping[str, str] | None
) -> CaseOutputs:
    """What each case's run writes: its cassette (`record`), its own trace (`--otel`)."""
    from converge_dsl.batch import CaseOutputs

    return CaseOutputs(
        record=record,
        otel=otel is not None and otel.flag,
        otel_content=otel is not None and otel.content,
        env=dict(os.environ if env is None else env),
    )


def case_sinks(outputs: CaseOutputs) -> Callable[[Case], Sequence[RunSink]] | None:
    """The sinks of each case's run on the local executor (None: it writes nothing)."""
    if not outputs.any:
        return None
    clock = SystemClock()
    return lambda case: outputs.sinks(case, clock)


def evaluation_spans(
    evaluation: EvalFile, otel: OtelOptions | None, env: Mapping[str, str]
) -> CallSpans | None:
    """The evaluation's span, which its judges' calls go under (None: not traced)."""
    if otel is None:
        return None
    from converge_dsl.runtime import CallSpans

    attributes = {
        "converge_dsl.eval.name": evaluation.display,
        "converge_dsl.eval.cases": len(evaluation.cases),
        "converge_dsl.pipeline.name": evaluation.pipeline.name,
    }
    name = f"evaluate {Path(evaluation.display).name}"
    return CallSpans.start(name, attributes, otel, env, SystemClock())
