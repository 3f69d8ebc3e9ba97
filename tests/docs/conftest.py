"""The docs-commands test lists every command it ran at the end of the session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _doc_commands


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _doc_commands.RAN:
        terminalreporter.section("commands the docs show (tests/docs/test_doc_commands.py)")
        for line in _doc_commands.RAN:
            terminalreporter.write_line(line)
