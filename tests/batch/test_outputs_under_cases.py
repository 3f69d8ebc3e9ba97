"""Every output of `run` under `--cases`: written per case as the docs say, or refused by name.

`--report R.html`: one batch page linking `R/<index>.html`, a report per case;
`--trace DIR`: `DIR/<index>.jsonl`, a trace per case; `--otel`: one exported
trace per case; `--checkpoint`: refused with its reason (`--record DIR`, one
cassette per case: tests/batch/test_cassettes.py).
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from converge_dsl.cli import run as cli
from converge_dsl.runtime._report_html import MARK

from .conftest import ECHO, read_results, write_cases

WORDS = ["a", "b", "c"]


def batch(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    cases = write_cases(tmp_path / "cases.jsonl", [{"id": f"w{w}", "word": w} for w in WORDS])
    out, err = io.StringIO(), io.StringIO()
    argv = ["run", str(ECHO), "--cases", str(cases), "--out", str(tmp_path / "r.jsonl"), *args]
    code = cli(argv, out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("executor", ["local", "process"])
def test_report_is_one_batch_page_linking_a_report_per_case(tmp_path: Path, executor: str) -> None:
    page = tmp_path / "R.html"
    code, _, err = batch(tmp_path, "--report", str(page), "--executor", executor)
    assert code == 0, err
    text = page.read_text(encoding="utf-8")
    assert text.startswith(MARK)
    for index, word in enumerate(WORDS):
        assert (
            f'<a href="R/{index}.html">{index}</a></td><td><div class="id">w{word}</div></td>'
            in text
        )
        own = (tmp_path / "R" / f"{index}.html").read_text(encoding="utf-8")
        assert own.startswith(MARK)
        assert f"Say {word}" not in own  # prompts never reach a report
        assert "answer" in own  # the case's suggestors are in its own report
    assert text.count("<td>converged</td>") == len(WORDS)
    assert len(read_results(tmp_path / "r.jsonl")) == len(WORDS)


def test_the_batch_pages_links_and_ids_hold_for_any_name(tmp_path: Path) -> None:
    # A page named `r#x 1.html` linked `r#x 1/0.html`: the browser read `#x 1/0.html`
    # as a fragment. A case id with a right-to-left override reversed its row.
    cases = write_cases(tmp_path / "cases.jsonl", [{"id": "w\u202ea", "word": "a"}])
    page = tmp_path / "r#x 1.html"
    argv = ["run", str(ECHO), "--cases", str(cases), "--out", str(tmp_path / "r.jsonl")]
    assert cli([*argv, "--report", str(page)], io.StringIO(), io.StringIO()) == 0
    text = page.read_text(encoding="utf-8")
    assert (
        '<a href="r%23x%201/0.html">0</a></td><td><div class="id">w\u27e8U+202E\u27e9a</div></td>'
        in text
    )
    assert (tmp_path / "r#x 1" / "0.html").is_file()
    # a name that is not UTF-8: its bytes in the address (it was a traceback, no page)
    odd = Path(os.fsdecode(bytes(tmp_path / "r") + b"\xe9.html"))
    argv[-1] = str(tmp_path / "again.jsonl")
    assert cli([*argv, "--report", str(odd)], io.StringIO(), io.StringIO()) == 0
    text = odd.read_text(encoding="utf-8")
    assert '<a href="r%E9/0.html">0</a>' in text
    assert "each case's report is in r\ufffd/" in text


def test_report_and_trace_together_share_each_case_trace(tmp_path: Path) -> None:
    code, _, err = batch(
        tmp_path, "--report", str(tmp_path / "R.html"), "--trace", str(tmp_path / "traces")
    )
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "R").iterdir()) == ["0.html", "1.html", "2.html"]
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == [
        "0.jsonl",
        "1.jsonl",
        "2.jsonl",
    ]


@pytest.mark.parametrize("executor", ["local", "process"])
def test_trace_is_a_folder_with_one_trace_per_case(tmp_path: Path, executor: str) -> None:
    folder = tmp_path / "traces"
    code, _, err = batch(tmp_path, "--trace", str(folder), "--executor", executor)
    assert code == 0, err
    for index, word in enumerate(WORDS):
        lines = [json.loads(x) for x in (folder / f"{index}.jsonl").read_text().splitlines()]
        assert [line["seq"] for line in lines] == list(range(len(lines)))
        assert lines[0]["type"] == "run_started"
        assert lines[-1]["type"] == "run_finished"
        promoted = [line for line in lines if line["type"] == "fact_promoted"]
        assert f"answered {word}" in json.dumps(promoted)


def test_trace_refuses_a_file_where_its_folder_should_be(tmp_path: Path) -> None:
    taken = tmp_path / "t.jsonl"
    taken.write_text("notes\n")
    code, _, err = batch(tmp_path, "--trace", str(taken))
    assert code == 3
    assert "--trace" in err
    assert "writes one file per case into a folder" in err
    assert taken.read_text() == "notes\n"


@pytest.mark.parametrize(
    ("option", "reason"),
    [
        ("--out", "--out and --report name the same file"),
        ("--cases", "--report 'SAME' is the --cases file"),
    ],
)
def test_report_may_not_be_another_file_of_the_batch(
    tmp_path: Path, option: str, reason: str
) -> None:
    target = tmp_path / ("r.jsonl" if option == "--out" else "cases.jsonl")
    code, _, err = batch(tmp_path, "--report", str(target))
    assert code == 3
    assert reason.replace("SAME", str(target)) in err


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        (["--record", "c", "--replay", "c"], "--record and --replay cannot be combined"),
        (["--overwrite"], "--overwrite only applies to --record"),
        (["--checkpoint", "ck"], "--checkpoint saves one run to continue it"),
        (["--otel-content"], "--otel-content needs --otel"),
    ],
)
def test_outputs_a_batch_cannot_take_are_refused_by_name(
    tmp_path: Path, extra: list[str], reason: str
) -> None:
    code, out, err = batch(tmp_path, *extra)
    assert code == 3
    assert reason in err
    assert "hint:" in err
    assert not (tmp_path / "r.jsonl").exists()
    assert out == ""


@pytest.fixture
def receiver() -> Iterator[object]:
    pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (the otel extra)")
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "e2e"))
    try:
        from test_otel_cli import _Receiver
    finally:
        sys.path.pop(0)
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_otel_exports_one_trace_per_case(
    tmp_path: Path, receiver: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "environ", {**os.environ})
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)  # type: ignore[attr-defined]
    code, _, err = batch(tmp_path, "--otel")
    assert code == 0, err
    spans = receiver.spans  # type: ignore[attr-defined]
    roots = [span for span in spans if not span.get("parentSpanId")]
    assert len(roots) == len(WORDS)
    assert len({span["traceId"] for span in roots}) == len(WORDS)
    assert len({span["traceId"] for span in spans}) == len(WORDS)
