"""`converge-dsl lsp`: the language server over standard input and output.

Only starts it: everything the server does is in `converge_dsl.lsp`. Hovers
over a diagnostic code show `explain`'s text, read from the same page. Needs
the `lsp` extra (`pip install 'converge-dsl[lsp]'`); without it, a usage
error says so. Exit code: 0 when the client ends the session with `shutdown`
then `exit`; 1 when it ends it otherwise (`exit` alone, or its input closed), as the
protocol asks.
"""

from __future__ import annotations

import argparse

from converge_dsl import codes
from converge_dsl.cli import EXIT_OK, CommandIO
from converge_dsl.errors import UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="talk over standard input and output (the default and only transport)",
    )


def explain(code: str) -> str | None:
    """The explanation of `code` (`converge-dsl explain CODE`'s text), or None."""
    from converge_dsl.cli._explain import load
    from converge_dsl.errors import ConvergeError

    try:
        found = load().get(code)
    except ConvergeError:
        return None
    return None if found is None else f"**{found.code}** {found.title}\n\n{found.text}"


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    try:
        from converge_dsl.lsp import serve
    except ImportError as exc:
        raise UsageError(
            f"the language server needs the lsp extra ({exc.name} is not installed)",
            hint="pip install 'converge-dsl[lsp]'",
            code=codes.PART_NOT_INSTALLED,
        ) from None
    serve(explain, io.environ)
    return EXIT_OK
