"""`converge-dsl cache stats|ls|show KEY|prune|clear`: look into and tidy the answer cache.

Every action reads the cache folder `--cache-dir` gives (else
`$CONVERGE_DSL_CACHE/answers` of the command's environment, else the user cache
folder's; docs/cache.md) and
prints text, or one JSON object under `--format json`. `ls` lists the
entries, most recently used first (`--suggestor NAME` keeps one
suggestor's); `show KEY` prints one entry (a unique prefix of its key is
enough), with whether it passes its check; `prune --max-bytes N` removes the
least recently used entries until the rest fill at most N bytes; `clear`
removes every entry, and the cache's files when they are damaged (no database,
a corrupt one, one of another version: every other action is CD975 then). Both
remove a pause of storing (`models.caching.PAUSE_FILE`), which `stats` shows. A
key that names no entry is CD977 (exit 3).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.errors import UsageError
from converge_dsl.models.answer_store import MemoryAnswerStore, StoreStats

if TYPE_CHECKING:
    from collections.abc import Callable

    from converge_dsl.cli import CommandIO
    from converge_dsl.models.answer_store import CacheRow, SqliteAnswerStore

    Store = SqliteAnswerStore | MemoryAnswerStore


class _NoEntry(UsageError):
    code = codes.CACHE_NO_ENTRY


def configure(parser: argparse.ArgumentParser) -> None:
    from converge_dsl.cli._pack import add_format

    sub = parser.add_subparsers(
        dest="action", metavar="ACTION", required=True, help="what to do (each has --help)"
    )
    actions = {
        "stats": sub.add_parser("stats", help="how many entries, how many bytes, where"),
        "ls": sub.add_parser("ls", help="list the entries, most recently used first"),
        "show": sub.add_parser("show", help="print one entry: its request and its answer"),
        "prune": sub.add_parser("prune", help="remove least recently used entries past a size"),
        "clear": sub.add_parser("clear", help="remove every entry"),
    }
    actions["ls"].add_argument("--suggestor", metavar="NAME", help="only this suggestor's")
    actions["show"].add_argument("key", metavar="KEY", help="the entry's key (or a prefix)")
    actions["prune"].add_argument(
        "--max-bytes",
        type=int,
        metavar="N",
        help="the size to prune down to (default: the cache's bound)",
    )
    for action in actions.values():
        action.add_argument(
            "--cache-dir", type=Path, metavar="DIR", help="the answer cache's folder"
        )
        add_format(action)


class _NoStore(MemoryAnswerStore):
    """A cache folder with no database yet: every action sees no entry, and nothing is
    made (a mistyped --cache-dir is not created by looking into it)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def stats(self) -> StoreStats:
        return replace(super().stats(), location=str(self.path))


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.models.answer_store import STORE_FILE, CacheStoreError, SqliteAnswerStore
    from converge_dsl.runtime import cache_folder

    folder = cache_folder(args.cache_dir, io.environ)
    store: Store
    if not (folder / STORE_FILE).exists() and not folder.is_file():
        store = _NoStore(folder / STORE_FILE)  # a look creates no folder nor database
        return _act(store, folder, args, io)
    try:
        store = SqliteAnswerStore(folder)
    except CacheStoreError as exc:
        if args.action != "clear" or not exc.damaged:
            raise
        removed = [str(path) for path in SqliteAnswerStore.discard(folder)]
        text = "".join(f"removed the damaged file {path}\n" for path in removed)
        data = {"removed": 0, "files": removed, **_unpause(folder)}
        text += "removed the pause of storing\n" if data["pause_removed"] else ""
        return _emit(args, io, text, data)
    try:
        return _act(store, folder, args, io)
    finally:
        store.close()


def _act(store: Store, folder: Path, args: argparse.Namespace, io: CommandIO) -> int:
    text, data = _ACTIONS[args.action](store, args)
    if args.action == "stats":
        data["paused"], said = _pause(folder)
        text += said
    elif args.action in ("prune", "clear"):
        data |= _unpause(folder)
        text = text + ("removed the pause of storing\n" if data["pause_removed"] else "")
    return _emit(args, io, text, data)


def _pause(folder: Path) -> tuple[dict[str, Any] | None, str]:
    """The pause of storing in `folder` that has not ended, as JSON and as a line."""
    import time

    from converge_dsl.models.caching import PAUSE_FILE, read_pause

    now = time.time()
    pause = read_pause(folder / PAUSE_FILE)
    if pause is None or pause.until <= now:
        return None, ""
    said = (
        pause.describe(now)
        if pause.honoured
        else f"the pause of storing in {folder / PAUSE_FILE} was written by user "
        f"{pause.owner_name()}: only the current user's is honoured, storing is not paused"
    )
    return {
        "until": pause.until,
        "pid": pause.pid,
        "why": pause.why,
        "owner": pause.owner_name(),
        "honoured": pause.honoured,
        "file": str(pause.file),
    }, said + "\n"


def _unpause(folder: Path) -> dict[str, Any]:
    """Remove the pause of storing from `folder`: whether there was one removed."""
    from converge_dsl.models.caching import PAUSE_FILE

    try:
        (folder / PAUSE_FILE).unlink()
    except FileNotFoundError:
        return {"pause_removed": False}
    return {"pause_removed": True}


def _emit(args: argparse.Namespace, io: CommandIO, text: str, data: dict[str, Any]) -> int:
    from converge_dsl.cli._pack import emit

    emit(args, io, text, data)
    return 0


def _stats(store: Store, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    stats = store.stats()
    data = {
        "entries": stats.entries,
        "bytes": stats.bytes,
        "max_bytes": stats.max_bytes,
        "location": stats.location,
        "kinds": dict(stats.kinds),
    }
    kinds = ", ".join(f"{n} {kind}" for kind, n in stats.kinds)
    text = (
        f"{stats.entries} entries{f' ({kinds})' if kinds else ''}, "
        f"{stats.bytes:,} of {stats.max_bytes:,} bytes\n"
        f"in {stats.location}"
        f"{' (not there: nothing cached yet)' if isinstance(store, _NoStore) else ''}\n"
    )
    return text, data


def _summary(row: CacheRow) -> dict[str, Any]:
    from converge_dsl.models.answer_store import verify

    return {
        "key": row.key,
        "kind": row.kind,
        "suggestor": row.suggestor,
        "identity": json.loads(row.identity) if verify(row) is None else row.identity,
        "created": row.created,
        "last_used": row.last_used,
        "duration_s": row.duration_s,
        "bytes": row.size,
        "problem": verify(row),
    }


def _ls(store: Store, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    rows = store.rows(suggestor=args.suggestor)
    lines = [
        f"{row.key[:16]}  {row.kind:5}  {row.suggestor or '-':20}  {row.size:>8} B  "
        f"{row.duration_s:.3f} s{'  (fails its check)' if _summary(row)['problem'] else ''}\n"
        for row in rows
    ]
    return "".join(lines), {"entries": [_summary(row) for row in rows]}


def _show(store: Store, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    from converge_dsl.diagnostics import did_you_mean

    if not args.key.strip():  # a prefix of every key: it showed the one entry there was
        raise _NoEntry(
            "answer cache: KEY is empty",
            hint="give an entry's key or a prefix of it; `converge-dsl cache ls` lists them",
        )
    rows = store.rows()
    found = [row for row in rows if row.key.startswith(args.key)]
    if len(found) != 1:
        what = "no entry" if not found else f"{len(found)} entries"
        guess = did_you_mean(args.key, [row.key for row in rows])
        raise _NoEntry(
            f"answer cache: {what} has a key starting {args.key!r}",
            hint=f"did you mean {guess}?" if guess else "`converge-dsl cache ls` lists the keys",
        )
    row = found[0]
    data = _summary(row)
    problem = data["problem"]
    data["request"] = json.loads(row.request) if problem is None else row.request
    data["answer"] = json.loads(row.value) if problem is None else row.value
    text = (
        f"key: {row.key}\nkind: {row.kind}\nsuggestor: {row.suggestor}\n"
        f"identity: {row.identity}\ntook: {row.duration_s:.3f} s\n"
        f"check: {problem or 'ok'}\n"
        f"request:\n{json.dumps(data['request'], indent=2, ensure_ascii=False)}\n"
        f"answer:\n{json.dumps(data['answer'], indent=2, ensure_ascii=False)}\n"
    )
    return text, data


def _prune(store: Store, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    limit = store.max_bytes if args.max_bytes is None else args.max_bytes
    if limit < 0:
        raise UsageError("--max-bytes must be 0 or more", code=codes.ARGUMENTS_REFUSED)
    removed = store.prune(limit)
    return f"removed {removed} entries\n", {"removed": removed}


def _clear(store: Store, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    removed = store.clear()
    return f"removed {removed} entries\n", {"removed": removed}


_ACTIONS: dict[str, Callable[[Store, argparse.Namespace], tuple[str, dict[str, Any]]]] = {
    "stats": _stats,
    "ls": _ls,
    "show": _show,
    "prune": _prune,
    "clear": _clear,
}
