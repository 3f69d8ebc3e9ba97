"""Redaction: secrets never reach errors, logs, traces, cassettes or reprs.

`Redactor` knows the exact secret values of one model: the API keys its
accounts name, and so the values of the `Authorization` and `x-api-key`
headers it sends. It masks those values wherever they appear (a provider
echoing a key back in an error body is harmless) and nothing else: text that
merely looks like a credential ("Bearer upstream-not-secret", "sk-...") is an
answer like any other, and a record/replay round trip keeps it unchanged.
`redact_message` and `redact_call` apply a redactor to every string of an
answer (text, tool names, tool inputs at any depth).

A secret is masked in every form a message may show it in (`secret_forms`):
as given and with its surrounding whitespace stripped (an environment
variable holding `KEY\r\n`), escaped as Python's `repr` and JSON write it
(`b'Bearer KEY\\r'`), and cut: where a whole word of a text is the first
`MIN_CUT` characters or more of a secret (a server echo that stopped inside
it, `KEY[:6]...`), that prefix is masked too; a prefix of letters alone only
from `MIN_LETTERS_CUT` characters, since a shorter one is as often a word of
the message (the token `token-one-...` must not mask "a bearer token is
needed") and tells little of the secret. A word that merely starts like a
secret and then goes on otherwise (`sk-live-other` beside the key
`sk-live-abc`) is another word, and is shown as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from converge_dsl.models.port import Message, Part, TextPart, ToolCallPart

MASK = "[REDACTED]"


# The shortest prefix of a secret that is masked where an echo cut the secret, and the
# shortest such prefix made of letters alone.
MIN_CUT = 4
MIN_LETTERS_CUT = 8


def secret_forms(secret: str) -> set[str]:
    """Every way `secret` may be written in a message (see the module docstring)."""
    forms = set()
    for core in {secret, secret.strip()}:
        forms |= {core, core.encode("unicode_escape").decode("ascii"), json.dumps(core)[1:-1]}
    return {form for form in forms if form}


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with each of `secrets` masked in every form (`secret_forms`), cut ones too."""
    return Redactor(secrets)(text)


def _word_char(char: str) -> bool:
    return char.isalnum() or char in "-_"


def _mask_cut(text: str, secret: str) -> str:
    """`text` with each prefix of `secret` of `MIN_CUT` characters or more (of letters
    alone, `MIN_LETTERS_CUT`) masked where it is a whole word (it starts one, and the
    word ends where the prefix does)."""
    head = secret[:MIN_CUT]
    if len(head) < MIN_CUT:
        return text
    pieces: list[str] = []
    done = 0
    at = text.find(head)
    while at >= 0:
        end = at + MIN_CUT
        while end < len(text) and end - at < len(secret) and text[end] == secret[end - at]:
            end += 1
        starts = at == 0 or not _word_char(text[at - 1])
        ends = end == len(text) or not _word_char(text[end])
        long_enough = end - at >= MIN_LETTERS_CUT or not text[at:end].isalpha()
        if starts and ends and long_enough:
            pieces += [text[done:at], MASK]
            done = end
        at = text.find(head, end)
    return "".join(pieces) + text[done:] if pieces else text


class Redactor:
    """Masks the secrets of one model. Its repr shows how many, never which."""

    __slots__ = ("_cores", "_forms", "_secrets")

    def __init__(self, secrets: Iterable[str]) -> None:
        # The header values are `Bearer KEY` and `KEY`: masking the key masks both.
        # Longest first, so a key that contains another is masked whole.
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        forms = set().union(*map(secret_forms, self._secrets))
        self._forms = tuple(sorted(forms, key=len, reverse=True))
        cores = {s.strip() for s in self._secrets} - {""}
        self._cores = tuple(sorted(cores, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form, MASK)
        for core in self._cores:
            text = _mask_cut(text, core)
        return text

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
        redact(call.id),
        redact(call.name),
        _redact_json(redact, dict(call.input)),
        None if call.problem is None else redact(call.problem),
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
