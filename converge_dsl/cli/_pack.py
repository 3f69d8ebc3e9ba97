"""`converge-dsl pack SUBCOMMAND`: publish, list, inspect, fetch, verify, add and yank packs.

- `pack publish PACK_DIR --repo REPO_DIR [--sign-key KEY_FILE]`
- `pack list [REPO | --repo REPO]`, `pack info NAME[@VERSION] [--repo REPO]` (its suggestors,
  parameters, input schema outline, output, invariants and versions)
  (REPO: `builtin` (default), a folder, or an http(s) URL)
- `pack fetch PIPELINE`: install every locked pack of the pipeline into the
  pack cache, verifying digests (and signatures) as `run` does; prints each
  pack fetched and each already cached (`validate` reads the cache only)
- `pack verify PIPELINE [--offline]`: the lock is current; each pinned pack's
  repository still lists it with the locked digest (CD571) and serves an
  archive with that digest (CD570); a pin yanked since is a warning (CD572);
  the pack cache holds the verified archive, fetching what it lacks, and every
  unpacked pack in the cache still holds exactly its archive's files (an
  altered one is reported, exit 1, and re-installed from the verified archive);
  `--offline` checks the lock and the cache only
- `pack add NAME [SPECIFIER] PIPELINE [--repo REPO]`: add the requirement
  (comments and layout kept), and REPO to `repositories:` when it is not
  listed, and re-lock; the file is restored if locking fails
- `pack yank NAME VERSION --repo REPO_DIR [--undo]`
- `pack keygen KEY_FILE`: write an ed25519 signing key, print its public key

A refusal with a stable code (a cap, a deadline, a redirect: CD56x) is
printed as `error[CODE]: message` with its hint; exit 1 like every pack error.

`--format json` (every sub-command) prints one JSON object on standard output
instead of the text (`emit`); a failure then prints the command line's JSON
error object there (`cli`), invalid pack files their diagnostics as
`validate --format json` does.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl._reading import read_failure, read_text
from converge_dsl.errors import PipelineInvalid, UsageError

if TYPE_CHECKING:
    from converge_dsl.cli import CommandIO
    from converge_dsl.packs import Repository


_REPO_HELP = "builtin (the default), a repository folder, or an http(s) URL"
_CACHE_HELP = "pack cache folder (default: $CONVERGE_DSL_CACHE, else the user cache folder)"
_PIPELINE_HELP = "the pipeline YAML file whose locked packs are meant"


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(
        dest="action", metavar="ACTION", required=True, help="what to do (each has --help)"
    )
    publish = sub.add_parser("publish", help="archive a pack and add it to a folder repository")
    publish.add_argument(
        "pack_dir", type=Path, metavar="PACK_DIR", help="the pack's folder (with its pack.yaml)"
    )
    publish.add_argument(
        "--repo", type=Path, required=True, metavar="REPO_DIR", help="the folder repository"
    )
    publish.add_argument(
        "--sign-key",
        type=Path,
        metavar="KEY_FILE",
        help="sign the archive with this ed25519 key (written by: pack keygen)",
    )
    listing = sub.add_parser("list", help="list the packs of a repository")
    listing.add_argument(
        "repository", nargs="?", metavar="REPO", help=f"the repository: {_REPO_HELP}"
    )
    listing.add_argument("--repo", default="builtin", metavar="REPO", help=_REPO_HELP)
    info = sub.add_parser("info", help="a pack's suggestors, parameters, input and versions")
    info.add_argument("name", metavar="NAME[@VERSION]", help="the pack (default: newest version)")
    info.add_argument("--repo", default="builtin", metavar="REPO", help=_REPO_HELP)
    fetch = sub.add_parser("fetch", help="fetch the locked packs of a pipeline into the cache")
    fetch.add_argument("pipeline", type=Path, metavar="PIPELINE", help=_PIPELINE_HELP)
    fetch.add_argument("--cache", type=Path, metavar="DIR", help=_CACHE_HELP)
    _configure_verify_and_add(sub)
    yank = sub.add_parser("yank", help="mark a published version yanked")
    yank.add_argument("name", metavar="NAME", help="the pack's name")
    yank.add_argument("version", metavar="VERSION", help="the published version to yank")
    yank.add_argument(
        "--repo", type=Path, required=True, metavar="REPO_DIR", help="the folder repository"
    )
    yank.add_argument("--undo", action="store_true", help="un-yank: make the version usable again")
    keygen = sub.add_parser("keygen", help="create an ed25519 signing key")
    keygen.add_argument(
        "key_file",
        type=Path,
        metavar="KEY_FILE",
        help="where to write the private key (mode 0600; an existing file is never replaced)",
    )
    for child in dict.fromkeys(sub.choices.values()):
        add_format(child)


def _configure_verify_and_add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = sub.add_parser("verify", help="verify the locked packs of a pipeline")
    verify.add_argument("pipeline", type=Path, metavar="PIPELINE", help=_PIPELINE_HELP)
    verify.add_argument("--cache", type=Path, metavar="DIR", help=_CACHE_HELP)
    verify.add_argument(
        "--offline",
        action="store_true",
        help="check the lock and the pack cache only, without asking the repositories",
    )
    add = sub.add_parser("add", help="add a pack requirement to a pipeline and re-lock")
    add.add_argument(
        "words",
        nargs="+",
        metavar="NAME [SPECIFIER] PIPELINE",
        help="the pack, a PEP 440 specifier (default: compatible with the newest "
        "version), and the pipeline YAML file to edit",
    )
    add.add_argument("--cache", type=Path, metavar="DIR", help=_CACHE_HELP)
    add.add_argument(
        "--repo",
        metavar="REPO",
        help="take the pack from REPO (builtin, a folder or an http(s) URL), "
        "adding it to the pipeline's repositories: when it is not listed",
    )


# --- output layer: the text of each sub-command, or one JSON object ------------------


def add_format(parser: argparse.ArgumentParser) -> None:
    """`--format human|json` of every pack sub-command (and `lock`)."""
    parser.add_argument(
        "--format",
        choices=("human", "json"),
        default="human",
        help="json: one JSON object on standard output instead of the text",
    )


def emit(args: argparse.Namespace, io: CommandIO, text: str, data: dict[str, object]) -> None:
    """Write `text`, or `data` as JSON under `--format json`.

    `text` may quote a repository's or a cache's content: it is written through
    `terminal_safe`.
    """
    if getattr(args, "format", "human") == "json":
        io.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        from converge_dsl.frontend import terminal_safe

        io.stdout.write(terminal_safe(text))


# --- the sub-commands ----------------------------------------------------------------


def _repository(text: str) -> Repository:
    from converge_dsl.packs import BuiltinRepository, FolderRepository, HttpRepository

    if text == "builtin":
        return BuiltinRepository()
    if text.startswith(("http://", "https://")):
        return HttpRepository(text)
    return FolderRepository(Path(text), label=text)


def _read_key(path: Path) -> str:
    """The text of a signing key file (its content is checked when it is used)."""
    try:
        return read_text(path, "--sign-key file")
    except OSError as exc:
        raise read_failure(exc, path, "--sign-key file") from None
    except UnicodeDecodeError:
        raise UsageError(
            f"--sign-key {path} is not a key file (not UTF-8 text)",
            hint="give the file written by: converge-dsl pack keygen KEY_FILE",
            code=codes.FILE_UNREADABLE,
        ) from None


def _print_diagnostics(exc: PipelineInvalid, io: CommandIO, format: str = "human") -> int:
    """The diagnostics of a pack's files, rendered as `validate` renders a pipeline's."""
    from converge_dsl.cli._render import render

    stream = io.stdout if format == "json" else io.stderr
    render(exc.diagnostics, format, stream, files=len({d.file for d in exc.diagnostics}))
    return exc.exit_code


def _publish(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.packs import publish

    key = None if args.sign_key is None else _read_key(args.sign_key)
    try:
        done = publish(args.pack_dir, args.repo, sign_key=key, display=args.pack_dir.as_posix())
    except PipelineInvalid as exc:
        return _print_diagnostics(exc, io, args.format)
    name, entry = done.name, done.entry
    if done.created:
        signed = " (signed)" if done.signed else ""
        text = f"published {name} {entry.version} sha256:{entry.sha256}{signed}\n"
    else:
        text = (
            f"{name} {entry.version} is already published with this archive "
            f"(sha256:{entry.sha256}); nothing changed\n"
        )
    emit(args, io, text, done.as_json())
    notice = done.unused_key_notice()
    if notice is not None:
        warner(io)(notice)
    return 0


def _list(args: argparse.Namespace, io: CommandIO) -> int:
    if args.repository is not None and args.repo != "builtin":
        raise UsageError(
            "pack list takes one repository: REPO or --repo REPO, not both",
            code=codes.ARGUMENTS_REFUSED,
        )
    repository = _repository(args.repository or args.repo)
    packs: list[dict[str, object]] = []
    lines: list[str] = []
    for name in repository.names():
        index = repository.fetch_index(name)
        entries = index.entries if index else ()
        live = [str(e.version) for e in entries if not e.yanked]
        packs.append({"name": name, "latest": live[-1] if live else None})
        lines.append(
            f"{name}  {live[-1] if live else '(all yanked)' if entries else '(no version)'}\n"
        )
    # An empty listing printed nothing at all: a folder that is no repository looked fine.
    text = "".join(lines) or f"repository {repository.id} lists no pack\n"
    emit(args, io, text, {"repository": repository.id, "packs": packs})
    return 0


def _info(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.cli._pack_view import info_text
    from converge_dsl.packs import describe_pack

    info = describe_pack(_repository(args.repo), args.name)
    emit(args, io, info_text(info), info.as_json())
    return 0


def _fetch(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.packs import PackCache, load_locked_packs

    if not args.pipeline.is_file():
        raise UsageError(f"no such pipeline file: {args.pipeline}", code=codes.PATH_NOT_FOUND)
    cache = PackCache(args.cache, environ=io.environ)
    fetched: list[str] = []
    packs = load_locked_packs(args.pipeline, cache=cache, on_fetch=fetched.append)
    text = "".join(f"{line}\n" for line in fetched)
    for altered in cache.repaired:
        text += f"re-installed {altered}: its copy in the pack cache was altered\n"
    was_cached = len(packs) - len(fetched)
    text += f"{len(fetched)} pack(s) fetched, {was_cached} already cached\n"
    data = {
        "packs": [{"name": n, "version": str(p.version)} for n, p in sorted(packs.items())],
        "fetched": fetched,
        "already_cached": was_cached,
        "reinstalled": [str(altered) for altered in cache.repaired],
    }
    emit(args, io, text, data)
    return 0


def _verify(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.cli._pack_view import render_verify
    from converge_dsl.packs import PackCache, verify_pipeline

    if not args.pipeline.is_file():
        raise UsageError(f"no such pipeline file: {args.pipeline}", code=codes.PATH_NOT_FOUND)
    report = verify_pipeline(
        args.pipeline, cache=PackCache(args.cache, environ=io.environ), offline=args.offline
    )
    if args.format == "json":
        emit(args, io, "", report.as_json())
    else:
        render_verify(report, io.stdout, io.stderr)
    return 0 if report.ok else 1


def _add(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.packs import PackCache, add_pack, parse_specifier

    if len(args.words) not in (2, 3):
        raise UsageError("pack add takes NAME [SPECIFIER] PIPELINE", code=codes.ARGUMENTS_REFUSED)
    name, pipeline = args.words[0], Path(args.words[-1])
    if not pipeline.is_file():
        raise UsageError(f"no such pipeline file: {pipeline}", code=codes.PATH_NOT_FOUND)
    specifier = args.words[1] if len(args.words) == 3 else None
    if specifier is not None and parse_specifier(specifier) is None:
        raise UsageError(f"{specifier!r} is not a PEP 440 specifier", code=codes.ARGUMENTS_REFUSED)
    done = add_pack(
        pipeline,
        name,
        specifier,
        repo=args.repo,
        cache=PackCache(args.cache, environ=io.environ),
        warn=warner(io),
        environ=io.environ,
    )
    text = ""
    if done.repository_added is not None:
        text += f"added repository {done.repository_added} to {pipeline.name}\n"
    text += f"added {name} {done.specifier!r} to {pipeline.name}; locked {name} {done.version}\n"
    emit(args, io, text, {**done.as_json(), "pipeline": str(pipeline)})
    return 0


def warner(io: CommandIO) -> Callable[[str], object]:
    """Where `lock` and `pack add` report a replaced lock file or a yanked pin (`CD572`)."""

    def warn(message: str) -> None:
        code, hint = getattr(message, "code", None), getattr(message, "hint", None)
        io.stderr.write(f"{f'warning[{code}]' if code else 'warning'}: {message}\n")
        if hint:
            io.stderr.write(f"  hint: {hint}\n")

    return warn


def _yank(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.packs import yank

    if args.repo.as_posix().startswith(("http:", "https:")):
        raise UsageError(
            "pack yank needs a folder repository (--repo REPO_DIR), not a URL",
            code=codes.ARGUMENTS_REFUSED,
        )
    yank(args.repo, args.name, args.version, yanked=not args.undo)
    text = f"{'un' if args.undo else ''}yanked {args.name} {args.version}\n"
    emit(args, io, text, {"name": args.name, "version": args.version, "yanked": not args.undo})
    return 0


def _keygen(args: argparse.Namespace, io: CommandIO) -> int:
    import contextlib
    import os

    from converge_dsl._files import OutputError, create_new
    from converge_dsl.packs import generate_key

    private, public = generate_key()
    try:  # created private (0600) and never over an existing file
        descriptor = create_new(args.key_file, 0o600)
    except FileExistsError:
        raise UsageError(
            f"{args.key_file} exists; refusing to overwrite a key", code=codes.OUTPUT_REFUSED
        ) from None
    except FileNotFoundError:
        raise UsageError(
            f"cannot write {args.key_file}: folder {args.key_file.parent} does not exist",
            code=codes.OUTPUT_REFUSED,
        ) from None
    except OSError as exc:
        raise UsageError(
            f"cannot write {args.key_file}: {exc.strerror or exc}", code=codes.OUTPUT_REFUSED
        ) from None
    try:  # whole or not at all: a key cut short by a full disk is no key
        with os.fdopen(descriptor, "wb") as handle:
            handle.write((private + "\n").encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        with contextlib.suppress(OSError):
            args.key_file.unlink()
        raise OutputError(
            f"cannot write key file {str(args.key_file)!r}: {exc.strerror or exc}; "
            "nothing was written",
            hint="free space, or write to another file",
        ) from None
    emit(args, io, f"{public}\n", {"public_key": public, "key_file": str(args.key_file)})
    return 0


_ACTIONS = {
    "publish": _publish,
    "list": _list,
    "info": _info,
    "fetch": _fetch,
    "verify": _verify,
    "add": _add,
    "yank": _yank,
    "keygen": _keygen,
}


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    """Run the sub-command; its failures are reported by the command line (`cli`), under
    `--format json` as its one JSON error object too."""
    return _ACTIONS[args.action](args, io)
