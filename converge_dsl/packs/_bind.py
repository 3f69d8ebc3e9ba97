"""What a pipeline's `kind: pack` entry stands for when its pack suggestor is a template.

`instantiate_template(spec, definition)` is the pipeline suggestor body of a
rule/llm/agent pack suggestor as the pipeline binds it: name from the pipeline,
`target`/emit keys defaulting to `output`, `dependencies` to `[input]`, `model`
to `default`, `when` and `description` from the pipeline. Light on purpose: the
compiler's builder (`_compile`) and validate's checks (`_checks`) both read it.
"""

from __future__ import annotations

import json
from typing import Any

from converge_dsl.packs._kind import PackSuggestorSpec
from converge_dsl.packs._manifest import SuggestorDef


def instantiate_template(spec: PackSuggestorSpec, definition: SuggestorDef) -> dict[str, Any]:
    """The pipeline suggestor body a rule/llm/agent pack suggestor stands for (a mapping for
    the kind's parser: the pack's template is data of the pack, which no schema checked)."""
    body: dict[str, Any] = json.loads(json.dumps(definition.template or {}))
    body["name"] = spec.name
    body["kind"] = definition.kind
    if definition.kind == "rule":
        for item in body.get("emit", []):
            item.setdefault("key", spec.output)
    else:
        body.setdefault("target", spec.output)
        body.setdefault("model", "default")
    if spec.when is not None:
        body["when"] = spec.when
    if spec.description is not None:
        body["description"] = spec.description
    body["dependencies"] = list(spec.dependencies or [spec.input])
    return body
