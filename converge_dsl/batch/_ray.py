"""The `ray` executor: async Ray actors, one per CPU, each holding the loaded pipeline.

`ray` is an optional extra (`pip install 'converge-dsl[ray]'`). The driver
joins the cluster at `--ray-address` (or starts a local Ray when none is
running, and shuts it down at the end), loads the pipeline once itself (so
an invalid one fails before any actor starts), then starts one `_CaseRunner`
actor per CPU of the cluster. Each
actor loads the pipeline once and runs the cases it is sent concurrently on
its own event loop; the driver keeps `concurrency` cases in flight, sends
each to the actor with the fewest in flight, and yields results as they
finish. A batch-wide cap lives in one `_PoolState` actor (a `LocalPool`; its
methods run one at a time, so taking a call is atomic across the cluster).
When the batch ends, each actor cancels the cases it still runs and waits for
them to end (`InFlight`, at most `CANCEL_S`: no case is cut off from its
tools mid-run), then closes its pipeline (stopping its tool servers and their
process groups) before it is killed (`stop_actors`); the tool servers'
parent-death signal is left for an actor that dies or does not answer.
Files the pipeline names are read on the nodes: on a cluster they must be
at the same paths there (see docs/ray.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.engine import StopReason
from converge_dsl.errors import ConvergeError, UsageError

from ._budget import BatchLimits, LocalPool
from ._cases import Case, CaseResult, error_result
from ._one import CANCEL_S, InFlight

if TYPE_CHECKING:
    from converge_dsl.runtime import CacheSettings

    from ._options import BatchOptions
    from ._outputs import CaseOutputs
    from ._pipeline import Pipeline


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError(
            "--executor ray needs Ray, which is not installed",
            hint="pip install 'converge-dsl[ray]'",
            code=codes.PART_NOT_INSTALLED,
        ) from None
    return ray


class _PoolState:
    """The batch's pool, held by one Ray actor."""

    def __init__(self, limits: BatchLimits, calls: int, tokens: int) -> None:
        self._pool = LocalPool(limits)
        self._pool.add(calls, tokens, 0, 0)

    def try_take(self, calls: int, held_calls: int, held_tokens: int) -> StopReason | None:
        return self._pool.try_take(calls, held_calls, held_tokens)

    def add(self, calls: int, tokens: int, held_calls: int, held_tokens: int) -> None:
        self._pool.add(calls, tokens, held_calls, held_tokens)

    def blocked(self, extra_calls: int) -> StopReason | None:
        return self._pool.blocked(extra_calls)

    def try_reserve(
        self, estimate: int, wanted: int | None
    ) -> tuple[StopReason | None, int | None]:
        return self._pool.try_reserve(estimate, wanted)

    def held_tokens(self) -> int:
        return self._pool.held_tokens()


class RayPool:
    """A `BudgetPool` whose counts live in a pool actor (each call one round trip)."""

    def __init__(self, limits: BatchLimits, actor: Any) -> None:
        self.limits = limits
        self._actor = actor

    def try_take(self, calls: int, held_calls: int, held_tokens: int) -> StopReason | None:
        ray = _ray()
        reason: StopReason | None = ray.get(
            self._actor.try_take.remote(calls, held_calls, held_tokens)
        )
        return reason

    def add(self, calls: int, tokens: int, held_calls: int, held_tokens: int) -> None:
        self._actor.add.remote(calls, tokens, held_calls, held_tokens)

    def blocked(self, extra_calls: int) -> StopReason | None:
        reason: StopReason | None = _ray().get(self._actor.blocked.remote(extra_calls))
        return reason

    def try_reserve(
        self, estimate: int, wanted: int | None
    ) -> tuple[StopReason | None, int | None]:
        granted: tuple[StopReason | None, int | None] = _ray().get(
            self._actor.try_reserve.remote(estimate, wanted)
        )
        return granted

    def held_tokens(self) -> int:
        return int(_ray().get(self._actor.held_tokens.remote()))


class _CaseRunner:
    """An actor's state: the pipeline, loaded once, and the batch's meter factory."""

    def __init__(
        self,
        path: Path,
        env: Mapping[str, str],
        roots: tuple[Path, ...],
        pool: RayPool | None,
        *,
        max_connections: int,
        outputs: CaseOutputs,
        cache: CacheSettings | None,
    ) -> None:
        from converge_dsl.clock import SystemClock

        from ._pipeline import load
        from ._schedule import make_meter

        clock = SystemClock()
        self._path = path
        self._pipeline = load(
            path, env=env, allow_roots=roots, max_connections=max_connections, cache=cache
        )
        self._meter = make_meter(pool, clock)
        self._sinks = (lambda case: outputs.sinks(case, clock)) if outputs.any else None
        self._in_flight = InFlight()

    async def run(self, case: Case) -> CaseResult:
        from ._schedule import run_case

        task = asyncio.ensure_future(run_case(self._pipeline, case, self._meter, self._sinks))
        self._in_flight.add(task)
        return await task  # a cancel of this call (`ray.cancel`) cancels the case too

    async def close(self) -> None:
        """Cancel the cases in flight and wait for them (`InFlight`), then stop the
        pipeline's tool servers (their process groups too) and close its connection
        pools."""
        await self._in_flight.cancel()
        await self._pipeline.aclose()


# How long the actors may take to end their runs and close their pipelines before they
# are killed (seconds).
CLOSE_S = CANCEL_S + 25.0


def stop_actors(
    ray: Any, actors: Sequence[Any], closed: Callable[[], object] = lambda: None
) -> None:
    """Ask each of `actors` to `close` (ending its runs, then stopping its tool servers),
    wait for them all, at most `CLOSE_S`, call `closed()`, then kill them. An actor that
    died already, or does not answer in time, is killed all the same: its servers then
    end by their parent-death signal."""
    closing = []
    for actor in actors:
        with contextlib.suppress(Exception):  # an actor that died already
            closing.append(actor.close.remote())
    if closing:
        with contextlib.suppress(Exception):  # Ray itself gone: the kills below still run
            ray.wait(closing, num_returns=len(closing), timeout=CLOSE_S)
    closed()
    for actor in actors:
        with contextlib.suppress(Exception):
            ray.kill(actor)


def run_on_ray(
    options: BatchOptions,
    workers: int,
    todo: list[Case],
    spent: tuple[int, int],
    loaded: Callable[[Pipeline], None],
) -> Generator[CaseResult, None, None]:
    """The `ray` executor (see the module docstring); `workers` cases in flight in all.
    The pipeline loaded here is handed to `loaded` before any actor starts."""
    from ._pipeline import load

    ray = _ray()
    # Loaded here first, so an invalid pipeline fails before any actor starts.
    loaded(
        load(
            options.pipeline, env=options.env, allow_roots=options.allow_roots, cache=options.cache
        )
    )
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=options.ray_address, logging_level="ERROR", log_to_driver=False)
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    pool, owned = None, []
    if options.limits.any:
        holder = ray.remote(num_cpus=0)(_PoolState).remote(options.limits, *spent)
        pool, owned = RayPool(options.limits, holder), [holder]
    per_actor = max(1, -(-workers // cpus))
    # One call more than the cases it runs at once: `close` never waits behind a case
    # still unwinding from its cancel.
    actor_class = ray.remote(num_cpus=1, max_concurrency=per_actor + 1)(_CaseRunner)
    actors = [
        actor_class.remote(
            options.pipeline.resolve(),
            dict(options.env),
            options.allow_roots,
            pool,
            max_connections=max(64, per_actor),
            outputs=options.outputs.resolved(),  # an actor's working folder is not ours
            cache=options.cache,  # its folder absolute: every actor shares the one store
        )
        for _ in range(min(cpus, max(1, len(todo))))
    ]
    return _stream(
        ray, actors, owned, todo, workers=workers, path=options.pipeline, shutdown=started_here
    )


def _stream(
    ray: Any,
    runners: list[Any],
    owned: list[Any],
    todo: list[Case],
    *,
    workers: int,
    path: Path,
    shutdown: bool,
) -> Generator[CaseResult, None, None]:
    """Feed `todo` to the `runners`, `workers` in flight, least-loaded first; at the end
    stop them (`stop_actors`) and kill the `owned` actors (the pool's)."""
    queue = list(reversed(todo))
    load = [0] * len(runners)
    running: dict[Any, tuple[Case, int]] = {}
    try:
        while queue or running:
            while queue and len(running) < workers:
                case = queue.pop()
                slot = min(range(len(runners)), key=load.__getitem__)
                load[slot] += 1
                running[runners[slot].run.remote(case)] = (case, slot)
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                case, slot = running.pop(ref)
                load[slot] -= 1
                try:
                    yield ray.get(ref)
                except Exception as exc:  # the actor died: this case's error is data
                    error = ConvergeError(
                        f"the Ray actor running this case failed: {exc}",
                        code=codes.EXECUTOR_WORKER_LOST,
                    )
                    yield error_result(case, error, path)
    finally:  # each step guarded: a lost Ray must not hide the batch's own error
        for ref in running:
            with contextlib.suppress(Exception):
                ray.cancel(ref)
        stop_actors(ray, runners)
        for actor in owned:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        if shutdown:  # the Ray this batch started (a cluster it joined stays up)
            ray.shutdown()
