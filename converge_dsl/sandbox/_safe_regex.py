"""Linear-time regexes for every pattern a pipeline or pack supplies, and `UnsafeSchema`.

A regex (a schema's `pattern` and `patternProperties`, a model script's
`match.regex`) runs on RE2 (`google-re2`), whose matching is linear in the text,
with a bounded memory; a pattern RE2 cannot compile (backreferences, lookaround,
bad syntax) raises `UnsafeSchema` naming the reason (`regex_problem` gives it
as text, for validate's located diagnostics). `search` charges the text to the
governor. `UnsafeSchema` is also what `_safe_schema` raises for a schema it
refuses.
"""

from __future__ import annotations

import functools
from typing import Any

from converge_dsl._json_text import without_lone_surrogates
from converge_dsl.errors import RunError
from converge_dsl.sandbox._governor import spend


class UnsafeSchema(RunError):
    """A schema refers outside itself or holds a regex RE2 cannot run."""


def regex_problem(pattern: str) -> str | None:
    """Why RE2 cannot run `pattern` (backreferences, lookaround, syntax), or None."""
    try:
        _re2(pattern)
    except UnsafeSchema as exc:
        return exc.message
    return None


@functools.lru_cache(maxsize=1024)
def _re2(pattern: str) -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False
    options.max_mem = 64 << 20
    try:
        return re2.compile(pattern, options)
    except (re2.error, TypeError, ValueError) as exc:
        detail = exc.args[0] if exc.args else ""
        reason = detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
        raise UnsafeSchema(
            f"the regex {pattern!r} cannot run in linear time ({reason})",
            hint="backreferences (\\1) and lookaround ((?=, (?!, (?<=, (?<!) are not supported",
        ) from None


def compile_regex(pattern: str) -> Any:
    """A compiled RE2 regex (`search`, `match`, `fullmatch`); raises `UnsafeSchema`."""
    return _re2(pattern)


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` (RE2) matches somewhere in `text`; charges the text to the governor.

    RE2 reads UTF-8, which cannot hold a lone surrogate (JSON text may write one, as
    `"\\ud800"`): each is matched as U+FFFD, the replacement character."""
    spend(1, len(text))
    try:
        return _re2(pattern).search(text) is not None
    except UnicodeEncodeError:
        return _re2(pattern).search(without_lone_surrogates(text)) is not None
