"""The HTML pages of `eval` and `diff`: self-contained, the data inert inside them.

What the pages show is checked in a real browser (the test_html_pages_*_browser.py
modules); here, what a page is made of: one file, a strict Content-Security-Policy, no
address of anything outside it, and data that cannot end its script element.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from converge_dsl._page_assets import CONTENT_SECURITY_POLICY
from converge_dsl.pipetest import render_diff_html, render_eval_html

from .conftest import DATA, cli

HOSTILE = '</script><script>window.pwned=1</script><!-- <img src=x onerror="pwned=2">'
CSP = CONTENT_SECURITY_POLICY


def _data(page: str) -> Any:
    found = re.search(r'<script id="page-data" type="application/json">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


def _document(**more: Any) -> dict[str, Any]:
    return {
        "evaluation": HOSTILE,
        "passed": False,
        "overall": 0.5,
        "threshold": 0.9,
        "seconds": 0.1,
        "usage": {"input_tokens": 3, "output_tokens": 4},
        "metrics": [
            {"name": HOSTILE, "mean": float("nan"), "cases": 1, "interval": None,
             "threshold": 1.0, "passed": False, "confusion": []},
        ],
        "cases": [{"name": HOSTILE, "stop_reason": "converged", "scores": {HOSTILE: 0.0}}],
        **more,
    }  # fmt: skip


def test_a_page_is_one_file_that_names_nothing_outside_it() -> None:
    empty = {"same": True, "facts": [], "stop_reason": None, "usage": []}
    for page in (
        render_eval_html(_document(evaluation="t")),
        render_diff_html(empty, "run", "a", "b"),
    ):
        assert page.startswith("<!DOCTYPE html><!-- converge-dsl ")
        assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
        # the page's own markup, style and script (the data is JSON text, never markup)
        own = re.sub(r'(<script id="page-data"[^>]*>).*?(</script>)', r"\1\2", page, flags=re.S)
        assert not re.search(r"<(link|img|iframe|object|embed)\b|\bsrc=|\bhref=|url\(", own)
        assert "@import" not in own
        # the one address is the SVG namespace, a name, never fetched
        assert set(re.findall(r"https?://[^\s\"')]+", own)) <= {"http://www.w3.org/2000/svg"}


def test_data_cannot_end_its_script_element_and_reads_back_the_same() -> None:
    page = render_eval_html(_document())
    assert HOSTILE not in page
    assert page.count("</script>") == 2  # the data's and the script's own
    assert "<!-- <img" not in page
    data = _data(page)
    assert data["result"]["evaluation"] == HOSTILE
    assert data["result"]["cases"][0]["scores"] == {HOSTILE: 0.0}
    # the title is the one place the page writes data as HTML: escaped
    assert "<title>Evaluation: &lt;/script&gt;&lt;script&gt;" in page


def test_control_and_bidi_characters_show_as_escapes_never_raw() -> None:
    sneaky = "CD911: stop\u202e(at a.yaml:1:2)\x1b[31m"
    case = {"name": sneaky, "stop_reason": "error", "scores": {}, "error": sneaky}
    page = render_eval_html(_document(evaluation=sneaky, cases=[case]))
    assert "\u202e" not in page
    assert "\x1b" not in page
    shown = "CD911: stop\\u202e(at a.yaml:1:2)\\x1b[31m"
    assert _data(page)["result"]["cases"][0]["error"] == shown
    assert f"<title>Evaluation: {shown}</title>" in page


def test_a_mean_that_is_not_a_number_is_written_as_null() -> None:
    assert _data(render_eval_html(_document()))["result"]["metrics"][0]["mean"] is None


def test_the_diff_page_carries_both_names_and_the_kind() -> None:
    document = {"same": True, "unchanged": 2, "cases": [], "only_a": [], "only_b": [], "usage": []}
    data = _data(render_diff_html(document, "batch", "a.jsonl", HOSTILE))
    assert (data["kind"], data["a"], data["b"], data["diff"]) == (
        "batch",
        "a.jsonl",
        HOSTILE,
        document,
    )


def test_the_eval_page_shows_case_names_apart_from_their_escape_text() -> None:
    # The cases' names and the baseline changes' cases are names: `⟨U+202E⟩`.
    real, typed, shown = "r\u202eev", "r\\u202eev", "r\u27e8U+202E\u27e9ev"
    cases = [{"name": real, "error": "x\u202e"}, {"name": typed}]
    changes = [{"case": real, "metric": "m"}, {"case": typed, "metric": "m"}]
    result = _data(render_eval_html(_document(cases=cases, changes=changes)))["result"]
    assert [c["name"] for c in result["cases"]] == [shown, typed]
    assert [c["case"] for c in result["changes"]] == [shown, typed]
    assert result["cases"][0]["error"] == "x\\u202e"


def test_the_eval_page_shows_metric_names_as_names() -> None:
    # A metric's name (its card, its confusion, its column, a change's metric) was shown
    # raw: "acc" followed by a zero-width space or joined to "c" read as "acc" and "acc",
    # and U+202E as `\u202e`, the shown form of the six characters that spell it.
    names = ["acc\u200b", "ac\u200dc", "r\u202eev", "r\\u202eev", "👨\u200d👩\u200d👧"]
    shown = ["acc⟨U+200B⟩", "ac⟨U+200D⟩c", "r⟨U+202E⟩ev", "r\\u202eev", names[4]]
    confusion = [{"expected": "a", "found": "a", "count": 1}]
    metrics = [{"name": n, "mean": 1.0, "confusion": confusion} for n in names]
    cases = [{"name": "c", "scores": dict.fromkeys(names, 1.0)}]
    changes = [{"case": "c", "metric": n} for n in names]
    result = _data(render_eval_html(_document(metrics=metrics, cases=cases, changes=changes)))
    result = result["result"]
    assert [m["name"] for m in result["metrics"]] == shown
    assert list(result["cases"][0]["scores"]) == shown
    assert [c["metric"] for c in result["changes"]] == shown


def test_the_diff_page_shows_names_and_ids_apart_from_their_escape_text() -> None:
    # A case, a fact key or id holding U+202E and one holding the six characters `\u202e`
    # both showed `\u202e`; values keep their escapes.
    def fact(name: str) -> dict[str, Any]:
        field = {"what": "content", "a": "x\u202e", "b": "y"}
        return {"key": name, "id": name, "change": "changed", "fields": [field]}

    real, typed, shown = "r\u202eev", "r\\u202eev", "r\u27e8U+202E\u27e9ev"
    cases = [{"case": n, "facts": [fact(n)], "stop_reason": None} for n in (real, typed)]
    document = {"same": False, "unchanged": 0, "cases": cases, "only_a": [real, typed]}
    diff = _data(render_diff_html({**document, "only_b": [real]}, "batch", "a", "b"))["diff"]
    assert [c["case"] for c in diff["cases"]] == [shown, typed]
    assert [(c["facts"][0]["key"], c["facts"][0]["id"]) for c in diff["cases"]] == [
        (shown, shown),
        (typed, typed),
    ]
    assert diff["cases"][0]["facts"][0]["fields"][0]["a"] == "x\\u202e"
    assert (diff["only_a"], diff["only_b"]) == ([shown, typed], [shown])
    run = _data(render_diff_html({"same": False, "facts": [fact(real)]}, "run", "a", "b"))
    assert (run["diff"]["facts"][0]["key"], run["diff"]["facts"][0]["id"]) == (shown, shown)


def test_eval_writes_its_page_from_the_document_json_prints(tmp_path: Path) -> None:
    page, document = tmp_path / "eval.html", tmp_path / "eval.json"
    evaluation = DATA / "eval" / "classify.eval.yaml"
    # Without timings: each case's wall time is the one value two runs do not share.
    assert cli("eval", evaluation, "--no-timings", "--format", "html", "-o", page)[0] == 0
    assert cli("eval", evaluation, "--no-timings", "--format", "json", "-o", document)[0] == 0
    shown = _data(page.read_text(encoding="utf-8"))["result"]
    printed = json.loads(document.read_text(encoding="utf-8"))
    assert shown == printed


def test_the_pages_and_the_run_report_share_one_virtualised_list() -> None:
    """The eval and diff pages inline the report's own list (`converge_dsl._page_assets`),
    not a copy of their own."""
    from converge_dsl._page_assets import page_asset

    script, style = page_asset("vlist.js"), page_asset("vlist.css")
    assert "function VList(" in script
    pages = [
        render_eval_html({"evaluation": "e", "metrics": [], "cases": []}),
        render_diff_html({"same": True, "facts": [], "usage": []}, "run", "a", "b"),
    ]
    for page in pages:
        assert page.count(script) == 1
        assert page.count(style) == 1
        assert page.count("function VList(") == 1
