"""The run's models, built from the compiler's typed model declarations.

Provider retries and failovers are bounded by the run's budget: each asks the
attempt gate (the run's usage meter, where each further attempt consumes a
model call) first, and none starts past the run's
wall-clock deadline. `--replay` and `--model NAME=CASSETTE` answer from
cassettes; `--record` wraps every model in a recorder.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from converge_dsl.compiler import PipelineSettings
from converge_dsl.errors import UsageError
from converge_dsl.models.port import Model

from ._options import RunOptions


def _cassette(path: Path, option: str, name: str) -> Model:
    """The replay of a cassette named on the command line, standing in for the model
    recorded as `name`; a bad cassette is a `UsageError`."""
    from converge_dsl.models import ModelError, ReplayModel
    from converge_dsl.models.cassette import RECORD_HINT

    if path.is_dir():
        raise UsageError(
            f"{option}: {str(path)!r} is a folder, not a cassette file", hint=RECORD_HINT
        )
    if not path.exists():
        raise UsageError(f"{option}: no cassette file {str(path)!r}", hint=RECORD_HINT)
    try:
        return ReplayModel.from_file(path, name=name)
    except ModelError as exc:
        raise UsageError(
            f"{option}: {exc.message.removeprefix(f'{exc.code.value}: ')}", hint=exc.hint
        ) from None


def build_models(
    settings: PipelineSettings,
    options: RunOptions,
    attempt_gate: Callable[[], bool] | None = None,
) -> dict[str, Model]:
    """Build every model `settings` declares.

    Provider retries and failovers are bounded by the run's budget: each asks
    `attempt_gate` (the run's usage meter) first, and none starts past the
    run's wall-clock deadline (`settings.budget.max_wall_s` from now, on the
    run's clock). Files a model names must lie in the pipeline's folder or
    one of `options.roots`. An override of an undeclared model is a `UsageError`.
    """
    from converge_dsl.models import RecordingModel, build_model

    declared = settings.models
    for name in options.model_overrides:
        if name not in declared:
            raise UsageError(
                f"--model {name}=...: the pipeline declares no model {name!r}",
                hint=f"declared models: {', '.join(sorted(declared)) or 'none'}",
            )
    max_wall_s = settings.budget.max_wall_s
    deadline = None if max_wall_s is None else options.clock.monotonic() + float(max_wall_s)
    roots = options.roots
    models: dict[str, Model] = {}
    for name, declaration in declared.items():
        override = options.model_overrides.get(name)
        model: Model
        if options.replay is not None:
            model = _cassette(options.replay, f"--replay {options.replay}", name)
        elif override is not None:
            model = _cassette(Path(override), f"--model {name}={override}", name)
        else:
            model = build_model(
                name,
                declaration.config,
                base_dir=declaration.base_dir,
                env=options.env,
                clock=options.clock,
                rng=random.Random(0),
                attempt_gate=attempt_gate,
                deadline=deadline,
                roots=roots,
            )
        if options.record is not None:
            model = RecordingModel(model, options.record, append=True, name=name)
        models[name] = model
    return models
