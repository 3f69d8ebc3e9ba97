"""The one rule for a JSON object that gives one key twice, in every JSON a user hands
a run: `--inputs FILE`, `--input KEY=JSON`, a line of `--cases`, a JSONL line of an
evaluation's dataset and a request body of `serve`.

Such an object is refused, whatever its two values: which of the two a reader keeps
is not JSON's to say, and whether they are "the same" is not Python's to say either
(`1 == 1.0 == true` in Python, three different JSON values).

- `unique_keys` is the `object_pairs_hook` that refuses one (`DuplicateKey`, a
  `ValueError` naming the key);
- `keep_duplicates` is the hook that reads on, marking such an object
  (`Duplicated.key`), for a reader that says where the first one is
  (`duplicate_path`, in document order).
"""

from __future__ import annotations

from typing import Any


class DuplicateKey(ValueError):
    """An object of the JSON text gives `key` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} is given twice in one object")
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of JSON text (`object_pairs_hook`); `DuplicateKey` when a key repeats."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise DuplicateKey(_first_repeated(pairs))
    return out


class Duplicated(dict[str, Any]):
    """An object read with a key given twice (`key`, the first one repeated)."""

    key: str = ""


def keep_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of JSON text (`object_pairs_hook`), a `Duplicated` when a key repeats."""
    out = Duplicated(pairs)
    if len(out) != len(pairs):
        out.key = _first_repeated(pairs)
        return out
    return dict(out)


def duplicate_path(value: Any) -> tuple[str | int, ...] | None:
    """The path (object keys, array indexes) of the first key given twice in `value`,
    read with `keep_duplicates`, in document order; None when there is none."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, Duplicated) and item.key:
            return (*path, item.key)
        if isinstance(item, dict):
            stack.extend(reversed([((*path, k), v) for k, v in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([((*path, i), v) for i, v in enumerate(item)]))
    return None


def _first_repeated(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise AssertionError("no key repeats")  # pragma: no cover (called on a repeat only)
