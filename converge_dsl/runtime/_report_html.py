"""`converge-dsl report`: a run trace as one self-contained HTML page.

The page holds its data (`_report_data.report_data`, compact JSON in a
`<script type="application/json">` element), its style and its script (the
files of `_report_assets`, written by hand: no library is vendored and nothing
is fetched at view time; the virtualised list is `converge_dsl._page_assets`'
`vlist.js` and `vlist.css`, which the eval and diff pages share). Sections: a
timeline of cycles with one bar per
suggestor execution and the model calls inside them, the facts (click one for
its data, provenance and the suggestor's source excerpt), the gate (rejected
proposals with the reason, pending and decided approvals), the model calls
(an agent's turns told from its summarizer's calls),
the agents' turns, messages, compactions, summaries and stub fallbacks, and
the budgets (usage against each limit over time, and the stop reason). A
search box filters every list. The output is opened by
`converge_dsl._files.open_output`: only an empty file or a report we wrote
may be overwritten, and it is replaced whole or not at all
(`converge_dsl._files.whole_output`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from converge_dsl import codes
from converge_dsl._files import OUTPUT_ERRORS, open_output, whole_output
from converge_dsl._page_assets import names_shown, page_asset, page_json, page_name

from ._report_data import report_data

_ASSETS = Path(__file__).resolve().parent / "_report_assets"
MARK = "<!DOCTYPE html><!-- converge-dsl run report -->"
REPORT_MARK = MARK  # the name the runtime package exports it under


def is_report_line(line: bytes) -> bool:
    """True for the first line of a report this module wrote."""
    return line.startswith(MARK.encode())


def kind_styles(kinds: Iterable[str | None]) -> dict[str, dict[str, str]]:
    """Kind name -> its colours and legend label, from the kind's own `GraphStyle`: the
    one table the graph draws with too. A kind no installed registry knows is left out
    (the page draws it grey)."""
    from ._engine import SUGGESTOR_KINDS

    styles: dict[str, dict[str, str]] = {}
    for name in dict.fromkeys(k for k in kinds if k is not None):
        kind = SUGGESTOR_KINDS.get(name)
        if kind is not None:
            style = kind.graph
            styles[name] = {
                "fill": style.fill,
                "stroke": style.stroke,
                "text": style.text,
                "label": style.label,
            }
    return styles


def render_report(trace: Path) -> str:
    """The HTML page of the trace at `trace` (a bad trace is a `UsageError` at file:line)."""
    found = report_data(trace)
    found["styles"] = kind_styles(found["kinds"])
    _names_shown(found)
    # Safe inside <script>, control and bidi characters as visible escapes (`page_json`):
    # text from the run (facts, answers, messages) cannot reorder or hide what the page shows.
    data = page_json(found)
    page = (_ASSETS / "page.html").read_text(encoding="utf-8")
    css = (
        page_asset("page.css")
        + page_asset("vlist.css")
        + (_ASSETS / "report.css").read_text(encoding="utf-8")
        + page_asset("marks.css")
    )
    js = (
        page_asset("names.js")
        + page_asset("vlist.js")
        + (_ASSETS / "report.js").read_text(encoding="utf-8")
    )
    # One pass, so that nothing inserted is itself searched for a placeholder.
    parts = {"@CSS@": css, "@DATA@": data, "@JS@": js}
    body = re.sub("@(?:CSS|DATA|JS)@", lambda m: parts[m.group(0)], page)
    return MARK + "\n" + body


# The columns of a report's tables that hold a key or an id (the rest: report.js).
_NAME_COLUMNS = {"facts": (0, 1), "rej": (2, 3), "hitl": (2, 3)}


def _names_shown(found: dict[str, Any]) -> None:
    """Rewrite the suggestors' names and the facts' keys and ids of the report's data
    `found` as the page shows them (`page_name`: `⟨U+202E⟩`, where the rest of the page
    writes `\\u202e`), the sources' names too, which the page looks a name up by, and the
    pipeline's and the trace's, which the title names."""
    meta = found["meta"]
    meta.update((k, page_name(meta[k])) for k in ("pipeline", "trace") if meta[k] is not None)
    found["names"] = [page_name(name) for name in found["names"]]
    found["sources"] = {page_name(name): source for name, source in found["sources"].items()}
    for table, columns in _NAME_COLUMNS.items():
        found[table] = names_shown(found[table], columns)


def check_report_output(
    output: Path, option: str, *, others: Mapping[str, Path | None] | None = None
) -> None:
    """Refuse `output` now (a `UsageError`), before a run, if a report could not go there.

    An existing file is opened without truncating it (so it must be a report we
    wrote, or empty); a new one must have an existing folder. Nothing is created.
    `others` are the run's other outputs by option: the report may not share a
    file with one (the run would write it first and the report be refused at the end).
    """
    from converge_dsl._files import same_file
    from converge_dsl.errors import UsageError

    for other_option, other in (others or {}).items():
        if other is not None and same_file(Path(other), output):
            raise UsageError(
                f"{option} and {other_option} name the same file {str(output)!r}",
                hint="give each its own file",
                code=codes.OUTPUT_REFUSED,
            )

    if output.exists() or output.is_symlink():
        open_output(output, option, "report file", recognise=is_report_line, append=True).close()
    elif not output.parent.is_dir():
        raise UsageError(
            f"cannot write report file {str(output)!r} ({option}): "
            f"no folder {str(output.parent)!r}",
            code=codes.OUTPUT_REFUSED,
        )


def write_report(trace: Path, output: Path, option: str = "-o") -> int:
    """Write the report of `trace` to `output`; the number of bytes written."""
    return write_page(render_report(trace), output, option)


def write_page(page: str, output: Path, option: str) -> int:
    """Write `page` (it starts with `MARK`) to `output` through the checked opener: only
    an empty file or a report we wrote is overwritten, whole or not at all; a new file
    is removed again when the write fails or is interrupted (`_files.whole_output`).
    The number of bytes written."""
    with whole_output(output, option, "report file", recognise=is_report_line) as out:
        out.write(page)
    return len(page.encode("utf-8", OUTPUT_ERRORS))
