"""Test reports for people and machines: human text with diffs, JSON, JUnit XML.

- `format_failures(report)`: one case's failures, each a located CD960
  diagnostic (file:line:col, the test file's line with a caret under the
  expectation) followed by the expected and actual values as a diff. The pytest
  plugin prints the same text.
- `render_human(reports)`: a PASS/FAIL/ERROR line per case, the failures, a summary.
- `render_json(reports)`: `{"summary": {...}, "cases": [...]}`.
- `render_junit(reports)`: JUnit XML (the Jenkins `junit-10.xsd` dialect), one
  `testsuite` per test file, one `testcase` per case.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, format_path

from ._expect import Failure
from ._runner import CaseReport

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

REPORT_FORMATS = ("human", "json", "junit")


def render_report(reports: Sequence[CaseReport], format: str, *, color: bool = False) -> str:
    """`reports` in one of `REPORT_FORMATS`."""
    if format == "json":
        return render_json(reports)
    if format == "junit":
        return render_junit(reports)
    return render_human(reports, color=color)


@dataclass(frozen=True, slots=True)
class Totals:
    passed: int
    failed: int
    errors: int
    seconds: float

    @classmethod
    def of(cls, reports: Sequence[CaseReport]) -> Totals:
        return cls(
            passed=sum(r.passed for r in reports),
            failed=sum(bool(r.failures) and r.error is None for r in reports),
            errors=sum(r.error is not None for r in reports),
            seconds=sum(r.seconds for r in reports),
        )

    def line(self) -> str:
        parts = [f"{self.passed} passed", f"{self.failed} failed"]
        if self.errors:
            parts.append(f"{self.errors} error" + ("s" if self.errors != 1 else ""))
        return ", ".join(parts) + f" in {self.seconds:.2f}s"


def failure_diagnostic(report: CaseReport, failure: Failure) -> Diagnostic:
    """A failure as a located diagnostic (the caret under the expectation)."""
    span = report.span(failure)
    return Diagnostic.at(
        codes.TEST_FAILED,
        f"case {report.case.name!r}: {failure.title} differs from the expectation",
        span,
        path=failure.path,
        hint="run `converge-dsl test --update` to accept the run's value"
        if failure.updatable
        else None,
    )


def error_diagnostic(report: CaseReport) -> Diagnostic:
    return Diagnostic.at(
        codes.TEST_CASE_ERROR,
        f"case {report.case.name!r} could not run: {report.error}",
        report.span(),
        path=report.case.path,
        hint=report.error_hint,
    )


def diff_text(failure: Failure) -> str:
    """Expected vs actual: a unified diff for text over several lines, else two lines."""
    expected, actual = failure.expected, failure.actual
    if "\n" in expected and "\n" in actual:
        lines = difflib.unified_diff(
            expected.splitlines(), actual.splitlines(), "expected", "actual", lineterm="", n=2
        )
        return "\n".join("    " + line for line in lines) + "\n"
    return f"    expected: {_indent(expected)}\n    actual:   {_indent(actual)}\n"


def format_failures(report: CaseReport, *, color: bool = False) -> str:
    """The readable account of why `report`'s case failed ("" when it passed)."""
    from converge_dsl.frontend import render_human

    texts = {report.test.display: report.test.document.text}
    if report.error is not None:
        return render_human([error_diagnostic(report)], texts, color)
    blocks = []
    for failure in report.failures:
        located = render_human([failure_diagnostic(report, failure)], texts, color)
        blocks.append(located + diff_text(failure))
    return "\n".join(blocks)


def render_human(reports: Sequence[CaseReport], *, color: bool = False) -> str:
    from converge_dsl.frontend import terminal_safe

    lines: list[str] = []
    for report in reports:
        status = "PASS" if report.passed else ("ERROR" if report.error else "FAIL")
        # The case's name and file are the user's text: escaped, as diagnostics escape theirs.
        lines.append(f"{status} {terminal_safe(report.test_id)} ({report.seconds:.2f}s)\n")
        if not report.passed:
            lines.append(format_failures(report, color=color) + "\n")
    lines.append(Totals.of(reports).line() + "\n")
    return "".join(lines)


def render_json(reports: Sequence[CaseReport]) -> str:
    totals = Totals.of(reports)
    cases = [_case_json(r) for r in reports]
    summary = {
        "passed": totals.passed,
        "failed": totals.failed,
        "errors": totals.errors,
        "seconds": round(totals.seconds, 3),
    }
    text = json.dumps({"summary": summary, "cases": cases}, indent=2, ensure_ascii=False)
    # A file name that is not UTF-8 (lone surrogates in Python): the output stays UTF-8 (U+FFFD).
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") + "\n"


def _case_json(report: CaseReport) -> dict[str, Any]:
    span = report.span()
    status = "passed" if report.passed else ("error" if report.error else "failed")
    return {
        "file": report.test.display,
        "case": report.case.name,
        "line": span.line,
        "status": status,
        "seconds": round(report.seconds, 3),
        "stop_reason": report.stop_reason,
        "error": report.error,
        "failures": [
            {
                "code": codes.TEST_FAILED,
                "file": report.span(f).file,
                "line": report.span(f).line,
                "column": report.span(f).column,
                "path": format_path(f.path),
                "title": f.title,
                "expected": f.expected,
                "actual": f.actual,
            }
            for f in report.failures
        ],
    }


def render_junit(reports: Sequence[CaseReport]) -> str:
    """JUnit XML: `testsuites` > one `testsuite` per file > one `testcase` per case."""
    import xml.etree.ElementTree as ET

    totals = Totals.of(reports)
    root = ET.Element(
        "testsuites",
        name="converge-dsl test",
        tests=str(len(reports)),
        failures=str(totals.failed),
        errors=str(totals.errors),
        time=f"{totals.seconds:.3f}",
    )
    by_file: dict[str, list[CaseReport]] = {}
    for report in reports:
        by_file.setdefault(report.test.display, []).append(report)
    for file, items in by_file.items():
        sub = Totals.of(items)
        suite = _element(
            root,
            "testsuite",
            name=file,
            tests=str(len(items)),
            failures=str(sub.failed),
            errors=str(sub.errors),
            skipped="0",
            time=f"{sub.seconds:.3f}",
            file=file,
        )
        for report in items:
            case = _element(
                suite,
                "testcase",
                name=report.case.name,
                classname=file,
                time=f"{report.seconds:.3f}",
            )
            if report.error is not None:
                element = _element(case, "error", type=codes.TEST_CASE_ERROR, message=report.error)
                element.text = _xml_safe(format_failures(report))
            elif report.failures:
                first = report.failures[0]
                message = f"{report.where(first)}: {first.title} differs"
                element = _element(case, "failure", type=codes.TEST_FAILED, message=message)
                element.text = _xml_safe(format_failures(report))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def render_junit_invalid(diagnostics: Sequence[Diagnostic]) -> str:
    """JUnit XML for test files that could not be read: one `testsuite` per file
    with one `testcase` in error holding its located diagnostics, so a CI system
    that reads the XML shows why instead of finding no report."""
    import xml.etree.ElementTree as ET

    from converge_dsl.frontend import render_human

    by_file: dict[str, list[Diagnostic]] = {}
    for d in diagnostics:
        by_file.setdefault(d.file, []).append(d)
    root = ET.Element(
        "testsuites",
        name="converge-dsl test",
        tests=str(len(by_file)),
        failures="0",
        errors=str(len(by_file)),
        time="0.000",
    )
    for file, found in by_file.items():
        suite = _element(
            root,
            "testsuite",
            name=file,
            tests="1",
            failures="0",
            errors="1",
            skipped="0",
            time="0.000",
            file=file,
        )
        case = _element(suite, "testcase", name="(test file)", classname=file, time="0.000")
        first = found[0]
        message = f"{first.file}:{first.line}:{first.column}: {first.message}"
        element = _element(case, "error", type=first.code, message=message)
        element.text = _xml_safe(render_human(found, {}, False))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _element(parent: ET.Element, tag: str, **attributes: str) -> ET.Element:
    """A child element whose every attribute is `_xml_safe`: names of cases and files
    are the user's text and may hold characters XML 1.0 cannot."""
    import xml.etree.ElementTree as ET

    safe = {name: _xml_safe(value) for name, value in attributes.items()}
    return ET.SubElement(parent, tag, safe)


def _xml_safe(text: str) -> str:
    """`text` without the characters XML 1.0 cannot hold (escaped as `\\xNN`)."""
    return "".join(
        c
        if c in "\t\n\r"
        or 0x20 <= ord(c) < 0xD800
        or 0xE000 <= ord(c) < 0xFFFE
        or ord(c) >= 0x10000
        else f"\\x{ord(c):02x}"
        for c in text
    )


def _indent(text: str) -> str:
    return text.replace("\n", "\n              ")
