"""`python -m converge_dsl` runs the command line."""

from __future__ import annotations

from converge_dsl.cli import main

main()
