"""`converge-dsl schema NAME`: print a published JSON Schema.

NAME is one of pipeline, pack, model-script, run-result, trace-event,
pipeline-test, eval, run-config (the
file `schemas/<NAME>.v1.json` shipped with converge-dsl). The pipeline schema
is the one `validate` applies: with suggestor kinds installed from other
distributions (entry points `converge_dsl.kinds`), the shipped one composed
with their branches (docs/architecture.md §16). A schema that takes definitions from
another (the pack schema's `tools` are the pipeline schema's) is printed standing alone,
those definitions copied in (`frontend._schema.bundled_schema`).
"""

from __future__ import annotations

import argparse

from converge_dsl import codes
from converge_dsl.cli import EXIT_OK, CommandIO
from converge_dsl.errors import UsageError

NAMES = (
    "pipeline",
    "pack",
    "model-script",
    "run-result",
    "trace-event",
    "pipeline-test",
    "eval",
    "run-config",
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help=f"one of: {', '.join(NAMES)}")


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl._resources import read_schema_text
    from converge_dsl.diagnostics import did_you_mean, suggestion

    name: str = args.name
    if name not in NAMES:
        guess = did_you_mean(name, NAMES)
        raise UsageError(
            f"unknown schema {name!r}",
            hint=suggestion(guess) if guess else f"one of: {', '.join(NAMES)}",
            code=codes.ARGUMENTS_REFUSED,
        )
    try:
        text = read_schema_text(f"{name}.v1.json")
    except (FileNotFoundError, OSError):
        raise UsageError(
            f"schema {name!r} is not available in this installation", code=codes.PART_NOT_INSTALLED
        ) from None
    if name == "pipeline":
        text = _composed_pipeline(text)
    elif ".v1.json#" in text:  # it takes definitions from another schema: printed standing alone
        import json

        from converge_dsl.frontend import bundled_schema

        text = json.dumps(bundled_schema(f"{name}.v1.json"), indent=2, ensure_ascii=False)
    io.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK


def _composed_pipeline(shipped: str) -> str:
    """The shipped pipeline schema, or, with kinds installed from elsewhere, its composition."""
    from converge_dsl.frontend import installed_kinds, pipeline_schema
    from converge_dsl.validation import KINDS

    if not any(name not in KINDS for name in installed_kinds()):
        return shipped
    import json

    return json.dumps(pipeline_schema(KINDS.all()), indent=2, ensure_ascii=False) + "\n"
