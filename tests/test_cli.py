from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from converge_dsl.cli import EXIT_OK, EXIT_USAGE, run

ECHO = Path(__file__).parent / "batch" / "data" / "echo.yaml"
ROOT = Path(__file__).resolve().parent.parent


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


def test_an_unknown_option_suggests_the_closest_of_the_command_or_its_action() -> None:
    assert _run("validate", str(ECHO), "--strcit") == (
        EXIT_USAGE,
        "",
        "error[CD333]: converge-dsl validate: unrecognized arguments: --strcit\n"
        "  hint: did you mean '--strict'?\n",
    )
    code, _, err = _run("run", str(ECHO), "--fromat=json")
    assert (code, err.splitlines()[1]) == (EXIT_USAGE, "  hint: did you mean '--format'?")
    code, _, err = _run("pack", "info", "alpha", "--rpeo", "repo")
    assert (code, err.splitlines()[1]) == (EXIT_USAGE, "  hint: did you mean '--repo'?")
    code, _, err = _run("run", str(ECHO), "--zzzzzz")
    assert (code, err.splitlines()[1]) == (EXIT_USAGE, "  hint: see 'converge-dsl run --help'")
    # the dashes every option shares make no likeness: `--bogus` is no typo of `--out`
    code, _, err = _run("run", str(ECHO), "--bogus")
    assert (code, err.splitlines()[1]) == (EXIT_USAGE, "  hint: see 'converge-dsl run --help'")


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
    assert err == "error[CD361]: cannot use 'out.jsonl': No space left on device\n"


def test_the_entry_point_leaves_the_collector_alone() -> None:
    """`main` switches no global state but the process's end (`os._exit`, after a flush) and
    the name of a console script's module (the test below)."""
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


def _console_script(before: str = "", after: str = "") -> str:
    """The console script an installer writes from `pyproject.toml` (it imports the
    function named there, then calls it), with `before` and `after` its import."""
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["converge-dsl"].split(":")
    return (
        f"{before}import re\nimport sys\nfrom {module} import {function}\n{after}"
        'if __name__ == "__main__":\n'
        '    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])\n'
        f"    sys.exit({function}())\n"
    )


# A line that notes each run of the console script as multiprocessing's `__mp_main__`
# (in a worker process) in the file `{marker}`.
_NOTED = """\
if __name__ == "__mp_main__":
    open({marker!r}, "a").close()
"""


def test_the_workers_a_command_starts_do_not_run_the_console_script_again(
    tmp_path: Path,
) -> None:
    """multiprocessing runs a main module known by its path again in every worker it
    starts; the console script is known as `converge_dsl.__main__`, so it is not."""
    marker = tmp_path / "ran-as-mp-main"
    script = tmp_path / "converge-dsl"
    script.write_text(_console_script(after=_NOTED.format(marker=str(marker))))
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"word": "tea"}\n{"word": "cup"}\n')
    out = tmp_path / "out.jsonl"
    argv = [sys.executable, str(script), "run", str(ECHO), "--cases", str(cases)]
    argv += ["--out", str(out), "--executor", "process", "--concurrency", "2"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 2
    assert not marker.exists()


def test_a_users_script_calling_main_keeps_its_main_module(tmp_path: Path) -> None:
    """A main module that defines anything may be needed by a worker: left as it is."""
    shown = (
        "sys.modules['converge_dsl.cli'].run = "
        "lambda argv, out, err: print(sys.modules['__main__'].__spec__) or 0\n"
    )
    console = "import sys\nfrom converge_dsl.cli import main\n"
    for defined, spec in (("", "converge_dsl.__main__"), ("def mine(): pass\n", "None")):
        script = tmp_path / "script.py"
        script.write_text(console + defined + shown + "main()\n")
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        assert spec in done.stdout


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


def test_run_format_json_prints_the_run_result_when_an_option_file_is_refused(
    tmp_path: Path,
) -> None:
    import json

    broken = tmp_path / "inputs.json"
    broken.write_text("{bad")
    for given in (["--inputs", str(broken)], ["--input", "word"], ["--inputs", "/dev/zero"]):
        code, out, err = _run("run", str(ECHO), *given, "--format", "json")
        assert code == EXIT_USAGE
        document = json.loads(out)
        assert document["stop_reason"] == "usage_error"
        assert document["diagnostics"][0]["message"] in err


_SECOND_CTRL_C = """
import os, signal, sys
import converge_dsl.cli as cli

def interrupted(argv, io):
    raise KeyboardInterrupt

real_report = cli._report

def report(stderr, text):  # a second Ctrl-C, pressed as the first is reported
    os.kill(os.getpid(), signal.SIGINT)
    real_report(stderr, text)

cli._report = report
cli._dispatch = interrupted
sys.argv = ["converge-dsl", "validate", "x.yaml"]
cli.main()
"""


def test_a_ctrl_c_while_the_first_is_reported_ends_the_process_as_one() -> None:
    # Before, it was raised inside the report ("interrupted" half written, a traceback).
    done = subprocess.run(
        [sys.executable, "-c", _SECOND_CTRL_C],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (130, "interrupted\n")


# A finder that sends the process a SIGINT as `converge_dsl.cli` starts to load.
_INTERRUPT_AS_CLI_LOADS = """\
import os, signal, sys

class InterruptAsCliLoads:
    def find_spec(self, name, path=None, target=None):
        if name == "converge_dsl.cli":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptAsCliLoads())
sys.argv[1:] = ["validate", "p.yaml"]
"""


def test_a_ctrl_c_while_the_command_line_loads_is_no_traceback(tmp_path: Path) -> None:
    """A SIGINT as `converge_dsl.cli` starts to load: the moment a user's Ctrl-C lands
    in when the start is slow."""
    # It ended in a KeyboardInterrupt traceback out of `from converge_dsl.cli import main`.
    script = tmp_path / "converge-dsl"
    script.write_text(_console_script(before=_INTERRUPT_AS_CLI_LOADS))
    (tmp_path / "p.yaml").write_text("apiVersion: converge-dsl/v1\n")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert (done.returncode, done.stderr) == (130, "interrupted\n")
