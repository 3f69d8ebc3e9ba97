"""Benchmark: `converge-dsl validate` against a bare C YAML load and check-jsonschema.

Generates a 1,000-suggestor pipeline (about 10k lines, every suggestor kind,
templates everywhere) in a temporary folder and times three whole processes on
it, each several times after one untimed warm-up run, in interleaved rounds
(the median counts):

  (a) `converge-dsl validate FILE` (load + schema + semantic checks)
  (b) `python -c` that only loads FILE with `yaml.load(..., Loader=yaml.CSafeLoader)`
  (c) `check-jsonschema --schemafile schemas/pipeline.v1.json FILE`

The warm-up runs with Python's bytecode cache allowed (PYTHONDONTWRITEBYTECODE
unset), so converge-dsl is timed as installed, with compiled modules, as PyYAML
and check-jsonschema already are; the timed runs themselves are unchanged.

Last line: `validate/bare-load: X  validate/check-jsonschema: Y`
(targets: X <= 1.5, Y <= 0.3).

A second case, printed first, times (a) against (b) on a 1,000-suggestor file
of rules that read schema'd data fields (`facts.tickets[0].data.category ==
'billing'`, emits whose content and data read them), every one a different
expression: `data validate/bare-load: Z` (target: Z <= 1.5).

A third case, printed before the last line, loads 450,000 keys (`--keys`)
from two generated files of about 7.5 MB (under the 8 MiB file limit):

  - valid: one seed whose `data` is a mapping of 450,000 keys (free-form data,
    so the schema allows them); `validate` finds nothing;
  - unknown: 450,000 unknown top-level keys; `validate` prints the first 100
    and a count of the rest (`... and 449,900 more CD100 errors`).

Each is timed in this process, `validate` (the CLI's `run`, output to memory)
against a bare `yaml.load(..., Loader=yaml.CSafeLoader)` of the same file,
interleaved, the minimum of `--key-repeat` runs of each:
`450k validate/bare-load: X` per file (target: X <= 5), with how many
diagnostics were printed and the count line.

A scaling case (`--scaling` runs it alone) validates the generated pipeline of 1,000,
4,000 and 16,000 suggestors in this process (the CLI's `run`, output to memory; each
size in its own folder with its lock), the minimum CPU time of `--scaling-repeat`
runs, interleaved by size, after one untimed run of each: the time per suggestor of
each size and the ratio of 16,000's to 1,000's (1.0: linear).
Last line: `validate per-suggestor 16k/1k: X`.

Run: .venv/bin/python bench/validate.py [--suggestors N] [--repeat R] [--keys K]
     [--scaling] [--scaling-repeat R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "schemas" / "pipeline.v1.json"

_HEADER = """\
# yaml-language-server: $schema=../schemas/pipeline.v1.json
apiVersion: converge-dsl/v1
kind: Pipeline
name: bench-{count}
description: Generated pipeline with {count} suggestors for the validate benchmark.
keys:
  - {{name: risks, description: Risks found along the way}}
  - {{name: notes}}
inputs:
  market: {{description: The market to study, default: Nordic logistics}}
packs:
  optimization: ">=1.0,<2"
repositories: [builtin]
models:
  default: {{adapter: scripted, script: bench.script.yaml}}
  fast:
    adapter: openai
    base_url: "http://127.0.0.1:8080/v1"
    model: m
    accounts: [{{name: main, api_key_env: OPENAI_API_KEY}}]
    timeout_s: 30
    retries: 3
budget: {{max_cycles: 50, max_facts: 100000, max_model_calls: 2000, max_wall_s: 300}}
promotion: {{min_confidence: 0.5, max_content_length: 10000, forbidden_terms: [guaranteed]}}
seeds:
  - {{id: market, content: "{{{{ inputs.market }}}}"}}
  - {{id: rules, key: constraints, content: "Two engineers, no weekend work"}}
suggestors:
"""

_KINDS = (
    """\
  - name: seed-{i}
    kind: seed
    target: hypotheses
    facts:
      - id: "hypothesis-{i}"
        content: "Hypothesis number {i} about {{{{ inputs.market }}}}"
        confidence: 0.7
""",
    """\
  - name: rule-{i}
    kind: rule
    dependencies: [hypotheses, seeds]
    when: "count('hypotheses') >= {i} and not has('risks')"
    description: Turns hypotheses into strategies.
    emit:
      - key: strategies
        id: "strategy-{i}"
        content: "Act on {{{{ facts.hypotheses | map(attribute='content') | join(', ') }}}}"
""",
    """\
  - name: llm-{i}
    kind: llm
    model: default
    dependencies: [seeds]
    target: competitors
    prompt:
      system: You are analyst {i}.
      user: |
        Market: {{{{ facts.seeds | map(attribute='content') | join('; ') }}}}.
        Cycle {{{{ cycle }}}}. Answer in JSON.
    output:
      {{format: json, id: "competitor-{i}-{{{{ item.id }}}}", content: "{{{{ item.name }}}}"}}
""",
    """\
  - name: agent-{i}
    kind: agent
    model: fast
    dependencies: [strategies, constraints]
    target: evaluations
    goal: "Evaluate strategy {i} against {{{{ count('constraints') }}}} constraints."
    max_turns: 12
    tools: [context.read, context.propose]
    contributors:
      - {{kind: reminder, every: 5, text: "Reminder: {{{{ goal }}}}"}}
      - {{kind: facts, keys: [constraints], persist: false}}
""",
    """\
  - name: pack-{i}
    kind: pack
    use: optimization/assignment
    input: constraints
    output: risks
""",
)

_FOOTER = """\
invariants:
  - {name: has-strategy, class: acceptance, check: "count('strategies') > 0", critical: true}
  - {name: few-risks, class: semantic, check: "count('risks') < 100000", message: "too many risks"}
"""


_DATA_HEADER = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: bench-data-{count}
description: Generated pipeline with {count} rules reading schema'd data fields.
keys:
  - name: tickets
    schema:
      type: object
      additionalProperties: false
      required: [category, urgency]
      properties:
        category: {{enum: [billing, tech, other]}}
        urgency: {{type: integer, minimum: 0, maximum: 5}}
        customer: {{$ref: "#/$defs/customer"}}
      $defs:
        customer:
          type: object
          additionalProperties: false
          properties: {{name: {{type: string}}, plan: {{enum: [free, pro]}}}}
  - name: routed
    schema:
      type: object
      additionalProperties: false
      properties: {{queue: {{type: string}}, ticket: {{type: string}}, urgency: {{type: integer}}}}
seeds:
  - id: t1
    key: tickets
    content: A refund request
    data: {{category: billing, urgency: 3, customer: {{name: Ada, plan: pro}}}}
suggestors:
"""

_DATA_RULE = """\
  - name: route-{i}
    kind: rule
    dependencies: [tickets]
    when: "facts.tickets[0].data.category == '{category}' and facts.tickets[0].data.urgency >= {u}"
    emit:
      - key: routed
        id: "route-{i}-{{{{ facts.tickets[0].id }}}}"
        content: "{{{{ facts.tickets[0].data.customer.name }}}} goes to {category} ({i})"
        data: "{{'queue': '{category}', 'ticket': facts.tickets[0].id, 'urgency': {i}}}"
"""
_CATEGORIES = ("billing", "tech", "other")


def generate_data(count: int) -> str:
    """A pipeline of `count` rules that read schema'd data fields, each expression different."""
    parts = [_DATA_HEADER.format(count=count)]
    parts += [_DATA_RULE.format(i=i, category=_CATEGORIES[i % 3], u=i % 6) for i in range(count)]
    return "".join(parts)


def generate(count: int) -> str:
    """The text of a pipeline with `count` suggestors, cycling through every kind."""
    parts = [_HEADER.format(count=count)]
    parts += [_KINDS[i % len(_KINDS)].format(i=i) for i in range(count)]
    parts.append(_FOOTER)
    return "".join(parts)


def _time_interleaved(commands: dict[str, list[str]], repeat: int, cwd: Path) -> dict[str, float]:
    """Median wall time of each command, run in rounds (a, b, c, a, b, c, ...).

    Interleaving means a burst of load from elsewhere on the machine falls on
    every command alike instead of on whichever happened to run then.
    """
    warm = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for argv in commands.values():
        subprocess.run(argv, cwd=cwd, capture_output=True, check=False, env=warm)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, argv in commands.items():
            start = time.perf_counter()
            done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
            samples[name].append(time.perf_counter() - start)
            if done.returncode not in (0, 1):
                sys.exit(
                    f"command failed ({done.returncode}): {' '.join(argv)}\n"
                    f"{done.stdout}{done.stderr}"
                )
    return {name: statistics.median(values) for name, values in samples.items()}


def generate_keys(count: int, *, unknown: bool) -> str:
    """A pipeline with `count` keys: unknown top-level keys, or keys of one seed's data."""
    head = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: bench-keys\n"
    if unknown:
        return head + "".join(f"key{i}: {i}\n" for i in range(count))
    seed = "seeds:\n  - id: a\n    content: b\n    data:\n"
    return head + seed + "".join(f"      k{i}: 0\n" for i in range(count))


def _time_in_process(path: Path, repeat: int) -> tuple[float, float, str]:
    """Min times of `validate PATH` (in process) and a bare C load, interleaved; the output."""
    import io

    import yaml

    from converge_dsl.cli import run

    validate, bare, output = [], [], ""
    for _ in range(repeat):
        start = time.perf_counter()
        with path.open(encoding="utf-8") as stream:
            yaml.load(stream, Loader=yaml.CSafeLoader)
        bare.append(time.perf_counter() - start)
        out = io.StringIO()
        start = time.perf_counter()
        run(["validate", str(path)], out, io.StringIO())
        validate.append(time.perf_counter() - start)
        output = out.getvalue()
    return min(validate), min(bare), output


def _keys_case(folder: Path, count: int, repeat: int) -> None:
    """Print `450k validate/bare-load: X` for the valid and the unknown-keys file."""
    for label, unknown in (("valid, keys of one seed's data", False), ("unknown keys", True)):
        path = folder / ("unknown-keys.yaml" if unknown else "valid-keys.yaml")
        path.write_text(generate_keys(count, unknown=unknown), encoding="utf-8")
        validate, bare, output = _time_in_process(path, repeat)
        printed = output.count("\nerror[") + output.startswith("error[")
        rest = [line for line in output.splitlines() if line.startswith("... and ")]
        size = path.stat().st_size / 1e6
        print(f"{count:,} keys ({label}, {size:.1f} MB): {output.splitlines()[-1]}")
        print(f"  diagnostics printed: {printed}; {rest[0] if rest else 'none omitted'}")
        print(f"  validate:          {validate:.3f} s (in process, min of {repeat})")
        print(f"  bare C load:       {bare:.3f} s")
        print(f"{count // 1000}k validate/bare-load: {validate / bare:.2f}")


def _scaling_case(folder: Path, python: str, repeat: int) -> None:
    """Print the CPU time per suggestor of validate at 1k, 4k and 16k, and 16k/1k."""
    import io

    from converge_dsl.cli import run

    sizes = (1000, 4000, 16000)
    for count in sizes:
        place = folder / f"scaling-{count}"
        place.mkdir()
        (place / "bench.yaml").write_text(generate(count), encoding="utf-8")
        (place / "bench.script.yaml").write_text(
            "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules: []\n", encoding="utf-8"
        )
        subprocess.run(
            [python, "-m", "converge_dsl", "lock", "bench.yaml"],
            cwd=place,
            check=True,
            capture_output=True,
        )
    best: dict[int, float] = {}
    for round_ in range(repeat + 1):
        for count in sizes:
            path = str(folder / f"scaling-{count}" / "bench.yaml")
            start = time.process_time()
            run(["validate", path], io.StringIO(), io.StringIO())
            spent = time.process_time() - start
            if round_:  # the first round is the warm-up
                best[count] = min(best.get(count, spent), spent)
    print(f"validate scaling (CPU time, min of {repeat}):")
    for count in sizes:
        print(
            f"  {count:6,} suggestors: {best[count]:.3f} s  {best[count] / count * 1e6:.0f} us each"
        )
    ratio = (best[16000] / 16000) / (best[1000] / 1000)
    print(f"validate per-suggestor 16k/1k: {ratio:.2f}")


def _commands(python: str, name: str) -> dict[str, list[str]]:
    """`validate NAME` and the bare C load of NAME."""
    return {
        "validate": [python, "-m", "converge_dsl", "validate", name],
        "bare": [
            python,
            "-c",
            f"import yaml; yaml.load(open({name!r}, encoding='utf-8'), Loader=yaml.CSafeLoader)",
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suggestors", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keys", type=int, default=450_000)
    parser.add_argument("--key-repeat", type=int, default=3)
    parser.add_argument("--scaling", action="store_true", help="run the scaling case alone")
    parser.add_argument("--scaling-repeat", type=int, default=3)
    args = parser.parse_args()
    python = sys.executable
    checker = shutil.which("check-jsonschema", path=str(Path(python).parent)) or shutil.which(
        "check-jsonschema"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pipeline = folder / "bench.yaml"
        pipeline.write_text(generate(args.suggestors), encoding="utf-8")
        (folder / "bench.script.yaml").write_text(
            "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules: []\n", encoding="utf-8"
        )
        # The pipeline declares packs: validate needs its lock (converge.lock), written once,
        # untimed, with a pack cache inside the temporary folder.
        os.environ["CONVERGE_DSL_CACHE"] = str(folder / "cache")
        if args.scaling:
            _scaling_case(folder, python, args.scaling_repeat)
            return
        subprocess.run(
            [python, "-m", "converge_dsl", "lock", "bench.yaml"],
            cwd=folder,
            check=True,
            capture_output=True,
        )
        (folder / "data.yaml").write_text(generate_data(args.suggestors), encoding="utf-8")
        data_times = _time_interleaved(_commands(python, "data.yaml"), args.repeat, folder)
        print(f"data pipeline: {args.suggestors} rules reading schema'd fields")
        print(f"validate:          {data_times['validate']:.3f} s")
        print(f"bare C load:       {data_times['bare']:.3f} s")
        print(f"data validate/bare-load: {data_times['validate'] / data_times['bare']:.2f}")
        _keys_case(folder, args.keys, args.key_repeat)
        lines = pipeline.read_text(encoding="utf-8").count("\n")
        print(f"pipeline: {args.suggestors} suggestors, {lines} lines")
        commands = _commands(python, "bench.yaml")
        if checker is not None:
            commands["check-jsonschema"] = [checker, "--schemafile", str(SCHEMA), "bench.yaml"]
        times = _time_interleaved(commands, args.repeat, folder)
        validate, bare = times["validate"], times["bare"]
        print(f"validate:          {validate:.3f} s")
        print(f"bare C load:       {bare:.3f} s")
        ratio_schema = float("nan")
        if checker is None:
            print("check-jsonschema:  not installed (pip install '.[bench]')")
        else:
            reference = times["check-jsonschema"]
            print(f"check-jsonschema:  {reference:.3f} s")
            ratio_schema = validate / reference
        print(
            f"validate/bare-load: {validate / bare:.2f}  "
            f"validate/check-jsonschema: {ratio_schema:.2f}"
        )


if __name__ == "__main__":
    main()
