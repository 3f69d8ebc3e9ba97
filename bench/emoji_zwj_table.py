"""Writes `converge_dsl/_page_assets/emoji_zwj.txt`, the emoji ZWJ sequences a page
shows whole, from the `emoji` package's data (not a dependency: `pip install emoji`
to run this; tests/test_page_assets.py checks the table against it when it is there).

Run `python bench/emoji_zwj_table.py [--check]`. The table is Unicode's RGI emoji ZWJ
sequences (the fully qualified ones), one a line; a line holding `T` stands for the
sequence with any skin tone (U+1F3FB-U+1F3FF) there, written so only when every tone
at every such place is in the set (a couple whose two tones must differ is listed
sequence by sequence). With `--check` it writes nothing and exits 1 when the file
differs from what it would write.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parent.parent / "converge_dsl" / "_page_assets" / "emoji_zwj.txt"
_TONE = re.compile("[\U0001f3fb-\U0001f3ff]")
_HEADER = (
    "# Unicode's RGI emoji ZWJ sequences, from the emoji package {version}, written by\n"
    "# bench/emoji_zwj_table.py: a page keeps a zero-width joiner only inside one of\n"
    "# these; T stands for any skin tone (U+1F3FB-U+1F3FF).\n"
)


def rgi_zwj_sequences() -> set[str]:
    """The fully qualified emoji sequences of the `emoji` package that hold a ZWJ."""
    import emoji  # only this script and its test use it

    qualified = emoji.STATUS["fully_qualified"]
    return {
        e for e, data in emoji.EMOJI_DATA.items() if "\u200d" in e and data["status"] == qualified
    }


def table_text(sequences: set[str]) -> str:
    import emoji

    by_pattern: dict[str, set[str]] = {}
    for sequence in sequences:
        by_pattern.setdefault(_TONE.sub("T", sequence), set()).add(sequence)
    lines: list[str] = []
    for pattern, found in by_pattern.items():
        whole = len(found) == 5 ** pattern.count("T")
        lines.extend([pattern] if whole else sorted(found))
    return _HEADER.format(version=emoji.__version__) + "".join(
        f"{line}\n" for line in sorted(lines)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    arguments = parser.parse_args()
    text = table_text(rgi_zwj_sequences())
    if arguments.check:
        return 0 if TABLE.read_text(encoding="utf-8") == text else 1
    TABLE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
