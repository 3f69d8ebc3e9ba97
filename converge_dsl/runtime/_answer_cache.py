"""Whether and how a run uses the answer cache (docs/cache.md), as the run assembly takes it.

`AnswerCaching` says which store a run reads and writes and how (`mode`,
`offline`); the assembly opens one `models.caching.AnswerCache` per run from
it, so each run (a batch case, a test case) counts its own hits while all of
them share one store. `CacheSettings` is the same decision before any store is
opened: plain values (mode, folder, offline, explain) that pickle, so a batch
decides once and every executor's workers (processes, Ray actors) open their
own connection to the same folder with the same settings.

`cache_settings(...)` decides, for each of the mode and the folder, by the
first layer that says it: a command-line flag, then an environment variable,
then the run configuration (`--config FILE`, `frontend.read_run_config`), then the default.
- mode: `--offline` (read-only, a miss is an error) or `--cache` (read-write);
  else `CONVERGE_DSL_CACHE_MODE`; else the configuration's `cache.mode`; else
  off (the default of `run`, `batch`, `test` and the Python API: a cached
  answer for a sampled request is a choice the user makes). `--explain-cache`
  keeps the mode the other layers give and turns the cache on (read-write)
  where they leave it off.
- folder: `--cache-dir`; else the `answers` folder of `CONVERGE_DSL_CACHE` (the
  cache root the compile cache uses too); else the configuration's
  `cache.dir`; else the `answers` folder of the user cache folder.
`caching_from(...)` is the same without a configuration, opened at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.clock import Clock
from converge_dsl.errors import UsageError

if TYPE_CHECKING:
    from converge_dsl.frontend import CacheConfig
    from converge_dsl.models.answer_store import AnswerStore
    from converge_dsl.models.caching import AnswerCache, CacheMode, SavePause

MODE_VARIABLE = "CONVERGE_DSL_CACHE_MODE"
DIR_VARIABLE = "CONVERGE_DSL_CACHE"  # the cache root the compile cache uses too


def _save_pause() -> SavePause:
    """A fresh pause of storing, one per `AnswerCaching` (its store's runs share it)."""
    from converge_dsl.models.caching import SavePause

    return SavePause()


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
    # A failed store pauses storing for every run on the store, not for one run each.
    saving: SavePause = field(default_factory=_save_pause, compare=False)

    def open(self, clock: Clock) -> AnswerCache:
        """One run's view of the store."""
        from converge_dsl.models.caching import AnswerCache

        return AnswerCache(
            self.store,
            mode=self.mode,
            offline=self.offline,
            explain=self.explain,
            clock=clock,
            warn=self.warn,
            saving=self.saving,
        )


class _ModeError(UsageError):
    code = codes.CACHE_BAD_MODE


def cache_mode(env: Mapping[str, str]) -> CacheMode | None:
    """`CONVERGE_DSL_CACHE_MODE` (None when unset or empty); another value is a UsageError."""
    raw = env.get(MODE_VARIABLE, "").strip()
    if not raw:
        return None
    from converge_dsl.models.caching import CACHE_MODES

    if raw not in CACHE_MODES:
        raise _ModeError(
            f"answer cache: {MODE_VARIABLE}={raw!r} is not a cache mode",
            hint=f"use one of {', '.join(CACHE_MODES)}",
        )
    return raw


def cache_folder(cache_dir: Path | None, env: Mapping[str, str]) -> Path:
    """`--cache-dir`, else `answers` in `CONVERGE_DSL_CACHE`, else in the user cache folder."""
    if cache_dir is not None:
        return cache_dir
    named = env.get(DIR_VARIABLE, "").strip()
    if named:
        return Path(named) / "answers"
    from converge_dsl.models.answer_store import default_cache_dir

    return default_cache_dir()


@dataclass(frozen=True)
class CacheSettings:
    """Where and how a run's model calls are cached, decided once (see the module
    docstring); `folder` is absolute, so a worker in another working folder finds it."""

    mode: CacheMode = "off"
    folder: Path = Path()
    offline: bool = False
    explain: bool = False

    def caching(self, warn: Callable[[str], object] | None = None) -> AnswerCaching | None:
        """The store opened from these settings (None when the cache is off)."""
        if self.mode == "off":
            return None
        from converge_dsl.models.answer_store import SqliteAnswerStore
        from converge_dsl.models.caching import PAUSE_FILE, SavePause

        return AnswerCaching(
            SqliteAnswerStore(self.folder),
            mode=self.mode,
            offline=self.offline,
            warn=warn,
            explain=self.explain,
            # the processes on the folder (a batch's workers) share a failed store's pause
            saving=SavePause(file=self.folder / PAUSE_FILE),
        )


def cache_settings(
    *,
    env: Mapping[str, str],
    cache: bool = False,
    offline: bool = False,
    explain: bool = False,
    cache_dir: Path | None = None,
    config: CacheConfig | None = None,
) -> CacheSettings:
    """The run's cache settings: flag, then environment, then configuration, then default."""
    from converge_dsl.frontend import CacheConfig

    said = config or CacheConfig()
    from_env = cache_mode(env)  # a value that is no mode is refused, whatever a flag says
    mode: CacheMode
    if offline:
        mode = "read-only"
    elif cache:
        mode = "read-write"
    else:
        mode = from_env or said.mode or "off"
        if explain and mode == "off":
            mode = "read-write"
    if cache_dir is None and not env.get(DIR_VARIABLE, "").strip() and said.folder is not None:
        folder = said.folder
    else:
        folder = cache_folder(cache_dir, env)
    return CacheSettings(mode, folder.absolute(), offline=offline, explain=explain)


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
    settings = cache_settings(
        env=env, cache=flag, offline=offline, explain=explain, cache_dir=cache_dir
    )
    return settings.caching(warn)
