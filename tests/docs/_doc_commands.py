"""Read the shell commands that `README.md` and `docs/*.md` show, in the order they show them.

Every fenced `sh`, `console`, `bash` or `shell` block is a list of commands
(a `$ ` prompt is dropped; a trailing `\\` joins lines). A comment before a
fence steers the test that runs them (`test_doc_commands.py`):

    <!-- docs-test: skip=REASON -->        the block is not run (the reason is listed)
    <!-- docs-test: setup=COMMAND -->      a hidden command run first (e.g. a fixture copied in)
    <!-- docs-test: output-of=COMMAND -->  (before a `text` block) the output COMMAND prints
    <!-- docs-test: edit=FILE:OLD=>NEW --> (with output-of) run on a copy with OLD replaced

A command expects exit 0 unless its line says `# exit N`. Directives join
with `;`, and `setup`, `edit` may repeat.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_FENCE = re.compile(r"^```(\w*)\s*$")
_DIRECTIVE = re.compile(r"^<!--\s*docs-test:(.*?)-->\s*$")
_EXIT = re.compile(r"#\s*exit (\d+)\b")
# Directives join with `;` (a `;` inside a command stays in it).
_PARTS = re.compile(r";\s*(?=(?:skip|setup|output-of|edit)=)")
SHELL = frozenset({"sh", "console", "bash", "shell"})
# Every command the page tests ran (or skipped, with why), in order, for the summary.
RAN: list[str] = []


@dataclass(frozen=True)
class Command:
    text: str
    expect_exit: int


@dataclass(frozen=True)
class Block:
    """One fenced block of a page, with the directives written before it."""

    page: str
    line: int
    language: str
    body: str
    skip: str | None = None
    setup: tuple[str, ...] = ()
    output_of: str | None = None
    edits: tuple[tuple[str, str, str], ...] = ()

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def commands(self) -> list[Command]:
        out: list[Command] = []
        pending = ""
        for raw in self.body.splitlines():
            line = raw.removeprefix("$ ").rstrip()
            if pending:
                line = line.lstrip()
            if line.endswith("\\"):
                pending += line[:-1].rstrip() + " "
                continue
            line = pending + line
            pending = ""
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            found = _EXIT.search(line)
            out.append(Command(line, int(found.group(1)) if found else 0))
        return out


@dataclass
class _Pending:
    values: dict[str, list[str]] = field(default_factory=dict)

    def add(self, text: str) -> None:
        for part in _PARTS.split(text):
            name, _, value = part.strip().partition("=")
            if name:
                self.values.setdefault(name.strip(), []).append(value.strip())


def _edit(text: str) -> tuple[str, str, str]:
    name, _, change = text.partition(":")
    old, _, new = change.partition("=>")
    return name, old, new


def blocks(path: Path, page: str) -> list[Block]:
    """The fenced blocks of one page, each with the directives just before it."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    pending = _Pending()
    i = 0
    while i < len(lines):
        directive = _DIRECTIVE.match(lines[i])
        fence = _FENCE.match(lines[i])
        if directive:
            pending.add(directive.group(1))
        elif fence and fence.group(1):
            start = i
            i += 1
            body: list[str] = []
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            v = pending.values
            found.append(
                Block(
                    page=page,
                    line=start + 1,
                    language=fence.group(1),
                    body="\n".join(body),
                    skip=(v.get("skip") or [None])[0],
                    setup=tuple(v.get("setup", ())),
                    output_of=(v.get("output-of") or [None])[0],
                    edits=tuple(_edit(e) for e in v.get("edit", ())),
                )
            )
            pending = _Pending()
        elif lines[i].strip():
            pending = _Pending()
        i += 1
    return found
