"""What the server writes on standard error: one line a record, without a traceback."""

from __future__ import annotations

import logging
import sys


class _FirstLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        lines = record.getMessage().splitlines() or [""]
        return f"converge-dsl lsp: {lines[0]}"


def quiet_pygls() -> None:
    """pygls's warnings and errors, and the server's own (the loggers of this package's
    modules), as one line each on standard error (no traceback)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_FirstLine())
    for name in ("pygls", "converge_dsl.lsp"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.WARNING)
        logger.propagate = False
