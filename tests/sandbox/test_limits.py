"""The render bounds' own helpers (`converge_dsl.sandbox._limits`)."""

from __future__ import annotations

from typing import Any

import pytest
from markupsafe import Markup

from converge_dsl.sandbox._limits import MAX_SIZE, guard_filter, text_size


@pytest.mark.parametrize(
    "value", ["", "abc", Markup("<b>"), 0, 7, -(2**70), True, 2.5, None, b"xy"]
)
@pytest.mark.parametrize("indent", [0, 3])
def test_a_lone_value_is_sized_as_the_walk_sizes_it_inside_a_list(value: Any, indent: int) -> None:
    # Inside a one-item list the walk counts the list's 2, then the item one level down.
    inside = text_size([value], MAX_SIZE, indent) - 2 - indent
    assert text_size(value, MAX_SIZE, indent) == inside


def test_a_filter_with_an_async_variant_is_called_as_its_wrapper_would_call_it() -> None:
    """The sandbox renders synchronously: the wrapper's choice is made once, so a filter
    call skips it (here, an evaluation context the wrapper could not even read)."""
    from types import SimpleNamespace

    from jinja2 import pass_context
    from jinja2.async_utils import async_variant

    def plain(value: list[int], n: int = 1) -> list[int]:
        return value * n

    @pass_context
    def with_context(context: Any, value: list[int]) -> list[int]:
        return [context.n, *value]

    async def never(*_: Any) -> None:
        raise AssertionError("the sandbox is not asynchronous")

    opaque, context = SimpleNamespace(), SimpleNamespace(n=0)
    assert guard_filter("f", async_variant(plain)(never), None)(opaque, [1], 2) == [1, 1]
    assert guard_filter("g", async_variant(with_context)(never), None)(context, [1]) == [0, 1]
    checked = guard_filter("h", async_variant(plain)(never), lambda value, *_: value[:1])
    assert checked(opaque, [1, 2], 2) == [1, 1]
