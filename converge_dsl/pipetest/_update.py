"""`--update`: write the run's values into a test file's snapshot expectations.

A snapshot expectation is `stop_reason`, `counts.KEY` or `snapshot.KEY`
(`Failure.updatable`). The file is rewritten with a ruamel.yaml round trip,
so comments, key order and the quoting of untouched values are kept; nothing
else of the file changes. Files with nothing to update are not written.

The file is rewritten in place of its real file: a symbolic link stays a
link (its target is updated) and the file keeps its permissions, its line
ends (CRLF or LF) and its UTF-8 byte-order mark. An
expectation reached through a YAML anchor (`expect: &common ...` used again
as `*common`) may be shared by other cases, which a value from one run would
break: it is not written, its failure stays, and `SnapshotUpdate.shared`
names it so the user edits it by hand. A file that cannot be read again or
written (read-only, immutable, a full disk) is left as it was, its failures
stay, and `SnapshotUpdate.unwritten` names it with the system's reason.
"""

from __future__ import annotations

import codecs
import dataclasses
import io
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from converge_dsl._files import replace_file
from converge_dsl._reading import read_bytes
from converge_dsl.errors import ConvergeError

from ._runner import CaseReport

_Where = tuple[str | int, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class SnapshotUpdate:
    """What `update_snapshots` did: values written per file, the reports with the
    written failures gone, the failures left because their value is shared, and the
    files that could not be rewritten (file, why)."""

    written: Mapping[Path, int]
    reports: tuple[CaseReport, ...]
    shared: tuple[str, ...] = ()  # `file:line:col: path` of each expectation not written
    unwritten: tuple[tuple[Path, str], ...] = ()


def update_snapshots(reports: Sequence[CaseReport]) -> SnapshotUpdate:
    """Rewrite the snapshot expectations `reports` failed (see the module docstring)."""
    by_file: dict[Path, list[tuple[_Where, Any]]] = {}
    for report in reports:
        for failure in report.failures:
            if failure.updatable:
                by_file.setdefault(report.test.path, []).append((failure.path, failure.snapshot))
    written: dict[Path, int] = {}
    refused: set[tuple[Path, _Where]] = set()
    unwritten: list[tuple[Path, str]] = []
    for path, changes in by_file.items():
        try:
            kept = _rewrite(path, changes)
        except (OSError, ConvergeError) as exc:  # the file is as it was: its failures stay
            why = exc.message if isinstance(exc, ConvergeError) else exc.strerror or str(exc)
            unwritten.append((path, why))
            kept = [where for where, _ in changes]
        refused.update((path, where) for where in kept)
        if len(kept) < len(changes):
            written[path] = len(changes) - len(kept)
    after = tuple(
        dataclasses.replace(
            report,
            failures=tuple(
                f
                for f in report.failures
                if not f.updatable or (report.test.path, f.path) in refused
            ),
        )
        for report in reports
    )
    failed = {path for path, _ in unwritten}
    shared = tuple(
        report.where(f)
        for report in reports
        for f in report.failures
        if f.updatable and (report.test.path, f.path) in refused and report.test.path not in failed
    )
    return SnapshotUpdate(written, after, shared, tuple(unwritten))


def _rewrite(path: Path, changes: Sequence[tuple[_Where, Any]]) -> list[_Where]:
    """Write `changes` into the file at `path`; return those not written (shared)."""
    yaml = _round_trip()
    target = path.resolve()  # a symbolic link is followed, not replaced
    raw = read_bytes(target, "test file")
    text = raw.decode("utf-8-sig")
    document = yaml.load(text)
    refused: list[_Where] = []
    for where, value in changes:
        parent, anchored = document, False
        for step in where[:-1]:
            parent = parent[step]
            anchored = anchored or _anchored(parent)
        if anchored or _anchored(parent[where[-1]]):
            refused.append(where)
            continue
        parent[where[-1]] = _node(value, parent[where[-1]])
    if len(refused) == len(changes):
        return refused
    out = io.StringIO()
    yaml.dump(document, out)
    # The file's own line ends and byte-order mark, so only the updated lines differ.
    written = out.getvalue().replace("\r\n", "\n")  # ruamel keeps a comment's "\r"
    if "\r\n" in text.split("\n", 1)[0] + "\n":
        written = written.replace("\n", "\r\n")
    data = (codecs.BOM_UTF8 if raw.startswith(codecs.BOM_UTF8) else b"") + written.encode()
    # Written beside, then renamed: an interrupted update leaves the old file whole.
    replace_file(target, data, mode=stat.S_IMODE(target.stat().st_mode))
    return refused


def _anchored(node: Any) -> bool:
    """Whether `node` carries a YAML anchor, so an alias elsewhere may share it."""
    anchor = getattr(node, "anchor", None)
    return getattr(anchor, "value", None) is not None


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
