"""One cassette per case: `run --cases --record DIR` and `--replay DIR` (`batch._cassettes`)."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.batch import cassette_name
from converge_dsl.cli import run as cli

from .conftest import DATA, expected, read_results, write_cases


def _echo(tmp_path: Path) -> Path:
    """The echo pipeline copied into `tmp_path` (its script may change there); the folder."""
    for name in ("echo.yaml", "echo.script.yaml"):
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path


def _batch(folder: Path, cases: Path, out: str, *args: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["run", str(folder / "echo.yaml"), "--cases", str(cases), "--out", out, *args]
    code = cli(argv, stdout, stderr)
    return code, stdout.getvalue(), stderr.getvalue()


CASES = [
    {"id": "a/b", "word": "one"},
    {"id": "..", "word": "two"},
    {"word": "three"},
    {"id": 7, "word": "four"},
    {"id": "../../escape", "word": "five"},
]


def test_a_cassette_is_named_by_the_id_and_no_id_names_a_path_elsewhere() -> None:
    assert cassette_name("ticket-1", 0) == "ticket-1.jsonl"
    assert cassette_name(None, 3) == "3.jsonl"
    assert cassette_name(7, 0) == "7.jsonl"
    assert cassette_name("a/b", 0) == "a%2Fb.jsonl"
    assert cassette_name("a%2Fb", 0) == "a%252Fb.jsonl"  # `%` too: two ids, two names
    assert cassette_name("..", 0) == "%2E..jsonl"
    assert cassette_name(".hidden", 0) == "%2Ehidden.jsonl"
    assert cassette_name("", 0) == "%.jsonl"
    assert cassette_name("C:\\x", 0) == "C%3A%5Cx.jsonl"
    long = cassette_name("x" * 300, 0)
    assert len(long) < 110
    assert long != cassette_name("x" * 299 + "y", 0)
    for case_id in ("a/b", "..", "../../escape", "/etc/passwd", "x" * 300, "\x00"):
        name = cassette_name(case_id, 0)
        assert "/" not in name
        assert "\x00" not in name
        assert not name.startswith(".")


@pytest.mark.parametrize(("recorder", "replayer"), [("local", "process"), ("process", "local")])
def test_a_batch_recorded_per_case_replays_the_same_lines_on_any_executor(
    tmp_path: Path, recorder: str, replayer: str
) -> None:
    folder = _echo(tmp_path)
    cases = write_cases(tmp_path / "cases.jsonl", CASES)
    tapes = tmp_path / "tapes"
    code, _, err = _batch(
        folder, cases, str(tmp_path / "a.jsonl"), "--record", str(tapes), "--executor", recorder
    )
    assert code == 0, err
    assert sorted(p.name for p in tapes.iterdir()) == [
        "%2E.%2F..%2Fescape.jsonl",
        "%2E..jsonl",
        "2.jsonl",
        "7.jsonl",
        "a%2Fb.jsonl",
    ]
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".jsonl") == [
        "a.jsonl",
        "cases.jsonl",
    ]  # nothing recorded outside the folder
    # The model now says otherwise: only the cassettes give the recorded answers.
    (folder / "echo.script.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\ndefault: {reply: changed}\n"
    )
    code, _, err = _batch(
        folder, cases, str(tmp_path / "b.jsonl"), "--replay", str(tapes), "--executor", replayer
    )
    assert code == 0, err
    recorded, replayed = read_results(tmp_path / "a.jsonl"), read_results(tmp_path / "b.jsonl")
    assert replayed == recorded
    assert {line["facts"]["hypotheses"][0]["content"] for line in replayed} == {"said it"}


def test_two_cases_that_would_share_a_cassette_are_refused_before_any_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _echo(tmp_path)
    write_cases(
        tmp_path / "cases.jsonl",
        [{"id": "x", "word": "a"}, {"id": "X", "word": "b"}, {"word": "c"}, {"id": 2, "word": "d"}],
    )
    code, _, err = _batch(tmp_path, Path("cases.jsonl"), "r.jsonl", "--record", "tapes")
    assert code == 2
    assert f"error[{codes.CASE_CASSETTE_CLASH}]" in err
    assert err == expected("cassette-clash.txt", err)
    assert not (tmp_path / "tapes").exists()
    assert not (tmp_path / "r.jsonl").exists()


def test_a_case_missing_from_the_replay_folder_is_a_located_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _echo(tmp_path)
    write_cases(tmp_path / "cases.jsonl", CASES)
    assert _batch(tmp_path, Path("cases.jsonl"), "a.jsonl", "--record", "tapes")[0] == 0
    (tmp_path / "tapes" / "7.jsonl").unlink()
    code, _, err = _batch(tmp_path, Path("cases.jsonl"), "b.jsonl", "--replay", "tapes")
    assert code == 2
    assert f"error[{codes.CASE_CASSETTE_MISSING}]: case 7 has no cassette" in err
    assert err == expected("cassette-missing.txt", err)
    assert not (tmp_path / "b.jsonl").exists()


def test_recording_onto_a_case_cassette_is_refused_without_overwrite(tmp_path: Path) -> None:
    folder = _echo(tmp_path)
    cases = write_cases(tmp_path / "cases.jsonl", CASES[:2])
    tapes = str(tmp_path / "tapes")
    assert _batch(folder, cases, str(tmp_path / "a.jsonl"), "--record", tapes)[0] == 0
    code, _, err = _batch(folder, cases, str(tmp_path / "a.jsonl"), "--record", tapes)
    assert code == 3
    assert re.search(r"already holds the cassette of case 'a/b' \(a%2Fb.jsonl\)", err)
    assert "hint: add --overwrite" in err
    code, _, err = _batch(
        folder, cases, str(tmp_path / "a.jsonl"), "--record", tapes, "--overwrite"
    )
    assert code == 0, err
    lines = (tmp_path / "tapes" / "a%2Fb.jsonl").read_text().splitlines()
    assert len(lines) == 1  # recorded afresh, not appended


def test_a_cassette_folder_is_quoted_as_every_message_quotes_a_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quote or a line break in the folder's name reads as `_escapes.written` writes it
    (`\\x27`, `\\x0a`), as the case's id does, not as Python's repr."""
    monkeypatch.chdir(tmp_path)
    _echo(tmp_path)
    write_cases(tmp_path / "cases.jsonl", [{"id": "it's", "word": "a"}])
    (tmp_path / "tap'es\n").mkdir()
    code, _, err = _batch(tmp_path, Path("cases.jsonl"), "b.jsonl", "--replay", "tap'es\n")
    assert code == 2
    assert (
        "case 'it\\x27s' has no cassette: --replay holds no file 'tap\\x27es\\x0a/it%27s.jsonl'"
        in err
    )
    code, _, err = _batch(tmp_path, Path("cases.jsonl"), "b.jsonl", "--replay", "no'\tfolder")
    assert code == 3
    assert "--replay: 'no\\x27\\x09folder' is not a folder of cassettes" in err


def test_a_replay_folder_that_is_not_a_folder_is_refused(tmp_path: Path) -> None:
    folder = _echo(tmp_path)
    cases = write_cases(tmp_path / "cases.jsonl", CASES[:1])
    code, _, err = _batch(folder, cases, str(tmp_path / "b.jsonl"), "--replay", str(cases))
    assert code == 3
    assert "is not a folder of cassettes" in err
