"""Where a shown name may be cut short (a graph node's label, with "…").

`shown_cut(shown, at)` is the greatest place at or before `at` (a count of code
points) where the text `page_name` showed may be cut: not inside a `⟨U+XXXX⟩`
notation, and between two extended grapheme clusters (Unicode's UAX #29), so
that no emoji sequence is split (a family joined by U+200D, a flag's two regional
indicators, a keycap, a skin tone) nor a letter parted from its marks (Thai ที่,
Devanagari's conjunct क्ष, Hangul's jamo). The graph page's `names.js` cuts where
the browser's `Intl.Segmenter` says, and tests/test_page_assets.py holds the cases
both are checked against.

The rules are UAX #29's, from `unicodedata`'s categories: Python has no table of
grapheme cluster breaks. They are exact for what a shown name can hold, where every
control, every joiner outside one of Unicode's emoji ZWJ sequences and every
zero-width character is written as a notation (so a raw U+200D only joins emoji).
"""

from __future__ import annotations

import unicodedata

_NOTATION_OPEN, _NOTATION_CLOSE = "\u27e8", "\u27e9"
_ZWJ = "\u200d"
# Hangul's conjoining jamo: leading consonants, vowels, trailing consonants.
_L = ((0x1100, 0x115F), (0xA960, 0xA97C))
_V = ((0x1160, 0x11A7), (0xD7B0, 0xD7C6))
_T = ((0x11A8, 0x11FF), (0xD7CB, 0xD7FB))
# Viramas that join two consonants into one cluster (UAX #29's GB9c, Indic_Conjunct_Break).
_LINKERS = frozenset("\u094d\u09cd\u0acd\u0b4d\u0c4d\u0d4d")
_LINKED_SCRIPTS = ((0x0900, 0x0D7F),)
# Letters that are spacing marks though not of category Mc (Thai's and Lao's sara am).
_SPACING = frozenset("\u0e33\u0eb3")


def _within(code: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(low <= code <= high for low, high in ranges)


def _hangul(char: str) -> str:
    """L, V, T, LV or LVT (a syllable), else "" (for no character too)."""
    code = ord(char) if char else 0
    if 0xAC00 <= code <= 0xD7A3:
        return "LV" if (code - 0xAC00) % 28 == 0 else "LVT"
    for kind, ranges in (("L", _L), ("V", _V), ("T", _T)):
        if _within(code, ranges):
            return kind
    return ""


def _extends(char: str) -> bool:
    """Whether `char` never starts a cluster: a mark, a joiner, a variation selector,
    a skin tone, a tag (of a subdivision's flag), a spacing mark."""
    code = ord(char)
    return (
        unicodedata.category(char) in ("Mn", "Me", "Mc")
        or char == _ZWJ
        or char in _SPACING
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F
    )


def _pictographic(char: str) -> bool:
    code = ord(char)
    return unicodedata.category(char) == "So" or 0x1F000 <= code <= 0x1FAFF


def _regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _starts(text: str) -> list[bool]:
    """For each character of `text`, whether a cluster starts at it."""
    starts: list[bool] = []
    first = ""  # the first character of the current cluster
    regional = 0  # regional indicators in a row, up to the previous character
    linked = False  # the cluster is a consonant, a virama, and marks
    for at, char in enumerate(text):
        before = text[at - 1] if at else ""
        pair = (_hangul(before), _hangul(char))
        joined = bool(before) and (
            _extends(char)
            or (pair[0] == "L" and pair[1] in ("L", "V", "LV", "LVT"))
            or (pair[0] in ("LV", "V") and pair[1] in ("V", "T"))
            or (pair[0] in ("LVT", "T") and pair[1] == "T")
            or (before == _ZWJ and _pictographic(first) and _pictographic(char))
            or (_regional(before) and _regional(char) and regional % 2 == 1)
            or (
                linked
                and unicodedata.category(char) == "Lo"
                and _within(ord(char), _LINKED_SCRIPTS)
            )
        )
        starts.append(not joined)
        if not joined:
            first = char
        regional = regional + 1 if _regional(char) else 0
        if char in _LINKERS:
            linked = _within(ord(first), _LINKED_SCRIPTS) and unicodedata.category(first) == "Lo"
        elif not _extends(char):
            linked = False  # a consonant after one again: another virama joins the next
    return starts


def shown_cut(shown: str, at: int) -> int:
    """The greatest place at or before `at` where `shown` may be cut (see the module)."""
    if at >= len(shown):
        return len(shown)
    start = shown.rfind(_NOTATION_OPEN, 0, at)  # every `⟨` of a shown name starts a notation
    if start != -1 and shown.find(_NOTATION_CLOSE, start, at) == -1:
        at = start
    starts = _starts(shown[: at + 1])
    while at > 0 and not starts[at]:
        at -= 1
    return at
