"""The files `converge-dsl init` writes: `project_files(name, version)` -> path -> text.

A pipeline with a seed, an llm suggestor on a scripted model, a rule and an
invariant; its model script; a test file; a pre-commit configuration with
this repository's hooks as local hooks (nothing fetched); a README. Every YAML file starts with its
`# yaml-language-server: $schema=` header, which names a copy of the installed
schemas that `init` writes beside it (`.converge-dsl/schemas/`): editors
check the files offline, against the schemas of the converge-dsl that made
them. The editor configuration works offline too: VS Code's YAML settings
map the files to those copies and turn the schema store off, and Helix runs
`converge-dsl lsp` beside its YAML server (docs/editors.md). Right after `init`, `validate .`,
`run NAME.yaml`, `test` and `pytest` pass (tests/cli/test_init.py runs them).
"""

from __future__ import annotations

import json

SCHEMAS = ".converge-dsl/schemas"
# The schemas copied into the project, by the kind of file they check.
SCHEMA_FILES = {
    "pipeline": "pipeline.v1.json",
    "script": "model-script.v1.json",
    "test": "pipeline-test.v1.json",
}

_PIPELINE = """\
# yaml-language-server: $schema={schemas}/pipeline.v1.json
# {name}: a model summarises a request (a scripted model here, so it runs
# offline and the same every time), a rule flags urgent requests, and an
# invariant checks that a summary was made.
# Try `converge-dsl validate .` (checks every pipeline here),
# `converge-dsl run {name}.yaml` (runs it; add --input request="...")
# and `converge-dsl test` (runs {name}.test.yaml).
apiVersion: converge-dsl/v1
kind: Pipeline
name: {name_yaml}
description: Summarise a request and flag it when it is urgent.
inputs:
  request:
    description: The request to triage
    default: The checkout page is down for every customer
keys:
  - name: summaries
    description: One-line summaries of the request
models:
  # Swap for a real model later, e.g.
  # {{adapter: openai, model: gpt-4o-mini, api_key_env: OPENAI_API_KEY}}
  default: {{adapter: scripted, script: {name}.script.yaml}}
budget: {{max_cycles: 5, max_model_calls: 2}}
suggestors:
  - name: intake
    kind: seed
    target: seeds
    facts:
      - {{id: request, content: "{{{{ inputs.request }}}}"}}
  - name: summarise
    kind: llm
    model: default
    dependencies: [seeds]
    target: summaries
    prompt:
      system: You triage requests. Answer with one line.
      user: "Summarise this request: {{{{ fact('seeds', 'request').content }}}}"
    output:
      format: text
      id: summary
      confidence: 0.9
  - name: flag-urgent
    kind: rule
    dependencies: [summaries]
    when: "has('summaries') and 'urgent' in (fact('summaries', 'summary').content | lower)"
    emit:
      - {{key: signals, id: urgent, content: "{{{{ fact('summaries', 'summary').content }}}}"}}
invariants:
  - name: summarised
    class: acceptance
    check: "count('summaries') == 1"
    message: no summary was made
"""

_SCRIPT = """\
# yaml-language-server: $schema={schemas}/model-script.v1.json
# Scripted answers for {name}.yaml: the first rule that matches answers.
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {{suggestor: summarise, contains: down}}
    reply: "Urgent: checkout is down for every customer"
default: {{reply: A routine request}}
"""

_TEST = """\
# yaml-language-server: $schema={schemas}/pipeline-test.v1.json
# Tests of {name}.yaml: `converge-dsl test` (or `pytest`) runs every case.
apiVersion: converge-dsl/v1
kind: PipelineTest
pipeline: {name}.yaml
cases:
  - name: an outage is flagged as urgent
    expect:
      stop_reason: converged
      facts:
        - {{key: summaries, id: summary, contains: checkout}}
        - {{key: signals, id: urgent}}
      counts: {{summaries: 1, signals: 1}}
      usage: {{max_model_calls: 1}}
      invariants: [summarised]
  - name: a routine request is not flagged
    inputs: {{request: Please update my billing address}}
    expect:
      stop_reason: converged
      absent: [{{key: signals}}]
      # A snapshot: `converge-dsl test --update` rewrites it from the run.
      snapshot:
        summaries: {{summary: A routine request}}
  - name: replies written here stand in for the model script
    inputs: {{request: The database is full}}
    models:
      default:
        rules:
          - match: {{suggestor: summarise}}
            reply: "URGENT: the database is out of space"
    expect:
      facts:
        - {{key: signals, id: urgent, matches: "(?i)out of space"}}
"""

# The hooks of the repository's `.pre-commit-hooks.yaml`, as local hooks that run
# the converge-dsl installed beside pre-commit: no clone, no network, no release
# tag needed (tests/pipetest/test_init.py holds the two to the same commands).
_PRE_COMMIT = """\
# pre-commit (https://pre-commit.com): `pre-commit install`, then every commit
# validates the pipelines and runs their tests with the converge-dsl installed
# in this environment (`language: system`: nothing is fetched).
repos:
  - repo: local
    hooks:
      - id: converge-dsl-validate
        name: converge-dsl validate
        entry: converge-dsl validate --only-pipelines
        language: system
        types_or: [yaml]
      - id: converge-dsl-test
        name: converge-dsl test
        entry: converge-dsl test
        language: system
        types_or: [yaml]
        pass_filenames: false
        require_serial: true
"""

_README = """\
# {name}

A converge-dsl project, made by `converge-dsl init`.

| file | what it is |
|------|------------|
| `{name}.yaml` | the pipeline: a seed, an llm suggestor, a rule and an invariant |
| `{name}.script.yaml` | the scripted model's answers (offline, deterministic) |
| `{name}.test.yaml` | the pipeline's tests: inputs, models and expectations |
| `.pre-commit-config.yaml` | validate and test on every commit |
| `.converge-dsl/schemas/` | the JSON Schemas of these files, for editors (offline) |
| `.vscode/`, `.helix/` | editor settings: the schemas, and the `converge-dsl lsp` language server |

    converge-dsl validate .
    converge-dsl run {name}.yaml --input request="The printer is on fire"
    converge-dsl test                # or: pytest (the converge-dsl plugin collects *.test.yaml)
    converge-dsl test --update       # accept the run's values into snapshot expectations
"""


def project_files(name: str, version: str) -> dict[str, str]:
    """The files of a new project called `name` (relative path -> text)."""
    from converge_dsl._resources import read_schema_text

    values = {
        "name": name,
        "name_yaml": _yaml_text(name),
        "schemas": SCHEMAS,
        "version": version,
    }
    schemas = {f"{SCHEMAS}/{file}": read_schema_text(file) for file in SCHEMA_FILES.values()}
    return {
        f"{name}.yaml": _PIPELINE.format(**values),
        f"{name}.script.yaml": _SCRIPT.format(**values),
        f"{name}.test.yaml": _TEST.format(**values),
        ".pre-commit-config.yaml": _PRE_COMMIT.format(**values),
        "README.md": _README.format(**values),
        **schemas,
        ".vscode/settings.json": _vscode_settings(name),
        ".helix/languages.toml": _HELIX,
    }


def _vscode_settings(name: str) -> str:
    """VS Code's YAML extension: each file to its local schema; no schema store (no network)."""
    files = {"pipeline": f"{name}.yaml", "script": "*.script.yaml", "test": "*.test.yaml"}
    settings = {
        "yaml.schemaStore.enable": False,
        "yaml.schemas": {f"./{SCHEMAS}/{SCHEMA_FILES[k]}": [files[k]] for k in SCHEMA_FILES},
    }
    return json.dumps(settings, indent=2) + "\n"


# Helix: converge-dsl's server beside the YAML server for this project's YAML files.
_HELIX = """\
# Helix (https://helix-editor.com): `converge-dsl lsp` checks the pipelines as
# `converge-dsl validate` does, beside the YAML language server (docs/editors.md).
[language-server.converge-dsl]
command = "converge-dsl"
args = ["lsp"]

[[language]]
name = "yaml"
language-servers = ["converge-dsl", "yaml-language-server"]
"""


def _yaml_text(name: str) -> str:
    """`name` as a YAML value that reads back as that text: quoted when YAML would
    read it as something else (`9`, `true`, `null`, `on`), or YAML 1.1 and 1.2 differ
    on (`1e3`): every name that starts with a digit is quoted."""
    from converge_dsl._pyyaml import yaml

    plain = not name[:1].isdigit() and yaml.safe_load(name) == name
    return name if plain else f'"{name}"'
