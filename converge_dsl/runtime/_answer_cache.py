"""Whether and how a run uses the answer cache (docs/cache.md), as the run assembly takes it.

`AnswerCaching` says which store a run reads and writes and how (`mode`,
`offline`); the assembly opens one `models.caching.AnswerCache` per run from
it, so each run (a batch case, a test case) counts its own hits while all of
them share one store. `caching_from(...)` decides it from the command line and
the environment: `--offline` reads only and never calls; `--cache` reads and
writes (or reads only when `CONVERGE_DSL_CACHE_MODE=read-only`); without
either, `CONVERGE_DSL_CACHE_MODE` decides, and when it is unset the cache is
off (the default of `run`, `batch`, `test` and the Python API: a cached
answer for a sampled request is a choice the user makes). `--cache-dir`
(else the `answers` folder of `CONVERGE_DSL_CACHE`, the cache root the compile
cache uses too, else of the user cache folder) says where.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from converge_dsl import codes
from converge_dsl.clock import Clock
from converge_dsl.errors import UsageError
from converge_dsl.models.answer_store import AnswerStore, SqliteAnswerStore, default_cache_dir
from converge_dsl.models.caching import CACHE_MODES, AnswerCache, CacheMode

MODE_VARIABLE = "CONVERGE_DSL_CACHE_MODE"
DIR_VARIABLE = "CONVERGE_DSL_CACHE"  # the cache root the compile cache uses too


@dataclass(frozen=True)
class AnswerCaching:
    """The store a run's model calls are cached in, and how (see the module docstring).

    `warn` hears each warning line of the cache (a row that failed its check).
    """

    store: AnswerStore
    mode: CacheMode = "read-write"
    offline: bool = False
    warn: Callable[[str], object] | None = None
    explain: bool = False

    def open(self, clock: Clock) -> AnswerCache:
        """One run's view of the store."""
        return AnswerCache(
            self.store,
            mode=self.mode,
            offline=self.offline,
            explain=self.explain,
            clock=clock,
            warn=self.warn,
        )


class _ModeError(UsageError):
    code = codes.CACHE_BAD_MODE


def cache_mode(env: Mapping[str, str]) -> CacheMode | None:
    """`CONVERGE_DSL_CACHE_MODE` (None when unset or empty); another value is a UsageError."""
    raw = env.get(MODE_VARIABLE, "").strip()
    if not raw:
        return None
    if raw not in CACHE_MODES:
        raise _ModeError(
            f"answer cache [{codes.CACHE_BAD_MODE}]: {MODE_VARIABLE}={raw!r} is not a cache mode",
            hint=f"use one of {', '.join(CACHE_MODES)}",
        )
    return raw


def cache_folder(cache_dir: Path | None, env: Mapping[str, str]) -> Path:
    """`--cache-dir`, else `answers` in `CONVERGE_DSL_CACHE`, else in the user cache folder."""
    if cache_dir is not None:
        return cache_dir
    named = env.get(DIR_VARIABLE, "").strip()
    return Path(named) / "answers" if named else default_cache_dir()


def caching_from(
    *,
    flag: bool,
    offline: bool,
    cache_dir: Path | None,
    env: Mapping[str, str],
    warn: Callable[[str], object] | None = None,
    explain: bool = False,
) -> AnswerCaching | None:
    """The run's caching from `--cache`/`--offline`/`--cache-dir` and the environment."""
    mode = cache_mode(env)
    if offline:
        mode = "read-only"
    elif flag:
        mode = "read-only" if mode == "read-only" else "read-write"
    if mode is None or mode == "off":
        return None
    return AnswerCaching(
        SqliteAnswerStore(cache_folder(cache_dir, env)),
        mode=mode,
        offline=offline,
        warn=warn,
        explain=explain,
    )
