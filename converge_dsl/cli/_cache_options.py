"""The answer cache's options of `run` (and `run --cases`): which flags there are and the
cache settings they decide with the environment and a run configuration (docs/cache.md)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from converge_dsl.cli import CommandIO
    from converge_dsl.runtime import AnswerCaching, CacheSettings


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    """The answer cache's options (docs/cache.md)."""
    parser.add_argument(
        "--cache",
        action="store_true",
        help="answer model calls from the answer cache and store new answers "
        "(also: CONVERGE_DSL_CACHE_MODE=read-write|read-only|off)",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="answer model calls only from the answer cache; a miss is an error (CD973)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="the answer cache's folder (default: the user cache folder)",
    )
    parser.add_argument(
        "--explain-cache",
        action="store_true",
        help="say per model call: hit, or miss and why (on standard error; "
        "with --cases, per case at the end)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="RUN.yaml",
        help="a run configuration (kind RunConfig: `cache: {mode, dir}`); "
        "flags and environment variables win over it",
    )


def cache_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> CacheSettings:
    """The run's (or batch's) answer cache settings: flag, `environ` (the command's
    environment, `CommandIO.environ`), `--config`, default."""
    from converge_dsl.runtime import cache_settings as decide
    from converge_dsl.runtime import read_run_config

    config = None if args.config is None else read_run_config(args.config, environ).cache
    return decide(
        env=environ,
        cache=args.cache,
        offline=args.offline,
        explain=args.explain_cache,
        cache_dir=args.cache_dir,
        config=config,
    )


def caching(args: argparse.Namespace, io: CommandIO) -> AnswerCaching | None:
    """The run's answer caching from the command line, the environment and `--config`."""
    return cache_settings(args, io.environ).caching(lambda line: io.stderr.write(line + "\n"))
