"""The command line: `main()` wraps `run(argv, stdout, stderr) -> int` and ends the process.

Each command lives in its own module (`_validate`, `_run`, ...) exposing
`configure(parser)` and `execute(args, io) -> int`, and may expose
`interrupted(args, io)`: what it writes when a Ctrl-C ends it before it wrote
on standard output (`run`'s JSON document), and `refused(error, parser, argv, io)
-> bool`: whether it wrote its own document for a command line argparse refused
under `--format json` (`run`'s), instead of the JSON error object. Only the module of the
command being run is imported, so the CLI starts fast. Under the console entry
point a Ctrl-C while the command starts (its modules loading, its arguments
read) is held until `execute` is called, then ends it as a later one would.

Exit codes: 0 success; 1 failure (pack, model, run); 2 invalid pipeline;
3 usage error; commands document any others (`run`: 4 budget exhausted,
5 invariant violated, 6 paused for a human).

A command that takes `--format json` and fails with a user error (any `ConvergeError`
but an invalid pipeline, or what the last boundary translates: a folder, a disk, a
file not UTF-8, an input nested too deeply) writes one `{"error": {"code", "message",
"hint"}}` object on standard output (`where` too when it has one) unless it has
written there already (`run`'s run-result document), its line on standard error,
and exits with the error's own code. An invalid pipeline is rendered as
`validate --format json` renders it.

Every write to standard output and standard error goes through one checked
writer (`converge_dsl._files.CheckedStream`, made by `CommandIO.checked`): a
write that is cut short is continued, and one that fails (a full disk, a
closed pipe) ends the command with exit 1 and a message on standard error,
whatever the command would have returned, never a silently shorter output.
"""

from __future__ import annotations

try:
    import _signal  # type: ignore[import-not-found]  # no stub: `signal` re-exports it
except ImportError:  # an interpreter without the C module: the module that wraps it
    import signal as _signal
import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Mapping, Sequence
from io import TextIOBase
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TextIO, cast

from converge_dsl import _entry, codes
from converge_dsl._entry import ENTRY as _ENTRY
from converge_dsl._record import Record
from converge_dsl.errors import ConvergeError, PipelineInvalid, UsageError

if TYPE_CHECKING:
    from converge_dsl.cli._terminal import Style

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INVALID = 2
EXIT_USAGE = 3
EXIT_INTERRUPTED = 130


# A plain slotted class: no dataclass on `validate`'s path (docs/architecture.md §5).

# command -> (module, one-line summary). Modules are imported on demand.
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("converge_dsl.cli._validate", "check pipelines; report each problem"),
    "run": ("converge_dsl.cli._run", "run a pipeline to a fixed point"),
    "plan": ("converge_dsl.cli._plan", "simulate an agent's turns and budgets without a model"),
    "schema": ("converge_dsl.cli._schema", "print a JSON Schema (pipeline, pack, ...)"),
    "trace": ("converge_dsl.cli._trace", "inspect a run trace (expand cleared turns)"),
    "report": ("converge_dsl.cli._report_page", "render a run trace as a self-contained HTML page"),
    "lock": ("converge_dsl.cli._lock", "resolve pack specifiers into converge.lock"),
    "cache": ("converge_dsl.cli._cache", "look into and tidy the answer cache of model calls"),
    "pack": ("converge_dsl.cli._pack", "publish, list, inspect, verify, add and fetch packs"),
    "graph": ("converge_dsl.cli._graph", "draw a pipeline: Mermaid, DOT, JSON or an HTML page"),
    "test": ("converge_dsl.cli._test", "run pipeline tests (*.test.yaml) and check expectations"),
    "diff": ("converge_dsl.cli._diff", "compare two run results: facts, stop reasons, usage"),
    "eval": ("converge_dsl.cli._eval", "evaluate a pipeline over a dataset (*.eval.yaml)"),
    "init": ("converge_dsl.cli._init", "start a project: a pipeline, its model script and tests"),
    "explain": ("converge_dsl.cli._explain", "print what a diagnostic code means, with an example"),
    "lsp": ("converge_dsl.cli._lsp", "serve the language server over stdio (editors)"),
    "serve": ("converge_dsl.cli._serve", "serve pipelines over HTTP: runs, events, decisions"),
    "completion": (
        "converge_dsl.cli._completion",
        "print a shell completion script (bash, zsh, fish)",
    ),
}


QUIET = -1
NORMAL = 0
VERBOSE = 1


class CommandIO(Record):
    """Where a command writes, in which environment, how much.

    `environ` is the environment of the command: the one every command reads
    (colour, `style`, see `converge_dsl.cli._terminal`; cache folders, the pack
    cache, models' keys, allowed roots...), never the process's; `verbosity` is `QUIET` (`--quiet`),
    `NORMAL` or `VERBOSE` (`--verbose`). `--quiet` drops progress displays
    and informational notes (`note`); `--verbose` adds details (`detail`).
    Errors, warnings and a command's own output are never dropped.
    """

    _fields = ("stdout", "stderr", "environ", "verbosity")
    __slots__ = _fields

    def __init__(
        self,
        stdout: TextIO,
        stderr: TextIO,
        environ: Mapping[str, str] | None = None,
        verbosity: int = NORMAL,
    ) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.environ: Mapping[str, str] = {} if environ is None else environ
        self.verbosity = verbosity

    @classmethod
    def checked(
        cls, stdout: TextIO, stderr: TextIO, environ: Mapping[str, str] | None = None
    ) -> CommandIO:
        """Streams whose every write is checked and flushed (`converge_dsl._files.write_all`)."""
        from converge_dsl._files import CheckedStream

        return cls(
            cast(TextIO, CheckedStream(stdout, "standard output")),
            cast(TextIO, CheckedStream(stderr, "standard error")),
            {} if environ is None else environ,
        )

    def style(self, stream: TextIO) -> Style:
        """Whether `stream` may show colour and live displays (`cli._terminal.decide`)."""
        from converge_dsl.cli._terminal import decide

        return decide(stream, self.environ, quiet=self.verbosity == QUIET)

    @property
    def color(self) -> bool:
        """Whether standard output may be coloured."""
        return self.style(self.stdout).color

    def note(self, text: str) -> None:
        """An informational line on standard error, unless `--quiet`."""
        if self.verbosity > QUIET:
            self.stderr.write(text if text.endswith("\n") else text + "\n")

    def detail(self, text: str) -> None:
        """A line on standard error only under `--verbose`."""
        if self.verbosity >= VERBOSE:
            self.stderr.write(text if text.endswith("\n") else text + "\n")


def environment_error(exc: OSError) -> ConvergeError:
    """An `OSError` (a folder, a disk, a permission) in the words the command line uses."""
    where = f" {exc.filename!r}" if exc.filename else ""
    return ConvergeError(
        f"cannot use{where}: {exc.strerror or type(exc).__name__}", code=codes.ENVIRONMENT_FAILED
    )


class Command(Protocol):
    """A command module: its arguments (`configure`) and what it does (`execute`)."""

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def execute(self, args: argparse.Namespace, io: CommandIO) -> int: ...


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, reading the terminal's width only when it lays text out.

    argparse makes a formatter for every `add_argument` (to check the metavar);
    the stock one reads the width at once, importing shutil (with zlib, bz2 and
    lzma) on every command's start-up, though only help and usage text use it.
    """

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        super().__init__(prog, indent_increment, max_help_position, 80 if width is None else width)
        self._asked = (indent_increment, max_help_position)
        if width is None:
            del self._width, self._max_help_position  # measured on first use: `__getattr__`

    def __getattr__(self, name: str) -> Any:
        if name not in ("_width", "_max_help_position"):
            raise AttributeError(name)
        import shutil

        indent, position = self._asked
        self._width = shutil.get_terminal_size().columns - 2  # as argparse measures it
        self._max_help_position = min(position, max(self._width - 20, indent * 2))
        return getattr(self, name)


class _Parser(argparse.ArgumentParser):
    """argparse that raises `UsageError` instead of exiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        hint = f"see '{self.prog} --help'"
        if message.startswith("unrecognized arguments: "):
            hint = self._guess(message.removeprefix("unrecognized arguments: ").split()) or hint
        raise UsageError(f"{self.prog}: {message}", hint=hint, code=codes.ARGUMENTS_REFUSED)

    def _guess(self, unknown: list[str]) -> str | None:
        """`did you mean '--input'?` for the first unknown option close to a known one.

        The known ones are this parser's and its sub-commands' (`pack info --rpeo`: the
        sub-command's unknown options reach the command's parser).
        """
        from converge_dsl.diagnostics import did_you_mean, suggestion

        # compared without their dashes, which every option shares: `--bogus` is no
        # typo of `--out`, though the two read 0.67 alike with them
        known = {option.removeprefix("--"): option for option in _option_strings(self)}
        for word in unknown:
            if word.startswith("--"):
                guess = did_you_mean(word.split("=", 1)[0].removeprefix("--"), known)
                if guess is not None:
                    return suggestion(known[guess])
        return None


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """The long options of `parser` and of its sub-commands' parsers."""
    found: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _option_strings(sub)
        found += [flag for flag in action.option_strings if flag.startswith("--")]
    return found


def _top_help() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: converge-dsl COMMAND [ARGS]...", "", "commands:"]
    lines += [f"  {name:<{width}}  {summary}" for name, (_, summary) in COMMANDS.items()]
    lines += [
        "",
        "global options (before or after COMMAND):",
        "  -q, --quiet    no progress displays or informational notes",
        "  -v, --verbose  also print details (each file checked, each cycle started)",
        "",
        "Colour: on a terminal; NO_COLOR=1 turns it off, FORCE_COLOR=1 on, TERM=dumb off.",
        "Run 'converge-dsl COMMAND --help' for a command's options,",
        "'converge-dsl explain CODE' for a diagnostic code.",
    ]
    return "\n".join(lines) + "\n"


def run(
    argv: Sequence[str],
    stdout: TextIO,
    stderr: TextIO,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run one command line; return its exit code. Never raises for user errors.

    A write to `stdout` or `stderr` that fails is exit 1 (see the module docstring).
    `environ` (default: the process's, read here and nowhere else in the command line)
    is the environment every command reads (`CommandIO.environ`).
    """
    io = CommandIO.checked(stdout, stderr, os.environ if environ is None else environ)
    try:
        return _dispatch(list(argv), io)
    except KeyboardInterrupt:
        if _ENTRY.ends_process:  # it ends now: a further Ctrl-C would cut `_report` short
            import signal

            signal.signal(signal.SIGINT, signal.SIG_IGN)
        _report(stderr, "interrupted\n")
        return EXIT_INTERRUPTED
    except (ConvergeError, OSError, UnicodeDecodeError, RecursionError) as exc:
        error = _user_error(exc)
        _report(stderr, f"{error.printed()}\n")
        return error.exit_code


def _user_error(
    exc: ConvergeError | OSError | UnicodeDecodeError | RecursionError,
) -> ConvergeError:
    """The error the command line reports for what reached its last boundary.

    The environment (a full disk, a missing folder, a permission) as
    `environment_error`; commands translate the ones they expect with more context.
    """
    if isinstance(exc, ConvergeError):
        return exc
    if isinstance(exc, OSError):
        return environment_error(exc)
    if isinstance(exc, UnicodeDecodeError):
        return UsageError(
            f"a file given is not UTF-8 text ({exc.reason} at byte {exc.start})",
            code=codes.FILE_UNREADABLE,
        )
    assert isinstance(exc, RecursionError), exc
    return UsageError("an input is nested too deeply to be read", code=codes.FILE_UNREADABLE)


def _report(stderr: TextIO, text: str) -> None:
    """Say why the command failed, if standard error still takes it.

    The text may quote untrusted input (a trace's ids, a file's names): its
    control characters are escaped so that it cannot drive the terminal.
    """
    from converge_dsl._files import flush_checked, write_all
    from converge_dsl.frontend import terminal_safe

    text = terminal_safe(text)

    with contextlib.suppress(ConvergeError):
        write_all(stderr, text, "standard error")
        flush_checked(stderr, "standard error")


_GLOBAL_FLAGS = {"-q": QUIET, "--quiet": QUIET, "-v": VERBOSE, "--verbose": VERBOSE}


def _add_global_options(parser: argparse.ArgumentParser, *, nested: bool = False) -> None:
    """`--quiet` and `--verbose`, accepted after the command name too.

    Also on every sub-command's parser (`pack list -q`); there they default to
    nothing, so that they do not undo a flag given before the sub-command.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                _add_global_options(sub, nested=True)
    default = argparse.SUPPRESS if nested else False
    taken = parser._option_string_actions  # a command's own -q or -v wins
    group = parser.add_argument_group("global options")
    group.add_argument(
        *[flag for flag in ("-q", "--quiet") if flag not in taken],
        dest="cli_quiet",
        action="store_true",
        default=default,
        help="no progress displays or informational notes (errors and results still print)",
    )
    group.add_argument(
        *[flag for flag in ("-v", "--verbose") if flag not in taken],
        dest="cli_verbose",
        action="store_true",
        default=default,
        help="also print details on standard error (each file checked, each cycle started)",
    )


def _verbosity(flags: set[int]) -> int:
    if len(flags) > 1:
        raise UsageError(
            "--quiet and --verbose cannot be combined",
            hint="choose one",
            code=codes.ARGUMENTS_REFUSED,
        )
    return next(iter(flags), NORMAL)


def _dispatch(args: list[str], io: CommandIO) -> int:
    """`run` for checked streams; raises what the command raises."""
    flags: set[int] = set()
    while args and args[0] in _GLOBAL_FLAGS:
        flags.add(_GLOBAL_FLAGS[args.pop(0)])
    if not args or args[0] in {"-h", "--help"}:
        io.stdout.write(_top_help())
        return EXIT_OK if args else EXIT_USAGE
    if args[0] == "--version":
        from converge_dsl._version import __version__

        io.stdout.write(f"converge-dsl {__version__}\n")
        return EXIT_OK
    name = args[0]
    if name not in COMMANDS:
        from converge_dsl.diagnostics import did_you_mean, suggestion

        guess = did_you_mean(name, COMMANDS)
        raise UsageError(
            f"unknown command {name!r}",
            hint=suggestion(guess) if guess else "see 'converge-dsl --help'",
            code=codes.ARGUMENTS_REFUSED,
        )
    module_name, summary = COMMANDS[name]
    __import__(module_name)  # as `import` does, so `python -X importtime` lists it
    command: Command = sys.modules[module_name]
    parser = command_parser(name, summary, command)
    try:
        with contextlib.redirect_stdout(io.stdout):  # where argparse prints --help
            namespace = parser.parse_args(args[1:])
        flags |= {QUIET} if namespace.cli_quiet else set()
        flags |= {VERBOSE} if namespace.cli_verbose else set()
        io = io._replace(verbosity=_verbosity(flags))
    except SystemExit as exc:  # --help exits through argparse
        return int(exc.code or 0)
    except UsageError as exc:  # argparse's refusals, said as JSON when JSON was asked for
        from converge_dsl.cli._arguments import asks_json

        if asks_json(parser, args[1:]):
            refused = getattr(command, "refused", None)
            if refused is None or not refused(exc, parser, args[1:], io):
                _render_json_error(exc, io)
        raise
    return _execute(command, namespace, io)


def _render_json_error(error: ConvergeError, io: CommandIO) -> None:
    """Write `error` as the one JSON error object on standard output, if it still takes it
    (standard output failing: the error is still said on standard error)."""
    from converge_dsl.cli._render import render_error

    with contextlib.suppress(ConvergeError, OSError, ValueError):
        render_error(error, io.stdout)


def command_parser(
    name: str, summary: str, command: Command, parser: argparse.ArgumentParser | None = None
) -> argparse.ArgumentParser:
    """The parser of one command: its own arguments, then the global options.

    `parser` is one to fill (a sub-parser, for `completion`); by default a new one.
    """
    if parser is None:
        parser = _Parser(prog=f"converge-dsl {name}", description=summary)
    command.configure(parser)
    _add_global_options(parser)
    return parser


def _execute(command: Command, args: argparse.Namespace, io: CommandIO) -> int:
    """Run one command; an invalid pipeline is rendered like `validate` renders it.

    The command's `--format` chooses the rendering (JSON on stdout; human text
    on stderr, since stdout is the command's own output). Under `--format json`
    a user error is also one JSON error object (see the module docstring).
    """
    try:
        _release_interrupts()
        return command.execute(args, io)
    except KeyboardInterrupt:
        interrupted = getattr(command, "interrupted", None)
        if interrupted is not None and not getattr(io.stdout, "wrote", True):
            interrupted(args, io)
        raise
    except PipelineInvalid as exc:
        from converge_dsl.cli._render import FORMATS, render

        format = getattr(args, "format", "human")
        format = format if format in FORMATS else "human"
        render(exc.diagnostics, format, io.stderr if format == "human" else io.stdout)
        return exc.exit_code
    except (ConvergeError, OSError, UnicodeDecodeError, RecursionError) as exc:
        if getattr(args, "format", None) != "json" or getattr(io.stdout, "wrote", True):
            raise
        error = _user_error(exc)
        _render_json_error(error, io)
        if error is exc:
            raise
        raise error from exc


def _hold_interrupts() -> None:
    """Hold a Ctrl-C (SIGINT) from the process's start until its command runs
    (`_release_interrupts`): one pressed while the command's modules load or its
    arguments are read ends it as one pressed a moment later would (`_execute`:
    exit 130, and the command's own word for it, `run`'s JSON document), never
    with a traceback out of an import. The console script holds it from before this
    module is imported (`converge_dsl._entry`); `main` holds it when called otherwise.
    """
    _entry.hold_interrupts()


def _release_interrupts() -> None:
    """Let Ctrl-C interrupt again; `KeyboardInterrupt` now if one was held."""
    if not _ENTRY.ends_process:
        return
    if _signal.getsignal(_signal.SIGINT) == _ENTRY.hold:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    if _ENTRY.held:
        _ENTRY.held = 0
        raise KeyboardInterrupt


def main() -> None:
    """Console-script entry point: `run` over the process's arguments and streams, then exit.

    The process ends with `os._exit` once the standard streams are flushed,
    without the interpreter's teardown, which frees every module and object
    one by one: about a tenth of `validate`'s time on a small pipeline, which
    the start-up target needs (docs/architecture.md §13). Commands close what
    they write before they return. This, and naming the console script
    `converge_dsl.__main__` for multiprocessing (`_main_is_the_package`), are the
    command line's only global switches.
    """
    _ENTRY.ends_process = True
    _hold_interrupts()
    _main_is_the_package()
    # A stream the process started without (`>&-`) is None in Python: writing to it fails
    # as a closed descriptor does (CD361, exit 1), not with a traceback.
    closed = cast("TextIO", _Closed())
    stdout, stderr = sys.stdout or closed, sys.stderr or closed
    code = run(sys.argv[1:], stdout, stderr)
    for stream, name in ((stdout, "standard output"), (stderr, "standard error")):
        try:
            stream.flush()
        except (OSError, ValueError) as exc:  # a closed pipe (`converge-dsl ... | head`)
            code = EXIT_FAILURE
            if stream is stdout:
                error = ConvergeError(f"cannot write {name}: {exc}", code=codes.ENVIRONMENT_FAILED)
                _report(stderr, f"{error.printed()}\n")
    os._exit(code)


class _Closed(TextIOBase):
    """A standard stream the process was started without."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "it was closed when the command started")


# The names the console script an installer writes holds (besides dunders): it imports
# `main` and defines nothing.
_SCRIPT_NAMES = frozenset(("re", "sys", "main"))


def _main_is_the_package() -> None:
    """Name `converge_dsl.__main__` as the main module's spec when the main module is
    the console script (`__spec__` None; it holds `main` and defines nothing), as
    `python -m converge_dsl` has it.

    multiprocessing runs a main module known only by its path again, as `__mp_main__`,
    in every worker process it starts (spawned, or forked by the fork server), in case
    the worker needs what it defines; a worker of this command line needs nothing of
    the console script (it only imports this module), and one named `*.__main__` is not
    run again. A main module that defines anything (a script of the user's calling
    `main`) is left as it is.
    """
    script = sys.modules.get("__main__")
    if script is None or getattr(script, "__spec__", None) is not None:
        return
    names = {name for name in vars(script) if not name.startswith("__")}
    entry = sys.modules.get("converge_dsl.__main__")  # the console script's function's module
    mains = (main, getattr(entry, "main", main))
    if names <= _SCRIPT_NAMES and getattr(script, "main", None) in mains:
        import importlib.util

        script.__spec__ = importlib.util.find_spec("converge_dsl.__main__")
