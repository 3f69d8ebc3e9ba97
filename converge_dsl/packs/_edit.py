"""Edit a pipeline file in place, keeping the user's comments, order and layout.

`add_pack_requirement(text, name, specifier)` returns the new text with
`packs: {name: specifier}` set, through ruamel.yaml's round-trip mode. The
indentation settings are chosen so that dumping the *unchanged* document
reproduces the original text byte for byte; only the edited lines differ.
The settings are detected from the file (mapping / sequence indentation and
dash offset, `---` / `...` document markers, CRLF line ends, a missing final
newline) and checked by that round trip; anchors are kept even when unused.
A new `packs:` key is placed where the language puts it (after `name`,
`description`, `keys`, `inputs`); a new entry of an existing `packs:` goes
before the comment block that follows its last entry, not after it.
`add_repository(text, spec)` appends a repository to `repositories:` the same
way (a new `repositories:` goes after `packs:` and starts with `builtin`).
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from packaging.version import Version
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedBase, CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from converge_dsl import codes
from converge_dsl.packs._files import PackRefused

_BEFORE_PACKS = ("apiVersion", "kind", "name", "description", "keys", "inputs")
_LAYOUTS = ((2, 2, 0), (2, 4, 2), (4, 4, 0), (4, 6, 4), (2, 2, 2), (4, 4, 2), (4, 4, 4))


_KEY_LINE = re.compile(r"^( *)[^\s#-][^#]*:[ \t]*(?:#.*)?$")  # a key opening a block
_DASH = re.compile(r"^( *)-( +)\S")
# Comments before `---` (ruamel drops them): kept aside as text, put back after the edit.
_PREAMBLE = re.compile(r"\A((?:[ \t]*(?:#.*)?\n)*)---(?:[ \t]|$)", re.MULTILINE)


def _yaml(mapping: int, sequence: int, offset: int, start: bool = False, end: bool = False) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.brace_single_entry_mapping_in_flow_sequence = True  # keep `[builtin, {path: r}]`
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    yaml.explicit_start = start
    yaml.explicit_end = end
    return yaml


def _detected_layouts(text: str) -> list[tuple[int, int, int]]:
    """(mapping, sequence, offset) candidates from the file's first nested blocks."""
    mapping = sequence = offset = None
    lines = [line for line in text.splitlines() if line.strip() and line.lstrip()[0] != "#"]
    for parent, child in itertools.pairwise(lines):
        opened = _KEY_LINE.match(parent)
        if opened is None:
            continue
        base = len(opened.group(1))
        dash = _DASH.match(child)
        if dash is not None and sequence is None:
            offset = len(dash.group(1)) - base
            sequence = offset + 1 + len(dash.group(2))
        elif dash is None and mapping is None:
            step = len(child) - len(child.lstrip(" ")) - base
            mapping = step if step > 0 else None
    if sequence is None and mapping is None:
        return []
    layouts = []
    for step in [mapping] if mapping else [2, 4, 3]:
        if sequence is None or offset is None or offset < 0 or sequence < offset + 2:
            layouts.append((step, step, 0))
        else:
            layouts.append((step, sequence, offset))
    return layouts


def _keep_anchors(node: Any) -> None:
    """Mark every anchor to be written, used by an alias or not (ruamel drops unused ones)."""
    if isinstance(node, CommentedBase) and node.anchor.value is not None:
        node.yaml_set_anchor(node.anchor.value, always_dump=True)
    children: Iterator[Any] = iter(())
    if isinstance(node, dict):
        children = iter(node.values())
    elif isinstance(node, list):
        children = iter(node)
    for child in children:
        _keep_anchors(child)


def _dump(yaml: YAML, data: Any) -> str:
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def _faithful(text: str) -> YAML:
    """The layout that reproduces `text` unchanged (the detected one, if none does)."""
    start = _PREAMBLE.match(text) is not None
    end = text.rstrip().endswith("\n...") or text.strip() == "..."
    detected = _detected_layouts(text)
    layouts = detected + [layout for layout in _LAYOUTS if layout not in detected]
    for layout in layouts:
        yaml = _yaml(*layout, start=start, end=end)
        data = yaml.load(text)
        _keep_anchors(data)
        if _dump(yaml, data) == text:
            return yaml
    return _yaml(*layouts[0], start=start, end=end)


def _set_last(mapping: CommentedMap, key: str, value: str) -> None:
    """`mapping[key] = value`; a new last key goes before the previous last key's comment block.

    ruamel hangs the comment lines after an entry on that entry, so a plain
    append would land below them (below a trailing comment, or below a
    comment that introduces the next top-level key).
    """
    previous = list(mapping)[-1] if mapping and key not in mapping else None
    mapping[key] = value
    comments = mapping.ca.items.get(previous) if previous is not None else None
    token = comments[2] if comments and len(comments) > 2 else None
    if token is None or "\n" not in token.value:
        return
    own, _, block = token.value.partition("\n")
    if not block.strip():
        return
    if own.strip():
        token.value = own + "\n"
    else:
        del mapping.ca.items[previous]
    mapping.yaml_add_eol_comment("# x", key)  # creates the token; its text is set below
    mapping.ca.items[key][2].value = "\n" + block


def default_specifier(version: Version) -> str:
    """A compatible-release range for `version`: `>=1.4,<2` (`>=0.3,<0.4` below 1.0)."""
    major, minor = version.major, version.minor
    upper = f"{major + 1}" if major > 0 else f"0.{minor + 1}"
    return f">={major}.{minor},<{upper}"


def _edit(text: str, change: Callable[[CommentedMap], None]) -> str:
    """`text` with `change` applied to its top-level mapping, layout and comments kept."""
    crlf = "\r\n" in text
    if crlf:
        text = text.replace("\r\n", "\n")
    preamble = _PREAMBLE.match(text)
    head = preamble.group(1) if preamble else ""
    text = text[len(head) :]
    try:
        yaml = _faithful(text)
        data = yaml.load(text)
    except YAMLError as exc:
        raise PackRefused(
            codes.PIPELINE_PACKS_MALFORMED, f"the pipeline is not valid YAML: {exc}"
        ) from None
    _keep_anchors(data)
    if not isinstance(data, CommentedMap):
        raise PackRefused(codes.PIPELINE_PACKS_MALFORMED, "the pipeline is not a YAML mapping")
    change(data)
    out = head + _dump(yaml, data)
    if not text.endswith("\n") and out.endswith("\n"):
        out = out[:-1]
    return out.replace("\n", "\r\n") if crlf else out


def add_pack_requirement(text: str, name: str, specifier: str) -> str:
    """`text` with `packs.<name>` set to `specifier` (added or replaced)."""

    def change(data: CommentedMap) -> None:
        packs = data.get("packs")
        if packs is None:
            position = sum(1 for key in data if key in _BEFORE_PACKS)
            data.insert(position, "packs", CommentedMap([(name, specifier)]))
        elif isinstance(packs, CommentedMap):
            _set_last(packs, name, specifier)
        elif isinstance(packs, dict):
            packs[name] = specifier
        else:
            raise PackRefused(
                codes.PIPELINE_PACKS_MALFORMED, "packs: must be a mapping of pack name to specifier"
            )

    return _edit(text, change)


def add_repository(text: str, spec: str | Mapping[str, str]) -> str:
    """`text` with `spec` (`builtin`, `{path: ...}` or `{url: ...}`) last in `repositories:`.

    A pipeline without `repositories:` reads from `builtin` alone, so the new
    list starts with `builtin`: packs it already uses keep resolving as before.
    A new mapping entry is written in flow style (`- {path: repo}`).
    """
    entry: Any = spec
    if isinstance(spec, Mapping):
        entry = CommentedMap(spec.items())
        entry.fa.set_flow_style()

    def change(data: CommentedMap) -> None:
        repositories = data.get("repositories")
        if repositories is None:
            items = [entry] if spec == "builtin" else ["builtin", entry]
            position = sum(1 for key in data if key in (*_BEFORE_PACKS, "packs"))
            data.insert(position, "repositories", CommentedSeq(items))
        elif isinstance(repositories, list):
            repositories.append(entry)
        else:
            raise PackRefused(codes.PIPELINE_PACKS_MALFORMED, "repositories: must be a list")

    return _edit(text, change)
