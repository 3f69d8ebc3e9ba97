"""`--quiet` and `--verbose`: where they may be written and what they change."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parent.parent.parent
MINIMAL = str(ROOT / "tests" / "data" / "valid" / "minimal.yaml")
INVALID = str(ROOT / "tests" / "data" / "invalid" / "duplicate_key.yaml")
MARKET = str(ROOT / "pipelines" / "market-entry.yaml")


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err, {})
    return code, out.getvalue(), err.getvalue()


def test_validate_quiet_drops_the_summary_line_but_never_the_diagnostics() -> None:
    assert _run("validate", MINIMAL) == (0, "1 file valid\n", "")
    assert _run("validate", "--quiet", MINIMAL) == (0, "", "")
    code, out, _ = _run("validate", "-q", INVALID)
    assert code == 2
    assert "error[CD002]" in out
    assert "1 error in 1 file" not in out


def test_validate_verbose_names_each_file_checked_on_stderr() -> None:
    code, out, err = _run("--verbose", "validate", MINIMAL, INVALID)
    assert code == 2
    assert err == f"checked {MINIMAL}\nchecked {INVALID}\n"
    assert out == _run("validate", MINIMAL, INVALID)[1]


@pytest.mark.parametrize(
    "argv",
    [
        ("-q", "-v", "validate", MINIMAL),
        ("validate", "--quiet", "--verbose", MINIMAL),
        ("-q", "validate", "-v", MINIMAL),
    ],
)
def test_quiet_and_verbose_together_are_a_usage_error(argv: tuple[str, ...]) -> None:
    code, _, err = _run(*argv)
    assert code == 3
    assert "--quiet and --verbose cannot be combined" in err


def test_run_progress_is_plain_by_default_gone_when_quiet_detailed_when_verbose() -> None:
    code, out, err = _run("run", MARKET)
    assert code == 0
    assert "cycle 1: 4 fact(s) promoted\n" in err
    assert "running" not in err
    code, quiet_out, quiet_err = _run("run", "-q", MARKET)
    assert (code, quiet_out, quiet_err) == (0, out, "")
    code, _, verbose_err = _run("-v", "run", MARKET)
    assert "cycle 1: 2 suggestor(s) running: target-market, competitor-scan\n" in verbose_err
    assert "cycle 1: 4 fact(s) promoted\n" in verbose_err


def test_a_flag_before_a_sub_command_is_not_undone_by_the_sub_command(tmp_path: Path) -> None:
    """`pack -q list` and `pack list -q` both parse; neither undoes the other."""
    assert _run("pack", "-q", "list")[0] == 0
    assert _run("pack", "list", "--quiet")[0] == 0
    assert _run("pack", "-q", "list", "-v")[0] == 3
    import converge_dsl.cli._pack as pack
    from converge_dsl.cli import command_parser

    parser = command_parser("pack", "packs", pack)  # type: ignore[arg-type]
    assert parser.parse_args(["-q", "list"]).cli_quiet is True
    assert parser.parse_args(["list", "-q"]).cli_quiet is True
    assert parser.parse_args(["list"]).cli_quiet is False


def test_batch_progress_is_silent_when_quiet(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{i}"}) + "\n" for i in range(3)))
    out = tmp_path / "out.jsonl"
    code, _, err = _run("run", MINIMAL, "--cases", str(cases), "--out", str(out))
    assert code == 0
    assert "3/3 cases" in err
    code, _, err = _run("run", "-q", MINIMAL, "--cases", str(cases), "--out", str(out))
    assert (code, err) == (0, "")


def test_the_help_lists_the_global_options() -> None:
    code, out, _ = _run("--help")
    assert code == 0
    assert "--quiet" in out
    assert "NO_COLOR" in out
    code, out, _ = _run("validate", "--help")
    assert "global options" in out


def test_a_command_that_has_its_own_short_v_keeps_it_and_gets_the_long_flags() -> None:
    import argparse
    import types

    from converge_dsl.cli import command_parser

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-v", dest="version_of", help="a command's own -v")

    command = types.SimpleNamespace(configure=configure, execute=None)
    parser = command_parser("demo", "a demo", command)  # type: ignore[arg-type]
    parsed = parser.parse_args(["-v", "1.0", "--verbose", "-q"])
    assert (parsed.version_of, parsed.cli_verbose, parsed.cli_quiet) == ("1.0", True, True)
