"""A fast, exact analysis of the simplest templates, without importing jinja2.

Most templates in a pipeline are text with a few `{{ name.attr | filter('x') }}`
blocks, and most expressions are `count('x') >= 2 and not has('y')`. For
those, parsing with Jinja costs far more than everything else `validate`
does. This module recognises a strict *subset* of Jinja's grammar with
regular expressions: whatever it accepts, Jinja accepts with the same free
names and filters. Anything else (statements, comments, whitespace control,
`is` tests, conditionals, subscripts...) returns None and goes to Jinja.
"""

from __future__ import annotations

import re

_KEYWORDS = r"(?:and|or|not|in|is|if|else|for|recursive|true|false|none|True|False|None)\b"
_NAME = rf"(?!{_KEYWORDS})[A-Za-z_][A-Za-z0-9_]*"
_LITERAL = r"(?:'[^'\\{}\n]*'|\"[^\"\\{}\n]*\"|\d+(?:\.\d+)?|true|false|none)"
_S = r"[ \t]*"
_ARGS = rf"\({_S}(?:{_LITERAL}{_S}(?:,{_S}{_LITERAL}{_S})*)?\)"
_FARG = rf"(?:{_NAME}{_S}={_S})?{_LITERAL}"
_FILTER = rf"\|{_S}{_NAME}(?:{_S}\({_S}(?:{_FARG}{_S}(?:,{_S}{_FARG}{_S})*)?\))?"
_TERM = rf"(?:{_NAME}{_S}{_ARGS}|{_NAME}(?:\.{_NAME})*|{_LITERAL})(?:{_S}{_FILTER})*"
_ARITH = rf"{_TERM}(?:{_S}[-+~*/%]{_S}{_TERM})*"
_COMPARE = rf"{_ARITH}(?:{_S}(?:==|!=|>=|<=|>|<|in\b){_S}{_ARITH})*"
_NOT = rf"(?:not\b{_S})*{_COMPARE}"
_EXPR = re.compile(rf"{_S}{_NOT}(?:{_S}(?:and|or)\b{_S}{_NOT})*{_S}")
_BLOCK = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_TOKEN = re.compile(
    rf"'[^']*'|\"[^\"]*\"|{_KEYWORDS}|(\|{_S})?({_NAME})({_S}=(?!=))?|\.{_S}({_NAME})|.", re.DOTALL
)
_CONSTANTS = frozenset({"true", "false", "none"})


Analysis = tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]


def analyse(text: str, *, expression: bool) -> Analysis | None:
    """(free names, filters, `inputs.X` names) when `text` is in the simple subset, else None."""
    if expression:
        blocks = [text]
    else:
        if "{%" in text or "{#" in text:
            return None
        blocks = _BLOCK.findall(text)
        if "{{" in _BLOCK.sub("", text):
            return None
    names: set[str] = set()
    filters: list[str] = []
    inputs: list[str] = []
    for block in blocks:
        if "\n" in block or not _EXPR.fullmatch(block):
            return None
        previous = ""
        for match in _TOKEN.finditer(block):
            pipe, name, assign, attribute = match.groups()
            if attribute is not None:
                if previous == "inputs":
                    inputs.append(attribute)
                previous = attribute
                continue
            if name is not None:
                if pipe:
                    filters.append(name)
                elif not assign and name not in _CONSTANTS:
                    names.add(name)
                previous = name
            elif not match.group().isspace():
                previous = match.group()
    return frozenset(names), tuple(filters), tuple(inputs)
