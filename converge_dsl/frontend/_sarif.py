"""Diagnostics as a SARIF 2.1.0 log (`validate --format sarif`).

Each file is named by a URI reference that code-scanning services can resolve:

- a file inside the source root (the working directory unless the caller
  names another) is a relative reference, percent-encoded per RFC 3986 (a
  space is `%20`, a comma `%2C`, a colon `%3A`, so `a:b.yaml` is not read as a
  URI of scheme `a`), resolved against `uriBaseId` `%SRCROOT%`, which
  `run.originalUriBaseIds` maps to the root's absolute `file:` URI;
- a file outside the root is an absolute `file:` URI with no base;
- a diagnostic with no file has no location.

Rules are the codes that occur, each with the one-line `shortDescription`
that `converge_dsl/codes.py` gives beside the code, and a `helpUri` into
`docs/errors.md`. Columns count Unicode code points (`columnKind`).
Each `Omitted` record of `cap` is one more result, at the first diagnostic it
stands for, with its count in `properties.omitted`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from urllib.parse import quote_from_bytes

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.frontend._cap import Omitted
from converge_dsl.frontend._render import _as_diagnostic

SRCROOT = "%SRCROOT%"
_DOCS_URI = "https://github.com/converge-dsl/converge-dsl/blob/main/docs/errors.md"
_CODE_LINE = re.compile(r'^[A-Z][A-Z0-9_]* = "(CD\d{3})"\s+#\s*(.+?)\s*$', re.M)


@cache
def code_summaries() -> dict[str, str]:
    """Code -> its one-line description, the comment beside it in `converge_dsl/codes.py`."""
    text = Path(codes.__file__).read_text(encoding="utf-8")
    return {code: summary[:1].upper() + summary[1:] for code, summary in _CODE_LINE.findall(text)}


def artifact_location(file: str, root: Path) -> dict[str, str] | None:
    """The SARIF `artifactLocation` of `file` (as a diagnostic names it), or None for no file.

    Relative to `root` (an absolute folder) under `%SRCROOT%` when the file lies
    inside it, else an absolute `file:` URI.
    """
    if not file:
        return None
    absolute = Path(os.path.abspath(root / file))
    try:
        relative = absolute.relative_to(root)
    except ValueError:
        return {"uri": absolute.as_uri()}
    # The name's bytes, as the file system holds them: a name that is not UTF-8
    # (a lone surrogate in Python) is percent-encoded byte by byte, never an error.
    return {
        "uri": quote_from_bytes(os.fsencode(relative.as_posix()), safe="/"),
        "uriBaseId": SRCROOT,
    }


def _region(d: Diagnostic) -> dict[str, int]:
    """The region of `d`, kept within SARIF's bounds (1-based; the end not before the start)."""
    line, column = max(d.line, 1), max(d.column, 1)
    end_line = max(d.end_line, line)
    end_column = max(d.end_column, column if end_line == line else 1)
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def _result(d: Diagnostic, count: int | None, rule: int, root: Path) -> dict[str, object]:
    text = d.message + (f"\nhint: {d.hint}" if d.hint else "")
    location = artifact_location(d.file, root)
    physical = {"physicalLocation": {"artifactLocation": location, "region": _region(d)}}
    return {
        "ruleId": d.code,
        "ruleIndex": rule,
        "level": d.severity.value,  # SARIF's levels include error, warning and note
        "message": {"text": text},
        "locations": [physical] if location else [],
        **({"properties": {"omitted": count}} if count is not None else {}),
    }


def _rule(code: str) -> dict[str, object]:
    summary = code_summaries().get(code, f"Diagnostic {code}")
    return {
        "id": code,
        "shortDescription": {"text": summary},
        "helpUri": f"{_DOCS_URI}#{code.lower()}",
    }


def render_sarif(
    diagnostics: Sequence[Diagnostic],
    omitted: Sequence[Omitted] = (),
    *,
    root: Path | None = None,
) -> str:
    """A SARIF 2.1.0 log with one run; rules are the codes that occur.

    `root` is the source root files are made relative to (default: the working
    directory); its absolute `file:` URI is `%SRCROOT%` in `originalUriBaseIds`.
    """
    from converge_dsl._version import __version__

    base = Path(os.path.abspath(root if root is not None else Path.cwd()))
    shown: list[tuple[Diagnostic, int | None]] = [(d, None) for d in diagnostics]
    shown += [(_as_diagnostic(o), o.count) for o in omitted]
    rules = sorted({d.code for d, _ in shown})
    index = {code: position for position, code in enumerate(rules)}
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "converge-dsl",
                        "version": __version__,
                        "informationUri": _DOCS_URI,
                        "rules": [_rule(code) for code in rules],
                    }
                },
                "originalUriBaseIds": {SRCROOT: {"uri": _folder_uri(base)}},
                "columnKind": "unicodeCodePoints",
                "results": [_result(d, count, index[d.code], base) for d, count in shown],
            }
        ],
    }
    text = json.dumps(log, indent=2, ensure_ascii=False) + "\n"
    # A file name that is not UTF-8 may reach a message: the log stays UTF-8 (U+FFFD).
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _folder_uri(folder: Path) -> str:
    """The `file:` URI of `folder`, ending in one `/` (the root is `file:///`)."""
    uri = folder.as_uri()
    return uri if uri.endswith("/") else uri + "/"
