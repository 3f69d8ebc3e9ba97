"""Per-run state that lives in suggestors, kept in checkpoints (docs/architecture.md §12).

A suggestor that changes over a run (an agent's summary calls made against
its `max_calls`) implements `StatefulSuggestor`: `checkpoint_state()` returns
its per-run state as JSON data, `restore_checkpoint_state(data)` puts it back
in a freshly compiled suggestor before a resumed run starts. The protocol is
structural, so suggestor kinds in lower layers implement it without importing
the runtime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Protocol, cast, runtime_checkable

from converge_dsl._json_types import JsonValue
from converge_dsl.engine.types import Suggestor


@runtime_checkable
class StatefulSuggestor(Protocol):
    """A suggestor with per-run state that checkpoints keep."""

    @property
    def name(self) -> str: ...

    def checkpoint_state(self) -> JsonValue:
        """The per-run state as JSON data (compared between cycles, so cheap to build)."""
        ...

    def restore_checkpoint_state(self, data: JsonValue) -> None:
        """Continue from `data`, a value `checkpoint_state` returned."""
        ...


def stateful(suggestors: Iterable[Suggestor]) -> tuple[StatefulSuggestor, ...]:
    """The suggestors among `suggestors` that keep per-run state, in order."""
    return tuple(cast(StatefulSuggestor, s) for s in suggestors if _keeps_state(type(s)))


@cache
def _keeps_state(kind: type) -> bool:
    """`isinstance(x, StatefulSuggestor)` for the instances of `kind`, answered once per class.

    A runtime protocol check walks the protocol's members on every call (about
    10 us); a pipeline of thousands of suggestors asks it for each.
    """
    return all(
        callable(getattr(kind, member, None))
        for member in ("checkpoint_state", "restore_checkpoint_state")
    )


def restore_states(suggestors: Iterable[Suggestor], states: Mapping[str, JsonValue]) -> None:
    """Give each stateful suggestor its state from `states` (by name; absent = untouched)."""
    for suggestor in stateful(suggestors):
        if suggestor.name in states:
            suggestor.restore_checkpoint_state(states[suggestor.name])
