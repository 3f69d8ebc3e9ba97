"""`run`/`plan` on hostile command-line input: precise usage errors, checked before any work.

Exit 3 for what the user typed (unreadable --inputs, --resume, --replay,
--model cassettes, unusable --checkpoint/--trace/--record paths); exit 1 for
an environment failure mid-run (a full disk), which keeps what was written.
"""

from __future__ import annotations

import argparse
import io
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run
from converge_dsl.cli._inputs import MAX_INPUT_DEPTH, parse_inputs
from converge_dsl.runtime import CHECKPOINT_FILE
from converge_dsl.runtime import _trace as trace_module

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "pipelines" / "market-entry.yaml"
GARBAGE = bytes(range(128, 256)) * 4


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


# --- --inputs / --input -------------------------------------------------------------------


@pytest.mark.parametrize("levels", [MAX_INPUT_DEPTH + 1, 100_000])
def test_deep_inputs_file_is_a_usage_error(tmp_path: Path, levels: int) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"market": ' + deep(levels) + "}")
    code, _, err = cli("run", PIPELINE, "--inputs", path)
    assert code == 3
    assert f"error[CD338]: --inputs {path} nests deeper than {MAX_INPUT_DEPTH} levels" in err
    assert "Traceback" not in err


def test_deep_input_value_is_a_usage_error() -> None:
    code, _, err = cli("run", PIPELINE, "--input", "market=" + deep(20_000))
    assert code == 3
    assert f"error[CD338]: --input market nests deeper than {MAX_INPUT_DEPTH} levels" in err


def test_plan_refuses_deep_inputs_too(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(deep(100_000))
    code, _, err = cli("plan", ROOT / "pipelines" / "agent-review.yaml", "--inputs", path)
    assert code == 3
    assert "nests deeper than" in err


def test_non_utf8_inputs_file_names_the_option(tmp_path: Path) -> None:
    path = tmp_path / "bin.json"
    path.write_bytes(GARBAGE)
    code, _, err = cli("run", PIPELINE, "--inputs", path)
    assert code == 3
    assert f"error[CD335]: --inputs {path} is not UTF-8 text (byte 0)" in err


def test_input_depth_at_the_limit_is_accepted() -> None:
    args = argparse.Namespace(inputs=None, input=["x=" + deep(MAX_INPUT_DEPTH)])
    assert isinstance(parse_inputs(args)["x"], list)


@pytest.mark.parametrize("text", ["Infinity", "-Infinity", "NaN"])
def test_non_standard_json_constants_stay_text(text: str) -> None:
    args = argparse.Namespace(inputs=None, input=[f"market={text}"])
    assert parse_inputs(args) == {"market": text}


def test_a_lone_surrogate_in_an_inputs_file_is_a_usage_error_naming_where(tmp_path: Path) -> None:
    path = tmp_path / "inputs.json"
    path.write_text('{"market": {"name": "Lyon\\ud800"}}')
    code, out, err = cli("run", PIPELINE, "--inputs", path)
    assert (code, out) == (3, "")
    assert (
        f"error[CD335]: --inputs {path} is not JSON: the text at /market/name holds a lone "
        "surrogate (U+D800), which is not Unicode text"
    ) in err


def test_input_text_the_shell_passed_undecoded_is_a_usage_error() -> None:
    # A byte that is not UTF-8 on the command line reaches Python as a lone surrogate.
    code, out, err = cli("run", PIPELINE, "--input", "market=Lyon\udcff")
    assert (code, out) == (3, "")
    assert "error[CD338]: --input market: the text holds a lone surrogate (U+DCFF)" in err
    assert "hint: give the value as UTF-8 text" in err


def test_a_valid_surrogate_pair_is_text() -> None:
    args = argparse.Namespace(inputs=None, input=['market="\\ud83d\\ude00"'])
    assert parse_inputs(args) == {"market": "\U0001f600"}


# --- output paths checked before any work --------------------------------------------------


def test_checkpoint_on_an_existing_file_fails_before_the_run(tmp_path: Path) -> None:
    path = tmp_path / "afile"
    path.write_text("keep\n")
    code, out, err = cli("run", PIPELINE, "--checkpoint", path)
    assert code == 3
    assert f"error[CD336]: --checkpoint '{path}' is a file, not a folder" in err
    assert "cycle 1" not in err
    assert out == ""
    assert path.read_text() == "keep\n"


def test_checkpoint_under_a_file_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    code, _, err = cli("run", PIPELINE, "--checkpoint", tmp_path / "afile" / "ck")
    assert code == 3
    assert "error[CD336]: cannot create --checkpoint folder" in err


@pytest.mark.parametrize("option", ["--trace", "--record"])
def test_trace_or_record_to_a_folder_fails_before_the_run(tmp_path: Path, option: str) -> None:
    code, out, err = cli("run", PIPELINE, option, tmp_path)
    assert code == 3
    assert f"({option}): Is a directory" in err
    assert "cycle 1" not in err
    assert out == ""


@pytest.mark.parametrize("option", ["--trace", "--record"])
def test_trace_or_record_under_a_file_fails_before_the_run(tmp_path: Path, option: str) -> None:
    (tmp_path / "afile").write_text("")
    code, _, err = cli("run", PIPELINE, option, tmp_path / "afile" / "out.jsonl")
    assert code == 3
    assert f"cannot write {'trace file' if option == '--trace' else 'cassette'} '" in err
    assert str(tmp_path / "afile" / "out.jsonl") in err


class _FillingDisk(io.StringIO):
    """A trace stream with room for `lines` lines; then the disk is full."""

    def __init__(self, lines: int) -> None:
        super().__init__()
        self.room = lines
        self.kept: list[str] = []

    def write(self, text: str) -> int:
        if self.room == 0:
            raise OSError(28, "No space left on device")
        self.room -= 1
        self.kept.append(text)
        return len(text)


def test_trace_write_failure_mid_run_stops_with_exit_1_keeping_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = _FillingDisk(lines=16)  # the disk fills during cycle 2
    monkeypatch.setattr(trace_module, "open_output", lambda *_, **__: stream)
    folder = tmp_path / "ck"
    code, _, err = cli("run", PIPELINE, "--trace", tmp_path / "t.jsonl", "--checkpoint", folder)
    assert code == 1
    assert f"error[CD361]: cannot write trace file '{tmp_path / 't.jsonl'}': No space left" in err
    assert "Traceback" not in err
    assert len(stream.kept) == 16
    assert all(json.loads(line) for line in stream.kept)
    saved = json.loads((folder / CHECKPOINT_FILE).read_text().splitlines()[-1])["record"]
    finished = [json.loads(x) for x in stream.kept if '"cycle_finished"' in x]
    assert saved["cycle"] == finished[-1]["cycle"] >= 1
    monkeypatch.undo()
    code, _, err = cli("run", PIPELINE, "--resume", folder)
    assert code == 0, err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_trace_to_a_device_that_fails_names_it() -> None:
    # A device is written as it is, as every output of the command line is
    # (`cli._output.output_stream`); one whose writes fail (a full disk) is named.
    code, _, err = cli("run", PIPELINE, "--trace", "/dev/full")
    assert code == 1
    assert err.startswith("error[CD361]: cannot write --trace '/dev/full': No space left")


# --- files read back: checkpoints, cassettes ---------------------------------------------


def test_resume_from_a_non_utf8_checkpoint_is_refused(tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT_FILE).write_bytes(GARBAGE)
    code, _, err = cli("run", PIPELINE, "--resume", tmp_path)
    assert code == 3
    assert f"checkpoint '{tmp_path / CHECKPOINT_FILE}' is torn or corrupt" in err


@pytest.mark.parametrize("option", ["--replay", "--model"])
def test_non_utf8_cassette_is_a_usage_error_naming_the_option(tmp_path: Path, option: str) -> None:
    path = tmp_path / "garbage.jsonl"
    path.write_bytes(GARBAGE)
    value = str(path) if option == "--replay" else f"default={path}"
    code, _, err = cli("run", PIPELINE, option, value)
    assert code == 3
    # the cassette's own code travels with its text (`ConvergeError.cited`)
    assert (
        f"error[CD335]: {option} {value}: [E_CONFIG] cassette garbage.jsonl is not UTF-8 text"
        in err
    )
    assert "--record CASSETTE" in err


@pytest.mark.parametrize("line", [deep(100_000), '{"key": 1}', "[1, 2]"])
def test_cassette_lines_that_are_not_recordings_are_usage_errors(tmp_path: Path, line: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    code, _, err = cli("run", PIPELINE, "--replay", path)
    assert code == 3
    assert "bad.jsonl line 1" in err


@pytest.mark.parametrize("option", ["--replay", "--model"])
def test_missing_cassette_is_exit_3_for_both_options(tmp_path: Path, option: str) -> None:
    path = tmp_path / "none.jsonl"
    value = str(path) if option == "--replay" else f"default={path}"
    code, _, err = cli("run", PIPELINE, option, value)
    assert code == 3
    assert f"no cassette file '{path}'" in err
    assert "hint: record one with `converge-dsl run PIPELINE --record CASSETTE`" in err


def test_model_option_takes_a_cassette_not_an_adapter() -> None:
    code, out, _ = cli("run", "--help")  # --help is written to the command's stdout
    assert code == 0
    assert "NAME=CASSETTE" in out
    assert "ADAPTER" not in out
    code, _, err = cli("run", PIPELINE, "--model", "default=openai")
    assert code == 3
    assert "error[CD334]: --model default=openai: no cassette file 'openai'" in err


def test_model_option_replays_a_cassette_recorded_with_record(tmp_path: Path) -> None:
    cassette = tmp_path / "run.jsonl"
    code, recorded, _ = cli("run", PIPELINE, "--record", cassette, "--format", "json")
    assert code == 0
    code, replayed, _ = cli("run", PIPELINE, "--model", f"default={cassette}", "--format", "json")
    assert code == 0
    facts: dict[str, Any] = json.loads(replayed)["facts"]
    assert facts == json.loads(recorded)["facts"]


# --- model scripts -------------------------------------------------------------------------


def test_a_backtracking_regex_in_a_model_script_is_refused_at_load(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\n"
        'rules:\n  - match: {regex: "(a*)\\\\1*b"}\n    reply: hi\n'
    )
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        textwrap.dedent(
            """\
            apiVersion: converge-dsl/v1
            kind: Pipeline
            name: p
            budget: {max_wall_s: 15}
            models: {default: {adapter: scripted, script: s.yaml}}
            seeds: [{id: s, content: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"}]
            suggestors:
              - name: l
                kind: llm
                model: default
                dependencies: [seeds]
                target: competitors
                prompt: {user: "{{ facts.seeds[0].content }}"}
                output: {format: text, id: x}
            """
        )
    )
    code, _, err = cli("run", pipeline)
    assert code == 2
    assert "error[CD703]: match.regex: the regex '(a*)\\\\1*b' cannot run in linear time" in err
    assert "s.yaml:4:" in err


def test_resume_from_a_file_names_the_resume_option(tmp_path: Path) -> None:
    path = tmp_path / "afile"
    path.write_text("")
    code, _, err = cli("run", PIPELINE, "--resume", path)
    assert code == 3
    assert f"error[CD334]: --resume '{path}' is a file, not a folder" in err
