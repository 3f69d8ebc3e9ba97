"""What a pipeline's `kind: pack` entry stands for when its pack suggestor is a template.

`instantiate_template(spec, definition)` is the pipeline suggestor body of a
rule/llm/agent pack suggestor as the pipeline binds it: name from the pipeline,
`target`/emit keys defaulting to `output`, `dependencies` to `[input]`, `model`
to `default`, `when` and `description` from the pipeline. Light on purpose: the
compiler's builder (`_compile`) and validate's checks (`_checks`) both read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from converge_dsl.packs._manifest import SuggestorDef


def instantiate_template(spec: Mapping[str, Any], definition: SuggestorDef) -> dict[str, Any]:
    """The pipeline suggestor body a rule/llm/agent pack suggestor stands for."""
    body: dict[str, Any] = json.loads(json.dumps(definition.template or {}))
    body["name"] = spec["name"]
    body["kind"] = definition.kind
    output = spec.get("output")
    if definition.kind == "rule":
        for item in body.get("emit", []):
            item.setdefault("key", output)
    else:
        body.setdefault("target", output)
        body.setdefault("model", "default")
    for field_name in ("when", "description"):
        if field_name in spec:
            body[field_name] = spec[field_name]
    body["dependencies"] = list(spec.get("dependencies") or [spec.get("input")])
    return body
