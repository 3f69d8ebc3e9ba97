"""Bearer tokens of `--token-file`, kept only as SHA-256 digests, seen again when it changes.

The file holds one token a line (blank lines and `#` comments skipped); a
line `sha256:HEX` is a token's digest already (so the file need not hold
the token itself). `Tokens.allows(header)` compares the digest of the
presented token with each kept digest in constant time
(`hmac.compare_digest`), checking them all whichever matches.

`TokenFile` is the file while the service runs. It is read at the start
(`read_tokens`: a bad file stops the start, CD992). Each request's check then
stats the file (a symbolic link followed, as Kubernetes swaps a mounted
secret) and reads it again only when its identity (device, inode, size,
mtime_ns, ctime_ns) changed since the last read, or when that read came
within `RACY_NS` of the file's mtime or ctime (whichever is later: a writer may
set the mtime back): a write in the same timestamp tick would leave the
identity as it was (git's "racily clean" index entries). A file written in
place is truncated first, then written: while it is that recent, a last line
without its newline may be a token cut short, and is not read (a token is
let in once its line is whole, or once the file has settled). When that line
is all the file holds (a secret written with no final newline), the tokens held
before stay until the file settles, rather than none: the service does not refuse
every request for those seconds.
While the file is missing, unreadable or invalid, no request is let in on
the tokens it held before (fail closed): each is answered 503 with CD461 and
`Retry-After` until the file holds tokens again, and the server's log says so
once for each change of what it found, never for each request.

`admitted(tokens, headers)` is the one token check of the HTTP API and of the
MCP endpoint: None when the request may go on, else the refusal each edge
answers (401 CD987 with `WWW-Authenticate: Bearer`, 400 CD309 for two
`Authorization` headers that differ, 503 CD461). A service without a token
file reads no `Authorization` header (docs/serve.md).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl._file_identity import SETTLED_NS, FileIdentity, identity, settled
from converge_dsl._reading import ReadRefused, read_text

from ._errors import ServeRefused
from ._requests import Problem, Refused, one_header

if TYPE_CHECKING:
    from starlette.datastructures import Headers

_PREFIX = "sha256:"
_CAP = 1 << 20
# A file whose mtime or ctime is this near the time it was read is read again at the
# next check (`_file_identity.settled`).
RACY_NS = SETTLED_NS
# The Retry-After of a request refused while the token file cannot be used (seconds).
UNUSABLE_RETRY_S = 5


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Tokens:
    """The digests of the tokens that may call the service."""

    digests: tuple[str, ...]

    def allows(self, authorization: str | None) -> bool:
        scheme, _, token = (authorization or "").partition(" ")
        presented = digest(token.strip()) if scheme.lower() == "bearer" and token else ""
        allowed = False
        for kept in self.digests:
            allowed |= hmac.compare_digest(presented.encode(), kept.encode())
        return allowed


class _Unsettled(Exception):
    """A file still being written (see the module docstring) whose whole lines hold no
    token yet: the tokens held before are kept until it settles."""


class _Unusable(Exception):
    """Why a token file's text cannot be used (its words, for CD992 or the log)."""


class _NoToken(_Unusable):
    """A file that holds no token (only blank lines and comments, or nothing)."""


def _parse(text: str) -> tuple[Tokens, tuple[str, ...]]:
    digests: list[str] = []
    plain: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(_PREFIX):
            value = line[len(_PREFIX) :].lower()
            if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
                raise _Unusable(f"line {number} is not sha256: and 64 hex digits")
            digests.append(value)
            continue
        if len(line) < 16 or any(c.isspace() for c in line):
            raise _Unusable(f"line {number} is not a token of 16 or more characters")
        digests.append(digest(line))
        plain.append(line)
    if not digests:
        raise _NoToken("it holds no token")
    return Tokens(tuple(digests)), tuple(plain)


def _read(path: Path, *, racy: bool = False) -> tuple[Tokens, tuple[str, ...]]:
    """The tokens of `path`; `_Unusable` when it cannot be read as a token file (a FIFO
    or a file over the cap stays the `ReadRefused` it is). `racy`: the file may be being
    written (see the module docstring): a last line without its newline is left out."""
    try:
        text = read_text(path, "--token-file", cap=_CAP)
    except UnicodeDecodeError:
        raise _Unusable("it is not UTF-8 text") from None
    except OSError as exc:
        raise _Unusable(f"it cannot be read ({exc.strerror or exc})") from None
    if racy and not text.endswith("\n"):
        whole = text[: text.rfind("\n") + 1]
        try:
            return _parse(whole)
        except _NoToken:
            raise _Unsettled from None
    return _parse(text)


def read_tokens(path: Path) -> tuple[Tokens, tuple[str, ...]]:
    """The tokens of `path` and the plain ones it held (for the redactor); `UsageError` CD992."""
    try:
        return _read(path)
    except _Unusable as exc:
        raise _unusable(path, str(exc)) from None


def _unusable(path: Path, reason: str) -> ServeRefused:
    return ServeRefused(
        codes.SERVE_TOKEN_FILE,
        f"--token-file {str(path)!r}: {reason}",
        hint="one token a line (16 or more characters, e.g. from `openssl rand -hex 32`), "
        "or sha256:HEX of one",
    )


UNUSABLE = Problem(
    codes.SERVE_TOKENS_UNUSABLE,
    "the service cannot check bearer tokens now: its token file is missing, unreadable or "
    "holds no valid token, and no request is let in on the tokens it held before",
    "",
    "retry after the seconds Retry-After gives; the server's log says what is wrong with "
    "its --token-file, for its operator to mend",
)


class TokenFile:
    """The tokens of `--token-file` while the service runs (see the module docstring).

    `allows(header)` says whether the header's bearer token is one of the file's as it
    is now, or raises the 503 `Refused` (CD461) while the file cannot be used. `plain`
    holds every plain token the file has held since the start (the redactor masks
    them, revoked ones too). `now` is the wall clock file timestamps are compared with.
    """

    def __init__(self, path: Path, *, now: Callable[[], int] = time.time_ns) -> None:
        self.path = path
        self._now = now
        found = identity(path)
        self._tokens: Tokens | None
        self._tokens, plain = read_tokens(path)
        self.plain: tuple[str, ...] = plain
        self._seen = self._trusted(found)
        self._problem: str | None = None

    def _trusted(self, found: FileIdentity | OSError) -> FileIdentity | None:
        """`found` if a read after it cannot have missed a write; else None (read again
        at the next check)."""
        if isinstance(found, OSError) or not settled(found, self._now()):
            return None
        return found

    def allows(self, authorization: str | None) -> bool:
        """Whether `authorization` (the request's header) carries one of the file's tokens
        as it is now; the 503 `Refused` (CD461) while the file cannot be used."""
        return self.usable().allows(authorization)

    def usable(self) -> Tokens:
        """The file's tokens as it is now (read again if it changed); the 503 `Refused`
        (CD461) while it cannot be used (`/healthz` asks too: no token needed)."""
        found = identity(self.path)
        if found != self._seen:  # an error or a change (never equal to an error)
            self._reread(found)
        if self._tokens is None:
            raise Refused(503, (UNUSABLE,), retry_after=UNUSABLE_RETRY_S)
        return self._tokens

    def _reread(self, found: FileIdentity | OSError) -> None:
        tokens: Tokens | None
        plain: tuple[str, ...]
        seen = self._trusted(found)
        if isinstance(found, OSError):
            problem = self._problem_of(found)
            tokens, plain = None, ()
        else:
            try:
                tokens, plain = _read(self.path, racy=seen is None)
                problem = None
            except _Unsettled:
                self._seen = None  # read again at the next check
                return
            except (_Unusable, ReadRefused) as exc:
                problem = self._problem_of(exc)
                tokens, plain = None, ()
        before = self._tokens
        self._seen = seen
        self._tokens = tokens
        self.plain = tuple(dict.fromkeys((*self.plain, *plain)))
        log = logging.getLogger("uvicorn.error")
        shown = repr(str(self.path))
        if problem is not None:
            if problem != self._problem:
                log.error(
                    "--token-file %s cannot be used: %s; every request that needs a token is "
                    "refused (503, %s) until it holds tokens again",
                    shown,
                    problem,
                    codes.SERVE_TOKENS_UNUSABLE,
                )
        elif self._problem is not None or tokens != before:
            count = len(tokens.digests) if tokens is not None else 0
            log.warning("--token-file %s read again: %d token(s) let in from now", shown, count)
        self._problem = problem

    @staticmethod
    def _problem_of(error: Exception) -> str:
        if isinstance(error, FileNotFoundError):
            return "it is missing"
        if isinstance(error, OSError):
            return f"it cannot be read ({error.strerror or error})"
        if isinstance(error, ReadRefused):
            return error.reason
        return str(error)


UNAUTHORIZED = Problem(
    codes.SERVE_UNAUTHORIZED,
    "a valid bearer token is needed",
    "",
    "send Authorization: Bearer TOKEN with a token of --token-file",
)


def admitted(tokens: TokenFile | None, headers: Headers) -> Refused | None:
    """None when a request with `headers` may go on (`tokens` None: no token file, no
    header read); else what it is refused with (see the module docstring)."""
    if tokens is None:
        return None
    try:
        if tokens.allows(one_header(headers, "Authorization", codes.SERVE_BAD_PARAMETER)):
            return None
    except Refused as refusal:
        return refusal
    return Refused(401, (UNAUTHORIZED,))
