"""The render bounds' own helpers (`converge_dsl.sandbox._limits`)."""

from __future__ import annotations

from typing import Any

import pytest
from markupsafe import Markup

from converge_dsl.sandbox._limits import MAX_SIZE, text_size


@pytest.mark.parametrize(
    "value", ["", "abc", Markup("<b>"), 0, 7, -(2**70), True, 2.5, None, b"xy"]
)
@pytest.mark.parametrize("indent", [0, 3])
def test_a_lone_value_is_sized_as_the_walk_sizes_it_inside_a_list(value: Any, indent: int) -> None:
    # Inside a one-item list the walk counts the list's 2, then the item one level down.
    inside = text_size([value], MAX_SIZE, indent) - 2 - indent
    assert text_size(value, MAX_SIZE, indent) == inside
