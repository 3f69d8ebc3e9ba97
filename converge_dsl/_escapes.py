"""How text nobody here wrote is shown where a character could act on its reader.

`UNSHOWN` is the class of characters a terminal or a page would act on: C0 but
newline and tab, DEL, C1 and the bidi controls (U+202A-U+202E, U+2066-U+2069).
`escaped(match)` is a matched character's visible escape, `\\xNN` below U+0100
and `\\uNNNN` above: what `frontend.terminal_safe`, the pages' `page_text` and
a location's file name (`diagnostics.one_line`) show in its place.
`shell_word(text)` is `text` as one word a shell reads back as it is, and as
safe to show: a command line the user may paste (`init`'s next step).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import re

UNSHOWN = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"


def escaped(found: re.Match[str]) -> str:
    """The visible escape of the one character `found` matched."""
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _acts(char: str) -> bool:
    """Whether a terminal would act on `char` (`UNSHOWN`), or it breaks a pasted line."""
    code = ord(char)
    return (
        code < 0x20
        or 0x7F <= code <= 0x9F
        or 0x202A <= code <= 0x202E
        or 0x2066 <= code <= 0x2069
        or 0xDC80 <= code <= 0xDCFF
    )


def shell_word(text: str) -> str:
    """`text` quoted as one word for a POSIX shell, with no character a terminal acts on.

    `shlex.quote`'s form when that holds none; else ANSI-C quoting (`$'...'`: bash,
    zsh, ksh, busybox sh) with each such character escaped: `\\xNN` below
    U+0080, `\\uNNNN` above (the shell writes it in UTF-8), and `\\xNN` for a byte of a
    file name that was not UTF-8 (Python's surrogate escape U+DC80-U+DCFF)."""
    if not any(_acts(char) for char in text):
        import shlex

        return shlex.quote(text)
    parts = []
    for char in text:
        code = ord(char)
        if char in "\\'":
            parts.append("\\" + char)
        elif not _acts(char):
            parts.append(char)
        elif 0xDC80 <= code <= 0xDCFF:
            parts.append(f"\\x{code - 0xDC00:02x}")
        else:
            parts.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}")
    return "$'" + "".join(parts) + "'"


def shell_join(words: list[str]) -> str:
    """`words` as one command line for a POSIX shell, each a `shell_word`."""
    return " ".join(shell_word(word) for word in words)
