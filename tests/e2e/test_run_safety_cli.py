"""`run` guards: outputs never overwrite inputs, one run per checkpoint, no raw controls."""

from __future__ import annotations

import io
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.runtime._checkpoint import folder_lock

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def market(tmp_path: Path) -> Path:
    for name in ("market-entry.yaml", "market-entry.script.yaml"):
        shutil.copy(PIPELINES / name, tmp_path / name)
    return tmp_path / "market-entry.yaml"


@pytest.mark.parametrize(
    ("option", "target", "what"),
    [
        ("--record", "market-entry.yaml", "is the pipeline"),
        ("--trace", "market-entry.yaml", "is the pipeline"),
        ("--trace", "market-entry.script.yaml", "is the script of model"),
        ("--record", "./market-entry.script.yaml", "is the script of model"),
    ],
)
def test_outputs_may_not_name_a_file_the_run_reads(
    market: Path, option: str, target: str, what: str
) -> None:
    before = {p.name: p.read_bytes() for p in market.parent.iterdir()}
    code, out, err = cli("run", market, option, market.parent / target)
    assert code == 3, err
    assert what in err
    assert out == ""
    assert {p.name: p.read_bytes() for p in market.parent.iterdir()} == before


def test_trace_and_record_may_not_share_a_file(market: Path) -> None:
    same = market.parent / "same.jsonl"
    code, _, err = cli("run", market, "--trace", same, "--record", same)
    assert code == 3
    assert "--trace and --record name the same file" in err
    assert not same.exists()


def test_trace_may_not_overwrite_the_replayed_cassette(market: Path) -> None:
    cassette = market.parent / "c.jsonl"
    assert cli("run", market, "--record", cassette)[0] == 0
    code, _, err = cli("run", market, "--replay", cassette, "--trace", cassette)
    assert (code, "is the --replay cassette" in err) == (3, True)


def test_record_overwrites_only_a_cassette_and_trace_starts_afresh(market: Path) -> None:
    trace, cassette = market.parent / "t.jsonl", market.parent / "c.jsonl"
    assert cli("run", market, "--trace", trace, "--record", cassette)[0] == 0
    once = cassette.read_text()
    argv = ("run", market, "--trace", trace, "--record", cassette, "--overwrite")
    assert cli(*argv)[0] == 0
    assert trace.read_text().count('"run_started"') == 1
    assert all("key" in json.loads(line) for line in cassette.read_text().splitlines())
    assert cassette.read_text().count("\n") == once.count("\n")  # afresh, not appended
    code, _, err = cli("run", market, "--record", trace)
    assert code == 3
    assert "is not a cassette" in err


GATED = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
promotion: {gated_keys: [strategies]}
seeds: [{id: a, content: x}]
suggestors:
  - name: plan
    kind: rule
    when: "true"
    emit:
      - {key: strategies, id: s1, content: "go big"}
      - {key: strategies, id: s2, content: "go small"}
"""


@pytest.fixture
def paused(tmp_path: Path) -> tuple[Path, Path]:
    pipeline = tmp_path / "g.yaml"
    pipeline.write_text(GATED, encoding="utf-8")
    folder = tmp_path / "ck"
    assert cli("run", pipeline, "--checkpoint", folder)[0] == 6
    return pipeline, folder


@pytest.mark.parametrize(
    ("decisions", "extra"),
    [('{"s1": false}', ["--approve", "s1"]), ('{"s1": true, "s1": false}', [])],
)
def test_conflicting_decisions_are_a_usage_error(
    paused: tuple[Path, Path], decisions: str, extra: list[str]
) -> None:
    pipeline, folder = paused
    file = folder.parent / "dec.json"
    file.write_text(decisions, encoding="utf-8")
    code, _, err = cli("run", pipeline, "--resume", folder, "--decisions", file, *extra)
    assert code == 3
    assert "'s1'" in err


def test_held_decisions_are_listed(paused: tuple[Path, Path]) -> None:
    pipeline, folder = paused
    code, out, _ = cli("run", pipeline, "--resume", folder, "--approve", "s1")
    assert code == 6
    assert "held until every pending proposal is decided (1)\n  - s1: approved" in out
    code, out, _ = cli("run", pipeline, "--resume", folder, "--format", "json")
    doc = json.loads(out)
    assert (code, doc["held"], [p["id"] for p in doc["pending"]]) == (6, {"s1": True}, ["s2"])


def test_a_checkpoint_in_use_is_refused(paused: tuple[Path, Path]) -> None:
    pipeline, folder = paused
    with folder_lock(folder, "--resume"):
        code, _, err = cli("run", pipeline, "--resume", folder, "--approve", "s1", "s2")
        assert code == 3
        assert "is in use by another run" in err
        code, _, err = cli("run", pipeline, "--checkpoint", folder)
        assert code == 3
    assert cli("run", pipeline, "--resume", folder, "--approve", "s1", "s2")[0] == 0


def test_human_output_escapes_terminal_controls(tmp_path: Path) -> None:
    pipeline = tmp_path / "e.yaml"
    pipeline.write_text(
        textwrap.dedent(
            """\
            apiVersion: converge-dsl/v1
            kind: Pipeline
            name: e
            seeds:
              - {id: a, content: "\\e[31mRED\\e[0m \\e]0;pwned\\a \\u202eevil \\0 end"}
            """
        ),
        encoding="utf-8",
    )
    code, out, err = cli("run", pipeline)
    assert code == 0, err
    assert "\\x1b[31mRED\\x1b[0m \\x1b]0;pwned\\x07 \\u202eevil \\x00 end" in out
    assert not any(c in out for c in "\x1b\x07\x00\u202e")
    code, out, _ = cli("run", pipeline, "--format", "json")
    assert json.loads(out)["facts"]["seeds"][0]["content"].startswith("\x1b[31mRED")
