"""What the HTML pages of several packages share (the run report, the eval and diff pages).

`page_asset(name)` is the text of one of this folder's files, to be inlined in a
self-contained page: `vlist.js`, the virtualised list (only the rows in view
exist in the DOM), and `vlist.css`, its style. The files are written by hand;
nothing is vendored.
"""

from __future__ import annotations

from pathlib import Path

_FOLDER = Path(__file__).resolve().parent


def page_asset(name: str) -> str:
    """The text of the shared file `name` (a file of this package)."""
    return (_FOLDER / name).read_text(encoding="utf-8")
