"""The HTML pages of `eval --format html` and `diff --format html`: one self-contained file each.

A page holds its data (the command's own JSON document, compact, in a
`<script type="application/json">` element), its style and its script (the
hand-written files of `_html_assets`, and the virtualised list the run report
uses too, `converge_dsl._page_assets`: nothing is vendored, nothing fetched at
view time, and a Content-Security-Policy allows no source outside the page).
Long lists (the cases, the baseline changes, the differences) keep only the
rows in view in the DOM, so a page of 20,000 cases draws as fast as one of 20.
The script draws the page from the data with `textContent` only, so no value of
the data is ever read as HTML.

- `render_eval_html(document)`: the result document of `eval --format json`
  (with its `changes` under `--baseline`), drawn from whatever it holds: a card
  per metric with its mean, interval, threshold and any other field the metric
  carries, a confusion matrix per metric that has one, the worst cases, the
  changes against the baseline, and a filterable table of the cases.
- `render_diff_html(document, kind, a, b)`: the `diff --format json` document of
  two run results (`kind` "run") or two batch results files ("batch"), A's
  values beside B's, filterable by text and by added / removed / changed.

Both pages show a name or an id (a case's, a metric's, a fact's key and id) as `page_name`
writes it (`⟨U+202E⟩`, where values and messages keep `page_text`'s `\\u202e`),
so that an id holding the character and one holding its escape text read apart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from converge_dsl._page_assets import html_text, names_shown, page_asset, page_json, page_name

_ASSETS = Path(__file__).resolve().parent / "_html_assets"
MARK = "<!DOCTYPE html><!-- converge-dsl {what} page -->"


def render_eval_html(document: Mapping[str, Any]) -> str:
    """The page of an evaluation's result document (see the module docstring)."""
    title = f"Evaluation: {document.get('evaluation', '')}"
    return _page("eval", title, {"result": _case_names_shown(document)})


def _case_names_shown(document: Mapping[str, Any]) -> dict[str, Any]:
    """`document` with each case's name and each metric's (a metric's own, a case's
    scores' keys, a change's case and metric) as the page shows a name (`page_name`:
    `⟨U+202E⟩` where the rest of the page writes `\\u202e`), so that a name holding the
    character and one holding its escape text read apart."""
    shown = dict(document)
    for table, fields in (("cases", ("name",)), ("changes", ("case", "metric"))):
        if table in shown:
            shown[table] = names_shown(shown[table], fields)
    if "metrics" in shown:
        shown["metrics"] = names_shown(shown["metrics"], ("name",))
    cases = shown.get("cases")
    if isinstance(cases, list):
        shown["cases"] = [_scores_shown(case) for case in cases]
    return shown


def _scores_shown(case: Any) -> Any:
    """`case` with its scores keyed by each metric's name as the page shows it."""
    scores = case.get("scores") if isinstance(case, Mapping) else None
    if not isinstance(scores, Mapping) or all(page_name(str(k)) == k for k in scores):
        return case
    return {**case, "scores": {page_name(str(k)): v for k, v in scores.items()}}


def render_diff_html(document: Mapping[str, Any], kind: str, a: str, b: str) -> str:
    """The page of a diff document of two run results (`kind` "run") or two batch
    results files ("batch"), `a` and `b` their names."""
    shown = _diff_names_shown(document)
    return _page("diff", f"Diff: {a} \u2192 {b}", {"kind": kind, "a": a, "b": b, "diff": shown})


def _diff_names_shown(document: Mapping[str, Any]) -> dict[str, Any]:
    """`document` with each fact's key and id, and each case's name, as the page shows a
    name (`page_name`), as the eval page and the run report show them."""

    def facts_shown(owner: Mapping[str, Any]) -> dict[str, Any]:
        shown = dict(owner)
        if "facts" in shown:
            shown["facts"] = names_shown(shown["facts"], ("key", "id"))
        return shown

    shown = facts_shown(document)
    cases = shown.get("cases")
    if isinstance(cases, list):
        rows = [facts_shown(c) if isinstance(c, Mapping) else c for c in cases]
        shown["cases"] = names_shown(rows, ("case",))
    for side in ("only_a", "only_b"):
        names = shown.get(side)
        if isinstance(names, list):
            shown[side] = [page_name(n) if isinstance(n, str) else n for n in names]
    return shown


def _finite(value: Any) -> Any:
    """`value` with each NaN or infinity made null (JSON has neither: the page would not parse)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _page(what: str, title: str, data: Mapping[str, Any]) -> str:
    # Safe inside <script>, control and bidi characters as visible escapes (`page_json`):
    # a case's text cannot reorder or hide what the page shows.
    text = page_json(_finite(data))
    scripts = ("common.js", f"{what}.js")
    js = (
        page_asset("names.js")
        + page_asset("vlist.js")
        + "".join((_ASSETS / name).read_text(encoding="utf-8") for name in scripts)
    )
    parts = {
        "@TITLE@": html_text(title),
        "@CSS@": page_asset("page.css")
        + page_asset("vlist.css")
        + (_ASSETS / "page.css").read_text(encoding="utf-8")
        + page_asset("marks.css"),
        "@DATA@": text,
        "@JS@": js,
    }
    page = (_ASSETS / "page.html").read_text(encoding="utf-8")
    # One pass, so that nothing inserted is itself searched for a placeholder.
    body = re.sub("@(?:TITLE|CSS|DATA|JS)@", lambda m: parts[m.group(0)], page)
    return MARK.format(what=what) + "\n" + body
