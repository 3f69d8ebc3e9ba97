"""The runtime's composition: one usage meter, the kind registry, no raw YAML."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

from converge_dsl import runtime
from converge_dsl.clock import FakeClock
from converge_dsl.compiler import compile_pipeline, compile_settings
from converge_dsl.engine import Budget, Engine, UsageMeter
from converge_dsl.frontend import KINDS, load_text
from converge_dsl.runtime import SUGGESTOR_KINDS, TraceWriter, build_engine

RULES = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: rules
budget: {max_cycles: 5}
seeds:
  - {id: s1, content: hello}
suggestors:
  - name: r1
    kind: rule
    dependencies: [seeds]
    emit: [{key: strategies, id: st1, content: "from {{ count('seeds') }} seeds"}]
"""


def test_engine_uses_the_meter_it_is_given() -> None:
    meter = UsageMeter(Budget())
    assert Engine(usage=meter).usage is meter
    assert isinstance(Engine().usage, UsageMeter)


def test_build_engine_takes_the_compiled_objects_and_the_runs_meter() -> None:
    settings = compile_settings(load_text(RULES, "p.yaml"), inputs={})
    meter = UsageMeter(settings.budget)
    compiled = compile_pipeline(settings, models={}, usage=meter, kinds=SUGGESTOR_KINDS)
    engine = build_engine(compiled, TraceWriter({}), FakeClock(), meter)
    assert engine.usage is meter
    assert (engine.budget, engine.policy) == (settings.budget, settings.promotion)
    assert [s.name for s in engine.suggestors] == ["r1"]
    assert asyncio.run(engine.run(compiled.seeds)).stop_reason == "converged"


def test_the_runtime_adds_agent_and_pack_to_the_front_ends_kinds() -> None:
    assert SUGGESTOR_KINDS.names == (*KINDS.names, "agent", "pack")
    assert all(SUGGESTOR_KINDS.kind(name) is KINDS.kind(name) for name in KINDS.names)


def test_a_rules_only_run_imports_neither_agents_nor_packs(tmp_path: Path) -> None:
    pipeline = tmp_path / "rules.yaml"
    pipeline.write_text(RULES, encoding="utf-8")
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        from converge_dsl.runtime import RunOptions, run_pipeline
        out = asyncio.run(run_pipeline(RunOptions(pipeline=Path({str(pipeline)!r}))))
        assert out.exit_code == 0, out.exit_code
        print(sorted(m for m in sys.modules if m.startswith(("converge_dsl.agents",
                                                             "converge_dsl.packs"))))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def _is_fact_data(node: ast.Attribute) -> bool:
    """`fact.data` / `proposal.data`: a fact's JSON data, not the YAML document's."""
    owner = node.value
    name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
    return name in {"fact", "proposal"}


def test_the_runtime_never_reads_the_yaml_data() -> None:
    folder = Path(runtime.__file__).parent
    for module in sorted(folder.glob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        reads = [
            n.lineno
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr == "data" and not _is_fact_data(n)
        ]
        assert not reads, f"{module.name} reads `.data` at lines {reads}"
