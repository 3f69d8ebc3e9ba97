"""The front end checks alone; `converge_dsl.validation` adds the domain packages' checks."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from converge_dsl import codes, frontend, validation
from converge_dsl.frontend._semantic import kind_checks

PIPELINE = textwrap.dedent(
    """\
    apiVersion: converge-dsl/v1
    kind: Pipeline
    name: both
    packs: {demo: ">=1"}
    models:
      default: {adapter: scripted, script: missing.script.yaml}
    suggestors:
      - name: ag
        kind: agent
        model: default
        target: evaluations
        goal: g
        tools: [context.read, finish]
      - {name: p, kind: pack, use: demo/note, with: {topic: t}, input: seeds, output: strategies}
    """
)
DOMAIN = {codes.LOCK_MISSING, codes.MISSING_FILE}  # an agent's own checks come with its kind


def _codes(checked: frontend.CheckedPipeline) -> set[str]:
    return {d.code for d in checked.diagnostics}


def test_domain_checks_come_through_validation_only(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE, encoding="utf-8")
    alone = frontend.check_pipeline(path, kinds=validation.KINDS)
    composed = validation.check_pipeline(path)
    assert not _codes(alone) & DOMAIN
    assert codes.AGENT_CANNOT_PROPOSE in _codes(alone)
    assert _codes(composed) >= DOMAIN
    assert _codes(alone) <= _codes(composed)
    assert [d for d in composed.diagnostics if d.code not in DOMAIN] == list(alone.diagnostics)


def test_validation_checks_are_the_front_ends_then_the_domains_in_order() -> None:
    names = [check.__name__ for check in validation.CHECKS]
    assert names[: len(frontend.CHECKS)] == [c.__name__ for c in frontend.CHECKS]
    assert names[len(frontend.CHECKS) :] == [
        "check_model_scripts",
        "check_model_config",
        "check_packs",
        "check_tool_lock",
    ]


def test_the_front_end_alone_knows_its_own_kinds_only(tmp_path: Path) -> None:
    """An agent is an unknown kind to the front end's own registry (seed, rule, llm, tool):
    a located schema error naming the kinds there are, never a crash."""
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE, encoding="utf-8")
    found = frontend.check_pipeline(path).diagnostics
    assert {d.code for d in found} == {codes.NOT_ALLOWED_VALUE}
    assert [d.path for d in found] == [("suggestors", 0, "kind"), ("suggestors", 1, "kind")]
    assert [d.hint for d in found] == ["allowed: seed, rule, llm, tool"] * 2


def test_the_front_end_checks_any_given_sequence(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE, encoding="utf-8")
    assert frontend.check_pipeline(path, checks=(), kinds=validation.KINDS).diagnostics == ()
    only_kinds = frontend.check_pipeline(path, checks=[kind_checks], kinds=validation.KINDS)
    assert _codes(only_kinds) == {codes.AGENT_CANNOT_PROPOSE}


def test_importing_validation_imports_no_domain_package_module() -> None:
    import subprocess

    code = (
        "import sys, converge_dsl.validation\n"
        "heavy = [m for m in sys.modules if m.startswith(('converge_dsl.packs.',"
        " 'converge_dsl.agents.', 'converge_dsl.models.', 'converge_dsl.engine'))"
        " or m in ('pydantic', 'httpx', 'asyncio', 'jinja2')]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"


def test_the_front_end_imports_no_domain_package() -> None:
    import subprocess

    code = (
        "import sys, converge_dsl.frontend\n"
        "print([m for m in sys.modules if m.split('.')[:2] in (['converge_dsl', 'packs'],"
        " ['converge_dsl', 'agents'], ['converge_dsl', 'models'])])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"


def test_the_front_end_docstring_names_every_public_name() -> None:
    import re

    documented = set(re.findall(r"`([A-Za-z_]+)", frontend.__doc__ or ""))
    assert set(frontend.__all__) <= documented


def test_the_check_sequences_are_composed_once_and_cannot_change() -> None:
    assert type(frontend.CHECKS) is tuple
    assert type(validation.CHECKS) is tuple
    assert not hasattr(frontend, "check")  # no registrar that mutates a module's list
