"""What the runs of one loaded pipeline share: one HTTP connection pool per model and loop.

A run builds its models afresh (each run has its own usage meter, attempt gate
and deadline, and a scripted model counts its rules' uses per run), but an
HTTP model's connections are kept: every run's model sends through the one
`ShardedTransport` of its model name on the running event loop, lent to it
(`LentTransport`: the run's model closing its client leaves the pool open).
httpx is imported only when a pool is lent: a batch on a scripted model never loads it.
`SharedTransports.aclose()` closes the pools of the running loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

    from converge_dsl.models import ShardedTransport

# How long an idle keep-alive connection stays in a shared pool (seconds).
KEEPALIVE_S = 30.0


class SharedTransports:
    """One connection pool per (event loop, model name), made on first use. Thread-safe.

    A pool trusts the certificates `SSL_CERT_FILE` and `SSL_CERT_DIR` of `env` name, as
    a model built in that environment does.
    """

    def __init__(self, max_connections: int, env: Mapping[str, str]) -> None:
        self._max_connections = max_connections
        self._env = env
        self._pools: dict[tuple[int, str], tuple[asyncio.AbstractEventLoop, ShardedTransport]] = {}
        self._lock = threading.Lock()

    def lend(self, model: str) -> httpx.AsyncBaseTransport:
        """The running loop's pool for `model`, lent (the borrower cannot close it)."""
        from converge_dsl.models import LentTransport, ShardedTransport, certificates_in

        loop = asyncio.get_running_loop()
        key = (id(loop), model)
        with self._lock:
            found = self._pools.get(key)
            if found is None or found[0] is not loop:
                pool = ShardedTransport(
                    self._max_connections, KEEPALIVE_S, certificates=certificates_in(self._env)
                )
                found = (loop, pool)
                self._pools[key] = found
        return LentTransport(found[1])

    async def aclose(self) -> None:
        """Close the running loop's pools (they are made again if used after)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            mine = [key for key, (owner, _) in self._pools.items() if owner is loop]
            pools = [self._pools.pop(key)[1] for key in mine]
        for pool in pools:
            await pool.aclose()
