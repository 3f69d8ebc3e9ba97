"""Benchmark: 2,000 rule suggestors in a dependency chain of depth 20, vs a LangGraph chain.

Runs a generated pipeline (load -> validate -> compile -> engine run) and, in
the same process, a LangGraph `StateGraph` chain of 1,000 no-op nodes
(langgraph is a bench-only extra). Prints figures; the last line is
`run s per 1k suggestor executions: X  langgraph s per 1k nodes: L  ratio: X/L`.
Usage: .venv/bin/python bench/run.py

Fairness of the LangGraph side: the graph is compiled outside the timed
region, with no checkpointer and no debug, the recursion limit is raised above
the chain length, and only `invoke` is timed, best of N. On langgraph 1.2 a
1,000-node chain costs well over 0.2 s because each superstep's
`apply_writes` visits every channel (about a million `is_available` calls per
invoke); that is the library's cost, not the harness's. Our side times only
`Engine.run` (compile outside the timed region too), with no event sink
listening, as `converge-dsl run --format json` without --trace.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEPTH = 20
WIDTH = 100  # suggestors per level: 2,000 in all
NODES = 1_000
REPEATS = 5


def pipeline_text() -> str:
    lines = [
        "apiVersion: converge-dsl/v1",
        "kind: Pipeline",
        "name: bench",
        "keys: [" + ", ".join(f"{{name: k{d:02d}}}" for d in range(DEPTH)) + "]",
        "budget: {max_cycles: 100, max_facts: 100000}",
        "seeds: [{id: start, content: go}]",
        "suggestors:",
    ]
    for d in range(DEPTH):
        source = "seeds" if d == 0 else f"k{d - 1:02d}"
        for w in range(WIDTH):
            lines += [
                f"  - name: s{d:02d}-{w:03d}",
                "    kind: rule",
                f"    dependencies: [{source}]",
                f"    emit: [{{key: k{d:02d}, id: 'f{w}', "
                f"content: 'level {d} after {{{{ count(\"{source}\") }}}} facts'}}]",
            ]
    return "\n".join(lines) + "\n"


def time_pipeline(path: Path) -> tuple[float, int]:
    from converge_dsl.clock import SystemClock
    from converge_dsl.compiler import compile_pipeline
    from converge_dsl.runtime import build_engine, load_document
    from converge_dsl.runtime._trace import TraceWriter

    document = load_document(path)
    best = float("inf")
    executions = 0
    for _ in range(REPEATS):
        sink = TraceWriter({})
        usage: Any = None
        compiled = compile_pipeline(document, inputs={}, models={}, usage=usage, events=sink)
        engine = build_engine(compiled, sink, SystemClock())
        started = time.perf_counter()
        result = asyncio.run(engine.run(compiled.seeds))
        elapsed = time.perf_counter() - started
        assert str(result.stop_reason) == "converged", result.stop_reason
        executions = len(compiled.suggestors)
        assert len(result.context) == 1 + executions
        best = min(best, elapsed)
    return best, executions


def time_langgraph() -> float:
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict):
        n: int

    graph: Any = StateGraph(State)
    for i in range(NODES):
        graph.add_node(f"n{i}", lambda state: {})
    graph.add_edge(START, "n0")
    for i in range(NODES - 1):
        graph.add_edge(f"n{i}", f"n{i + 1}")
    graph.add_edge(f"n{NODES - 1}", END)
    app = graph.compile()
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        app.invoke({"n": 0}, {"recursion_limit": NODES + 10})
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.yaml"
        path.write_text(pipeline_text(), encoding="utf-8")
        run_s, executions = time_pipeline(path)
    graph_s = time_langgraph()
    x = run_s / executions * 1000
    lg = graph_s / NODES * 1000
    print(
        f"pipeline: {executions} rule suggestors, depth {DEPTH}: "
        f"converged in {run_s:.3f} s (best of {REPEATS})"
    )
    print(f"langgraph: {NODES} no-op nodes in {graph_s:.3f} s (best of {REPEATS})")
    print(
        f"run s per 1k suggestor executions: {x:.3f}  "
        f"langgraph s per 1k nodes: {lg:.3f}  ratio: {x / lg:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
