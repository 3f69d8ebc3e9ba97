"""Decisions on a paused run come from the user: forged, replayed or moved ones never count."""

from __future__ import annotations

import io
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.engine.types import canonical_json
from converge_dsl.runtime._decisions import DECISIONS_FILE
from converge_dsl.runtime._journal import seal

PIPELINE = """\
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
      - {key: strategies, id: spend-all-money, content: "{{ inputs.what }}"}
      - {key: strategies, id: s2, content: "go small"}
inputs: {what: {default: "spend it all"}}
"""


@pytest.fixture(autouse=True)
def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVERGE_DSL_CONFIG_DIR", str(tmp_path / "config"))


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(PIPELINE), encoding="utf-8")
    return path


def _pause(pipeline: Path, ckpt: Path, *extra: str) -> None:
    code, _, err = cli("run", pipeline, "--checkpoint", ckpt, *extra)
    assert code == 6, err


def _resume(pipeline: Path, ckpt: Path, *extra: str | Path) -> tuple[int, dict[str, object], str]:
    code, out, err = cli("run", pipeline, "--resume", ckpt, "--format", "json", *extra)
    return code, (json.loads(out) if out.strip() else {}), err


def _promoted(doc: dict[str, object]) -> list[str]:
    facts = doc.get("facts") or {}
    assert isinstance(facts, dict)
    return [f["id"] for f in facts.get("strategies", [])]


def _still_paused(pipeline: Path, ckpt: Path) -> None:
    """The checkpoint is unchanged: a plain resume still stops at the same pause."""
    (ckpt / DECISIONS_FILE).unlink(missing_ok=True)
    code, doc, _ = _resume(pipeline, ckpt)
    assert code == 6
    assert [p["id"] for p in doc["pending"]] == ["spend-all-money", "s2"]  # type: ignore[index]


def _refused(code: int, doc: dict[str, object], err: str, ckpt: Path) -> None:
    assert code == 3, err
    assert "[CD932]" in err
    assert str(ckpt / DECISIONS_FILE) in err
    assert "spend-all-money" not in _promoted(doc)
    assert "Traceback" not in err


PLANTED = [
    {"spend-all-money": True, "s2": True},  # the old unsealed format
    {"mac": "0" * 64, "record": {"kind": "decisions"}},
    "not json at all",
]


@pytest.mark.parametrize("planted", PLANTED, ids=["plain", "bad-mac", "garbage"])
def test_a_decisions_file_planted_after_the_pause_is_refused(
    pipeline: Path, tmp_path: Path, planted: object
) -> None:
    ckpt = tmp_path / "ck"
    _pause(pipeline, ckpt)
    text = planted if isinstance(planted, str) else json.dumps(planted)
    (ckpt / DECISIONS_FILE).write_text(text)
    _refused(*_resume(pipeline, ckpt), ckpt)
    _refused(*_resume(pipeline, ckpt, "--approve", "s2"), ckpt)
    _still_paused(pipeline, ckpt)


def test_a_decisions_file_planted_before_the_pause_is_refused(
    pipeline: Path, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ck"
    _pause(pipeline, ckpt)  # an earlier run made the folder a checkpoint folder
    (ckpt / DECISIONS_FILE).write_text(json.dumps({"spend-all-money": True, "s2": True}))
    _pause(pipeline, ckpt)  # a fresh run: what the folder held for the old journal is dropped
    code, doc, _ = _resume(pipeline, ckpt)
    assert code == 6
    assert "spend-all-money" not in _promoted(doc)
    # Planted again, now between the pause and the resume: refused.
    (ckpt / DECISIONS_FILE).write_text(json.dumps({"spend-all-money": True, "s2": True}))
    _refused(*_resume(pipeline, ckpt), ckpt)
    _still_paused(pipeline, ckpt)


def test_a_record_resealed_with_another_key_is_refused(pipeline: Path, tmp_path: Path) -> None:
    """The attacker knows the format, the pause and the digests, but not the user's key."""
    ckpt = tmp_path / "ck"
    _pause(pipeline, ckpt)
    assert _resume(pipeline, ckpt, "--reject", "spend-all-money")[0] == 6
    body = json.loads((ckpt / DECISIONS_FILE).read_text())["record"]
    assert body["decisions"][0]["approve"] is False
    body["decisions"][0]["approve"] = True
    _, line = seal(b"k" * 32, "decisions", canonical_json(body).encode("utf-8"))
    (ckpt / DECISIONS_FILE).write_bytes(line)
    _refused(*_resume(pipeline, ckpt, "--approve", "s2"), ckpt)
    _still_paused(pipeline, ckpt)


def test_a_record_replayed_from_another_run_is_refused(pipeline: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _pause(pipeline, first)
    assert _resume(pipeline, first, "--approve", "spend-all-money")[0] == 6
    _pause(pipeline, second)
    shutil.copy(first / DECISIONS_FILE, second / DECISIONS_FILE)
    _refused(*_resume(pipeline, second, "--approve", "s2"), second)
    _still_paused(pipeline, second)


def test_a_record_for_other_content_is_refused(pipeline: Path, tmp_path: Path) -> None:
    """Same key, same ids, other content: a decision on "x" is not one on "spend it all"."""
    harmless, real = tmp_path / "harmless", tmp_path / "real"
    _pause(pipeline, harmless, "--input", "what=buy a coffee")
    assert _resume(pipeline, harmless, "--approve", "spend-all-money")[0] == 6
    _pause(pipeline, real)
    record = json.loads((harmless / DECISIONS_FILE).read_text())
    # Even bound to the right pause, the digest of other content does not match.
    body = record["record"]
    real_journal = (real / "checkpoint.jsonl").read_bytes().splitlines()
    body["run"] = json.loads(real_journal[-1])["mac"]
    (real / DECISIONS_FILE).write_text(json.dumps(record))
    _refused(*_resume(pipeline, real, "--approve", "s2"), real)
    _still_paused(pipeline, real)


def test_an_earlier_record_of_the_same_folder_is_refused_after_a_new_pause(
    pipeline: Path, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ck"
    _pause(pipeline, ckpt)
    assert _resume(pipeline, ckpt, "--approve", "spend-all-money")[0] == 6
    kept = (ckpt / DECISIONS_FILE).read_bytes()
    (ckpt / DECISIONS_FILE).unlink()
    _pause(pipeline, ckpt)  # a new run in the same folder: a new journal, a new pause
    (ckpt / DECISIONS_FILE).write_bytes(kept)
    _refused(*_resume(pipeline, ckpt, "--approve", "s2"), ckpt)


def test_sealed_decisions_of_this_pause_are_used_and_traced_with_who_gave_them(
    pipeline: Path, tmp_path: Path
) -> None:
    ckpt, trace = tmp_path / "ck", tmp_path / "t.jsonl"
    _pause(pipeline, ckpt)
    assert _resume(pipeline, ckpt, "--approve", "spend-all-money")[0] == 6
    decisions = tmp_path / "mine.json"
    decisions.write_text(json.dumps({"s2": False}))
    code, doc, err = _resume(pipeline, ckpt, "--decisions", decisions, "--trace", trace)
    assert code == 0, err
    assert _promoted(doc) == ["spend-all-money"]
    assert not (ckpt / DECISIONS_FILE).exists()
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    decided = {e["id"]: (e["decision"], e["by"]) for e in lines if e["type"] == "proposal_decided"}
    assert decided == {
        "spend-all-money": ("approved", "cli"),
        "s2": ("rejected", "file:mine.json"),
    }


def test_a_fresh_run_in_the_folder_drops_the_decisions_kept_for_the_old_journal(
    pipeline: Path, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ck"
    _pause(pipeline, ckpt)
    assert _resume(pipeline, ckpt, "--approve", "spend-all-money")[0] == 6
    _pause(pipeline, ckpt)  # a new run: the kept approval belonged to the old pause
    assert not (ckpt / DECISIONS_FILE).exists()
    code, doc, err = _resume(pipeline, ckpt, "--reject", "spend-all-money", "--approve", "s2")
    assert code == 0, err
    assert _promoted(doc) == ["s2"]


def test_a_lone_surrogate_never_reaches_a_pause(pipeline: Path, tmp_path: Path) -> None:
    """Half a surrogate pair (bytes of the command line that are not UTF-8, or a JSON
    escape) is refused where it comes in, before anything is written: no proposal, no
    decision and no trace ever holds text that cannot be written as UTF-8."""
    ckpt = tmp_path / "ck"
    code, out, err = cli("run", pipeline, "--checkpoint", ckpt, "--input", "what=half \ud800")
    assert (code, out) == (3, "")
    assert "error[CD338]: --input what: the text holds a lone surrogate (U+D800)" in err
    assert not ckpt.exists()


def test_decisions_kept_from_a_file_whose_name_is_not_utf_8_are_used(
    pipeline: Path, tmp_path: Path
) -> None:
    """A file name of bytes that are not UTF-8 reads as lone surrogates (`file:NAME`)."""
    ckpt, decisions = tmp_path / "ck", tmp_path / "mine-\udcff.json"
    decisions.write_text(json.dumps({"s2": False}))
    _pause(pipeline, ckpt)
    assert _resume(pipeline, ckpt, "--decisions", decisions)[0] == 6
    code, doc, err = _resume(pipeline, ckpt, "--approve", "spend-all-money")
    assert code == 0, err
    assert _promoted(doc) == ["spend-all-money"]
