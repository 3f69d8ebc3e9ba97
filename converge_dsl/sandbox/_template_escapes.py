"""Jinja's lexer on a template string with an escape Python does not know (`'\\e'`).

The lexer decodes a string literal with Python's `unicode-escape` codec, which keeps
an unknown escape as written (a backslash and the letter) and warns of it
(`DeprecationWarning: invalid escape sequence`) each time a template is parsed. The
template is the pipeline author's, and validate already names how each key it reads
is written (CD250's note), so the warning only reached users as noise in the warnings
summary of a pytest run (`converge-dsl test`'s plugin). `quiet_escapes()` silences
that one warning around a parse; like `warnings.catch_warnings`, under which it
works, it is not meant for parses in several threads at once (every parse is on the
thread that loads or checks the pipeline).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_escapes() -> Iterator[None]:
    """Within it, the lexer's warning of an unknown escape in a string literal is not shown."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", r"invalid escape sequence", DeprecationWarning, r"jinja2\.lexer"
        )
        yield
