"""An evaluation's result as text: `render_eval_human(result, changes)`.

Per-metric means (with their 95% Wilson interval when every score is a pass or
a fail) and thresholds, a confusion matrix per exact match of a categorical
field, the worst cases, tokens and time, the overall verdict, and, given the
changes against a baseline (None: no baseline), each case and metric that moved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ._eval_run import Change, EvalResult


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
        failed = ", ".join(m for m, s in case.scores.items() if s is not None and s < 1.0)
        lines.append(f"  {case.name}: {case.mean:.3f}" + (f" ({failed})" if failed else ""))
    tokens_in = sum(c.input_tokens for c in result.cases)
    tokens_out = sum(c.output_tokens for c in result.cases)
    lines.append(f"usage: {tokens_in} input tokens, {tokens_out} output tokens")
    lines.append(f"time: {result.seconds:.2f}s")
    overall = f"overall: {result.overall:.3f}"
    if result.threshold is not None:
        overall += f" (threshold {result.threshold:g})"
    lines.append(f"{overall}: {'passed' if result.passed else 'FAILED'}")
    if changes is not None:
        lines.append("against the baseline:")
        if not changes:
            lines.append("  no change")
        for c in changes:
            before = "-" if c.before is None else f"{c.before:.3f}"
            after = "-" if c.after is None else f"{c.after:.3f}"
            lines.append(f"  {c.verdict}: {c.case} / {c.metric}: {before} -> {after}")
    return "\n".join(lines) + "\n"


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
    threshold) and one for the overall threshold."""
    from xml.etree import ElementTree as ET

    suite = ET.Element("testsuite", name=result.evaluation, time=f"{result.seconds:.3f}")
    failures = 0
    for a in result.aggregates:
        case = ET.SubElement(suite, "testcase", classname=result.evaluation, name=a.metric)
        if not a.passed:
            failures += 1
            failure = ET.SubElement(case, "failure", message=f"{a.mean:.3f} < {a.threshold:g}")
            failure.text = render_eval_human(result, None)
    overall = ET.SubElement(suite, "testcase", classname=result.evaluation, name="overall")
    if result.threshold is not None and result.overall < result.threshold:
        failures += 1
        message = f"{result.overall:.3f} < {result.threshold:g}"
        ET.SubElement(overall, "failure", message=message).text = render_eval_human(result, None)
    suite.set("tests", str(len(result.aggregates) + 1))
    suite.set("failures", str(failures))
    return ET.tostring(suite, encoding="unicode") + "\n"
