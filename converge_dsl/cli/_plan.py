"""`converge-dsl plan PIPELINE`: simulate an agent's first turns without calling a model.

For each agent (or the one named by `--agent`): per turn, the contributors
that fire (persisted or transient), the estimated tokens before the call,
where compaction triggers, and which summarizer calls fit the budget and
which fall back to the stub, how it stops, and the model calls and tokens
one execution expects; then their total against the pipeline's budget. The
simulation runs the real turn machine and compaction policy
(`converge_dsl.agents.simulate`) with assumed reply and tool-result sizes, or
the model script of an agent on a scripted model. Exit codes: 0, 2 invalid
pipeline, 3 usage error.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.cli._inputs import add_input_arguments, parse_inputs
from converge_dsl.errors import UsageError

if TYPE_CHECKING:
    from converge_dsl.agents import Plan, PlanTotal
    from converge_dsl.cli import CommandIO


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", type=Path, metavar="PIPELINE", help="the pipeline YAML file")
    parser.add_argument(
        "--agent", metavar="NAME", help="plan this agent only (default: every agent)"
    )
    parser.add_argument(
        "--turns", type=int, metavar="N", help="turns to simulate (default max_turns)"
    )
    parser.add_argument(
        "--assume-reply-chars",
        type=int,
        default=400,
        metavar="N",
        help="size of each model reply, in characters (default 400; an agent on a "
        "scripted model gets its script's replies)",
    )
    parser.add_argument(
        "--assume-tool-result-chars",
        type=int,
        default=800,
        metavar="N",
        help="size of each turn's tool results, in characters (default 800)",
    )
    add_input_arguments(parser)
    parser.add_argument(
        "--format",
        choices=("human", "json"),
        default="human",
        help="json: the plans and their total as JSON",
    )


def _human(plans: tuple[Plan, ...], total: PlanTotal) -> str:
    lines: list[str] = []
    for plan in plans:
        a = plan.assumptions
        lines.append(
            f"agent {plan.agent}: window {plan.context_window} tokens, compaction at "
            f"{plan.threshold_tokens:g}, emergency at {plan.emergency_tokens:g}"
        )
        replies = (
            f"replies of {a['reply_chars']} chars"
            if plan.replies == "assumed"
            else f"replies from its {plan.replies}"
        )
        lines.append(f"assuming {replies} and tool results of {a['tool_result_chars']} chars")
        lines.append(f"{'turn':>4}  {'tokens':>7}  {'contributors':<34}  compaction / summary")
        for row in plan.turns:
            fired = (
                ", ".join(f"{n}{'' if p else ' (transient)'}" for n, p in row.contributors) or "-"
            )
            notes = []
            summaries = {s.reduction_id: s for s in row.summaries}
            for c in row.compactions:
                span = f"turns {c['first_turn']}-{c['last_turn']}"
                s = summaries.get(c["reduction_id"])
                how = (
                    "stub (no summarizer)"
                    if s is None
                    else (
                        "summary call fits the budget"
                        if s.decision == "call"
                        else f"stub: {s.decision}" + (f" ({s.detail})" if s.detail else "")
                    )
                )
                notes.append(
                    f"{c['level']} {c['reduction_id']}: clear {span}, "
                    f"{c['tokens_before']} -> {c['tokens_after']} tokens; {how}"
                )
            lines.append(
                f"{row.turn:>4}  {row.estimated_tokens:>7}  {fired:<34}  {'; '.join(notes) or '-'}"
            )
        end = f"stops: {plan.status}" + (f" ({plan.detail})" if plan.detail else "")
        side = _plural(plan.summary_calls, "summary call")
        expects = (
            f"expects: {_plural(plan.model_calls, 'model call')} "
            f"({_plural(plan.model_calls - plan.summary_calls, 'turn')}, {side}), "
            f"~{plan.tokens:,} tokens per execution"
        )
        lines += [end, expects, ""]
    lines.append(_total(total, len(plans)))
    return "\n".join(lines) + "\n"


def _plural(count: int, unit: str) -> str:
    return f"{count:,} {unit}" + ("" if count == 1 else "s")


def _total(total: PlanTotal, agents: int) -> str:
    """The total line: calls and tokens of one execution of each agent, against the budget."""
    each = "the agent" if agents == 1 else f"each of the {agents} agents"
    line = (
        f"total: {_plural(total.model_calls, 'model call')}, ~{total.tokens:,} tokens "
        f"for one execution of {each}"
    )
    limits = [
        _against(name, limit, used)
        for name, limit, used in (
            ("max_model_calls", total.max_model_calls, total.model_calls),
            ("max_tokens", total.max_tokens, total.tokens),
        )
        if limit is not None
    ]
    return line + (
        f"; {'; '.join(limits)}" if limits else "; the budget sets no call or token limit"
    )


def _against(setting: str, limit: int, used: int) -> str:
    if used > limit:
        return f"over budget.{setting} {limit:,} by {used - limit:,}"
    return f"within budget.{setting} {limit:,}"


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl._files import user_roots
    from converge_dsl.agents import MAX_ASSUMED_CHARS, plan_pipeline
    from converge_dsl.validation import load_pipeline

    for option in ("turns", "assume_reply_chars", "assume_tool_result_chars"):
        value = getattr(args, option)
        flag = f"--{option.replace('_', '-')}"
        if value is not None and value < 0:
            raise UsageError(f"{flag} must not be negative", code=codes.ARGUMENTS_REFUSED)
        if option != "turns" and value > MAX_ASSUMED_CHARS:
            raise UsageError(
                f"{flag} must be at most {MAX_ASSUMED_CHARS:,} (got {value:,})",
                hint="a reply or tool result that large overflows any context window; "
                f"{MAX_ASSUMED_CHARS:,} already forces an emergency compaction every turn",
                code=codes.ARGUMENTS_REFUSED,
            )
    roots = user_roots((), io.environ)
    document = load_pipeline(args.pipeline, roots=roots, env=io.environ)
    planned = plan_pipeline(
        document,
        roots=roots,
        env=io.environ,
        inputs=parse_inputs(args),
        agent=args.agent,
        turns=args.turns,
        reply_chars=args.assume_reply_chars,
        tool_result_chars=args.assume_tool_result_chars,
    )
    if args.format == "json":
        io.stdout.write(json.dumps(asdict(planned), indent=2) + "\n")
    else:
        io.stdout.write(_human(planned.plans, planned.total))
    return 0
