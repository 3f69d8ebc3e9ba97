"""Rename a declared context key, a suggestor, a model, an input or an invariant everywhere.

The edits replace the name's own text at each place `_navigate.occurrences`
finds (the pipeline's values and keys, the names inside its templates and
expressions, its model scripts' `match.suggestor`, its tests' invariants and
inputs): every other byte of each file, comments, anchors and quoting
included, stays as it was. A built-in key cannot be renamed, and the new name
must be one `validate` accepts there and not one already written for that kind
(two suggestors, keys... would become one). Accepted: the schema's pattern for
that kind of name, the whole name matched, and a name the loader reads back,
written plain as the edits write it, as that same text (`read_back`): not one
YAML 1.1 or 1.2 reads as a boolean, a number or null (`true`, `on`, `null`, `~`,
`1.5`, `0o17`, `.inf`), which `validate` refuses (CD007, CD008, CD012, CD102,
CD108), nor one PyYAML (YAML 1.1, as other tools read the file) reads as a date
(`2001-12-14`), which `validate` takes as text and such a tool would not. The
rename is refused with the reason, whatever the places it would write: a name in
a quoted scalar or an expression would read back, the one in a plain scalar not.
The pattern is checked first; a name it refuses is given YAML's reading as the
reason only when it is one plain scalar of its own text (`~`, `.inf`), not when
YAML reads it as a mapping, a comment or a shorter text (`x: y`, `#x`, `a #b`).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from lsprotocol import types as lsp

from converge_dsl._pyyaml import yaml
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import load_text
from converge_dsl.keys import BUILTIN_KEYS
from converge_dsl.lsp._analysis import PIPELINE
from converge_dsl.lsp._index import INPUT, INVARIANT, KEY, MODEL, SUGGESTOR, Place
from converge_dsl.lsp._lookup import Subject, schema_of
from converge_dsl.lsp._navigate import Symbol, occurrences, symbol_at
from converge_dsl.lsp._positions import contains


@cache
def name_pattern(kind: str) -> re.Pattern[str]:
    """The pattern the pipeline schema gives a name of `kind`."""
    schema = schema_of(PIPELINE)
    properties, definitions = schema["properties"], schema["$defs"]
    pattern = {
        KEY: definitions["key"],
        SUGGESTOR: definitions["name"],
        INVARIANT: definitions["name"],
        MODEL: properties["models"]["propertyNames"],
        INPUT: properties["inputs"]["propertyNames"],
    }[kind]["pattern"]
    return re.compile(pattern)


def read_back(name: str) -> str | None:
    """Why `name`, written as a plain YAML scalar, does not load as the text `name`; None when
    it does. The loader's own rules say it (its scalars' checks: CD007, CD008...), so a
    name is refused exactly when `validate` would refuse it or read it as another type."""
    try:
        data = load_text(f"- {name}\n", "name.yaml").data
    except PipelineInvalid as refused:
        first = refused.diagnostics[0]
        return f"{first.message} ({first.code})"
    value = data[0] if isinstance(data, list) and data else None
    if isinstance(value, str) and value != name:
        return f"YAML reads it as the text {value!r}"
    if not isinstance(value, str):
        read = _READ_AS.get(type(value), "another type")
        return f"YAML reads it as {read}, not as text"
    resolve = yaml.resolver.Resolver().resolve
    tag = resolve(yaml.ScalarNode, name, (True, False))  # type: ignore[no-untyped-call]
    if tag == "tag:yaml.org,2002:timestamp":
        tools = "YAML 1.1 (PyYAML, and the tools that read the file with it)"
        return f"{tools} reads it as a date, not as text"
    return None


def _one_scalar(name: str) -> bool:
    """Whether `name`, written plain, is one YAML scalar of that very text (not a mapping,
    a comment, a list or a shorter text): only then does `read_back` say why of it."""
    try:
        node = yaml.compose(name, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return False
    return isinstance(node, yaml.ScalarNode) and node.style is None and node.value == name


_READ_AS = {
    type(None): "null",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    dict: "a mapping",
    list: "a list",
}


class RenameRefused(Exception):
    """Why a rename cannot be made (the server answers with this message)."""


_NO_NAME = (
    "nothing to rename here: the cursor is not on a name (a key, a suggestor, a model, an "
    "input or an invariant)"
)


def renameable(subject: Subject, position: lsp.Position) -> tuple[Symbol, Place] | None:
    """The symbol at the cursor and the place the cursor is on, when it can be renamed."""
    found = _name_at(subject, position)
    return None if found is None or _built_in(found[0]) else found


def _name_at(subject: Subject, position: lsp.Position) -> tuple[Symbol, Place] | None:
    """The symbol at the cursor and the place the cursor is on; None off a name (a comment,
    a blank, a schema's word)."""
    symbol = symbol_at(subject, position)
    if symbol is None:
        return None
    point = subject.point(position)
    for place in occurrences(subject, symbol):
        if place.path == subject.path and contains(place.span, point):
            return symbol, place
    return None


def _built_in(symbol: Symbol) -> bool:
    return symbol[0] == KEY and symbol[1] in BUILTIN_KEYS


def rename(subject: Subject, position: lsp.Position, new_name: str) -> dict[Path, list[Place]]:
    """The places to write `new_name` at, by file; raises `RenameRefused`."""
    found = _name_at(subject, position)
    if found is None:
        raise RenameRefused(_NO_NAME)
    (kind, name), _ = found
    if _built_in((kind, name)):
        raise RenameRefused(f"{name!r} is a built-in key: it keeps its name")
    refused = f"{new_name!r} is not a valid {kind} name"
    if not name_pattern(kind).fullmatch(new_name):
        why = read_back(new_name) if _one_scalar(new_name) else None
        raise RenameRefused(refused if why is None else f"{refused}: {why}")
    why = read_back(new_name)
    if why is not None:
        raise RenameRefused(f"{refused}: {why}")
    if kind == KEY and new_name in BUILTIN_KEYS:
        raise RenameRefused(f"{new_name!r} is a built-in key")
    if new_name != name and occurrences(subject, (kind, new_name)):
        raise RenameRefused(
            f"{new_name!r} already names {_article(kind)} {kind} here: the two would be one;"
            " pick another name"
        )
    by_file: dict[Path, list[Place]] = {}
    for place in occurrences(subject, (kind, name)):
        by_file.setdefault(place.path, []).append(place)
    return by_file


def _article(kind: str) -> str:
    return "an" if kind[:1] in "aeiou" else "a"
