"""The port's records: limits with their defaults, the tool-list digest, the result cap."""

from __future__ import annotations

from converge_dsl.frontend import StdioServerSpec
from converge_dsl.tools import ServerInfo, ServerLimits, ToolInfo, cap_result


def test_limits_not_written_take_the_defaults() -> None:
    spec = StdioServerSpec(name="s", command=("x",), allow=("t",), call_timeout_s=2)
    assert ServerLimits.of(spec) == ServerLimits(10.0, 2.0, 65_536)


def test_the_digest_covers_names_and_input_schemas_not_order() -> None:
    a = ToolInfo("a", "one", {"type": "object"})
    b = ToolInfo("b", "two", {"type": "object", "required": ["x"]})
    digest = ServerInfo("s", "1", (a, b)).digest()
    assert digest == ServerInfo("s", "2", (b, a)).digest()
    assert digest.startswith("sha256:")
    changed = ToolInfo("b", "two", {"type": "object"})
    assert digest != ServerInfo("s", "1", (a, changed)).digest()
    assert digest != ServerInfo("s", "1", (a,)).digest()


def test_a_result_within_the_cap_is_whole() -> None:
    result = cap_result("short", {"n": 1}, False, 100)
    assert (result.text, result.structured, result.cut, result.size) == (
        "short",
        {"n": 1},
        False,
        5,
    )


def test_a_result_over_the_cap_is_cut_at_a_character_and_marked() -> None:
    result = cap_result("é" * 10, None, True, 5)
    assert result.text == "éé\n[result cut: 20 bytes, over the cap of 5]"
    assert (result.cut, result.size, result.is_error) == (True, 20, True)


def test_a_result_that_is_not_unicode_text_is_an_error_result() -> None:
    # An MCP server's JSON may escape a lone surrogate; no writer of the run could write it.
    for text, structured, where in [
        ("ok \ud800", None, "the text holds"),
        ("ok", {"rows": ["a", "\udc00"]}, "the text at /rows/1 holds"),
        ("ok", {"\udc00": 1}, "a key holds"),
    ]:
        result = cap_result(text, structured, False, 100)
        assert (result.is_error, result.structured) == (True, None)
        assert result.text.startswith(f"the tool's result is refused: {where} a lone surrogate")
        result.text.encode("utf-8")  # what the trace writes
