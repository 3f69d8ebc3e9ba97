"""`converge-dsl lsp`: a language server for pipelines, over stdio (pygls, lsprotocol).

Diagnostics are `validate`'s own (`converge_dsl.validation`'s checks on the
editor's text); completion, hover, definitions and references, code actions,
symbols, folding, rename and semantic tokens read the same analysis
(docs/editors.md).

- `build_server(explain=..., debounce=..., environ=...)` -> the server with every
  feature registered; `explain(code)` gives a code's explanation for hovers;
  `environ` is the environment its analyses read (default: the process's).
- `serve(explain=..., environ=...)`: build it and serve the standard streams until
  the client exits (exit code 1 when the session ends without `shutdown`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from converge_dsl.lsp._features import build_server
from converge_dsl.lsp._server import Explain

__all__ = ["build_server", "serve"]


def serve(explain: Explain | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Serve the language server on standard input and output until the client exits.

    A session that ends without `shutdown` (`exit` alone, or the input closed)
    raises `ConvergeError`, whose exit code is 1, as the protocol asks. The
    server reads and writes copies of the two descriptors, which it closes
    when it stops: the process's own streams stay open for the command line's
    last flush.
    """
    from converge_dsl.errors import ConvergeError
    from converge_dsl.lsp._stderr import quiet_pygls

    quiet_pygls()
    server = build_server(explain, environ=environ)
    with os.fdopen(os.dup(0), "rb") as stdin, os.fdopen(os.dup(1), "wb") as stdout:
        server.start_io(stdin, stdout)
    if not server.protocol.shut_down:
        raise ConvergeError(
            "the editor ended the language server's session without a 'shutdown' request",
            hint="an editor sends 'shutdown', then 'exit'",
        )
