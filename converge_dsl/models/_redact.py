"""Redaction: secrets never reach errors, logs, traces, cassettes or reprs.

`Redactor` knows the exact secret values of one model: the API keys its
accounts name, and so the values of the `Authorization` and `x-api-key`
headers it sends. It masks those values wherever they appear (a provider
echoing a key back in an error body is harmless) and nothing else: text that
merely looks like a credential ("Bearer upstream-not-secret", "sk-...") is an
answer like any other, and a record/replay round trip keeps it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

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
