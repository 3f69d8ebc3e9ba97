"""`converge-dsl lsp` with its analyses counted, for the tests of superseded analyses.

Run as a script in place of `python -m converge_dsl lsp`: the server's `analyse` is
wrapped to count the analyses that began and those that ran to their end (one
stopped because its text was replaced began but did not end), and the command
`test.analyses` answers `{"began": B, "ended": E}`.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from converge_dsl.lsp import _server, build_server

COMMAND = "test.analyses"


def main() -> None:
    counts = {"began": 0, "ended": 0}
    lock = threading.Lock()
    real = _server.analyse

    def counted(*args: Any, **kwargs: Any) -> Any:
        with lock:
            counts["began"] += 1
        analysis = real(*args, **kwargs)
        with lock:
            counts["ended"] += 1
        return analysis

    _server.analyse = counted  # type: ignore[assignment]
    server = build_server()

    @server.command(COMMAND)
    def analyses(ls: _server.PipelineServer, *arguments: object) -> dict[str, int]:
        with lock:
            return dict(counts)

    with os.fdopen(os.dup(0), "rb") as stdin, os.fdopen(os.dup(1), "wb") as stdout:
        server.start_io(stdin, stdout)


if __name__ == "__main__":
    main()
