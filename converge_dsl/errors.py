"""The one error root of converge-dsl, branched by what the user must fix.

Every exception that converge-dsl raises on purpose derives from
`ConvergeError`. Each branch names the stage where the problem lies and
carries the process exit code the CLI returns for it:

- `UsageError` (3): the command line is wrong.
- `PipelineInvalid` (2): loading, schema or semantic checks found errors; it
  carries every `Diagnostic`.
- `PackError` (1): a pack, repository, lock file or archive is unusable.
- `ModelFailure` (1): a model adapter failed (see `converge_dsl.models`).
- `RunError` (1): the run itself failed (a suggestor raised, a kernel rule was
  broken, a template failed at run time).

Foreign exceptions (yaml, jsonschema, jinja2, httpx) are translated into one
of these at the boundary where they occur and never escape.

An error's stable code (`CDxxx` of `converge_dsl.codes`, a model's `E_*`) lives in
one place, its `code` field (None when it has none), never in its `message`.
Every error reads one way:

- `str(exc)` is `[CODE] text` (`text` alone without a code), then
  `\n  hint: ...` when it has a hint; `text` is the message, and for a
  `RunError` its place and suggestor around it.
- `exc.cited` is how another error's message quotes it, when one error wraps
  another (a checkpoint unreadable because of what reading it raised, an
  option whose file was refused): `[CODE] message` (`message` alone without a
  code), its hint left to the wrapper. So the inner code travels with its text,
  in the human line and in JSON alike (`unreadable: [CD930] cannot read ...`).
  A wrapper that takes over the inner's code instead (`code=exc.code`) quotes
  its `message`.
- `exc.printed()` is how the command line prints it: `error[CODE]: text`
  (`error: text` without a code), then ` --> WHERE` under its first line when it
  has a `where` (a pack error's place in the pipeline), then `  hint: ...`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from converge_dsl._escapes import quoted

if TYPE_CHECKING:
    from converge_dsl.diagnostics import Diagnostic, SourceSpan


class ConvergeError(Exception):
    """Root of every error converge-dsl raises on purpose."""

    exit_code: ClassVar[int] = 1
    code: str | None = None
    where: str | None = None  # `FILE:LINE:COLUMN` of what the error is about, when known

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if code is not None:  # else the class's own (None, or the one code of its kind)
            self.code = code

    @property
    def text(self) -> str:
        """The message as it reads on its line, without code and hint."""
        return self.message

    @property
    def coded_message(self) -> str:
        """The message after its code, `CODE: message`, as data that keeps an error's
        text holds it (a diagnostic fact, a test case's error); the message without one."""
        return self.message if self.code is None else f"{self.code}: {self.message}"

    @property
    def cited(self) -> str:
        """The error as another error's message quotes it: `[CODE] message`, the message
        alone without a code (see the module docstring)."""
        return self.message if self.code is None else f"[{self.code}] {self.message}"

    def __str__(self) -> str:
        text = self.text if self.code is None else f"[{self.code}] {self.text}"
        return text if self.hint is None else f"{text}\n  hint: {self.hint}"

    def printed(self) -> str:
        """The error as the command line prints it (see the module docstring), no newline at
        its end."""
        head, newline, rest = self.text.partition("\n")
        text = f"error[{self.code}]: {head}" if self.code else f"error: {head}"
        if self.where:  # under the first line, as a located diagnostic shows its place
            from converge_dsl.diagnostics import one_line

            text += f"\n --> {one_line(self.where)}"
        text += newline + rest
        return text if self.hint is None else f"{text}\n  hint: {self.hint}"


class UsageError(ConvergeError):
    """The command line is wrong (unknown option, missing file, bad `--input`)."""

    exit_code = 3


class PipelineInvalid(ConvergeError):
    """A pipeline (or pack, or model script) failed loading or validation.

    `diagnostics` holds every finding, the best one first.
    """

    exit_code = 2

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        first = self.diagnostics[0].message if self.diagnostics else "invalid input"
        super().__init__(first)


class PackError(ConvergeError):
    """A pack, pack repository, lock file or pack archive cannot be used."""


class ModelFailure(ConvergeError):
    """Base of model-port failures; `converge_dsl.models.ModelError` derives from it."""


class RunError(ConvergeError):
    """The run failed. `span` points at the YAML node responsible, when known."""

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        code: str | None = None,
        span: SourceSpan | None = None,
        suggestor: str | None = None,
        cycle: int | None = None,
    ) -> None:
        super().__init__(message, hint=hint, code=code)
        self.span = span
        self.suggestor = suggestor
        self.cycle = cycle

    @property
    def text(self) -> str:
        """`FILE:LINE:COL: message (suggestor 'NAME', cycle N)`, each part when known."""
        where = ""
        if self.span is not None:  # its file name on one line, as a diagnostic shows it
            where = f"{self.span}: "
        who = f" (suggestor {quoted(self.suggestor)}" if self.suggestor else ""
        if who:
            who += f", cycle {self.cycle})" if self.cycle is not None else ")"
        return f"{where}{self.message}{who}"


class KernelError(RunError):
    """A suggestor broke a rule of the engine contract (empty provenance, conflicting fact)."""


class TemplateRunError(RunError):
    """A template or expression failed while the pipeline ran."""
