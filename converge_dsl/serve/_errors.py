"""The errors that stop `converge-dsl serve` before it serves: each with its CD99x code."""

from __future__ import annotations

from converge_dsl.errors import ConvergeError, UsageError


class ServeRefused(UsageError):
    """The command line cannot be served as given (exit 3): `code` says why."""

    code: str

    def __init__(self, code: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"serve: {message}", hint=hint, code=code)


class ServeFailed(ConvergeError):
    """The service cannot work (exit 1): its state cannot be used, say."""

    code: str

    def __init__(self, code: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"serve: {message}", hint=hint, code=code)
