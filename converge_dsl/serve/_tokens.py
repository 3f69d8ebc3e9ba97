"""Bearer tokens: read once from `--token-file`, kept only as SHA-256 digests.

The file holds one token a line (blank lines and `#` comments skipped); a
line `sha256:HEX` is a token's digest already (so the file need not hold
the token itself). `Tokens.allows(header)` compares the digest of the
presented token with each kept digest in constant time
(`hmac.compare_digest`), checking them all whichever matches.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from converge_dsl import codes
from converge_dsl._reading import read_text

from ._errors import ServeRefused

_PREFIX = "sha256:"
_CAP = 1 << 20


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Tokens:
    """The digests of the tokens that may call the service (`None`: no token needed)."""

    digests: tuple[str, ...]

    def allows(self, authorization: str | None) -> bool:
        scheme, _, token = (authorization or "").partition(" ")
        presented = digest(token.strip()) if scheme.lower() == "bearer" and token else ""
        allowed = False
        for kept in self.digests:
            allowed |= hmac.compare_digest(presented.encode(), kept.encode())
        return allowed


def read_tokens(path: Path) -> tuple[Tokens, tuple[str, ...]]:
    """The tokens of `path` and the plain ones it held (for the redactor); `UsageError` CD992."""
    try:
        text = read_text(path, "--token-file", cap=_CAP)
    except UnicodeDecodeError:
        raise _unusable(path, "it is not UTF-8 text") from None
    except OSError as exc:
        raise _unusable(path, f"it cannot be read ({exc.strerror or exc})") from None
    digests: list[str] = []
    plain: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(_PREFIX):
            value = line[len(_PREFIX) :].lower()
            if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
                raise _unusable(path, f"line {number} is not sha256: and 64 hex digits")
            digests.append(value)
            continue
        if len(line) < 16 or any(c.isspace() for c in line):
            raise _unusable(path, f"line {number} is not a token of 16 or more characters")
        digests.append(digest(line))
        plain.append(line)
    if not digests:
        raise _unusable(path, "it holds no token")
    return Tokens(tuple(digests)), tuple(plain)


def _unusable(path: Path, reason: str) -> ServeRefused:
    return ServeRefused(
        codes.SERVE_TOKEN_FILE,
        f"--token-file {str(path)!r}: {reason}",
        hint="one token a line (16 or more characters, e.g. from `openssl rand -hex 32`), "
        "or sha256:HEX of one",
    )
