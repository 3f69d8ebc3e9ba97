"""One renderer of diagnostics for every command: `render(diagnostics, format, stream)`.

`validate` prints its findings with it; `run`, `plan`, `lock` and the `pack`
commands print a `PipelineInvalid` with it (through `cli.run`), so an invalid
pipeline reads the same whichever command found it. Formats: `human` (a
source excerpt with a caret under each problem, then a summary line), `json`,
`github` (workflow annotations) and `sarif` (SARIF 2.1.0). Each shows at
most `MAX_PER_CODE` (100) diagnostics of a code and counts the rest.

`render_error(error, stream)` is the one JSON object of a command's failure
under `--format json`: `{"error": {"code", "message", "hint"}}`, with `where`
when the error has a place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from converge_dsl.diagnostics import Diagnostic

if TYPE_CHECKING:
    from converge_dsl.errors import ConvergeError

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

    Only the first `frontend.MAX_PER_CODE` diagnostics of each code are
    written; the rest of a code become one `... and N more CODE errors` entry
    (JSON and SARIF: with an `omitted` count), and the summary line counts
    them all. Human output reads excerpts from `sources` (file -> text), and
    from disk for a file it lacks; `files` is how many files were checked, for
    the summary line (none with `summary=False`).
    """
    from converge_dsl import frontend

    found = list(diagnostics)
    shown, omitted = frontend.cap(found)
    if format == "json":
        stream.write(frontend.render_json(shown, omitted))
    elif format == "github":
        stream.write(frontend.render_github(shown, omitted))
    elif format == "sarif":
        stream.write(frontend.render_sarif(shown, omitted))
    else:
        text = frontend.render_human(shown, sources or {}, color, omitted)
        if summary:
            text += ("\n" if text else "") + frontend.summary_line(found, files)
        stream.write(text)


def render_error(error: ConvergeError, stream: TextIO) -> None:
    """Write `error` as the one JSON error object (see the module docstring)."""
    import json

    body: dict[str, str | None] = {"code": error.code, "message": error.text, "hint": error.hint}
    if error.where:
        body["where"] = error.where
    # ASCII: a file name's undecodable bytes (lone surrogates) stay JSON in any encoding
    stream.write(json.dumps({"error": body}, indent=2) + "\n")
