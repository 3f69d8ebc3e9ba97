"""One renderer of diagnostics for every command: `render(diagnostics, format, stream)`.

`validate` prints its findings with it; `run`, `plan`, `lock` and the `pack`
commands print a `PipelineInvalid` with it (through `cli.run`), so an invalid
pipeline reads the same whichever command found it. Formats: `human` (a
source excerpt with a caret under each problem, then a summary line), `json`,
`github` (workflow annotations) and `sarif` (SARIF 2.1.0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TextIO

from converge_dsl.diagnostics import Diagnostic

FORMATS = ("human", "json", "github", "sarif")


def render(
    diagnostics: Sequence[Diagnostic],
    format: str,
    stream: TextIO,
    *,
    sources: Mapping[str, str] | None = None,
    files: int = 1,
    color: bool = False,
    summary: bool = True,
) -> None:
    """Write `diagnostics` (best first) to `stream` in `format`.

    Human output reads excerpts from `sources` (file -> text), and from disk
    for a file it lacks; `files` is how many files were checked, for the
    summary line (none with `summary=False`).
    """
    from converge_dsl import frontend

    found = list(diagnostics)
    if format == "json":
        stream.write(frontend.render_json(found))
    elif format == "github":
        stream.write(frontend.render_github(found))
    elif format == "sarif":
        stream.write(frontend.render_sarif(found))
    else:
        text = frontend.render_human(found, sources or {}, color)
        if summary:
            text += ("\n" if text else "") + frontend.summary_line(found, files)
        stream.write(text)
