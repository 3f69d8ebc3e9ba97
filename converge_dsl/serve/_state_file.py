"""Whether the service's state database is still the file its folder names.

SQLite keeps writing to a database file that was deleted (or renamed away, or
replaced) while it is open: a state folder removed while the server runs would
take every run, pause and decision into a file no restart reads again.
`StateFile(path)` records the file's identity (device, inode) when the service
starts; `problem()` says, from one `stat`, why the file at `path` is no longer
that one, or None while it is. The run service refuses what writes the state
(`check`: starting, cancelling and deciding a run, over HTTP or MCP; 503, CD993), and a
lookup of a run id its database does not have (`refusal(unknown=...)`: its 404 may be
false), and `/healthz` answers 503 while there is a problem.
"""

from __future__ import annotations

from pathlib import Path

from converge_dsl import codes
from converge_dsl._file_identity import identity

from ._requests import Problem, Refused

# The Retry-After of a request refused while the state is gone (seconds).
GONE_RETRY_S = 30


class StateFile:
    """See the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._identity = self._stat()

    def _stat(self) -> tuple[int, int] | OSError:
        """The file's device and inode (what a write leaves as they are), or the error."""
        found = identity(self.path)
        return found if isinstance(found, OSError) else (found.device, found.inode)

    def problem(self) -> str | None:
        """Why the file at `path` is no longer the database the service opened (deleted,
        replaced, not to be seen), from one `stat`; None while it is."""
        now = self._stat()
        if now == self._identity:
            return None
        if isinstance(now, FileNotFoundError):
            return "was deleted while the service runs"
        if isinstance(now, OSError):
            return f"cannot be seen ({now.strerror or now})"
        return "was replaced by another file while the service runs"

    def check(self) -> None:
        """Raise the `refusal` while there is a problem (before a write to the state)."""
        error = self.refusal()
        if error is not None:
            raise error

    def refusal(self, unknown: str | None = None) -> Refused | None:
        """The 503 (CD993) of a request that would write while there is a problem; with
        `unknown`, of a lookup of that run id, which the database the service holds does
        not have (it may be in the state folder's new one: "no such run" may be false)."""
        problem = self.problem()
        if problem is None:
            return None
        what = (
            "what it would store now is lost at its next start"
            if unknown is None
            else f"cannot tell whether run {unknown!r} exists (it has no such run)"
        )
        gone = Problem(
            codes.SERVE_STATE_UNUSABLE,
            f"the service's state database {problem}: {what}",
            "",
            "restart the server on a state folder it can keep (runs it had stored before "
            "are in the old folder, if it was moved)",
        )
        return Refused(503, (gone,), retry_after=GONE_RETRY_S)
