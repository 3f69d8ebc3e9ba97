"""The analysis: `validate`'s diagnostics for the editor's text, the collector left as it was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# Run in a process of its own: another test of the session may have frozen its objects
# for good (`_collector.freeze_alive`), and then an analysis rightly leaves the collector be.
CHECK = """
import gc, sys
from pathlib import Path
from converge_dsl.lsp._analysis import analyse

pipeline = '''\\
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
'''
rules = "".join(
    f'''  - name: rule-{i}
    kind: rule
    dependencies: [notes]
    when: "count('notes') > {i}"
    emit: [{{key: notes, id: r{i}, content: "{{{{ facts.notes | length }}}}"}}]
'''
    for i in range(300)
)
seen = []
path = Path(sys.argv[1]) / "tiny.yaml"
analyse(path, pipeline, "tiny.yaml")  # the modules it imports, before watching
gc.callbacks.append(lambda phase, info: phase == "start" and seen.append(gc.get_freeze_count()))
analysis = analyse(path, pipeline + rules, "tiny.yaml")
gc.callbacks.clear()
print(gc.get_freeze_count(), len(seen), min(seen, default=-1), analysis.facts is not None,
      sorted({d.code for d in analysis.diagnostics if d.is_error}))
"""


def test_objects_alive_before_an_analysis_are_frozen_only_while_it_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    frozen_after, collections, least_frozen, has_facts, codes = done.stdout.split(" ", 4)
    assert frozen_after == "0"  # given back when it ended
    assert int(collections) > 0  # 300 rules allocate enough for the collector to run
    assert int(least_frozen) > 0  # and every collection skipped the objects older than it
    assert has_facts == "True"
    assert codes.strip() != "[]"  # the unknown key 'notez' is found
