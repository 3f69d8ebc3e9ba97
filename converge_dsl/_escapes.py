"""How text nobody here wrote is shown where a character could act on its reader.

`UNSHOWN` is the class of characters a terminal or a page would act on: C0 but
newline and tab, DEL, C1 and the bidi controls (U+202A-U+202E, U+2066-U+2069).
`HIDDEN`, a wider one, is what a reader does not see as itself: what a fact id
may not hold (`converge_dsl._fact_ids`) and what a message naming a key says
how the file writes (CD250); a tag character too, but within one of the three
flags Unicode recommends (England, Scotland, Wales), which `HIDDEN` matches whole
and a search skips.
`escaped(match)` is a matched character's visible escape, `\\xNN` below U+0100,
`\\uNNNN` to U+FFFF and `\\UNNNNNNNN` above (a fixed width each, as Python and YAML
read them: `\\ue0041` would read as U+E004 and a `1`): what `frontend.terminal_safe`,
the pages' `page_text` and a location's file name (`diagnostics.one_line`) show in its
place; `written(text)` is how a message quotes a text with such characters (a fact id,
a key name), `quoted(text)` the same between its single quotes; `yaml_scalar(text)` is
`text` as a YAML scalar reads it back (a hint's copyable `keys: [{name: ...}]`),
double-quoted with `written`'s escapes unless plain.
`shown(text)` is `HIDDEN` escaped but newline and tab: every part of a diagnostic a
human rendering prints (`frontend._render`: the text and GitHub forms), whatever
wrote it; it leaves a backslash alone, so text `written` already escaped is unchanged.
`name_on_one_line(text)` escapes newline, tab and the backslash too, one to one:
a name pytest shows on a report line of its own. `shell_word(text)` is `text` as
one word a shell reads back as it is, and as safe to show: a command line the
user may paste (`init`'s next step, the answer cache's and run's hints); a word
holding such a character is `$'...'`, which bash, zsh and ksh read, not dash nor
fish.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import re

UNSHOWN = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
# What a reader does not see as itself: `UNSHOWN`, newline and tab, the soft hyphen, the
# zero-width space, the direction marks (the Arabic letter mark U+061C, LRM, RLM: with the
# embeddings, overrides and isolates, every one of Unicode's Bidi_Control characters), the
# line and paragraph separators, the word joiner and invisible operators, the byte-order
# mark. Not the zero-width non-joiner and joiner (U+200C, U+200D): Persian and Indic words
# are spelled with them and emoji sequences are joined by them; nor the Mongolian vowel
# separator (U+180E), which spells Mongolian words as they do. (The pages' `page_name`
# shows a set of its own, see `converge_dsl._page_assets`.)
# The tag characters (U+E0000-U+E007F) are hidden but inside one of the three emoji tag
# sequences Unicode recommends (RGI, `emoji-test.txt`: the flags of England, Scotland and
# Wales, U+1F3F4, the tags `gbeng`, `gbsct` or `gbwls`, the cancel tag U+E007F), which the
# first alternative matches whole so that no tag of it is matched alone (`escaped` gives it
# back as it is). Any other tag run is not drawn as a flag but as U+1F3F4 alone, its tags
# unseen: text a reader would not see. The whole is one group: `f"{HIDDEN}+"` repeats it.
_TAG_FLAG = (
    "\U0001f3f4\U000e0067\U000e0062"
    "(?:\U000e0065\U000e006e\U000e0067|\U000e0073\U000e0063\U000e0074"
    "|\U000e0077\U000e006c\U000e0073)\U000e007f"
)
HIDDEN = (
    f"(?:{_TAG_FLAG}"
    "|[\x00-\x1f\x7f-\x9f\xad\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2069\ufeff"
    "\U000e0000-\U000e007f])"
)


def escaped(found: re.Match[str]) -> str:
    """The visible escape of the one character `found` matched; a flag `HIDDEN`
    matched whole as it is."""
    if len(found.group()) > 1:
        return found.group()
    code = ord(found.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def written(text: str, *, unprintable: bool = False) -> str:
    """`text` as a message quotes it between single quotes, one notation for every message,
    so two texts never read alike: a backslash doubled, and each `HIDDEN` character, a
    space that is not U+0020 (a no-break space, `\\xa0`) and the quote `'` (`\\x27`) as
    `escaped` writes it (`\\x0a`, `\\u202e`, never Python's `\\n`); with `unprintable`,
    each character `str.isprintable` refuses (an unassigned code point...) too. Every
    escape is one YAML's double-quoted scalars read alike. The promotion gate's reason
    (`converge_dsl._fact_ids.written_id`), CD250, CD256, CD272, CD802 and a batch's case."""
    import re

    doubled = text.replace("\\", "\\\\")
    if unprintable:
        return re.sub(f"{_TAG_FLAG}|[^ -&(-~]", _unprintable_escaped, doubled)
    return re.sub(_QUOTED_ESCAPED, escaped, doubled)


def quoted(text: str, limit: int | None = None) -> str:
    """`text` between single quotes as every message quotes a name (`'a\\x09b'`): `written`;
    with `limit`, at most that many characters: cut at an escape's edge, `...` before the
    closing quote (`'aaaa\\x09...'`)."""
    inside = written(text)
    if limit is None or len(inside) + 2 <= limit:
        return f"'{inside}'"
    import re

    end = 0
    for piece in re.finditer(_WRITTEN_PIECE, inside):
        if piece.end() + 5 > limit:
            break
        end = piece.end()
    return f"'{inside[:end]}...'"


# One character of `written`'s text: an escape whole (a flag `HIDDEN` keeps whole too), or one.
_WRITTEN_PIECE = rf"\\(?:x[0-9a-f]{{2}}|u[0-9a-f]{{4}}|U[0-9a-f]{{8}}|\\)|{HIDDEN}|."


# What `written` escapes (with the backslash, doubled): `HIDDEN`, a space that is not
# U+0020 (`\s` reads Unicode's) and the quote that delimits it.
_QUOTED_ESCAPED = f"{HIDDEN}|[^\\S ]|'"


def shown(text: str) -> str:
    """`text` with each `HIDDEN` character but newline and tab escaped (`escaped`), as a
    human rendering of a diagnostic prints each of its parts: the escapes are ASCII and
    a backslash is kept, so `shown(shown(t)) == shown(t)` and `written`'s text is kept."""
    import re

    return re.sub(_SHOWN_ESCAPED, escaped, text)


_SHOWN_ESCAPED = f"(?![\t\n]){HIDDEN}"


# A name YAML reads back as this very text, unquoted, in a flow mapping too: no indicator,
# no space, nothing a reader could miss; and not a word YAML 1.1 reads as a boolean or null.
_PLAIN = "[A-Za-z_][A-Za-z0-9_.-]*"
_NOT_TEXT = frozenset(("y", "n", "yes", "no", "true", "false", "on", "off", "null"))


def yaml_scalar(text: str) -> str:
    """`text` as a YAML scalar that reads back as exactly `text`: itself when a plain
    name, else double-quoted with `written`'s escapes (`unprintable`) and `"` as `\\"`,
    every one an escape YAML reads (`"a\\x09b"`, `"k\\U000e0041"`)."""
    import re

    if re.fullmatch(_PLAIN, text) and text.lower() not in _NOT_TEXT:
        return text
    return '"' + written(text, unprintable=True).replace('"', '\\"') + '"'


def _unprintable_escaped(found: re.Match[str]) -> str:
    char = found.group()  # a flag `HIDDEN` keeps whole is kept whole here too
    return char if len(char) > 1 or (char.isprintable() and char != "'") else escaped(found)


def name_on_one_line(text: str) -> str:
    """`text` on one line and safe to show, escaped one to one (two texts never show
    alike): `UNSHOWN` as `escaped` does, newline as `\\n`, tab as `\\t` and a
    backslash as `\\\\`. What names a pytest item of a case (a report line each)."""
    import re

    return re.sub(f"[\\\\\t\n]|{UNSHOWN}", _line_escaped, text)


def _line_escaped(found: re.Match[str]) -> str:
    char = found.group()
    return {"\\": "\\\\", "\n": "\\n", "\t": "\\t"}.get(char) or escaped(found)


# What a pasted command line cannot hold as it is: `UNSHOWN`, newline and tab (which
# end or split the line), and a byte of a file name that was not UTF-8 (Python's
# surrogate escape).
_BREAKS_PASTE = f"[\t\n\udc80-\udcff]|{UNSHOWN}"


def shell_word(text: str) -> str:
    """`text` quoted as one word for a POSIX shell, with no character a terminal acts on.

    `shlex.quote`'s form when that holds none; else ANSI-C quoting (`$'...'`) with
    each such character written as its UTF-8 bytes, `\\xNN` each (a byte of a file
    name that was not UTF-8 as itself), which the shell reads back in any locale
    (`\\uNNNN` only in a UTF-8 one). `$'...'` is bash's, zsh's and ksh's (and
    busybox sh's), not dash's (Debian's /bin/sh) nor fish's: the portable forms
    (`"$(printf ...)"`) lose a trailing newline and read differently in fish."""
    import re

    if not re.search(_BREAKS_PASTE, text):
        import shlex

        return shlex.quote(text)
    return "$'" + re.sub(f"[\\\\']|{_BREAKS_PASTE}", _shell_escaped, text) + "'"


def _shell_escaped(found: re.Match[str]) -> str:
    char = found.group()
    if char in "\\'":
        return "\\" + char
    if 0xDC80 <= ord(char) <= 0xDCFF:
        return f"\\x{ord(char) - 0xDC00:02x}"
    return "".join(f"\\x{byte:02x}" for byte in char.encode())


def shell_join(words: list[str]) -> str:
    """`words` as one command line for a POSIX shell, each a `shell_word`."""
    return " ".join(shell_word(word) for word in words)
