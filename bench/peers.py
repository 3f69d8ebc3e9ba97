"""Peer benchmark: our engine and LangGraph on the same graph shapes, in one process.

Shapes (each built for both engines, compiled outside the timed region; our
pipelines come from `bench/shapes.py`):

- chain of 1,000 and 10,000: rule i reads key k{i-1} and writes k{i}; on the
  LangGraph side node i reads the value node i-1 wrote and writes the next
  (one `value` channel: the idiomatic graph, and faster there than a channel
  per node; see `lg_chain`);
- fan-out of 10,000: one source, 10,000 independent rules each writing one
  fact (LangGraph: 10,000 nodes after one source node, appending to a list);
- 10^5 facts: promoted at the start of a run (LangGraph: one node appends
  10^5 entries to a list channel); figures are microseconds per fact;
- 50 and 200 concurrent model calls against one loopback OpenAI-compatible
  server (`bench/loopback.py`, its own process) that answers after 100 ms
  (ours: llm suggestors on the `openai` adapter; LangGraph: async nodes
  posting the same request with one `httpx.AsyncClient` whose pool allows
  every call at once); figures are wall time / one latency;
- `validate` of the smallest example pipeline vs `python -c pass`, each a
  whole process.

Our side goes through the public path: YAML file -> `runtime.load_document`
(load + validate) -> `compile_settings` / `build_models` / `compile_pipeline`
-> `build_engine` -> `Engine.run`, with no trace listener (as `run --format
json` without `--trace`): that is `engine`. `api` is the public API a batch
calls per case: `converge_dsl.load` once, then `Pipeline.arun()` timed whole
(binding inputs, a fresh engine, the result document). `floor` is the
minimal hand-written fixed-point loop of `bench/floor.py` on the same file
(the same checks, its facts asserted equal to the engine's). LangGraph graphs
are compiled once with no checkpointer. Each measurement is the minimum of 7
runs, the sides interleaved (the order rotating every run), a garbage
collection before each run and none forced during it. The figures of record
are ratios to a baseline measured in the same run (the floor, LangGraph, one
loopback latency, `python -c pass`), so they hold on a loaded machine.

Prints one line per comparison, each with the one-minute load average when
it was measured, the chain growth exponent from 1k to 10k, and last (one line):

    chain10k/langgraph: A  fan10k/langgraph: B  calls50/latency: C
    calls200/latency: D  validate-small/python-startup: E  chain1k engine/floor: F
    chain1k api/floor: G  facts engine/floor: H  batch cases/s local: I  process: J  (load L)

(I and J: `bench/batch.py`'s cases per second, 2,000 support-triage cases.)

What the engine's cycle and the result document cost was cut against the floor
(issue 27; `--only chain --repeats 9` and `--only facts`, before and after in
turn, load average 7 to 10): chain1k engine/floor 4.02-4.66 -> 3.03-3.19,
chain1k api/floor 5.82-7.45 -> 3.74-3.98, facts engine/floor 2.17 -> 1.52,
chain10k/langgraph 0.007 and fan10k/langgraph 0.015 after. The parts: no
coroutine per cycle of synchronous suggestors, slot descriptors to build facts
and promotion records, one record per merge, fact models built unvalidated,
one provenance model per value, and the models built with the collector quiet.

Usage: python bench/peers.py [--quick] [--repeats N] [--only chain|facts|validate]
(`--only chain` runs the chain of 1,000 rules alone, with its floor line;
`--only facts` runs the 10^5-facts shape alone and prints its line; `--only
validate` times `validate` against `python -c pass` alone, with no LangGraph.)
(`--quick` runs every shape at a small size, for a smoke test; its figures are
not comparable with the targets.) Needs the `bench` extra (langgraph, httpx).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from batch import load_average  # noqa: E402
from floor import Floor, assert_same  # noqa: E402
from shapes import calls_yaml, chain_yaml, facts_yaml, fan_yaml  # noqa: E402

LATENCY_S = 0.1


@dataclass(frozen=True)
class Sizes:
    chain: tuple[int, int]
    fan: int
    facts: int
    calls: tuple[int, int]
    repeats: int
    cases: int


FULL = Sizes(
    chain=(1_000, 10_000), fan=10_000, facts=100_000, calls=(50, 200), repeats=7, cases=2_000
)
QUICK = Sizes(chain=(50, 500), fan=500, facts=2_000, calls=(5, 20), repeats=2, cases=50)


# -- our side -----------------------------------------------------------------------


class Ours:
    """A pipeline file through the public path; `prepare()` is untimed, `run()` timed."""

    def __init__(
        self, folder: Path, name: str, text: str, *, expect_facts: int, reuse_models: bool = False
    ) -> None:
        from converge_dsl.runtime import load_document

        self.path = folder / f"{name}.yaml"
        self.path.write_text(text, encoding="utf-8")
        self.document = load_document(self.path)  # load + validate
        self.expect_facts = expect_facts
        # Reused models keep their HTTP clients (set up by an earlier run) across runs.
        self.reuse_models = reuse_models
        self._models: dict[str, Any] | None = None
        self._compiled: Any = None
        self._ready: tuple[Any, Any, dict[str, Any]] | None = None
        self.facts: tuple[Any, ...] = ()

    def prepare(self) -> None:
        """Compile (once for pipelines without models) and build a fresh engine."""
        from converge_dsl.clock import SystemClock
        from converge_dsl.compiler import compile_pipeline, compile_settings
        from converge_dsl.engine import UsageMeter
        from converge_dsl.runtime import (
            SUGGESTOR_KINDS,
            RunOptions,
            TraceWriter,
            build_engine,
            build_models,
        )

        clock = SystemClock()
        sink = TraceWriter({})
        settings = compile_settings(self.document, inputs={})
        meter = UsageMeter(settings.budget, clock=clock)
        compiled = self._compiled
        models: dict[str, Any] = {}
        if compiled is None or settings.models:
            if self._models is None:
                options = RunOptions(pipeline=self.path, clock=clock)
                models = build_models(settings, options, attempt_gate=meter.allow_attempt)
                if self.reuse_models:
                    self._models = models
            else:
                models = self._models
            compiled = compile_pipeline(
                settings, models=models, usage=meter, events=sink, kinds=SUGGESTOR_KINDS
            )
            if not settings.models:
                self._compiled = compiled
        engine = build_engine(compiled, sink, clock, None if not models else meter)
        self._ready = (engine, compiled.seeds, models)

    async def run(self) -> None:
        assert self._ready is not None
        engine, seeds, models = self._ready
        try:
            result = await engine.run(seeds)
        finally:
            if not self.reuse_models:
                for model in models.values():
                    await model.aclose()
        self._ready = None
        assert str(result.stop_reason) == "converged", result.stop_reason
        assert len(result.context) == self.expect_facts, len(result.context)
        self.facts = result.context.facts()

    async def close(self) -> None:
        """Close reused models."""
        for model in (self._models or {}).values():
            await model.aclose()
        self._models = None


class Api:
    """The same file through the public API a batch calls per case: `load` once, `arun` timed."""

    def __init__(self, ours: Ours) -> None:
        from converge_dsl import load

        self.pipeline = load(ours.path)
        self.expect_facts = ours.expect_facts

    async def run(self) -> None:
        document = await self.pipeline.arun()
        assert document.stop_reason == "converged", document.stop_reason
        assert sum(map(len, document.facts.values())) == self.expect_facts


class FloorSide:
    """The floor loop (`bench/floor.py`) of the same file; checked against the engine once."""

    def __init__(self, ours: Ours) -> None:
        self.floor = Floor.of(ours.document.data)
        self.facts = self.floor.run()
        assert len(self.facts) == ours.expect_facts

    def check(self, ours: Ours) -> None:
        assert_same(self.facts, ours.facts)


# -- the LangGraph side --------------------------------------------------------------


def _list_add(left: list[Any], right: list[Any]) -> list[Any]:
    return left + right


def lg_chain(n: int) -> Callable[[], Any]:
    """Node i reads the value node i-1 wrote and writes the next one (one `value` channel).

    A channel per node, as ours has a key per rule, would be slower on LangGraph
    (its supersteps visit every channel: 2.2 s at 1,000 nodes here, 12 s at
    2,000): the one-channel graph is the idiomatic and the kinder comparison.
    """
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class ChainState(TypedDict):
        value: int

    graph: Any = StateGraph(ChainState)
    for i in range(1, n + 1):
        graph.add_node(f"r{i}", lambda s: {"value": s["value"] + 1})
    graph.add_edge(START, "r1")
    for i in range(1, n):
        graph.add_edge(f"r{i}", f"r{i + 1}")
    graph.add_edge(f"r{n}", END)
    app = graph.compile()

    def invoke() -> Any:
        out = app.invoke({"value": 0}, {"recursion_limit": n + 10})
        assert out["value"] == n
        return out

    return invoke


def _list_state(name: str, channel: str) -> Any:
    from typing import Annotated

    from typing_extensions import TypedDict

    return TypedDict(name, {"src": int, channel: Annotated[list, _list_add]}, total=False)  # type: ignore[misc]


def lg_fan(n: int) -> Callable[[], Any]:
    from langgraph.graph import END, START, StateGraph

    graph: Any = StateGraph(_list_state("FanState", "out"))
    graph.add_node("src", lambda s: {"src": 1})
    graph.add_edge(START, "src")

    def rule(i: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
        fact = f"f{i}"
        return lambda s: {"out": [fact]}

    for i in range(n):
        graph.add_node(f"r{i}", rule(i))
        graph.add_edge("src", f"r{i}")
        graph.add_edge(f"r{i}", END)
    app = graph.compile()

    def invoke() -> Any:
        out = app.invoke({"out": []}, {"recursion_limit": 20})
        assert len(out["out"]) == n
        return out

    return invoke


def lg_facts(n: int) -> Callable[[], Any]:
    from langgraph.graph import END, START, StateGraph

    graph: Any = StateGraph(_list_state("FactState", "facts"))
    graph.add_node(
        "emit",
        lambda s: {"facts": [{"key": "items", "id": f"f{i}", "content": "x"} for i in range(n)]},
    )
    graph.add_edge(START, "emit")
    graph.add_edge("emit", END)
    app = graph.compile()

    def invoke() -> Any:
        out = app.invoke({"facts": []})
        assert len(out["facts"]) == n
        return out

    return invoke


class LgCalls:
    """N async nodes after START, each posting one chat request; a fresh client per run."""

    def __init__(self, n: int, base_url: str) -> None:
        from langgraph.graph import END, START, StateGraph

        self.n = n
        self.url = f"{base_url}/chat/completions"
        self.client: Any = None
        graph: Any = StateGraph(_list_state("CallState", "out"))
        for i in range(n):
            graph.add_node(f"c{i}", self._node(i))
            graph.add_edge(START, f"c{i}")
            graph.add_edge(f"c{i}", END)
        self.app = graph.compile()

    def _node(self, i: int) -> Callable[[dict[str, Any]], Any]:
        body = {"model": "bench", "messages": [{"role": "user", "content": f"call {i}"}]}

        async def call(state: dict[str, Any]) -> dict[str, Any]:
            response = await self.client.post(self.url, json=body)
            response.raise_for_status()
            return {"out": [response.json()["choices"][0]["message"]["content"]]}

        return call

    def prepare(self) -> None:
        import httpx

        limits = httpx.Limits(max_connections=self.n, max_keepalive_connections=self.n)
        self.client = httpx.AsyncClient(limits=limits, timeout=30.0)

    async def run(self) -> None:
        try:
            out = await self.app.ainvoke({"out": []}, {"recursion_limit": 20})
        finally:
            await self.client.aclose()
        assert len(out["out"]) == self.n


# -- measuring -----------------------------------------------------------------------


class Bench:
    """Interleaved timing on one event loop; `min` of the repeats."""

    def __init__(self, repeats: int) -> None:
        self.repeats = repeats
        self.runner = asyncio.Runner()

    def _time_ours(self, ours: Ours) -> float:
        ours.prepare()
        gc.collect()
        started = time.perf_counter()
        self.runner.run(ours.run())
        return time.perf_counter() - started

    def _time_lg_sync(self, invoke: Callable[[], Any]) -> float:
        gc.collect()
        started = time.perf_counter()
        invoke()
        return time.perf_counter() - started

    def _time_lg_async(self, calls: LgCalls) -> float:
        calls.prepare()
        gc.collect()
        started = time.perf_counter()
        self.runner.run(calls.run())
        return time.perf_counter() - started

    def _time_api(self, api: Api) -> float:
        gc.collect()
        started = time.perf_counter()
        self.runner.run(api.run())
        return time.perf_counter() - started

    def _time_floor(self, floor: FloorSide) -> float:
        gc.collect()
        started = time.perf_counter()
        floor.floor.run()
        return time.perf_counter() - started

    def interleave(self, sides: dict[str, Callable[[], float]]) -> dict[str, float]:
        """Each side's best seconds over the repeats, the order rotating every repeat."""
        best = dict.fromkeys(sides, math.inf)
        names = list(sides)
        for r in range(self.repeats):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                best[name] = min(best[name], sides[name]())
        return best

    def with_floor(self, ours: Ours, theirs: Callable[[], Any] | None = None) -> dict[str, float]:
        """Best seconds of `engine`, `api`, `floor` (and `langgraph`), interleaved.

        The floor's facts are asserted equal to the engine's.
        """
        api, floor = Api(ours), FloorSide(ours)
        sides: dict[str, Callable[[], float]] = {
            "engine": lambda: self._time_ours(ours),
            "api": lambda: self._time_api(api),
            "floor": lambda: self._time_floor(floor),
        }
        if theirs is not None:
            sides["langgraph"] = lambda: self._time_lg_sync(theirs)
        best = self.interleave(sides)
        floor.check(ours)
        return best

    def warm(self, ours: Ours) -> float:
        """Our best seconds with models reused after one untimed run (their clients set up)."""
        assert ours.reuse_models
        self._time_ours(ours)
        return min(self._time_ours(ours) for _ in range(self.repeats))

    def pair(self, ours: Ours, theirs: Callable[[], Any] | LgCalls) -> tuple[float, float]:
        """(our best, LangGraph's best) seconds, alternating which goes first."""
        best_ours = best_theirs = math.inf

        def lg() -> float:
            if isinstance(theirs, LgCalls):
                return self._time_lg_async(theirs)
            return self._time_lg_sync(theirs)

        for r in range(self.repeats):
            if r % 2:
                best_theirs = min(best_theirs, lg())
                best_ours = min(best_ours, self._time_ours(ours))
            else:
                best_ours = min(best_ours, self._time_ours(ours))
                best_theirs = min(best_theirs, lg())
        return best_ours, best_theirs


def start_loopback() -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "loopback.py"), str(LATENCY_S)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline().split()
    assert line[:1] == ["port"], line
    return server, f"http://127.0.0.1:{line[1]}/v1"


def smallest_example() -> Path:
    examples = [
        p
        for p in (ROOT / "pipelines").glob("*.yaml")
        if not p.name.endswith((".script.yaml", ".test.yaml"))
    ]
    return min(examples, key=lambda p: (p.stat().st_size, p.name))


def validate_vs_startup(repeats: int) -> tuple[Path, float, float]:
    """(the example, best `validate` seconds, best `python -c pass` seconds), each a process.

    The package's bytecode is compiled first, as an installed package has it
    (`python -c pass` reads the standard library's): with PYTHONDONTWRITEBYTECODE
    set, every `validate` would otherwise compile our sources anew.
    """
    import compileall

    compileall.compile_dir(ROOT / "converge_dsl", quiet=1)
    example = smallest_example()
    commands = {
        "validate": [sys.executable, "-m", "converge_dsl", "validate", str(example)],
        "python": [sys.executable, "-c", "pass"],
    }
    best = dict.fromkeys(commands, math.inf)
    for _ in range(repeats):
        for name, command in commands.items():
            started = time.perf_counter()
            subprocess.run(command, check=True, cwd=ROOT, capture_output=True)
            best[name] = min(best[name], time.perf_counter() - started)
    return example, best["validate"], best["python"]


def _line(label: str, ours: float, theirs: float, unit: str = "s", scale: float = 1.0) -> str:
    return (
        f"{label}: ours {ours * scale:.3f} {unit}  langgraph {theirs * scale:.3f} {unit}  "
        f"ratio {ours / theirs:.3f}  ({load_average()})"
    )


def _floor_line(label: str, best: dict[str, float]) -> str:
    return (
        f"{label}: engine/floor {best['engine'] / best['floor']:.2f}  "
        f"api/floor {best['api'] / best['floor']:.2f}  "
        f"(floor {best['floor'] * 1e3:.2f} ms, engine {best['engine'] * 1e3:.2f} ms, "
        f"api {best['api'] * 1e3:.2f} ms)  ({load_average()})"
    )


def rule_shapes(bench: Bench, sizes: Sizes, folder: Path) -> dict[str, float]:
    """Chains, fan-out and facts; prints a line each and returns the last line's figures."""
    chain = {n: chain_shape(bench, n, folder) for n in sizes.chain}
    small, large = sizes.chain
    growth = math.log(large / small)
    ours_exp = math.log(chain[large]["engine"] / chain[small]["engine"]) / growth
    lg_exp = math.log(chain[large]["langgraph"] / chain[small]["langgraph"]) / growth
    print(
        f"chain growth exponent {small:,} -> {large:,}: ours {ours_exp:.2f}  langgraph {lg_exp:.2f}"
    )
    ours = Ours(folder, "fan", fan_yaml(sizes.fan), expect_facts=sizes.fan + 1)
    fan = bench.with_floor(ours, lg_fan(sizes.fan))
    del ours
    print(_line(f"fan-out {sizes.fan:,} rules", fan["engine"], fan["langgraph"]), flush=True)
    print(_floor_line(f"fan-out {sizes.fan:,} rules", fan), flush=True)
    facts = facts_shape(bench, sizes, folder)
    return {
        "chain": chain[large]["engine"] / chain[large]["langgraph"],
        "fan": fan["engine"] / fan["langgraph"],
        "chain_engine_floor": chain[small]["engine"] / chain[small]["floor"],
        "chain_api_floor": chain[small]["api"] / chain[small]["floor"],
        "facts_engine_floor": facts["engine"] / facts["floor"],
    }


def chain_shape(bench: Bench, n: int, folder: Path) -> dict[str, float]:
    """A chain of `n` rules; prints its LangGraph and floor lines, returns the best seconds."""
    ours = Ours(folder, f"chain-{n}", chain_yaml(n), expect_facts=n + 1)
    chain = bench.with_floor(ours, lg_chain(n))
    del ours
    print(_line(f"chain {n:,} rules", chain["engine"], chain["langgraph"]), flush=True)
    print(_floor_line(f"chain {n:,} rules", chain), flush=True)
    return chain


def facts_shape(bench: Bench, sizes: Sizes, folder: Path) -> dict[str, float]:
    """10^5 facts promoted at the start of a run; prints its lines, returns the best seconds."""
    ours = Ours(folder, "facts", facts_yaml(sizes.facts), expect_facts=sizes.facts)
    facts = bench.with_floor(ours, lg_facts(sizes.facts))
    del ours
    per = 1e6 / sizes.facts
    print(
        _line(
            f"{sizes.facts:,} facts, per fact",
            facts["engine"],
            facts["langgraph"],
            unit="us",
            scale=per,
        ),
        flush=True,
    )
    print(_floor_line(f"{sizes.facts:,} facts", facts), flush=True)
    return facts


def batch_rates(sizes: Sizes, folder: Path) -> dict[str, float]:
    """Cases per second of a batch of support-triage cases, `local` then `process` executor."""
    from batch import PIPELINE, _cases, _rate

    cases = _cases(folder, sizes.cases)
    rates = {}
    for executor in ("local", "process"):
        rates[executor] = _rate(PIPELINE, cases, folder / f"{executor}.jsonl", executor, None)
        print(f"batch {executor}: {rates[executor]:.1f} cases/s  ({load_average()})", flush=True)
    return rates


def call_shapes(bench: Bench, sizes: Sizes, folder: Path) -> dict[int, float]:
    """Concurrent model calls against one loopback server: {calls: our wall / latency}."""
    figures: dict[int, float] = {}
    server, base_url = start_loopback()
    try:
        for n in sizes.calls:
            text = calls_yaml(n, base_url)
            ours = Ours(folder, f"calls-{n}", text, expect_facts=n + 1)
            calls = bench.pair(ours, LgCalls(n, base_url))
            reused = Ours(folder, f"calls-{n}", text, expect_facts=n + 1, reuse_models=True)
            warm = bench.warm(reused)
            bench.runner.run(reused.close())
            print(
                f"{n} concurrent calls of {LATENCY_S * 1000:.0f} ms: "
                f"ours {calls[0] / LATENCY_S:.2f} x latency "
                f"(models reused, clients set up: {warm / LATENCY_S:.2f})  "
                f"langgraph+httpx {calls[1] / LATENCY_S:.2f} x latency  "
                f"ratio {calls[0] / calls[1]:.3f}",
                flush=True,
            )
            figures[n] = calls[0] / LATENCY_S
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Our engine vs LangGraph on the same shapes.")
    parser.add_argument("--quick", action="store_true", help="small shapes: a smoke run")
    parser.add_argument("--repeats", type=int, default=None, help="runs per side (default 7)")
    parser.add_argument(
        "--only", choices=("chain", "facts", "validate"), help="run one shape alone"
    )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.quick:
        print(f"quick run (not comparable with the targets): {sizes}")
    if args.only == "validate":
        example, validate_s, python_s = validate_vs_startup(args.repeats or sizes.repeats)
        print(
            f"validate {example.name}: {validate_s:.3f} s  python -c pass: {python_s:.3f} s  "
            f"ratio {validate_s / python_s:.2f}"
        )
        print(f"validate-small/python-startup: {validate_s / python_s:.2f}")
        return 0
    bench = Bench(args.repeats or sizes.repeats)
    if args.only == "chain":
        with tempfile.TemporaryDirectory() as tmp:
            chain = chain_shape(bench, sizes.chain[0], Path(tmp))
        bench.runner.close()
        n = sizes.chain[0]
        label = f"chain{n // 1000}k" if n % 1000 == 0 else f"chain{n}"
        print(
            f"{label} engine/floor: {chain['engine'] / chain['floor']:.2f}  "
            f"{label} api/floor: {chain['api'] / chain['floor']:.2f}  ({load_average()})"
        )
        return 0
    if args.only == "facts":
        with tempfile.TemporaryDirectory() as tmp:
            facts = facts_shape(bench, sizes, Path(tmp))
        bench.runner.close()
        print(
            f"per-fact us: {facts['engine'] * 1e6 / sizes.facts:.2f}  "
            f"facts engine/floor: {facts['engine'] / facts['floor']:.2f}"
        )
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        rules = rule_shapes(bench, sizes, Path(tmp))
        calls = call_shapes(bench, sizes, Path(tmp))
        rates = batch_rates(sizes, Path(tmp))
    bench.runner.close()
    example, validate_s, python_s = validate_vs_startup(bench.repeats)
    print(
        f"validate {example.name}: {validate_s:.3f} s  python -c pass: {python_s:.3f} s  "
        f"ratio {validate_s / python_s:.2f}"
    )
    few, many = sizes.calls
    print(
        f"chain10k/langgraph: {rules['chain']:.3f}  fan10k/langgraph: {rules['fan']:.3f}  "
        f"calls50/latency: {calls[few]:.2f}  calls200/latency: {calls[many]:.2f}  "
        f"validate-small/python-startup: {validate_s / python_s:.2f}  "
        f"chain1k engine/floor: {rules['chain_engine_floor']:.2f}  "
        f"chain1k api/floor: {rules['chain_api_floor']:.2f}  "
        f"facts engine/floor: {rules['facts_engine_floor']:.2f}  "
        f"batch cases/s local: {rates['local']:.1f}  process: {rates['process']:.1f}  "
        f"({load_average()})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
