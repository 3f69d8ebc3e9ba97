"""The benchmarks' pipeline shapes, generated as YAML text (one place for every bench).

- `chain_yaml(n)`: rule i reads key k{i-1} and writes k{i};
- `fan_yaml(n)`: one source fact, n independent rules each writing one literal fact;
- `templated_yaml(n)`: the fan-out again, every rule's id and content a different
  real template (`f{{ cycle }}-12`, `{{ count("src") + 12 }}`);
- `facts_yaml(n)`: n facts seeded at the start of a run;
- `calls_yaml(n, base_url)`: n llm suggestors calling one `openai` model at `base_url`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

HEADER = "apiVersion: converge-dsl/v1\nkind: Pipeline\n"


def pipeline_yaml(head: Iterable[str], items: Iterable[str]) -> str:
    """A pipeline file: the header, the `head` lines, then the `items` lines."""
    return HEADER + "\n".join([*head, *items]) + "\n"


def chain_yaml(n: int) -> str:
    keys = ", ".join(f"{{name: k{i}}}" for i in range(n + 1))
    head = [
        f"name: chain-{n}",
        f"keys: [{keys}]",
        f"budget: {{max_cycles: {n + 5}, max_facts: {n + 5}}}",
        "seeds: [{id: s, key: k0, content: go}]",
        "suggestors:",
    ]
    return pipeline_yaml(
        head,
        (
            f"  - {{name: r{i}, kind: rule, dependencies: [k{i - 1}], "
            f"emit: [{{key: k{i}, id: f{i}, content: x}}]}}"
            for i in range(1, n + 1)
        ),
    )


def _fan_out(name: str, n: int, emitted: Callable[[int], str]) -> str:
    """One source fact and `n` rules after it, rule i emitting `emitted(i)` to `out`."""
    head = [
        f"name: {name}",
        "keys: [{name: src}, {name: out}]",
        f"budget: {{max_cycles: 5, max_facts: {n + 5}, max_concurrency: {n}}}",
        "seeds: [{id: s, key: src, content: go}]",
        "suggestors:",
    ]
    return pipeline_yaml(
        head,
        (
            f"  - {{name: r{i}, kind: rule, dependencies: [src], "
            f"emit: [{{key: out, {emitted(i)}}}]}}"
            for i in range(n)
        ),
    )


def fan_yaml(n: int) -> str:
    return _fan_out(f"fan-{n}", n, lambda i: f"id: f{i}, content: x")


def templated_yaml(n: int) -> str:
    return _fan_out(
        f"templated-{n}",
        n,
        lambda i: f"id: 'f{{{{ cycle }}}}-{i}', content: '{{{{ count(\"src\") + {i} }}}}'",
    )


def facts_yaml(n: int) -> str:
    head = [
        f"name: facts-{n}",
        "keys: [{name: items}]",
        f"budget: {{max_cycles: 5, max_facts: {n + 5}}}",
        "seeds:",
    ]
    return pipeline_yaml(head, (f"  - {{id: f{i}, key: items, content: x}}" for i in range(n)))


def calls_yaml(n: int, base_url: str) -> str:
    head = [
        f"name: calls-{n}",
        "models:",
        f'  m: {{adapter: openai, base_url: "{base_url}", model: bench, retries: 0}}',
        # No max_model_calls: models reused across runs keep the first run's attempt gate.
        f"budget: {{max_cycles: 5, max_concurrency: {n}}}",
        "seeds: [{id: go, content: go}]",
        "suggestors:",
    ]
    return pipeline_yaml(
        head,
        (
            f"  - {{name: c{i}, kind: llm, model: m, dependencies: [seeds], target: signals, "
            f'prompt: {{user: "call {i}"}}, output: {{format: text, id: c{i}}}}}'
            for i in range(n)
        ),
    )
