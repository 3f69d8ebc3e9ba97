"""`converge-dsl cache stats|ls|show|prune|clear`, in text and JSON."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.models.answer_store import STORE_FILE, CacheRow, SqliteAnswerStore

ROOT = Path(__file__).resolve().parents[2]


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def fill(folder: Path) -> None:
    store = SqliteAnswerStore(folder)
    for number, suggestor in enumerate(("ask-a", "ask-b", "ask-a")):
        store.put(
            CacheRow(
                key=f"{number:x}" * 64,
                kind="model",
                identity='{"model":"m"}',
                suggestor=suggestor,
                request='{"messages":[]}',
                value=f'{{"message":{{"role":"assistant","parts":[]}},"n":{number}}}',
                created=float(number),
                duration_s=0.25,
                last_used=float(number),
            )
        )
    store.close()


def test_stats_ls_show_prune_clear(tmp_path: Path) -> None:
    fill(tmp_path)
    code, out, _ = cli("cache", "stats", "--cache-dir", tmp_path, "--format", "json")
    assert code == 0
    stats = json.loads(out)
    assert stats["entries"] == 3
    assert stats["location"] == str(tmp_path / STORE_FILE)

    code, out, _ = cli("cache", "ls", "--cache-dir", tmp_path, "--suggestor", "ask-a")
    assert code == 0
    assert out.splitlines()[0].startswith("2222222222222222  model  ask-a")
    assert len(out.splitlines()) == 2

    code, out, _ = cli("cache", "show", "1111", "--cache-dir", tmp_path, "--format", "json")
    assert code == 0
    shown = json.loads(out)
    assert shown["suggestor"] == "ask-b"
    assert shown["answer"]["n"] == 1
    assert shown["problem"] is None

    code, out, _ = cli("cache", "prune", "--max-bytes", "0", "--cache-dir", tmp_path)
    assert (code, out) == (0, "removed 3 entries\n")
    fill(tmp_path)
    code, out, _ = cli("cache", "clear", "--cache-dir", tmp_path, "--format", "json")
    assert (code, json.loads(out)) == (0, {"removed": 3, "pause_removed": False})


def test_show_says_when_an_entry_fails_its_check(tmp_path: Path) -> None:
    fill(tmp_path)
    with sqlite3.connect(tmp_path / STORE_FILE) as db:
        db.execute("UPDATE answers SET value = 'x' WHERE suggestor = 'ask-b'")
    code, out, _ = cli("cache", "show", "1111", "--cache-dir", tmp_path)
    assert code == 0
    assert "check: its digest does not match its content" in out
    code, out, _ = cli("cache", "ls", "--cache-dir", tmp_path)
    assert "(fails its check)" in out


def test_an_unknown_key_is_cd977(tmp_path: Path) -> None:
    fill(tmp_path)
    code, _, err = cli("cache", "show", "ffff", "--cache-dir", tmp_path)
    assert code == 3
    assert err.startswith("error[CD977]: answer cache: no entry has a key starting 'ffff'")


def test_a_batch_takes_the_cache_flags(tmp_path: Path) -> None:
    """The flags reach the batch (tests/batch/test_batch_cache.py runs them against a server):
    scripted models are never cached, so the cache is opened and stays empty."""
    cases = tmp_path / "cases.jsonl"
    cases.write_text("{}\n", encoding="utf-8")
    code, _, err = cli(
        "run",
        ROOT / "pipelines" / "market-entry.yaml",
        "--cases",
        cases,
        "--out",
        tmp_path / "o",
        "--cache",
        "--cache-dir",
        tmp_path / "answers",
        "--explain-cache",
    )
    assert code == 0, err
    assert "answer cache: 0 call(s) in 1 case(s): 0 hit(s), 0 miss(es)" in err
    assert (tmp_path / "answers" / "answers.sqlite3").exists()


def _damage(folder: Path, how: str) -> None:
    path = folder / STORE_FILE
    if how == "no database":
        path.write_bytes(b"not a database at all" * 100)
    elif how == "cut short":
        fill(folder)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:  # a file of another version: its table has other columns
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE answers (key TEXT, answer TEXT)")


@pytest.mark.parametrize("how", ["no database", "cut short", "another version"])
def test_a_damaged_cache_names_the_clear_that_removes_it_and_clear_does(
    tmp_path: Path, how: str
) -> None:
    # The hint said to give a writable folder, and `cache clear` failed as every
    # action did, with the same CD975: nothing the tool offered could mend the cache.
    folder = tmp_path / "answers"
    folder.mkdir()
    _damage(folder, how)
    code, _, err = cli("cache", "stats", "--cache-dir", folder)
    assert code == 3
    assert err.startswith(f"error[CD975]: answer cache: cannot open {str(folder / STORE_FILE)!r}")
    assert f"hint: `converge-dsl cache clear --cache-dir {folder}` removes it" in err
    code, out, err = cli("cache", "clear", "--cache-dir", folder, "--format", "json")
    assert code == 0, err
    assert json.loads(out) == {
        "removed": 0,
        "files": [str(folder / STORE_FILE)],
        "pause_removed": False,
    }
    assert cli("cache", "stats", "--cache-dir", folder)[1].startswith("0 entries")


def test_a_run_whose_cache_cannot_be_opened_stops_with_error_not_usage_error(
    tmp_path: Path,
) -> None:
    # The run result said `usage_error` (any exit-3 error did): a store that cannot be
    # opened is no misuse of the command line, but a store that cannot be used.
    folder = tmp_path / "answers"
    folder.mkdir()
    _damage(folder, "no database")
    pipeline = ROOT / "tests" / "data" / "docs" / "pipeline.yaml"
    trace = tmp_path / "trace.jsonl"
    argv = ("run", pipeline, "--cache", "--cache-dir", folder, "--trace", trace)
    code, out, err = cli(*argv, "--format", "json")
    assert code == 3, err  # CD975's exit code (docs/errors.md)
    result = json.loads(out)
    assert result["stop_reason"] == "error"
    assert [d["code"] for d in result["diagnostics"]] == ["CD975"]
    assert not trace.exists()  # the run never started: no trace, as for an invalid pipeline


def test_a_cache_folder_that_is_a_file_is_named_so(tmp_path: Path) -> None:
    (tmp_path / "answers").write_text("a file")
    code, _, err = cli("cache", "clear", "--cache-dir", tmp_path / "answers")
    assert code == 3
    assert f"{str(tmp_path / 'answers')!r} is a file, not a folder" in err
    assert "hint: give --cache-dir a folder, or move the file away" in err
    assert (tmp_path / "answers").read_text() == "a file"


def test_looking_into_a_cache_folder_that_is_not_there_creates_nothing(tmp_path: Path) -> None:
    # `cache stats --cache-dir TYPO` made the folder and an empty database, and said
    # "0 entries" as if the cache were there.
    folder = tmp_path / "typo" / "answers"
    code, out, _ = cli("cache", "stats", "--cache-dir", folder)
    assert (code, out) == (
        0,
        f"0 entries, 0 of 268,435,456 bytes\nin {folder / STORE_FILE} (not there: nothing "
        "cached yet)\n",
    )
    for action in ("ls", "prune", "clear"):
        assert cli("cache", action, "--cache-dir", folder)[0] == 0
    code, _, err = cli("cache", "show", "ab", "--cache-dir", folder)
    assert code == 3
    assert "[CD977]" in err
    code, out, _ = cli("cache", "stats", "--cache-dir", folder, "--format", "json")
    assert json.loads(out)["location"] == str(folder / STORE_FILE)
    assert not (tmp_path / "typo").exists()


def test_an_empty_key_is_refused(tmp_path: Path) -> None:
    # It was a prefix of every key: with one entry in the cache, `show ''` showed it.
    store = SqliteAnswerStore(tmp_path)
    store.put(
        CacheRow("ab" * 32, "model", "{}", "ask", "{}", "{}", 0.0, 0.1, 0.0)  # one entry
    )
    store.close()
    for key in ("", "  "):
        code, out, err = cli("cache", "show", key, "--cache-dir", tmp_path)
        assert (code, out) == (3, "")
        assert err.startswith("error[CD977]: answer cache: KEY is empty")


def test_a_listed_entry_shows_control_characters_escaped(tmp_path: Path) -> None:
    # The cache's rows are what runs stored: a suggestor named with an escape sequence
    # recoloured the terminal that listed it.
    store = SqliteAnswerStore(tmp_path)
    store.put(
        CacheRow(
            key="a" * 64,
            kind="model",
            identity='{"model":"m"}',
            suggestor="ask\x1b[31m\u202e",
            request='{"messages":[]}',
            value='{"message":{"role":"assistant","parts":[]}}',
            created=0.0,
            duration_s=0.25,
            last_used=0.0,
        )
    )
    store.close()
    code, out, _ = cli("cache", "ls", "--cache-dir", tmp_path)
    assert code == 0
    assert "ask\\x1b[31m\\u202e" in out
    assert "\x1b" not in out


def test_stats_shows_a_pause_of_storing_and_prune_and_clear_remove_it(tmp_path: Path) -> None:
    # The pause file stopped every later process's storing; stats did not show it and
    # clear left it, so nothing the user could see or do lifted it.
    import time

    from converge_dsl.models.caching import PAUSE_FILE

    fill(tmp_path)
    file = tmp_path / PAUSE_FILE
    for action in ("prune", "clear"):
        pause = {"until": time.time() + 30.0, "pid": 4242, "why": "CD975: disk full"}
        file.write_text(json.dumps(pause))
        code, out, _ = cli("cache", "stats", "--cache-dir", tmp_path)
        assert code == 0
        assert "no answer is stored until" in out
        assert "process 4242" in out
        assert "(CD975: disk full)" in out
        assert f"`rm -- {file}`" in out
        code, out, _ = cli("cache", "stats", "--cache-dir", tmp_path, "--format", "json")
        paused = json.loads(out)["paused"]
        assert (paused["pid"], paused["honoured"], paused["file"]) == (4242, True, str(file))
        code, out, _ = cli("cache", action, "--cache-dir", tmp_path)
        assert (code, out.splitlines()[-1]) == (0, "removed the pause of storing")
        assert not file.exists()
        code, out, _ = cli("cache", "stats", "--cache-dir", tmp_path, "--format", "json")
        assert json.loads(out)["paused"] is None
