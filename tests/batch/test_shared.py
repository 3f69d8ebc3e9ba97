"""The connection pools the runs of one loaded pipeline share."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from converge_dsl.batch._shared import SharedTransports


def test_a_shared_pool_trusts_the_certificates_of_the_pipelines_environment(
    trusts_the_environments_certificates: Callable[[Any], None],
) -> None:
    def pool_in(env: Mapping[str, str]) -> Any:
        """The pool lent for a model of a pipeline loaded in `env`."""

        async def lent() -> Any:
            transports = SharedTransports(4, env)
            try:
                return transports.lend("m")._inner  # type: ignore[attr-defined]
            finally:
                await transports.aclose()

        return asyncio.run(lent())

    trusts_the_environments_certificates(pool_in)


def test_the_runs_on_one_loop_share_one_pool_per_model() -> None:
    async def pools() -> tuple[object, object, object]:
        transports = SharedTransports(4, {})
        try:
            first, again, other = (transports.lend(m) for m in ("a", "a", "b"))
            return (
                first._inner,  # type: ignore[attr-defined]
                again._inner,  # type: ignore[attr-defined]
                other._inner,  # type: ignore[attr-defined]
            )
        finally:
            await transports.aclose()

    first, again, other = asyncio.run(pools())
    assert first is again
    assert first is not other
