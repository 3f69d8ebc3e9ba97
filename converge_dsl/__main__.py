"""`python -m converge_dsl` runs the command line; `main` is the console script's function.

`main` holds a Ctrl-C before the command line's modules load
(`converge_dsl._entry`), then runs `converge_dsl.cli.main`.
"""

from __future__ import annotations

from converge_dsl._entry import hold_interrupts


def main() -> None:
    """The console script's entry point: `converge_dsl.cli.main`, with Ctrl-C held first."""
    hold_interrupts()
    from converge_dsl.cli import main as command_line

    command_line()


if __name__ == "__main__":
    main()
