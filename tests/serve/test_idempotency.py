"""What a usable idempotency key is (`checked_key`): one rule for the HTTP header and an
MCP call's `_meta`, each refusal naming where the key was given."""

from __future__ import annotations

import pytest

from converge_dsl.serve._idempotency import MAX_IDEMPOTENCY_KEY, checked_key
from converge_dsl.serve._requests import Refused


def test_a_short_printable_key_is_kept_as_given() -> None:
    assert checked_key("ticket 4711/a", "CD998", "the header").value == "ticket 4711/a"
    assert checked_key("k" * MAX_IDEMPOTENCY_KEY, "CD998", "the header").value == "k" * 255


@pytest.mark.parametrize(
    ("key", "has"),
    [
        ("", "it has 0"),
        ("k" * (MAX_IDEMPOTENCY_KEY + 1), "it has 256"),
        ("tab\there", "its character 4, '\\t', is not printable ASCII"),
        ("ü", "its character 1, 'ü', is not printable ASCII"),
        (17, "it is a JSON number"),
        (True, "it is a JSON boolean"),
        (None, "it is a JSON null"),
        (["a"], "it is a JSON array"),
        ({"a": 1}, "it is a JSON object"),
    ],
)
def test_anything_else_is_a_400_naming_where_the_key_was_given(key: object, has: str) -> None:
    with pytest.raises(Refused) as refused:
        checked_key(key, "CD439", "the _meta key converge-dsl/idempotency-key")
    assert refused.value.status == 400
    [problem] = refused.value.problems
    assert problem.code == "CD439"
    assert problem.message == (
        "the _meta key converge-dsl/idempotency-key must be 1 to 255 printable ASCII "
        f"characters ({has})"
    )


def test_a_conflict_names_where_the_key_was_given() -> None:
    """Over MCP the key came from `_meta`, not from a header: the 409 says so."""
    from converge_dsl.serve._idempotency import key_conflict

    key = checked_key("order-17", "CD439", "the _meta key converge-dsl/idempotency-key")
    refusal = key_conflict(key, "echo", {"inputs": {"text": "b"}}, None)
    [problem] = refusal.problems
    assert refusal.status == 409
    assert problem.message == (
        "the _meta key converge-dsl/idempotency-key 'order-17' was first used with another request"
    )
    assert problem.pointer == "/inputs"
    assert "Idempotency-Key" not in (problem.hint or "")
