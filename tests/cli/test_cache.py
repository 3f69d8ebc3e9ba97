"""`converge-dsl cache stats|ls|show|prune|clear`, in text and JSON."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

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
    assert (code, json.loads(out)) == (0, {"removed": 3})


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
    assert err.startswith("error: answer cache [CD977]: no entry has a key starting 'ffff'")


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
