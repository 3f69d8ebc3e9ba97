"""`converge-dsl lock PIPELINE`: resolve the pipeline's packs, and pin its tool servers,
into its lock file.

Every specifier in `packs:` is resolved (transitively) against the pipeline's
`repositories:`, every pinned archive is fetched into the cache and verified,
and the pipeline's section of `converge.lock` (one per folder, beside the
pipeline) is replaced; the other pipelines' sections are kept. Versions
already pinned by an existing lock are kept when they still fit; an
unreadable lock file (empty, merge-conflict markers, ...) is replaced with a
warning. Each MCP tool server under `tools:` is started (within its
`start_timeout_s`), its name, version and tool list read, and stopped: the
lock pins them (docs/tools.md). Their `env.pass` and header variables are read
from the command's environment (`CommandIO.environ`: the one handed to
`converge_dsl.cli.run`), never the process's behind it. Exit 0 on success, 1
when the packs cannot be resolved or fetched (the message explains the
conflict) or a tool server does not start. `--format json` prints one object
(`pipeline`, `lock_file`, `packs`: name, version, repository, sha256; `tools`:
name, server, version, digest, tools), or the command line's JSON error object
(`cli`), as every command does.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.errors import UsageError

if TYPE_CHECKING:
    from converge_dsl.cli import CommandIO


def configure(parser: argparse.ArgumentParser) -> None:
    from converge_dsl.cli._pack import add_format

    parser.add_argument("pipeline", type=Path, metavar="PIPELINE", help="the pipeline YAML file")
    parser.add_argument("--cache", type=Path, metavar="DIR", help="pack cache folder")
    parser.add_argument(
        "--allow-downgrade",
        action="store_true",
        help="accept a pin that moves to a lower version than the lock has",
    )
    parser.add_argument(
        "--upgrade",
        nargs="*",
        metavar="NAME",
        help="move these packs (all, when no name follows) to the newest version that "
        "fits, instead of keeping their pins",
    )
    parser.add_argument(
        "--repin",
        action="store_true",
        help="accept a different archive digest for a version the lock already pins",
    )
    add_format(parser)


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    return _lock(args, io)


def _lock(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.cli._pack import emit, warner
    from converge_dsl.packs import PackCache, lock_path, lock_pipeline

    if not args.pipeline.is_file():
        raise UsageError(f"no such pipeline file: {args.pipeline}", code=codes.PATH_NOT_FOUND)
    lock = lock_pipeline(
        args.pipeline,
        cache=PackCache(args.cache, environ=io.environ),
        warn=warner(io),
        allow_downgrade=args.allow_downgrade,
        repin=args.repin,
        upgrade=args.upgrade,
        environ=io.environ,
    )
    text = (
        f"locked {len(lock.packs)} pack(s) of {args.pipeline.name} "
        f"into {lock_path(args.pipeline).name}\n"
    )
    packs: list[dict[str, object]] = []
    for name, pinned in sorted(lock.packs.items()):
        text += f"  {name} {pinned.version}  {pinned.repository}  sha256:{pinned.sha256[:16]}\n"
        packs.append(
            {
                "name": name,
                "version": str(pinned.version),
                "repository": pinned.repository,
                "sha256": pinned.sha256,
            }
        )
    tools: list[dict[str, object]] = []
    if lock.tools:
        text += f"locked {len(lock.tools)} tool server(s)\n"
    for name, server in sorted(lock.tools.items()):
        names = server.tool_names()
        text += (
            f"  {name}  {server.server_name} {server.server_version}  {server.digest[:23]}  "
            f"{len(names)} tool(s)\n"
        )
        tools.append(
            {
                "name": name,
                "server": server.server_name,
                "version": server.server_version,
                "digest": server.digest,
                "tools": list(names),
            }
        )
    data = {"pipeline": str(args.pipeline), "lock_file": str(lock_path(args.pipeline))}
    emit(args, io, text, {**data, "packs": packs, "tools": tools})
    return 0
