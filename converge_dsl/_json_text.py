"""Standard JSON from outside the package: the one reader of JSON text we did not write.

`loads` is `json.loads` refusing two things JSON text can say but the rest
of a run cannot carry:
- `NaN`, `Infinity` and `-Infinity`, which are not JSON numbers;
- a lone surrogate: an escape such as `\\ud800` with no partner (or the raw
  code point in text handed over as a `str`). It is not Unicode text, and
  every UTF-8 writer (a trace, a result document, a terminal, SQLite's text)
  would fail on it later, far from where it came in.
Each refusal is a `ValueError` whose message says where (a JSON pointer), so
the callers that already report "not JSON: ..." report these too.
`surrogate_problem` is the same check for text that did not come as JSON;
`without_lone_surrogates` mends such text instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from converge_dsl._json_pointer import pointer

# The only ways a decoded value can hold a surrogate: an escape in the text, or the code
# point itself in a `str` (bytes decoded strictly cannot hold one).
_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not standard JSON")


def loads(
    text: str | bytes,
    *,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """The value of standard JSON `text`; `ValueError` (or `RecursionError` when it nests
    too deeply for the decoder) when it is not. Bytes are decoded strictly (UTF-8, or the
    UTF-16/32 JSON allows): `json.loads` would let encoded surrogates through."""
    if isinstance(text, bytes):
        text = text.decode(json.detect_encoding(text))  # UnicodeDecodeError is a ValueError
    value = json.loads(text, parse_constant=_no_constant, object_pairs_hook=object_pairs_hook)
    if _may_hold_surrogate(text):
        problem = surrogate_problem(value)
        if problem is not None:
            raise ValueError(problem)
    return value


def _may_hold_surrogate(text: str) -> bool:
    return _ESCAPE.search(text) is not None or _SURROGATE.search(text) is not None


def surrogate_problem(value: Any) -> str | None:
    """Why `value` (text, or JSON made of dicts, lists and text) is not Unicode text, or
    None: the first string or key holding a lone surrogate, in document order."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                return _refusal(path, found.group())
        elif isinstance(item, dict):
            children: list[tuple[tuple[str | int, ...], Any]] = []
            for key, child in item.items():
                found = _SURROGATE.search(key) if isinstance(key, str) else None
                if found is not None:
                    return _refusal(path, found.group(), key=True)
                children.append(((*path, key), child))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([((*path, index), child) for index, child in enumerate(item)]))
    return None


def without_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate as U+FFFD, for what takes such text rather than
    refuse it (an editor's buffer, a pattern's subject): one UTF-16 unit for another,
    so positions stay, and the text encodes as UTF-8. A pair is one character once
    decoded from JSON, so any surrogate left is lone."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub("\ufffd", text)


def _refusal(path: tuple[str | int, ...], code_point: str, *, key: bool = False) -> str:
    what = "a key" if key else "the text"
    where = f" at {pointer(path)}" if path else ""
    return (
        f"{what}{where} holds a lone surrogate (U+{ord(code_point):04X}), which is not Unicode text"
    )
