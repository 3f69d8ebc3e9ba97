"""`validate` imports only what the file needs (docs/architecture.md §5).

Each test runs `validate FILE` under `python -X importtime` in a subprocess
and reads the modules it imported (through `cli.run` and a normal exit: the
console entry point ends with `os._exit`, which drops importtime's last
lines). A pipeline of rules never
imports the engine, the compiler, the runtime, the agents, the model
adapters, asyncio, pydantic, httpx or jinja2; a pipeline with an agent and a
scripted model adds its checks but still none of the engine, asyncio,
pydantic or httpx. Neither imports `dataclasses`, `inspect`, `shutil` or
`difflib` (`LEAN_FORBIDDEN`: each costs milliseconds of a short command).
How long the imports take is a benchmark's figure, not a test's:
`python bench/peers.py` prints `validate-small/python-startup`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_LINE = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)")

RULES_ONLY = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: rules-only
keys: [{name: tickets}, {name: triaged}]
seeds: [{id: t1, key: tickets, content: "printer on fire"}]
suggestors:
  - name: triage
    kind: rule
    dependencies: [tickets]
    emit: [{key: triaged, id: "x-{{ count('tickets') }}", content: "{{ facts.tickets | length }}"}]
invariants:
  - {name: all-triaged, class: acceptance, check: "count('triaged') >= 1"}
"""

ALWAYS_FORBIDDEN = (
    "asyncio",
    "pydantic",
    "httpx",
    "httpcore",
    "anyio",
    "converge_dsl.engine",
    "converge_dsl.compiler",
    "converge_dsl.runtime",
    "converge_dsl.sandbox._templating",
    "converge_dsl.models.http",
    "converge_dsl.models.port",
    "converge_dsl.agents._agent",
    "converge_dsl.agents._policy",
)
# Start-up costs a valid file never needs: `dataclasses` (with `inspect`, `ast`,
# `dis`, `tokenize`: the records on this path are `converge_dsl._record.Record`s),
# `shutil` (argparse's formatter reads the terminal width only to print help),
# `difflib` (only an unknown name asks "did you mean"), and the ways a
# validator or an entry point scan might come in.
LEAN_FORBIDDEN = (
    "dataclasses",
    "inspect",
    "shutil",
    "difflib",
    "importlib.metadata",
    "jsonschema",
    "rich",
    "ruamel",
)
ALWAYS_FORBIDDEN += LEAN_FORBIDDEN
RULES_FORBIDDEN = (*ALWAYS_FORBIDDEN, "jinja2", "converge_dsl.agents", "converge_dsl.packs")


def _imports(*args: str, exit_code: int = 0) -> dict[str, int]:
    """{module: own import microseconds} of `python -X importtime ARGS`."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == exit_code, done.stdout + done.stderr
    return {m.group(2): int(m.group(1)) for m in _LINE.finditer(done.stderr)}


def _validate(pipeline: Path, exit_code: int = 0) -> dict[str, int]:
    code = (
        "import sys; from converge_dsl.cli import run; "
        "sys.exit(run(sys.argv[1:], sys.stdout, sys.stderr))"
    )
    return _imports("-c", code, "validate", str(pipeline), exit_code=exit_code)


def _forbidden_in(modules: dict[str, int], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        name
        for name in modules
        if any(name == bad or name.startswith(bad + ".") for bad in forbidden)
    )


@pytest.fixture(scope="module")
def rules_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("startup") / "rules.yaml"
    path.write_text(RULES_ONLY, encoding="utf-8")
    return path


def test_validating_rules_imports_no_engine_event_loop_models_or_jinja(rules_only: Path) -> None:
    modules = _validate(rules_only)
    assert "converge_dsl.validation" in modules  # the command did run
    assert _forbidden_in(modules, RULES_FORBIDDEN) == []


def test_validating_an_agent_imports_its_checks_but_no_engine_or_event_loop() -> None:
    example = ROOT / "pipelines" / "agent-review.yaml"
    modules = _validate(example)
    assert "converge_dsl.agents._checks" in modules
    assert "converge_dsl.models._script_checks" in modules
    assert "converge_dsl.frontend._datawalk" not in modules  # no template of it reads a fact
    assert _forbidden_in(modules, ALWAYS_FORBIDDEN) == []


def test_the_forbidden_list_catches_what_run_imports(rules_only: Path) -> None:
    """The check has teeth: `plan` (which builds the agents' specs) or a plain import of
    the engine shows up in the same reading."""
    modules = _imports("-c", "import converge_dsl.engine, converge_dsl.validation")
    assert "asyncio" in _forbidden_in(modules, ALWAYS_FORBIDDEN)
    assert "converge_dsl.engine" in _forbidden_in(modules, ALWAYS_FORBIDDEN)
    assert "dataclasses" in _forbidden_in(modules, ALWAYS_FORBIDDEN)


# Runs `validate ARGS` and prints, one a line, the file of each source text compiled at
# run time (a NamedTuple's fields, a dataclass's methods) on behalf of a module of
# converge-dsl: the nearest caller outside the standard library is one of ours (not
# the import system, running another module's code: `decimal` makes a namedtuple).
_COMPILES = """
import sys, sysconfig
from converge_dsl.cli import run
STDLIB = sysconfig.get_paths()["stdlib"]
ours = []
def hook(event, args):
    if event != "compile" or str(args[1]).endswith(".py"):
        return  # a module's own source (no bytecode cached) is not generated code
    frame = sys._getframe(1)
    while frame and frame.f_code.co_filename.startswith(STDLIB):
        frame = frame.f_back
    if frame and "converge_dsl" in frame.f_code.co_filename:
        ours.append(frame.f_code.co_filename)
sys.addaudithook(hook)
if sys.argv[1] == "validate":
    code = run(sys.argv[1:], sys.stdout, sys.stderr)
else:
    exec(sys.argv[1])
    code = 0
sys.stdout.write("\\n".join(["compiled:", *ours]))
sys.exit(code)
"""


def _compiled_by_us(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _COMPILES, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.split("compiled:", 1)[1].split()


def test_validate_generates_no_code(rules_only: Path) -> None:
    """No record on validate's path is a NamedTuple or a dataclass: both compile source
    text for each class they make (`converge_dsl._record`)."""
    assert _compiled_by_us("validate", str(rules_only)) == []
    assert _compiled_by_us("validate", str(ROOT / "pipelines" / "agent-review.yaml")) == []


def test_code_generated_for_our_modules_is_seen() -> None:
    """The check has teeth: the engine's dataclasses are compiled on its behalf."""
    assert any("engine" in file for file in _compiled_by_us("import converge_dsl.engine"))


def test_an_unknown_name_still_gets_its_guess(tmp_path: Path) -> None:
    """`difflib` stays out of a valid file's start-up, not out of the command."""
    path = tmp_path / "typo.yaml"
    path.write_text(RULES_ONLY.replace("  - name: triage", "  - nmae: triage"), encoding="utf-8")
    modules = _validate(path, exit_code=2)
    assert "difflib" in modules
