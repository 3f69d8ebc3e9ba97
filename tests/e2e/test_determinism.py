"""Law: the same pipeline and the same inputs give a byte-identical JSON result, run after run."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converge_dsl.cli import run

KEYS = ["hypotheses", "strategies", "constraints", "evaluations"]
words = st.text(alphabet="abcdefgh xyz", min_size=1, max_size=12)


@st.composite
def pipelines(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    lines = [
        "apiVersion: converge-dsl/v1",
        "kind: Pipeline",
        "name: law",
        "inputs: {topic: {default: tea}}",
        f"seeds: [{{id: s0, content: {json.dumps(draw(words))}}}]",
        "suggestors:",
    ]
    count = draw(st.integers(1, 8))
    for index in range(count):
        # r0 reads the seed and writes an object content, so every run holds data
        reads = "seeds" if index == 0 else draw(st.sampled_from(["seeds", *KEYS]))
        writes = draw(st.sampled_from(KEYS))
        confidence = draw(st.sampled_from([0.4, 0.6, 0.9, 1.0]))
        content = draw(words)
        lines += [
            f"  - name: r{index}",
            "    kind: rule",
            f"    dependencies: [{reads}]",
            "    emit:",
            f"      - key: {writes}",
            f"        id: 'r{index}-{{{{ count(\"{reads}\") }}}}'",
            f"        content: '{content} {{{{ inputs.topic }}}} "
            f'{{{{ facts.{reads} | map(attribute="id") | join(",") }}}}\'',
            f"        confidence: {confidence}",
        ]
        if index == 0 or draw(st.booleans()):
            # an object content: the fact's data (and its canonical JSON as text)
            lines[-2] = (
                f"        content: {{text: '{content} {{{{ inputs.topic }}}}', "
                f"count: {draw(st.integers(-5, 5))}, "
                f'ids: \'{{{{ facts.{reads} | map(attribute="id") | join(",") }}}}\', '
                f"nested: {{ok: {draw(st.sampled_from(['true', 'false', 'null']))}, "
                f"xs: [1, 2.5, '{content}']}}}}"
            )
    topic = draw(words)
    return "\n".join(lines) + "\n", {"topic": topic}


def _json_run(path: Path, topic: str) -> tuple[int, bytes]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", str(path), "--format", "json", "--input", f"topic={topic}"], out, err)
    return code, out.getvalue().encode("utf-8")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelines())
def test_same_pipeline_same_inputs_byte_identical_result(
    case: tuple[str, dict[str, str]],
) -> None:
    text, inputs = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p.yaml"
        path.write_text(text, encoding="utf-8")
        first = _json_run(path, inputs["topic"])
        second = _json_run(path, inputs["topic"])
    assert first == second
    assert first[0] in (0, 1, 4)  # converged, conflicting ids (error), or out of cycles
    assert json.loads(first[1])["cycles"] >= 1
    facts = json.loads(first[1])["facts"]  # r0's fact, or the diagnostic rejecting it
    assert any(f["data"] is not None for fs in facts.values() for f in fs)
