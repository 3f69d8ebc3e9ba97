"""Redaction: secrets never reach errors, logs, traces, cassettes or reprs.

`Redactor` knows the exact secret values of one model (its API keys) and also
masks anything shaped like a credential (`Bearer ...`, `sk-...`, `x-api-key`
headers), so a provider echoing a key back in an error body is harmless.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "[REDACTED]"

_PATTERNS = (
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(?:bearer\s+)?[^\s\"',}]+"),
    re.compile(r"(?i)(x-api-key[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"()\b(?:sk|pk|rk)-[A-Za-z0-9_-]{8,}"),
)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret and credential-shaped token masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text


class Redactor:
    """Masks the secrets of one model. Its repr shows how many, never which."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a key that contains another is masked whole.
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        return redact_text(text, self._secrets)

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secrets)"
