"""URLs as messages may show them (docs/architecture.md §8): never with their user info.

`display_url` is the one way a message, a warning or a refusal shows a URL
that came from the user's configuration (an OpenTelemetry endpoint, a
model's `base_url`), which may carry a user and a password.
"""

from __future__ import annotations


def display_url(url: str) -> str:
    """`url` as a message may show it: without user, password, query or fragment.

    Plain string cutting, so it never fails on a malformed URL (which a refusal
    must still show). A password may hold an unencoded `/`, `?`, `#` or `@`
    (the URL is then malformed, and the first of them does not end the
    authority), so everything up to the last `@` of the whole URL goes first,
    whatever it holds; then the query and the fragment.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    rest = rest.rpartition("@")[2]
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    path = path.split("?", 1)[0].split("#", 1)[0]
    return f"{scheme}{sep}{authority}{path}"
