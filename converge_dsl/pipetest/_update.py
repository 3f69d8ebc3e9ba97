"""`--update`: write the run's values into a test file's snapshot expectations.

A snapshot expectation is `stop_reason`, `counts.KEY` or `snapshot.KEY`
(`Failure.updatable`). The file is rewritten with a ruamel.yaml round trip,
so comments, key order and the quoting of untouched values are kept; nothing
else of the file changes. Files with nothing to update are not written.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._runner import CaseReport


def update_snapshots(reports: Sequence[CaseReport]) -> dict[Path, int]:
    """Rewrite the snapshot expectations `reports` failed; return file -> values written."""
    by_file: dict[Path, list[tuple[tuple[str | int, ...], Any]]] = {}
    for report in reports:
        for failure in report.failures:
            if failure.updatable:
                by_file.setdefault(report.test.path, []).append((failure.path, failure.snapshot))
    written: dict[Path, int] = {}
    for path, changes in by_file.items():
        _rewrite(path, changes)
        written[path] = len(changes)
    return written


def _rewrite(path: Path, changes: Sequence[tuple[tuple[str | int, ...], Any]]) -> None:
    yaml = _round_trip()
    document = yaml.load(path.read_text(encoding="utf-8"))
    for where, value in changes:
        parent = document
        for step in where[:-1]:
            parent = parent[step]
        parent[where[-1]] = _node(value, parent[where[-1]])
    out = io.StringIO()
    yaml.dump(document, out)
    # Written beside, then renamed: an interrupted update leaves the old file whole.
    partial = path.with_name(f".{path.name}.update")
    partial.write_text(out.getvalue(), encoding="utf-8")
    os.replace(partial, path)


def _node(value: Any, old: Any) -> Any:
    """`value` as ruamel writes it, a mapping in the flow or block style `old` had."""
    from ruamel.yaml.comments import CommentedMap

    if isinstance(value, dict):
        node = CommentedMap()
        for key, item in value.items():
            node[key] = item
        if isinstance(old, CommentedMap) and old.fa.flow_style():
            node.fa.set_flow_style()
        return node
    return value


def _round_trip() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.brace_single_entry_mapping_in_flow_sequence = True  # keep `[{key: x}]` as written
    return yaml
