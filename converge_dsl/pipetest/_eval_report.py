"""An evaluation's result as text: `render_eval_human(result, changes)`.

Per-metric means (with their 95% Wilson interval when every score is a pass or
a fail) and thresholds, a confusion matrix per exact match of a categorical
field, the worst cases, the cases that failed their expectation (a refusal that ran)
and those whose run stopped with an error, tokens and
time, the overall verdict, and, given the
changes against a baseline (None: no baseline), each case and metric that moved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ._eval_compare import Change
from ._eval_result import EvalResult

# The judges' errors shown with their excerpt in the human output (all are in the JSON).
SHOWN_PROBLEMS = 3


def render_eval_human(result: EvalResult, changes: Sequence[Change] | None) -> str:
    lines = [f"{result.evaluation}: {len(result.cases)} cases"]
    for a in result.aggregates:
        interval = f" [{a.interval[0]:.3f}, {a.interval[1]:.3f}]" if a.interval else ""
        bar = f" (threshold {a.threshold:g})" if a.threshold is not None else ""
        mark = "ok  " if a.passed else "FAIL"
        lines.append(f"  {mark} {a.metric}: {a.mean:.3f}{interval} over {a.cases} cases{bar}")
    for a in result.aggregates:
        if a.confusion:
            lines.extend(_confusion(a.metric, a.confusion))
    worst = [case for case in result.worst() if case.mean < 1.0]
    lines.append("worst cases:" if worst else "worst cases: none, every case scored 1")
    for case in worst:
        below = [m for m, s in case.scores.items() if s is not None and s < 1.0]
        failed = ", ".join(below + ["failed expectation"] * bool(case.failed_expectation))
        lines.append(f"  {case.name}: {case.mean:.3f}" + (f" ({failed})" if failed else ""))
    tokens_in = sum(c.input_tokens for c in result.cases)
    tokens_out = sum(c.output_tokens for c in result.cases)
    lines.append(f"usage: {tokens_in} input tokens, {tokens_out} output tokens")
    if any(result.judge_usage):
        calls, judge_in, judge_out = result.judge_usage
        lines.append(f"judges: {calls} call(s), {judge_in} input tokens, {judge_out} output tokens")
    if result.not_run:
        lines.append(
            f"not run: {len(result.not_run)} case(s), the evaluation's caps were spent "
            f"({', '.join(result.not_run[:5])}{', ...' if len(result.not_run) > 5 else ''})"
        )
    if result.not_judged:
        shown_pairs = [f"{case}/{metric}" for case, metric in result.not_judged[:5]]
        more_pairs = ", ..." if len(result.not_judged) > 5 else ""
        lines.append(
            f"not judged: {len(result.not_judged)} judgement(s), the evaluation's caps were "
            f"spent ({', '.join(shown_pairs)}{more_pairs})"
        )
    unmet = result.failed_expectations()
    lines += _listed(
        "failed expectations: {} case(s):", [(c.name, c.failed_expectation) for c in unmet]
    )
    errors = result.errors()
    lines += _listed(
        "errors: {} case(s) stopped with an error:", [(c.name, c.error) for c in errors]
    )
    if result.problems:
        from converge_dsl.frontend import render_human

        shown = result.problems[:SHOWN_PROBLEMS]
        lines.append(render_human(shown, {}).rstrip("\n"))
        more = len(result.problems) - len(shown)
        if more:
            lines.append(f"... and {more} more judge error(s) (all in --format json)")
    lines.append(f"time: {result.seconds:.2f}s")
    overall = f"overall: {result.overall:.3f}"
    if result.threshold is not None:
        overall += f" (threshold {result.threshold:g})"
    broken = "" if result.passed else _broken(result)  # why, when its scores do not say
    lines.append(
        f"{overall}: {'passed' if result.passed else 'FAILED'}" + (f" ({broken})" * bool(broken))
    )
    if changes is not None:
        lines.append("against the baseline:")
        if not changes:
            lines.append("  no change")
        for c in changes:
            before = "-" if c.before is None else f"{c.before:.3f}"
            after = "-" if c.after is None else f"{c.after:.3f}"
            lines.append(f"  {c.verdict}: {c.case} / {c.metric}: {before} -> {after}")
    return "\n".join(lines) + "\n"


def _listed(title: str, cases: Sequence[tuple[str, str | None]]) -> list[str]:
    """`title` with the count, then the first `SHOWN_PROBLEMS` cases, `  NAME: TEXT` each
    (nothing for no case)."""
    if not cases:
        return []
    lines = [title.format(len(cases))]
    lines.extend(f"  {name}: {text}" for name, text in cases[:SHOWN_PROBLEMS])
    if len(cases) > SHOWN_PROBLEMS:
        lines.append(f"  ... and {len(cases) - SHOWN_PROBLEMS} more (all in --format json)")
    return lines


def _confusion(metric: str, cells: Mapping[tuple[str, str], int]) -> list[str]:
    expected = sorted({e for e, _ in cells})
    found = sorted({f for _, f in cells} | set(expected))
    width = max(len(x) for x in [*found, *expected, "expected"]) + 2
    lines = [f"confusion of {metric} (rows expected, columns found):"]
    lines.append("  " + "".ljust(width) + "".join(f.rjust(width) for f in found))
    for e in expected:
        row = "".join(str(cells.get((e, f), 0)).rjust(width) for f in found)
        lines.append("  " + e.ljust(width) + row)
    return lines


def render_eval_junit(result: EvalResult) -> str:
    """JUnit XML: one testsuite, one testcase per metric (a failure when it misses its
    threshold), one `cases` (a failure when a case's run stopped with an error, a case
    failed its expectation, was not run or not judged, or a judge's verdict was
    refused: what fails the evaluation whatever its scores) and one for the overall
    threshold."""
    import functools
    from xml.etree import ElementTree as ET

    suite = ET.Element("testsuite", name=result.evaluation, time=f"{result.seconds:.3f}")
    report = functools.cache(lambda: render_eval_human(result, None))  # each failure's text
    failures = 0
    for a in result.aggregates:
        case = ET.SubElement(suite, "testcase", classname=result.evaluation, name=a.metric)
        if not a.passed:
            failures += 1
            failure = ET.SubElement(case, "failure", message=f"{a.mean:.3f} < {a.threshold:g}")
            failure.text = report()
    cases = ET.SubElement(suite, "testcase", classname=result.evaluation, name="cases")
    broken = _broken(result)
    if broken:
        failures += 1
        ET.SubElement(cases, "failure", message=broken).text = report()
    overall = ET.SubElement(suite, "testcase", classname=result.evaluation, name="overall")
    if result.threshold is not None and result.overall < result.threshold:
        failures += 1
        message = f"{result.overall:.3f} < {result.threshold:g}"
        ET.SubElement(overall, "failure", message=message).text = report()
    suite.set("tests", str(len(result.aggregates) + 2))
    suite.set("failures", str(failures))
    return ET.tostring(suite, encoding="unicode") + "\n"


def _broken(result: EvalResult) -> str:
    """What fails `result` whatever its scores, in a few words ("" when nothing does)."""
    counts = (
        (len(result.errors()), "case(s) stopped with an error"),
        (len(result.failed_expectations()), "case(s) failed their expectation"),
        (len(result.not_run), "case(s) not run"),
        (len(result.not_judged), "judgement(s) not made"),
        (len(result.problems), "judge problem(s)"),
    )
    return "; ".join(f"{count} {what}" for count, what in counts if count)


def render_configurations_human(
    results: Sequence[EvalResult], changes: Mapping[str, Sequence[Change]] | None
) -> str:
    """Each configuration's evaluation (as `render_eval_human`), then the metrics side by
    side: one column per configuration, each mean marked `!` when it misses its threshold."""
    parts = []
    for result in results:
        own = None if changes is None else changes.get(result.configuration, [])
        parts.append(f"== configuration {result.configuration}\n" + render_eval_human(result, own))
    names = [r.configuration for r in results]
    metrics = [a.metric for a in results[0].aggregates]
    width = max(len(m) for m in [*metrics, "overall", "metric"]) + 2
    column = max(10, *(len(n) + 2 for n in names))
    lines = [
        "side by side:",
        "  " + "metric".ljust(width) + "".join(n.rjust(column) for n in names),
    ]
    for index, metric in enumerate(metrics):
        cells = []
        for result in results:
            a = result.aggregates[index]
            cells.append((f"{a.mean:.3f}" + ("" if a.passed else "!")).rjust(column))
        lines.append("  " + metric.ljust(width) + "".join(cells))
    overall = [(f"{r.overall:.3f}" + ("" if r.passed else "!")).rjust(column) for r in results]
    lines.append("  " + "overall".ljust(width) + "".join(overall))
    verdicts = ["passed" if r.passed else "FAILED" for r in results]
    lines.append("  " + "".ljust(width) + "".join(v.rjust(column) for v in verdicts))
    return "\n".join(parts) + "\n".join(lines) + "\n"


def render_configurations_junit(results: Sequence[EvalResult]) -> str:
    """JUnit XML: one testsuite per configuration (named `FILE [NAME]`), each as
    `render_eval_junit` writes it."""
    body = "".join(
        render_eval_junit(result).replace(
            f'name="{_xml(result.evaluation)}"',
            f'name="{_xml(result.evaluation)} [{_xml(result.configuration)}]"',
            1,
        )
        for result in results
    )
    return f"<testsuites>\n{body}</testsuites>\n"


def _xml(text: str) -> str:
    from xml.sax.saxutils import quoteattr

    return quoteattr(text)[1:-1]
