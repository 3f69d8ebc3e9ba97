"""At most `MAX_PER_CODE` diagnostics of a code are shown, in every format; the rest are counted."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.cli import run
from converge_dsl.diagnostics import Diagnostic, Severity
from converge_dsl.frontend import MAX_PER_CODE, SourceTexts, cap
from converge_dsl.frontend import _schema as schema_module

HEAD = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: many\n"


def _diag(code: str, line: int, severity: Severity = Severity.ERROR) -> Diagnostic:
    return Diagnostic(code, severity, f"bad {line}", "p.yaml", line, 1, line, 2)


def _validate(tmp_path: Path, text: str, *options: str) -> tuple[int, str]:
    path = tmp_path / "many.yaml"
    path.write_text(text, encoding="utf-8")
    out = io.StringIO()
    code = run(["validate", *options, str(path)], out, io.StringIO())
    return code, out.getvalue()


def _unknown_keys(count: int) -> str:
    return HEAD + "".join(f"key{i}: {i}\n" for i in range(count))


def test_cap_keeps_the_first_of_each_code_in_order_and_counts_the_rest() -> None:
    found = [_diag("CD100", i) for i in range(5)] + [_diag("CD303", 9, Severity.WARNING)] * 4
    found.insert(2, _diag("CD200", 50))
    kept, omitted = cap(found, per_code=2)
    assert [(d.code, d.line) for d in kept] == [
        ("CD100", 0),
        ("CD100", 1),
        ("CD200", 50),
        ("CD303", 9),
        ("CD303", 9),
    ]
    assert [(o.code, o.count, o.first.line) for o in omitted] == [("CD100", 3, 2), ("CD303", 2, 9)]
    assert omitted[0].message.startswith("... and 3 more CD100 errors")
    assert omitted[1].message.startswith("... and 2 more CD303 warnings")
    assert cap(found[:2], per_code=2) == (found[:2], [])


def test_human_output_prints_the_cap_then_a_count_line(tmp_path: Path) -> None:
    code, out = _validate(tmp_path, _unknown_keys(MAX_PER_CODE + 150))
    assert code == 2
    assert out.count("error[CD100]") == MAX_PER_CODE
    assert "--> " + str(tmp_path / "many.yaml") + f":{MAX_PER_CODE + 3}:1" in out
    assert "key100:" not in out  # the 101st is only counted
    assert out.endswith(
        "... and 150 more CD100 errors (only the first 100 of a code are shown)\n"
        "\n250 errors in 1 file\n"
    )


def test_json_output_ends_with_an_entry_holding_the_omitted_count(tmp_path: Path) -> None:
    _, out = _validate(tmp_path, _unknown_keys(12_345), "--format", "json")
    found = json.loads(out)
    assert len(found) == MAX_PER_CODE + 1
    assert all("omitted" not in entry for entry in found[:-1])
    last = found[-1]
    assert last["omitted"] == 12_245
    assert last["code"] == codes.UNKNOWN_FIELD
    assert last["message"].startswith("... and 12,245 more CD100 errors")
    assert last["path"] == "key100"  # where the omitted run starts
    assert set(last) == set(found[0]) | {"omitted"}


def test_sarif_and_github_outputs_are_capped_too(tmp_path: Path) -> None:
    _, out = _validate(tmp_path, _unknown_keys(300), "--format", "sarif")
    results = json.loads(out)["runs"][0]["results"]
    assert len(results) == MAX_PER_CODE + 1
    assert results[-1]["properties"] == {"omitted": 200}
    assert "200 more CD100 errors" in results[-1]["message"]["text"]
    assert all("properties" not in r for r in results[:-1])
    _, out = _validate(tmp_path, _unknown_keys(300), "--format", "github")
    lines = out.splitlines()
    assert len(lines) == MAX_PER_CODE + 1
    assert lines[-1].startswith("::error ")
    assert "200 more CD100 errors" in lines[-1]


def test_warnings_are_capped_per_code_as_errors_are(tmp_path: Path) -> None:
    inputs = "inputs:\n" + "".join(f"  i{i}: {{}}\n" for i in range(130))
    code, out = _validate(tmp_path, HEAD + inputs)
    assert code == 0
    assert out.count("warning[CD303]") == MAX_PER_CODE
    assert "... and 30 more CD303 warnings" in out
    assert out.endswith("130 warnings in 1 file\n")


def test_did_you_mean_runs_once_per_distinct_name_up_to_a_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    def counting(word: str, candidates: object) -> str | None:
        asked.append(word)
        return None

    monkeypatch.setattr(schema_module, "did_you_mean", counting)
    _validate(tmp_path, _unknown_keys(1000))
    assert len(asked) == schema_module.Suggestions().limit
    asked.clear()
    _validate(tmp_path, HEAD + "seeds:\n" + "  - {id: a, content: b, sugestion: 1}\n" * 500)
    assert asked == ["sugestion"]


def test_source_lines_are_split_once_per_file() -> None:
    texts = SourceTexts({"a.yaml": "x\ny\n"})
    assert texts.lines("a.yaml") is texts.lines("a.yaml") == ["x", "y"]
    assert texts.lines("missing/nowhere.yaml") == []


def test_many_unknown_keys_validate_in_bounded_time_and_memory(tmp_path: Path) -> None:
    """40,000 unknown keys (20,000 took 58 s, quadratically, before) under a 1 GB limit.

    Time is the CPU time of the validating process, which a loaded machine does not
    stretch as it does wall time (a 9 s wall-clock limit failed at a load of 10): about
    1 s here, bounded at 8 s, and the kernel stops a process past 20 s of CPU (a
    quadratic validate takes minutes). The wall-clock limit only guards against a hang."""
    (tmp_path / "keys.yaml").write_text(_unknown_keys(40_000), encoding="utf-8")
    script = textwrap.dedent(
        """
        import io, resource, sys, time
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        resource.setrlimit(resource.RLIMIT_CPU, (20, 21))
        from converge_dsl.cli import run
        out, began = io.StringIO(), time.process_time()
        code = run(["validate", "--format", "json", "keys.yaml"], out, io.StringIO())
        print(time.process_time() - began)
        sys.exit(code * 10 + (len(out.getvalue()) < 200_000))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, timeout=120, capture_output=True, check=False
    )
    assert done.returncode != -signal.SIGXCPU, "validate took more than 20 s of CPU time"
    assert done.returncode == 21, done.stderr.decode()[-2000:]
    assert float(done.stdout) < 8.0
