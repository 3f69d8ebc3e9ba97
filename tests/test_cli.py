from __future__ import annotations

import io

from converge_dsl.cli import EXIT_OK, EXIT_USAGE, run


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_no_arguments_prints_help_and_is_a_usage_error() -> None:
    code, out, _ = _run()
    assert code == EXIT_USAGE
    assert "commands:" in out


def test_unknown_command_suggests_the_closest() -> None:
    code, _, err = _run("valdate")
    assert code == EXIT_USAGE
    assert "did you mean 'validate'?" in err


def test_version() -> None:
    code, out, _ = _run("--version")
    assert code == EXIT_OK
    assert out.startswith("converge-dsl ")


def test_environment_errors_are_reported_without_a_traceback(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import converge_dsl.cli._schema as schema_command

    def fail(args: object, io: object) -> int:
        raise OSError(28, "No space left on device", "out.jsonl")

    monkeypatch.setattr(schema_command, "execute", fail)
    code, _, err = _run("schema", "pipeline")
    assert code == 1
    assert err == "error: cannot use 'out.jsonl': No space left on device\n"


def test_the_entry_point_leaves_the_collector_alone() -> None:
    """`main` switches no global state but the process's end (`os._exit`, after a flush)."""
    import subprocess
    import sys

    script = (
        "import gc, sys\n"
        "from converge_dsl import cli\n"
        "cli.run = lambda argv, out, err: print('collector', gc.isenabled()) or 7\n"
        "cli.main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout == "collector True\n", done.stderr
    assert done.returncode == 7


def test_help_is_laid_out_at_the_terminal_width_as_argparse_lays_it_out(
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    """The CLI's formatter measures the terminal only when it formats (no shutil at
    start-up), and then exactly as argparse's own does."""
    import argparse

    from converge_dsl.cli import COMMANDS, _add_global_options
    from converge_dsl.cli._validate import configure

    shown: dict[str, str] = {}
    for columns in ("52", "120"):
        monkeypatch.setenv("COLUMNS", columns)
        stock = argparse.ArgumentParser(
            prog="converge-dsl validate", description=COMMANDS["validate"][1]
        )
        configure(stock)
        _add_global_options(stock)
        code, shown[columns], _ = _run("validate", "--help")
        assert code == EXIT_OK
        assert shown[columns] == stock.format_help()
    assert shown["52"] != shown["120"]
