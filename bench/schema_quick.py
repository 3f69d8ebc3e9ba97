"""Schema checks that pass: python-jsonschema governed, against the quick yes of jsonschema-rs.

Run `python bench/schema_quick.py`. For each case it prints the microseconds
of one passing check through `GovernedValidator` with python-jsonschema alone,
then with the quick check of `converge_dsl.sandbox._schema_quick` (what every run uses
for a plain schema and small data), and their ratio, measured in the same
run (best of 5 rounds), so the ratio holds on a loaded machine:

- `ticket`: one item of `pipelines/support-triage.yaml` against its key's schema
  (the gate and the llm suggestor check each item);
- `tickets`: the llm answer of four tickets against the array of that schema
  (the scripted model's response schema);
- `workload`: the greedy-scheduling input of that pipeline against the pack's
  input schema.

Then the promotion gate's `rejection` of one ticket proposal of that pipeline
(its key's schema as the gate compiles it), checked there, and carrying the
evidence of the llm suggestor's own check of the item (`ProposedFact.vouched`),
which the gate charges instead of checking the data again, and their ratio.

Prints one line per case, the gate's line, and last (two lines):
`quick/python: A B C` and `vouched/checked: G`.
"""

from __future__ import annotations

import json
import timeit
from pathlib import Path
from typing import Any

from converge_dsl.clock import SystemClock
from converge_dsl.engine import PromotionGate, PromotionPolicy, ProposedFact, Provenance
from converge_dsl.frontend import load_file
from converge_dsl.sandbox import (
    SCHEMA_STEPS,
    SCHEMA_WORK,
    GovernedValidator,
    governed,
    python_validator,
    run_deadline,
)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "pipelines" / "support-triage.script.yaml"
PACK_SCHEMA = ROOT / "builtin_packs" / "optimization" / "schemas" / "greedy_scheduling.input.json"


def cases() -> dict[str, tuple[dict[str, Any], Any]]:
    pipeline = load_file(ROOT / "pipelines" / "support-triage.yaml").data
    ticket = next(k["schema"] for k in pipeline["keys"] if k["name"] == "tickets")
    answer = json.loads(load_file(SCRIPT).data["rules"][0]["reply"])
    pack = json.loads(PACK_SCHEMA.read_text(encoding="utf-8"))
    workload = {"machines": [{"id": "ana"}, {"id": "ben"}], "jobs": answer}
    return {
        "ticket": (ticket, answer[1]),
        "tickets": ({"type": "array", "items": ticket}, answer),
        "workload": (pack, workload),
    }


def micros(validator: GovernedValidator, data: Any) -> float:
    def check() -> None:
        with governed(SCHEMA_STEPS, SCHEMA_WORK, "bench"):
            assert validator.best_error(data) is None

    number = 200
    return min(timeit.repeat(check, number=number, repeat=5)) / number * 1e6


def gate_micros(schema: Any, data: Any) -> tuple[float, float]:
    """Microseconds of the gate's `rejection` of a proposal of `data`: checked, vouched."""
    gate = PromotionGate(PromotionPolicy(key_schemas={"tickets": schema}))
    proposal = ProposedFact("tickets", "ticket-1", "T-1: bug", 0.9, Provenance("bench"), data)
    _, fitted = python_validator(schema, "the schema of key 'tickets'").judge(data)
    vouched = proposal.vouched(fitted)
    number = 2000
    with run_deadline(SystemClock(), None):  # the run's pool, as in a run
        checked = min(timeit.repeat(lambda: gate.rejection(proposal), number=number, repeat=5))
        taken = min(timeit.repeat(lambda: gate.rejection(vouched), number=number, repeat=5))
    return checked / number * 1e6, taken / number * 1e6


def main() -> None:
    ratios = []
    for name, (schema, data) in cases().items():
        quick = python_validator(schema, name)
        python = GovernedValidator(quick.validator, name)  # python-jsonschema alone
        slow, fast = micros(python, data), micros(quick, data)
        ratios.append(fast / slow)
        ratio = f"quick/python {fast / slow:.3f}"
        print(f"{name:<9} python {slow:8.1f} us  quick {fast:6.1f} us  {ratio}")
    schema, data = cases()["ticket"]
    checked, vouched = gate_micros(schema, data)
    gate = f"vouched/checked {vouched / checked:.3f}"
    print(f"gate      checked {checked:7.1f} us  vouched {vouched:6.1f} us  {gate}")
    print("quick/python: " + " ".join(f"{r:.3f}" for r in ratios))
    print(f"vouched/checked: {vouched / checked:.3f}")


if __name__ == "__main__":
    main()
