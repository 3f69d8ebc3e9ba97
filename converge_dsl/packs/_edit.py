"""Edit a pipeline file in place, keeping the user's comments, order and layout.

`add_pack_requirement(text, name, specifier)` returns the new text with
`packs: {name: specifier}` set, through ruamel.yaml's round-trip mode. The
indentation settings are chosen so that dumping the *unchanged* document
reproduces the original text byte for byte; only the edited lines differ.
A new `packs:` key is placed where the language puts it (after `name`,
`description`, `keys`, `inputs`).
"""

from __future__ import annotations

import io
from typing import Any

from packaging.version import Version
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from converge_dsl.errors import PackError

_BEFORE_PACKS = ("apiVersion", "kind", "name", "description", "keys", "inputs")
_LAYOUTS = ((2, 2, 0), (2, 4, 2), (4, 4, 0), (4, 6, 4), (2, 2, 2), (4, 4, 2), (4, 4, 4))


def _yaml(mapping: int, sequence: int, offset: int) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def _dump(yaml: YAML, data: Any) -> str:
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def _faithful(text: str) -> YAML:
    """The layout that reproduces `text` unchanged (the first one, if none does)."""
    for layout in _LAYOUTS:
        yaml = _yaml(*layout)
        if _dump(yaml, yaml.load(text)) == text:
            return yaml
    return _yaml(*_LAYOUTS[0])


def default_specifier(version: Version) -> str:
    """A compatible-release range for `version`: `>=1.4,<2` (`>=0.3,<0.4` below 1.0)."""
    major, minor = version.major, version.minor
    upper = f"{major + 1}" if major > 0 else f"0.{minor + 1}"
    return f">={major}.{minor},<{upper}"


def add_pack_requirement(text: str, name: str, specifier: str) -> str:
    """`text` with `packs.<name>` set to `specifier` (added or replaced)."""
    try:
        yaml = _faithful(text)
        data = yaml.load(text)
    except YAMLError as exc:
        raise PackError(f"the pipeline is not valid YAML: {exc}") from None
    if not isinstance(data, CommentedMap):
        raise PackError("the pipeline is not a YAML mapping")
    packs = data.get("packs")
    if packs is None:
        position = sum(1 for key in data if key in _BEFORE_PACKS)
        data.insert(position, "packs", CommentedMap([(name, specifier)]))
    elif isinstance(packs, dict):
        packs[name] = specifier
    else:
        raise PackError("packs: must be a mapping of pack name to specifier")
    return _dump(yaml, data)
