"""`converge-dsl explain [CODE] [--format human|json]`: what a diagnostic code means.

The explanations are read at run time from `docs/errors.md` (shipped in the
wheel, `converge_dsl._resources.errors_doc_path`), one `## CDnnn` section per
code: a bold one-line title followed by the constant's name, then prose and
at least one fenced example. Nothing is copied into the code, so the page
and the command cannot drift (a test checks that every code of
`converge_dsl.codes` has a section). CODE may be written `CD203`, `cd203`,
`203` or by its constant's name (`UNKNOWN_CONTEXT_KEY`); without CODE, every
code is listed with its title. The section is printed as plain text, examples
indented (the title in bold on a colour terminal). Exit codes: 0; 1 the page is missing from the
installation or lacks a defined code; 3 an unknown code (with the closest
known one suggested).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.errors import ConvergeError, UsageError

if TYPE_CHECKING:
    from converge_dsl.cli import CommandIO

# `## CD203` (anything after the code on the heading line is ignored) up to the next
# `#` or `##` heading; `###` sub-headings belong to the section.
_SECTION = re.compile(r"^## (CD\d{3})\b[^\n]*\n(.*?)(?=^#{1,2} |\Z)", re.S | re.M)
_TITLE = re.compile(r"^\*\*(.+?)\*\*(?:\s*\(`([A-Z0-9_]+)`\))?[ \t]*$", re.M)
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass(frozen=True, slots=True)
class Explanation:
    """One code's section of docs/errors.md.

    `text` is the section below its title (Markdown, examples fenced);
    `examples` are the fenced blocks' contents, in order.
    """

    code: str
    name: str
    title: str
    text: str
    examples: tuple[str, ...]


def parse(page: str) -> dict[str, Explanation]:
    """Every `## CDnnn` section of `page` (the text of docs/errors.md), by code."""
    found: dict[str, Explanation] = {}
    for code, body in _SECTION.findall(page):
        title = _TITLE.search(body)
        text = body[title.end() :] if title else body
        found[code] = Explanation(
            code=code,
            name=(title.group(2) or "") if title else "",
            title=title.group(1).strip() if title else "",
            text=text.strip("\n") + "\n",
            examples=tuple(block for block in _FENCE.findall(text)),
        )
    return found


def load() -> dict[str, Explanation]:
    """The explanations of the installed docs/errors.md (a `ConvergeError` if it is missing)."""
    from converge_dsl._resources import errors_doc_path

    path = errors_doc_path()
    try:
        return parse(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConvergeError(
            f"the error documentation is not available in this installation ({path.name}: "
            f"{exc.strerror or type(exc).__name__})",
            hint="reinstall converge-dsl; the codes are also documented in docs/errors.md",
            code=codes.PART_NOT_INSTALLED,
        ) from None


def defined_codes() -> dict[str, str]:
    """code -> constant name, for every code in `converge_dsl.codes`."""
    return {value: name for name, value in vars(codes).items() if name.isupper()}


def _digits(word: str) -> str:
    """What follows `CD` in `word`, upper case, a letter O typed for a zero read as the zero."""
    return word.strip().upper().removeprefix("CD").replace("O", "0")


def _normalise(word: str, names: dict[str, str]) -> str:
    """`cd203`, `203`, `UNKNOWN_CONTEXT_KEY` -> `CD203` (unchanged when nothing fits)."""
    text = word.strip()
    upper = text.upper()
    if upper in names.values():
        return next(code for code, name in names.items() if name == upper)
    digits = _digits(text)
    if re.fullmatch(r"\d{1,3}", digits):
        return "CD" + digits.zfill(3)
    return text


def find(word: str) -> Explanation:
    """The explanation of the code `word` names; `UsageError` (did you mean) if none does."""
    from converge_dsl.diagnostics import did_you_mean, suggestion

    names = defined_codes()
    code = _normalise(word, names)
    if code not in names:
        # `CD2O4x` compares as `CD204X`, so it suggests CD204.
        guess = did_you_mean("CD" + _digits(word), names) or did_you_mean(
            word.upper(), names.values()
        )
        raise UsageError(
            f"unknown diagnostic code {word!r}",
            hint=suggestion(guess) if guess else "run 'converge-dsl explain' to list every code",
            code=codes.ARGUMENTS_REFUSED,
        )
    explanations = load()
    if code not in explanations:
        raise ConvergeError(
            f"{code} ({names[code]}) is defined but has no section in the error documentation",
            hint="add a '## " + code + "' section to docs/errors.md",
            code=codes.PART_NOT_INSTALLED,
        )
    return explanations[code]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "code",
        nargs="?",
        metavar="CODE",
        help="a diagnostic code (CD203, cd203, 203) or its constant's name; none: list every code",
    )
    parser.add_argument(
        "--format",
        choices=("human", "json"),
        default="human",
        help="json: one object (code, name, title, text, examples); a list without CODE",
    )


def _human(entry: Explanation) -> str:
    """The section as terminal text: fences dropped, examples indented by four spaces."""
    text = _FENCE.sub(
        lambda m: "".join(f"    {line}" if line else "\n" for line in m.group(1).splitlines(True)),
        entry.text,
    )
    name = f" ({entry.name})" if entry.name else ""
    return f"{entry.code}{name}: {entry.title}\n\n{text}"


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.frontend import terminal_safe

    if args.code is None:
        entries = sorted(load().values(), key=lambda e: e.code)
        if args.format == "json":
            listing = [asdict(e) for e in entries]
            io.stdout.write(json.dumps(listing, indent=2, ensure_ascii=False) + "\n")
        else:
            io.stdout.write("".join(f"{e.code}  {terminal_safe(e.title)}\n" for e in entries))
        return 0
    entry = find(args.code)
    typed = args.code.strip().upper().removeprefix("CD")
    if "O" in typed and re.fullmatch(r"[0-9O]{1,3}", typed):
        io.note(f"note: read {terminal_safe(args.code)!r} as {entry.code} (a letter O for a zero)")
    style = io.style(io.stdout)
    if args.format == "json":
        io.stdout.write(json.dumps(asdict(entry), indent=2, ensure_ascii=False) + "\n")
    elif style.color:
        from rich.text import Text

        from converge_dsl.cli._terminal import console

        # Only the title is styled: the examples must reach the reader uncut and unwrapped.
        title, rest = terminal_safe(_human(entry)).split("\n", 1)
        out = console(io.stdout, style, io.environ)
        out.print(Text(title, style="bold"), Text(rest), sep="\n", end="", soft_wrap=True)
    else:
        io.stdout.write(terminal_safe(_human(entry)))
    return 0
