"""Where a shown name may be cut short (a graph node's label, with "…").

`shown_cut(shown, at)` is the greatest place at or before `at` (a count of code
points) where the text `page_name` showed may be cut: not inside a `⟨U+XXXX⟩`
notation, and between two extended grapheme clusters (Unicode's UAX #29), so
that no emoji sequence is split (a family joined by U+200D, a flag's two regional
indicators, a keycap, a skin tone) nor a letter parted from its marks (Thai ที่,
Devanagari's conjunct क्ष, Hangul's jamo). The graph page's `names.js` cuts where
the browser's `Intl.Segmenter` says, and tests/test_page_assets.py holds the cases
both are checked against.

The clusters are the `regex` package's `\\X`, from its own Unicode tables: they
agree with the browser's where both know the same version of Unicode (a character
newer than one of them may be cut apart from its marks by that one).
"""

from __future__ import annotations

_NOTATION_OPEN, _NOTATION_CLOSE = "\u27e8", "\u27e9"


def shown_cut(shown: str, at: int) -> int:
    """The greatest place at or before `at` where `shown` may be cut (see the module)."""
    import regex  # only a page that cuts a name needs it

    if at >= len(shown):
        return len(shown)
    start = shown.rfind(_NOTATION_OPEN, 0, at)  # every `⟨` of a shown name starts a notation
    if start != -1 and shown.find(_NOTATION_CLOSE, start, at) == -1:
        at = start
    cut = 0
    for cluster in regex.finditer(r"\X", shown):
        if cluster.end() > at:
            break
        cut = cluster.end()
    return cut
