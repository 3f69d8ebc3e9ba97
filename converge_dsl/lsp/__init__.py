"""`converge-dsl lsp`: a language server for pipelines, over stdio (pygls, lsprotocol).

Diagnostics are `validate`'s own (`converge_dsl.validation`'s checks on the
editor's text); completion, hover, definitions and references, code actions,
symbols, folding, rename and semantic tokens read the same analysis
(docs/editors.md).

- `build_server(explain=..., debounce=..., environ=...)` -> the server with every
  feature registered; `explain(code)` gives a code's explanation for hovers;
  `environ` is the environment its analyses read (default: the process's).
- `serve(explain=..., environ=...)`: build it and serve the standard streams until
  the client exits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from converge_dsl.lsp._features import build_server
from converge_dsl.lsp._server import Explain

__all__ = ["build_server", "serve"]


def serve(explain: Explain | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Serve the language server on standard input and output until the client exits.

    The server reads and writes copies of the two descriptors, which it closes
    when it stops: the process's own streams stay open for the command line's
    last flush.
    """
    with os.fdopen(os.dup(0), "rb") as stdin, os.fdopen(os.dup(1), "wb") as stdout:
        build_server(explain, environ=environ).start_io(stdin, stdout)
