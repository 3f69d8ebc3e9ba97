"""The run's models, built from the compiler's typed model declarations.

Provider retries and failovers are bounded by the run's budget: each asks the
attempt gate (the run's usage meter, where each further attempt consumes a
model call) first, and none starts past the run's
wall-clock deadline. `--replay` and `--model NAME=CASSETTE` answer from
cassettes; `--record` wraps every model in a recorder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.clock import Clock
from converge_dsl.compiler import PipelineSettings
from converge_dsl.errors import UsageError
from converge_dsl.models.port import Model

from ._options import RunOptions

if TYPE_CHECKING:
    import httpx

    from converge_dsl.models import ReplayOrder
    from converge_dsl.tools import ServerFactory

# Builds one declared model of a run by name, sending through the transport if one is given.
ModelBuilder = Callable[[str, "httpx.AsyncBaseTransport | None"], Model]


def _cassette(
    path: Path,
    option: str,
    name: str,
    *,
    attempt_gate: Callable[[], bool] | None,
    order: ReplayOrder | None,
    clock: Clock,
) -> Model:
    """The replay of a cassette named on the command line, standing in for the model
    recorded as `name` (asking `attempt_gate` as the recorded model did, answering in
    `order`); a bad cassette is a `UsageError`."""
    from converge_dsl.models import ModelError, ReplayModel
    from converge_dsl.models.cassette import RECORD_HINT

    if path.is_dir():
        raise UsageError(
            f"{option}: {str(path)!r} is a folder, not a cassette file",
            hint=RECORD_HINT,
            code=codes.PATH_NOT_FOUND,
        )
    if not path.exists():
        raise UsageError(
            f"{option}: no cassette file {str(path)!r}", hint=RECORD_HINT, code=codes.PATH_NOT_FOUND
        )
    try:
        return ReplayModel.from_file(
            path, name=name, attempt_gate=attempt_gate, order=order, clock=clock
        )
    except ModelError as exc:
        raise UsageError(
            f"{option}: {exc.cited}", hint=exc.hint, code=codes.FILE_UNREADABLE
        ) from None


def model_builder(
    settings: PipelineSettings,
    *,
    env: Mapping[str, str],
    clock: Clock,
    roots: tuple[Path, ...],
    attempt_gate: Callable[[], bool] | None = None,
    resolved: MutableMapping[tuple[object, ...], Path] | None = None,
) -> ModelBuilder:
    """What builds the models `settings` declares for one run, each as its declaration says.

    Every model it builds shares the run's budget: provider retries and
    failovers ask `attempt_gate` (the run's usage meter) first, and none starts
    past the run's wall-clock deadline, `settings.budget.max_wall_s` from now
    (read once, here, on `clock`). Files a model names must lie in the
    pipeline's folder or one of `roots`. `converge-dsl run` and a loaded
    `Pipeline` (`batch`) build their runs' models through it; a `Pipeline` gives
    `resolved`, where the paths of those files are kept for all its runs
    (`build_model`).
    """
    from converge_dsl.models import build_model

    max_wall_s = settings.budget.max_wall_s
    deadline = None if max_wall_s is None else clock.monotonic() + float(max_wall_s)

    def build(name: str, transport: httpx.AsyncBaseTransport | None) -> Model:
        declaration = settings.models[name]
        return build_model(
            name,
            declaration.spec,
            base_dir=declaration.base_dir,
            env=env,
            clock=clock,
            transport=transport,
            attempt_gate=attempt_gate,
            deadline=deadline,
            roots=roots,
            resolved=resolved,
        )

    return build


def build_models(
    settings: PipelineSettings,
    options: RunOptions,
    attempt_gate: Callable[[], bool] | None = None,
    orders: dict[str, ReplayOrder] | None = None,
) -> dict[str, Model]:
    """Build every model `settings` declares, through `model_builder` (the run's
    `attempt_gate` and wall-clock deadline; files in the pipeline's folder or one
    of `options.roots`), unless a cassette stands in for it (`--replay`,
    `--model NAME=CASSETTE`; `--record` is a sink, `_sinks.RecordSink`). An
    override of an undeclared model is a `UsageError`. `orders` holds the answer order
    of each cassette file (by resolved path), shared with the run's tool replay.
    """
    from converge_dsl.models import ReplayOrder

    declared = settings.models
    for name in options.model_overrides:
        if name not in declared:
            raise UsageError(
                f"--model {name}=...: the pipeline declares no model {name!r}",
                hint=f"declared models: {', '.join(sorted(declared)) or 'none'}",
                code=codes.INPUT_REFUSED,
            )
    build = model_builder(
        settings,
        env=options.env,
        clock=options.clock,
        roots=options.roots,
        attempt_gate=attempt_gate,
    )
    models: dict[str, Model] = {}
    if orders is None:
        orders = {}  # one answer order per cassette file of the run

    def replay(path: Path, option: str, name: str) -> Model:
        assert orders is not None
        order = orders.setdefault(str(path.resolve()), ReplayOrder())
        return _cassette(
            path, option, name, attempt_gate=attempt_gate, order=order, clock=options.clock
        )

    for name in declared:
        override = options.model_overrides.get(name)
        model: Model
        if options.replay is not None:
            model = replay(options.replay, f"--replay {options.replay}", name)
        elif override is not None:
            model = replay(Path(override), f"--model {name}={override}", name)
        else:
            model = build(name, None)
        models[name] = model
    return models


def replayed_models(
    settings: PipelineSettings,
    cassette: Path,
    option: str,
    *,
    clock: Clock,
    attempt_gate: Callable[[], bool] | None,
    orders: dict[str, ReplayOrder],
) -> dict[str, Model]:
    """Every model `settings` declares, answered from `cassette` as `--replay` answers
    them (one answer order per cassette file in `orders`, shared with the run's tool
    replay); a batch case's own cassette (`--replay DIR`). A bad cassette is a
    `UsageError` naming `option`."""
    from converge_dsl.models import ReplayOrder

    order = orders.setdefault(str(cassette.resolve()), ReplayOrder())
    return {
        name: _cassette(cassette, option, name, attempt_gate=attempt_gate, order=order, clock=clock)
        for name in settings.models
    }


def tool_replay(path: Path, orders: dict[str, ReplayOrder]) -> ServerFactory:
    """`--replay CASSETTE` for the run's MCP tool servers: each answered from the cassette,
    none started, in the order shared with the models' replay of the same file; a bad
    cassette is a `UsageError`."""
    from converge_dsl.models import ReplayOrder
    from converge_dsl.models.cassette import RECORD_HINT
    from converge_dsl.tools import ToolReplay, ToolReplayMiss

    option = f"--replay {path}"
    if path.is_dir():
        raise UsageError(
            f"{option}: {str(path)!r} is a folder, not a cassette file",
            hint=RECORD_HINT,
            code=codes.PATH_NOT_FOUND,
        )
    if not path.exists():
        raise UsageError(
            f"{option}: no cassette file {str(path)!r}", hint=RECORD_HINT, code=codes.PATH_NOT_FOUND
        )
    order = orders.setdefault(str(path.resolve()), ReplayOrder())
    try:
        return ToolReplay.from_file(path, order=order).server
    except ToolReplayMiss as exc:
        raise UsageError(f"{option}: {exc.message}", hint=exc.hint, code=exc.code) from None
