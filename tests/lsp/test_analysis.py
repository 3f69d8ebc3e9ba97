"""The analysis: `validate`'s diagnostics for the editor's text, the collector left as it was."""

from __future__ import annotations

import gc
from pathlib import Path

from converge_dsl.lsp._analysis import analyse

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: tiny
keys: [{name: notes}]
suggestors:
  - name: first
    kind: seed
    facts: [{key: notes, id: a, content: "A"}]
  - name: second
    kind: rule
    dependencies: [notes]
    when: "count('notez') > 0"
    emit: [{key: notes, id: b, content: "B"}]
"""
RULES = "".join(
    f"""  - name: rule-{i}
    kind: rule
    dependencies: [notes]
    when: "count('notes') > {i}"
    emit: [{{key: notes, id: r{i}, content: "{{{{ facts.notes | length }}}}"}}]
"""
    for i in range(300)
)


def test_objects_alive_before_an_analysis_are_frozen_only_while_it_runs(tmp_path: Path) -> None:
    seen: list[int] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(gc.get_freeze_count())

    path = tmp_path / "tiny.yaml"
    analyse(path, PIPELINE, "tiny.yaml")  # the modules it imports, before watching
    gc.callbacks.append(watch)
    try:
        before = gc.get_freeze_count()
        seen.clear()
        analysis = analyse(path, PIPELINE + RULES, "tiny.yaml")
    finally:
        gc.callbacks.remove(watch)
    assert gc.get_freeze_count() == before == 0
    assert analysis.facts is not None
    assert [d.code for d in analysis.diagnostics if d.is_error]  # the unknown key 'notez'
    assert seen  # 300 rules allocate enough for the collector to run
    assert min(seen) > 0  # and every collection skipped the objects older than the analysis
