"""`_index.mentions`: the names a pipeline's templates write, each template aligned with the
file once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from converge_dsl.frontend import document as loaded
from converge_dsl.lsp import _index
from converge_dsl.lsp._analysis import analyse

LINES = 30
PIPELINE = (
    """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: spans
seeds: [{id: s, content: go}]
suggestors:
  - name: echo
    kind: rule
    dependencies: [seeds]
    emit:
      - key: seeds
        id: e
        content: |
"""
    + "".join(f"          {i} {{{{ facts.seeds }}}}\n" for i in range(LINES))
    + """\
      - key: seeds
        id: f
        content: "{{ facts.se\\
          eds }}"
"""
)


def test_each_template_is_aligned_with_the_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each mention aligned its template from the start (a name not aligned, written over
    two lines with an escaped line break, twice): references to a key named on each line
    of a long prompt read the prompt's lines once per mention. Now each line once."""
    path = tmp_path / "spans.yaml"
    path.write_text(PIPELINE, encoding="utf-8")
    analysis = analyse(path, PIPELINE, "spans.yaml")
    assert analysis.document is not None
    assert analysis.facts is not None
    read: list[str] = []
    pieces = loaded._pieces

    def counted(source: str, *rest: Any) -> Any:
        read.append(source)
        return pieces(source, *rest)

    monkeypatch.setattr(loaded, "_pieces", counted)
    found = list(_index.mentions(analysis.document, analysis.facts, _index.KEY, "seeds"))
    assert [(span.line, span.column) for _, span in found] == [
        (13 + i, 21 + len(str(i))) for i in range(LINES)
    ]  # the name over two lines is left out: no place of the file holds it
    assert len(read) <= LINES + 1 + 2  # was 471: the prompt's lines, then the quoted two
