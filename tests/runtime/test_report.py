"""`converge-dsl report` and `run --report`: the page's data, and located errors for bad traces."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run
from converge_dsl.errors import UsageError
from converge_dsl.runtime import render_report
from converge_dsl.runtime._report_data import MAX_LINE_BYTES, report_data

ROOT = Path(__file__).resolve().parents[2]


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def agent_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(ROOT)  # spans name `pipelines/...`, as a user at the root types it
    trace = tmp_path / "t.jsonl"
    assert _cli("run", "pipelines/agent-review.yaml", "--trace", str(trace))[0] == 0
    return trace


def test_the_data_of_an_agent_run(agent_trace: Path) -> None:
    data = report_data(agent_trace)
    meta = data["meta"]
    assert (meta["stop_reason"], meta["pipeline"], meta["budget"]["max_cycles"]) == (
        "converged",
        "agent-review",
        100,
    )
    assert data["names"][:1] == ["seeds"]
    reviewer = data["names"].index("reviewer")
    assert [row[0] for row in data["ex"]] == [reviewer]
    start, end = data["ex"][0][2:4]
    assert 0 <= start <= end
    assert len(data["mc"]) == 7
    assert all(call[1] == reviewer and call[10] == 1 for call in data["mc"])
    # what each call was for: the agent's turns 0-5, and one summary call (turn None)
    for_ = [(call[11], call[12]) for call in data["mc"]]
    assert sorted(t for p, t in for_ if p == "turn") == list(range(6))
    assert [t for p, t in for_ if p == "summary"] == [None]
    evaluation = next(f for f in data["facts"] if f[0] == "evaluations")
    assert evaluation[4] == pytest.approx(0.8)
    assert evaluation[5] == "reviewer@agent-review"
    assert data["sum"]
    assert data["comp"]
    assert data["turns"]
    assert data["contrib"]
    source = data["sources"]["reviewer"]
    assert source["file"] == "pipelines/agent-review.yaml"
    assert "kind: agent" in source["text"]
    assert data["usage"][-1][2] == meta["facts"]


def test_a_run_without_facts_is_named_by_its_pipeline_s_file_not_the_trace_s(
    agent_trace: Path, tmp_path: Path
) -> None:
    # Only facts carry the pipeline's name: a run that failed at its first suggestor, was
    # paused before a promotion or is served and still running was titled by the trace's
    # file (`Run report: trace.jsonl` on serve). It is named by its pipeline's file.
    lines = agent_trace.read_text(encoding="utf-8").splitlines()
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        "".join(f"{line}\n" for line in lines if '"fact_promoted"' not in line), encoding="utf-8"
    )
    assert report_data(trace)["meta"]["pipeline"] == "agent-review.yaml"
    assert report_data(agent_trace)["meta"]["pipeline"] == "agent-review"


def _page_with_first_fact(trace: Path, content: str) -> tuple[str, Any]:
    """The report of `trace` with its first fact's content replaced by `content`: the
    page, and the data its JSON element holds."""
    lines = trace.read_text(encoding="utf-8").splitlines()
    event = json.loads(lines[1])
    event["content"] = content
    lines[1] = json.dumps(event)
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = render_report(trace)
    start = page.index('type="application/json">') + len('type="application/json">')
    return page, json.loads(page[start : page.index("</script>", start)])


def test_the_page_is_self_contained_and_its_data_cannot_close_the_script(
    agent_trace: Path, tmp_path: Path
) -> None:
    page, data = _page_with_first_fact(agent_trace, "</script><script>alert(1)</script><!--")
    assert page.count("</script>") == 2  # the data element's and the code's, nothing more
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page
    assert data["facts"][0][2].startswith("</script>")


def test_control_and_bidi_characters_show_as_escapes_never_raw(
    agent_trace: Path, tmp_path: Path
) -> None:
    page, data = _page_with_first_fact(agent_trace, "ok \u202e(at a.yaml:1:2) \x1b[31m")
    assert "\u202e" not in page
    assert "\x1b" not in page
    assert data["facts"][0][2] == "ok \\u202e(at a.yaml:1:2) \\x1b[31m"


def test_an_id_with_a_hidden_character_and_one_with_its_escape_text_show_apart(
    agent_trace: Path,
) -> None:
    # Both showed `r\u202eev`; the facts' contents, messages and sources keep their escapes.
    lines = agent_trace.read_text(encoding="utf-8").splitlines()
    for number, fid in ((1, "r\u202eev"), (2, "r\\u202eev")):
        event = json.loads(lines[number])
        assert event["type"] == "fact_promoted"
        event["id"], event["content"] = fid, "caf\u00e9 \u202e"
        lines[number] = json.dumps(event)
    agent_trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = render_report(agent_trace)
    start = page.index('type="application/json">') + len('type="application/json">')
    data = json.loads(page[start : page.index("</script>", start)])
    assert [f[1] for f in data["facts"][:2]] == ["r\u27e8U+202E\u27e9ev", "r\\u202eev"]
    assert [f[2] for f in data["facts"][:2]] == ["caf\u00e9 \\u202e"] * 2


def test_the_gates_tables_and_the_sources_show_names_as_the_facts_do(
    agent_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each table's key and id columns, the suggestors' names and the sources' names (which
    # the page looks a suggestor's source up by) are written alike: a source whose name
    # was not rewritten was never found, and a rejected or held id showed `\u202e`.
    from converge_dsl.runtime import _report_html

    found = report_data(agent_trace)
    named, shown = "r\u202eev", "r\u27e8U+202E\u27e9ev"
    found["names"][0] = named
    found["sources"] = {named: {"file": "a.yaml", "line": 1, "text": "x"}}
    found["rej"] = [[1, 0, named, named, "too low"]]
    found["hitl"] = [[1, 0, named, named, "gated", "pending"]]
    monkeypatch.setattr(_report_html, "report_data", lambda _trace: found)
    page = render_report(agent_trace)
    start = page.index('type="application/json">') + len('type="application/json">')
    data = json.loads(page[start : page.index("</script>", start)])
    assert data["names"][0] == shown
    assert list(data["sources"]) == [shown]
    assert data["rej"][0][2:4] == [shown, shown]
    assert data["hitl"][0][2:4] == [shown, shown]
    assert data["rej"][0][4] == "too low"


def test_the_page_inlines_the_virtualised_list_the_eval_and_diff_pages_share(
    agent_trace: Path,
) -> None:
    from converge_dsl._page_assets import page_asset

    page = render_report(agent_trace)
    assert page.count(page_asset("vlist.js")) == 1
    assert page.count(page_asset("vlist.css")) == 1
    assert page.count("function VList(") == 1


def test_report_command_writes_beside_the_trace_and_refuses_a_foreign_output(
    agent_trace: Path, tmp_path: Path
) -> None:
    code, out, _ = _cli("report", str(agent_trace))
    assert code == 0
    assert out.startswith(f"wrote {agent_trace.with_suffix('.html')} (")
    again = _cli("report", str(agent_trace), "-o", str(agent_trace.with_suffix(".html")))
    assert again[0] == 0  # our own report may be overwritten
    foreign = tmp_path / "notes.html"
    foreign.write_text("my notes\n", encoding="utf-8")
    code, _, err = _cli("report", str(agent_trace), "-o", str(foreign))
    assert code == 3
    assert "-o" in err
    assert foreign.read_text(encoding="utf-8") == "my notes\n"


def test_run_report_writes_a_page_without_a_trace_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    page = tmp_path / "run.html"
    code, _, err = _cli("run", "pipelines/support-triage.yaml", "--report", str(page))
    assert code == 0
    assert f"report written to {page}" in err
    text = page.read_text(encoding="utf-8")
    assert '"pipeline":"support-triage"' in text


def _bad(tmp_path: Path, text: str | bytes) -> str:
    trace = tmp_path / "bad.jsonl"
    if isinstance(text, str):
        trace.write_text(text, encoding="utf-8")
    else:
        trace.write_bytes(text)
    with pytest.raises(UsageError) as caught:
        report_data(trace)
    return caught.value.message.replace(str(trace), "T")


GOOD = '{"seq":0,"type":"run_started","suggestors":1,"seeds":0}\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD + "{not json\n", "T:2: not a JSON line"),
        (GOOD + "\n[1, 2]\n", "T:3: not a trace event (an object with a `type`)"),
        (GOOD + b"\xff\n".decode("latin-1"), "T:2: not a JSON line"),
        (
            GOOD + '{"type":"fact_promoted","cycle":1}\n',
            "T:2: malformed fact_promoted event (no field 'key')",
        ),
        (
            GOOD + '{"type":"suggestor_finished","suggestor":"r","cycle":"one","proposals":1}\n',
            "T:2: malformed suggestor_finished event (expected a whole number, got 'one')",
        ),
        ("", "T: the trace holds no event"),
    ],
)
def test_a_bad_trace_is_a_located_error(tmp_path: Path, text: str, message: str) -> None:
    assert _bad(tmp_path, text) == message


@pytest.mark.parametrize(
    "cut",
    [
        b'{"seq":1,"type":"cycle_sta',
        '{"seq":1,"type":"fact_promoted","content":"\u00e9'.encode()[:-1],
    ],
)
def test_a_last_line_cut_short_ends_the_trace_and_the_page_says_so(
    tmp_path: Path, cut: bytes
) -> None:
    # A run killed while its trace writer wrote a line: before, `report` refused the whole
    # trace ("T:2: not a JSON line"), when a killed run is when one wants its report most.
    trace = tmp_path / "killed.jsonl"
    trace.write_bytes(GOOD.encode() + cut)
    data = report_data(trace)
    assert (data["meta"]["events"], data["meta"]["cut_short"]) == (1, 2)
    assert "cut short" in render_report(trace)  # the page's words for it
    trace.write_bytes(GOOD.encode() + cut + b"\n")  # a whole line: damaged, not cut short
    assert _bad(tmp_path, trace.read_bytes()).startswith("T:2: not ")


def test_an_overlong_line_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    text = GOOD.encode() + b'{"type":"x","pad":"' + b"a" * MAX_LINE_BYTES + b'"}\n'
    assert _bad(tmp_path, text) == "T:2: line longer than 8 MiB"


def test_a_missing_trace_is_a_usage_error_with_exit_3(tmp_path: Path) -> None:
    code, _, err = _cli("report", str(tmp_path / "none.jsonl"))
    assert code == 3
    assert "cannot read trace" in err


def test_unknown_event_types_are_skipped(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    lines: list[dict[str, Any]] = [
        {"seq": 0, "type": "run_started", "suggestors": 0, "seeds": 0},
        {"seq": 1, "type": "from_the_future", "x": 1},
    ]
    trace.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    assert report_data(trace)["meta"]["events"] == 2


def test_run_report_refuses_an_unusable_output_before_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    foreign = tmp_path / "notes.html"
    foreign.write_text("my notes\n", encoding="utf-8")
    for target, says in (
        (foreign, "is not a report file written by converge-dsl"),
        (tmp_path / "no" / "r.html", "no folder"),
    ):
        code, out, err = _cli("run", "pipelines/support-triage.yaml", "--report", str(target))
        assert code == 3
        assert says in err
        assert "cycle 1" not in err + out  # nothing ran
    assert foreign.read_text(encoding="utf-8") == "my notes\n"


def test_the_benchmark_trace_fits_the_trace_schema(tmp_path: Path) -> None:
    import importlib.util

    import jsonschema

    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    trace = tmp_path / "t.jsonl"
    bench.synthetic_trace(trace, 2_000)
    schema = json.loads((ROOT / "schemas" / "trace-event.v1.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    lines = [json.loads(x) for x in trace.read_text(encoding="utf-8").splitlines()]
    assert {x["type"] for x in lines} >= {"agent_compaction", "agent_summary_taken"}
    for line in lines:
        assert validator.is_valid(line), (line, next(validator.iter_errors(line)).message)


@pytest.mark.parametrize("option", ["--trace", "--record"])
def test_run_report_refuses_the_file_of_another_output_before_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    monkeypatch.chdir(tmp_path)
    shared = "same.jsonl"
    pipeline = ROOT / "pipelines" / "support-triage.yaml"
    code, out, err = _cli("run", str(pipeline), option, shared, "--report", f"./{shared}")
    assert code == 3, err
    assert err == (
        f"error[CD336]: --report and {option} name the same file '{shared}'\n"
        "  hint: give each its own file\n"
    )
    assert "stop:" not in out
    assert not (tmp_path / shared).exists()  # nothing ran, nothing written


# -- a report reads no file but the trace (docs/architecture.md §12) ---------------------


def _hostile_trace(tmp_path: Path, files: list[str]) -> Path:
    """A trace whose suggestors' spans name `files` and which holds no excerpt for them."""
    lines = [{"seq": 0, "type": "run_started", "suggestors": len(files), "seeds": 0}]
    for number, file in enumerate(files, start=1):
        span = {"file": file, "line": 1, "column": 1, "end_line": 40, "end_column": 1}
        lines.append(
            {"seq": number, "type": "suggestor_started", "cycle": 1, "suggestor": f"s{number}",
             "span": span}
        )  # fmt: skip
    trace = tmp_path / "case" / "deep" / "hostile.jsonl"
    trace.parent.mkdir(parents=True)
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return trace


def test_a_hostile_trace_does_not_pull_local_files_into_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("CANARY-SECRET-TEXT\n", encoding="utf-8")
    monkeypatch.setenv("CONVERGE_CANARY_VARIABLE", "CANARY-ENV-VALUE")
    files = [
        "/etc/passwd",
        "/proc/self/environ",
        "../../outside/secret.txt",  # relative to the trace's folder
        str(outside / "secret.txt"),
        "outside/secret.txt",  # relative to the current folder
    ]
    trace = _hostile_trace(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    page_path = tmp_path / "page.html"
    code, _, err = _cli("report", str(trace), "-o", str(page_path))
    assert code == 0, err
    page = page_path.read_bytes()
    for canary in (b"root:x:0", b"CANARY-ENV-VALUE", b"CANARY-SECRET-TEXT"):
        assert canary not in page
    data = report_data(trace)
    assert all(source["text"] is None for source in data["sources"].values())
    assert all("reads no other file" in source["why"] for source in data["sources"].values())


def test_excerpts_come_from_the_trace_even_when_the_file_changed(agent_trace: Path) -> None:
    first = json.loads(agent_trace.read_text(encoding="utf-8").splitlines()[0])
    assert first["type"] == "run_started"
    assert "kind: agent" in first["excerpts"]["reviewer"]
    first["excerpts"]["reviewer"] = "as the run loaded it"
    lines = agent_trace.read_text(encoding="utf-8").splitlines()
    lines[0] = json.dumps(first)
    agent_trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert report_data(agent_trace)["sources"]["reviewer"]["text"] == "as the run loaded it"


@pytest.mark.parametrize(
    "excerpts",
    [["not", "a", "map"], {"s1": 5}, {"s1": None}, "text", {"s1": ("x" * 5000 + "\n") * 500}],
    ids=["list", "number", "null", "string", "huge"],
)
def test_odd_excerpts_in_a_trace_are_bounded_or_left_out(tmp_path: Path, excerpts: Any) -> None:
    trace = _hostile_trace(tmp_path, ["p.yaml"])
    lines = trace.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["excerpts"] = excerpts
    lines[0] = json.dumps(first)
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    source = report_data(trace)["sources"]["s1"]
    text = source["text"]
    assert text is None or len(text) <= 40 * 401
    assert (text is None) == ("why" in source)


@pytest.mark.parametrize(
    "span",
    [{"file": "x"}, {"file": "x", "line": "abc"}, {"line": 1}, {"file": 3, "line": 1},
     {"file": "x", "line": True}],
)  # fmt: skip
def test_a_malformed_span_is_a_located_error(tmp_path: Path, span: dict[str, Any]) -> None:
    trace = tmp_path / "t.jsonl"
    lines = [
        {"seq": 0, "type": "run_started", "suggestors": 1, "seeds": 0},
        {"seq": 1, "type": "suggestor_started", "cycle": 1, "suggestor": "s", "span": span},
    ]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, _, err = _cli("report", str(trace), "-o", str(tmp_path / "p.html"))
    assert code == 3, err
    assert f"{trace}:2: malformed suggestor_started event" in err
    assert "Traceback" not in err


def test_an_excerpt_ends_with_its_suggestor_not_on_the_next_ones_first_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    trace = tmp_path / "t.jsonl"
    assert _cli("run", "pipelines/market-entry.yaml", "--trace", str(trace))[0] == 0
    data = report_data(trace)
    seed = data["sources"]["target-market"]["text"]
    assert seed.splitlines()[0] == "  - name: target-market"
    assert "competitor-scan" not in seed
    kinds = dict(zip(data["names"], data["kinds"], strict=True))
    assert (kinds["target-market"], kinds["competitor-scan"], kinds["differentiate"]) == (
        "seed",
        "llm",
        "rule",
    )
    assert data["meta"]["cycles"] == 4  # the header's and the Cycles card's one count


def test_a_new_report_interrupted_while_written_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C while `run --report` (or a batch's report) was written left an empty new
    page: the file the opener made was removed only on an output error."""
    import os

    from converge_dsl.runtime import REPORT_MARK, write_page

    def fsync(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(KeyboardInterrupt):
        write_page(REPORT_MARK + "\n<p>page</p>\n", tmp_path / "r.html", "--report")
    assert list(tmp_path.iterdir()) == []
