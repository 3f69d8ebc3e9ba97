"""Redaction: secrets never reach errors, logs, traces, cassettes or reprs.

`Redactor` knows the exact secret values of one model: the API keys its
accounts name, and so the values of the `Authorization` and `x-api-key`
headers it sends. It masks those values wherever they appear (a provider
echoing a key back in an error body is harmless) and nothing else: text that
merely looks like a credential ("Bearer upstream-not-secret", "sk-...") is an
answer like any other, and a record/replay round trip keeps it unchanged.
`redact_message` and `redact_call` apply a redactor to every string of an
answer (text, tool names, tool inputs at any depth).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from converge_dsl.models.port import Message, Part, TextPart, ToolCallPart

MASK = "[REDACTED]"


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every exact occurrence of each of `secrets` masked, longest first."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


class Redactor:
    """Masks the secrets of one model. Its repr shows how many, never which."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str]) -> None:
        # The header values are `Bearer KEY` and `KEY`: masking the key masks both.
        # Longest first, so a key that contains another is masked whole.
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        return redact_text(text, self._secrets)

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secrets)"


def _redact_json(redact: Callable[[str], str], value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact(str(k)): _redact_json(redact, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_json(redact, v) for v in value]
    return value


def redact_call(redact: Callable[[str], str], call: ToolCallPart) -> ToolCallPart:
    """`call` with every string in it redacted (the same object when nothing changes)."""
    redacted = ToolCallPart(
        redact(call.id), redact(call.name), _redact_json(redact, dict(call.input))
    )
    return call if redacted == call else redacted


def _redact_part(redact: Callable[[str], str], part: Part) -> Part:
    if isinstance(part, TextPart):
        text = redact(part.text)
        return part if text == part.text else TextPart(text)
    if isinstance(part, ToolCallPart):
        return redact_call(redact, part)
    return part


def redact_message(redact: Callable[[str], str], message: Message) -> Message:
    """`message` with every string of its parts redacted."""
    return Message(message.role, tuple(_redact_part(redact, p) for p in message.parts))
