"""`diff` of two runs of every shipped example, one prompt changed between them.

The examples' model scripts answer by suggestor, so a changed prompt alone
changes no answer. Each case here copies an example to a folder of its own,
puts one rule before its script's rules that matches on the changed prompt's
new text (`contains`, or `regex` where only some of a batch's cases are to
answer otherwise) and answers otherwise, runs the example as shipped (A) and
with the one prompt changed (B), both with that script, and compares
`diff --ignore usage A B` with `data/example-diffs/NAME.txt`: the facts that
the new answer changes, nothing else (the tokens a longer prompt counts are
usage, left out). The shipped files are read, never changed.
`support-triage/ticket.yaml` runs as a batch over its 52 labelled tickets, and
its diff is of the two results files. A fact of B changed that the prompt did
not change shows in the diff too: the expected files hold every changed fact.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import DATA, ROOT, cli, expected

PIPELINES = ROOT / "pipelines"


@dataclass(frozen=True)
class PromptChange:
    """In `example`, the prompt text `old` becomes `new`; `rule` (YAML) answers `new`."""

    example: str
    old: str
    new: str
    rule: str
    batch: bool = False
    folders: tuple[str, ...] = ()  # beside the example, copied with it (a tool server's)


CHANGES = (
    PromptChange(
        "agent-review.yaml",
        "proposing one evaluation per strategy.",
        "proposing one evaluation per strategy. Weigh the hiring limit first.",
        """\
  - match: {suggestor: reviewer, turn: 3, contains: "Weigh the hiring limit first."}
    reply: "Five hires cannot staff a direct sales force."
    tool_calls:
      - name: context.propose
        input:
          id: direct
          content: "Infeasible: direct sales needs 8 hires, the limit is 5"
          confidence: 0.9
""",
    ),
    PromptChange(
        "incident-triage.yaml",
        "system: You are an on-call SRE. Answer with a JSON array.",
        "system: You are an on-call SRE. Weigh recent deploys first. Answer with a JSON array.",
        """\
  - match: {suggestor: hypothesise, contains: "Weigh recent deploys first."}
    reply: |
      [{"id": "bad-deploy", "cause": "v2.31 introduced a slow query", "likelihood": 0.9},
       {"id": "db-saturation", "cause": "primary database is CPU-bound", "likelihood": 0.55},
       {"id": "cosmic-rays", "cause": "bit flips", "likelihood": 0.05}]
""",
    ),
    PromptChange(
        "market-entry.yaml",
        "system: You are a market analyst.",
        "system: You are a market analyst. Name competitors with at least 10% share only.",
        """\
  - match: {suggestor: competitor-scan, contains: "at least 10% share only"}
    reply: |
      [{"id": "freightly", "name": "Freightly", "share": 31},
       {"id": "routewise", "name": "RouteWise", "share": 22}]
""",
    ),
    PromptChange(
        "staffing-plan.yaml",  # its prompt is the pack's; the pipeline sets its market
        'with: {market: "Nordic B2B SaaS for logistics", max_items: 3}',
        'with: {market: "Nordic B2B SaaS for cold-chain logistics", max_items: 3}',
        """\
  - match: {suggestor: market-scan, contains: "cold-chain logistics"}
    reply: |
      [{"name": "Freightly"}, {"name": "ColdRoute"}, {"name": "NordHaul"}]
""",
    ),
    PromptChange(
        "support-triage.yaml",
        "system: You triage support tickets. Answer with a JSON array only.",
        "system: You triage support tickets. A double charge is critical."
        " Answer with a JSON array only.",
        """\
  - match: {suggestor: classify, contains: "A double charge is critical."}
    reply: |
      [{"id": "T-101", "category": "billing", "urgency": 3, "duration": 20, "deadline": 30},
       {"id": "T-102", "category": "bug", "urgency": 3, "duration": 45, "deadline": 60},
       {"id": "T-103", "category": "account", "urgency": 1, "duration": 10},
       {"id": "T-104", "category": "billing", "urgency": 2, "duration": 15}]
""",
    ),
    PromptChange(
        "vendor-review.yaml",
        "One vendor per line: name | claim | score.",
        "One vendor per line: name | claim | score. Name EU-hosted vendors only.",
        """\
  - match: {suggestor: propose-vendors, contains: "EU-hosted vendors only"}
    reply: |
      SignRight | EU-hosted, REST API, eIDAS qualified signatures | 0.85
      QuickSign | 100% uptime guaranteed forever | 0.9
      InkFlow EU | Frankfurt region, webhooks, audit trail | 0.7
""",
    ),
    PromptChange(
        "support-triage/ticket.yaml",
        "system: You triage support tickets. Answer with a JSON array only.",
        "system: You triage support tickets. Urgency 3 is for outages only."
        " Answer with a JSON array only.",
        # only the tickets the scripted model read as critical and that name no outage
        """\
  - match: {suggestor: classify, regex: "(?s)outages only.*Ticket: T-20[29] "}
    reply: '[{"category": "bug", "urgency": 2}]'
""",
        batch=True,
    ),
    PromptChange(
        "helpdesk.yaml",  # starts its MCP server: the tool suggestor's answer is the same
        "a reply that cites it.",
        "a reply that cites it. Give the article's title too.",
        """\
  - match: {suggestor: responder, turn: 2, contains: "Give the article's title too."}
    tool_calls:
      - name: context.propose
        input:
          id: reply-T-1042
          content: "See KB-7, VPN disconnects on office Wi-Fi: set the keep-alive to 60 s."
          data: {ticket: T-1042, article: KB-7, title: VPN disconnects on office Wi-Fi}
          confidence: 0.85
""",
        folders=("helpdesk",),
    ),
)


def _shipped_examples() -> set[str]:
    """Every pipeline file under pipelines/ (not a script, a test or an evaluation file)."""
    found = set()
    for path in PIPELINES.rglob("*.yaml"):
        if re.search(r"^kind: Pipeline\s*$", path.read_text(encoding="utf-8"), re.MULTILINE):
            found.add(path.relative_to(PIPELINES).as_posix())
    return found


def test_every_shipped_example_has_a_prompt_change() -> None:
    assert {c.example for c in CHANGES} == _shipped_examples()


def _copy(change: PromptChange, folder: Path) -> Path:
    """The example, its model script with the change's rule first, and its lock, in `folder`."""
    source = PIPELINES / change.example
    pipeline = folder / source.name
    folder.mkdir()
    shutil.copy(source, pipeline)
    for name in ("converge.lock", "tickets.jsonl"):
        if (source.parent / name).is_file():
            shutil.copy(source.parent / name, folder / name)
    for name in change.folders:
        shutil.copytree(source.parent / name, folder / name)
    (script_name,) = re.findall(r"script: (\S+?)\}", source.read_text(encoding="utf-8"))
    script = (source.parent / script_name).read_text(encoding="utf-8")
    assert script.count("\nrules:\n") == 1
    (folder / script_name).write_text(script.replace("\nrules:\n", "\nrules:\n" + change.rule))
    return pipeline


def _run(change: PromptChange, pipeline: Path) -> Path:
    if not change.batch:
        code, out, err = cli("run", pipeline, "--format", "json")
        assert code == 0, err
        result = pipeline.with_suffix(".json")
        result.write_text(out, encoding="utf-8")
        return result
    cases = pipeline.parent / "cases.jsonl"
    with cases.open("w", encoding="utf-8") as stream:
        for line in (pipeline.parent / "tickets.jsonl").read_text(encoding="utf-8").splitlines():
            ticket = json.loads(line)
            stream.write(json.dumps({"id": ticket["name"], **ticket["inputs"]}) + "\n")
    result = pipeline.with_suffix(".results.jsonl")
    code, _, err = cli("run", pipeline, "--cases", cases, "--out", result, "--concurrency", "4")
    assert code == 0, err
    return result


@pytest.mark.parametrize("change", CHANGES, ids=[c.example for c in CHANGES])
def test_a_changed_prompt_shows_the_changed_facts_and_nothing_else(
    change: PromptChange, tmp_path: Path
) -> None:
    a = _copy(change, tmp_path / "a")
    b = _copy(change, tmp_path / "b")
    text = b.read_text(encoding="utf-8")
    assert text.count(change.old) == 1
    b.write_text(text.replace(change.old, change.new), encoding="utf-8")
    result_a, result_b = _run(change, a), _run(change, b)
    code, out, err = cli("diff", "--ignore", "usage", result_a, result_b)
    assert code == 1, err
    name = change.example.replace("/", "-").removesuffix(".yaml")
    assert out == expected(f"example-diffs/{name}.txt", out)
    # the usage is still compared when not left out: a longer prompt counts more tokens
    code, whole, _ = cli("diff", result_a, result_b)
    assert code == 1
    assert "usage input_tokens" in whole
    # a fact the prompt did not change, changed in B: it shows, so the file no longer matches
    where = _change_an_unchanged_fact(result_b, out, batch=change.batch)
    code, changed, _ = cli("diff", "--ignore", "usage", result_a, result_b)
    assert code == 1
    assert changed != (DATA / f"example-diffs/{name}.txt").read_text(encoding="utf-8")
    assert where in changed
    assert '-> "changed elsewhere"' in changed
    # the same example run twice, unchanged: no difference at all
    again = _copy(change, tmp_path / "again")
    assert cli("diff", result_a, _run(change, again))[:2] == (0, _no_difference(change))


def _change_an_unchanged_fact(result: Path, listed: str, *, batch: bool) -> str:
    """Gives a fact of `result` that the diff `listed` does not name the content `changed
    elsewhere`; the line (for a batch, the lines) that names it in a diff."""
    if not batch:
        body = json.loads(result.read_text(encoding="utf-8"))
        where = _first_unlisted_fact(body, listed)
        result.write_text(json.dumps(body), encoding="utf-8")
        return f"~ {where}\n"
    lines = result.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        body = json.loads(line)
        if f"case {body['id']}:" not in listed:
            where = _first_unlisted_fact(body, "")  # a case the diff does not name at all
            lines[number] = json.dumps(body)
            result.write_text("\n".join(lines) + "\n", encoding="utf-8")
            return f"case {body['id']}:\n  ~ {where}\n"
    raise AssertionError("every case is in the diff")


def _first_unlisted_fact(body: dict[str, Any], listed: str) -> str:
    for key, facts in body["facts"].items():
        for fact in facts:
            if f"{key}/{fact['id']}\n" not in listed:
                fact["content"] = "changed elsewhere"
                return f"{key}/{fact['id']}"
    raise AssertionError("every fact is in the diff")


def _no_difference(change: PromptChange) -> str:
    return "no difference (52 cases)\n" if change.batch else "no difference\n"
