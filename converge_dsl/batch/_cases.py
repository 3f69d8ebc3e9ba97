"""Cases in, result lines out: the files of a batch run.

A cases file is JSON Lines: each non-blank line an object, the inputs of one
case, optionally with an `id` (a string or an integer, removed from the
inputs). A line that is not such an object is a case that cannot run: its
result says why (`usage_error`), and the other cases run.

A results file is JSON Lines too, one line per finished case, written as
cases finish (so a line is never lost to a kill) and tagged with the case's
0-based `index` (its position among the cases' non-blank lines) and `id`:
sort by `index` for input order. Each line is the case's run result
(`run-result.v1`: stop reason, facts, diagnostics, usage...) with `index`,
`id`, `exit_code` and `pipeline` first: the `PipelineStamp` of the pipeline
that ran it, its name and the SHA-256 of its text (the digest a checkpoint
journal keeps of it, `pipeline_text`). `read_done` reads a results file back
for `--resume`: a last line cut short by a kill is ignored and cut off, and
`check_pipeline` refuses (CD321) a file holding a line of another pipeline,
or of this one before an edit. A line without `pipeline` (written before
lines carried it) names no pipeline and is taken as this one's.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from converge_dsl import codes
from converge_dsl._escapes import written
from converge_dsl._json_keys import DuplicateKey, unique_keys
from converge_dsl._json_text import loads
from converge_dsl._json_types import MAX_INPUT_DEPTH, nests_deeper
from converge_dsl._reading import read_text
from converge_dsl.diagnostics import one_line
from converge_dsl.errors import ConvergeError, UsageError

if TYPE_CHECKING:
    from converge_dsl.diagnostics import SourceSpan
    from converge_dsl.engine import Budget
    from converge_dsl.runtime import RunResultDocument

CaseId = str | int | None
# The first bytes of every result line: how an existing `--out` file is recognised.
LINE_START = b'{"index":'
# What `json.dumps(line, ensure_ascii=False, separators=(",", ":"))` uses, made once.
_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class PipelineStamp:
    """The pipeline a result line is of: its name and the hex SHA-256 of its text.

    The digest is the one a checkpoint journal keeps of the pipeline text
    (`pipeline_text`, `converge_dsl.runtime`): an edit of the file changes it.
    """

    name: str
    sha256: str

    @classmethod
    def of(cls, name: str, text: str) -> PipelineStamp:
        """The stamp of the pipeline `name` whose file's text is `text`."""
        from converge_dsl.runtime import pipeline_text_digest

        return cls(name, pipeline_text_digest(text))

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "sha256": self.sha256}


_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


@dataclass(frozen=True, slots=True)
class ModelOverride:
    """A model of the pipeline declared anew for one run: a `models.<name>` mapping as
    the pipeline language writes it (`adapter: scripted`, `openai`, ...) and the folder
    the files it names are relative to. Plain data: it pickles to a worker process."""

    spec: Mapping[str, Any]
    base_dir: Path


@dataclass(frozen=True, slots=True)
class CaseBudget:
    """Limits of one case's run below its pipeline's `budget:` (None: the pipeline's).

    Called with the pipeline's budget, it gives the run's: each limit the lower of the two.
    """

    max_model_calls: int | None = None
    max_tokens: int | None = None
    max_wall_s: float | None = None

    def __call__(self, budget: Budget) -> Budget:
        return replace(
            budget,
            max_model_calls=_lower(budget.max_model_calls, self.max_model_calls),
            max_tokens=_lower(budget.max_tokens, self.max_tokens),
            max_wall_s=_lower(budget.max_wall_s, self.max_wall_s),
        )


def _lower(given: Any, limit: Any) -> Any:
    if limit is None:
        return given
    return limit if given is None else min(given, limit)


@dataclass(frozen=True, slots=True)
class Case:
    """One case: its position, its id and its inputs (or why it cannot run: its
    `problem`, a text its run's `usage_error` says, or that error itself).

    `span` is its line in the cases file (None for cases given through the
    API): where a problem with its inputs is reported. `models` declares some
    of the pipeline's models anew for this case's run (an evaluation's
    configuration); `budget` lowers its run's budget; `replay` is the cassette
    that answers its run's models (and tool servers) instead of them.
    """

    index: int
    id: CaseId
    inputs: Mapping[str, Any]
    problem: str | UsageError | None = None
    span: SourceSpan | None = None
    models: Mapping[str, ModelOverride] | None = None
    budget: CaseBudget | None = None
    # The cassette that answers every model of its run (`--replay DIR`: `_cassettes`).
    replay: Path | None = None

    @property
    def label(self) -> str:
        """How a message names the case: its id (`'a'`, quoted as `_escapes.written` quotes,
        `7`), else `#INDEX (no id)`."""
        if self.id is None:
            return f"#{self.index} (no id)"
        return f"'{written(self.id)}'" if isinstance(self.id, str) else repr(self.id)


@dataclass(frozen=True, slots=True)
class CaseResult:
    """A finished case: its run result and exit code (as `converge-dsl run` would exit).

    `body` is the run result as plain JSON values (`RunResultDocument.model_dump(mode="json")`),
    what its result line holds: a batch writes the line (or sends the case to the
    parent process) without building a model per fact. `document` is the
    `RunResultDocument`, made from `body` each time it is asked for. `text` is the
    result line once `with_line` has written it: a worker process writes it, so the
    parent process of a `process` batch only copies it to `--out`.
    """

    index: int
    id: CaseId
    body: Mapping[str, Any]
    exit_code: int
    text: str | None = field(default=None, compare=False, repr=False)
    # The run's calls through the answer cache, hit or miss and why (`CallRecord.as_json`).
    cache_calls: tuple[Mapping[str, Any], ...] = field(default=(), compare=False, repr=False)
    # The case's wall time (seconds), kept out of `body` and its line: a result line
    # stays the same from run to run.
    seconds: float = field(default=0.0, compare=False, repr=False)
    # The pipeline that ran it, first in its line after `exit_code` (None: left out).
    pipeline: PipelineStamp | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(
        cls, index: int, case_id: CaseId, document: RunResultDocument, exit_code: int
    ) -> CaseResult:
        """The result of a case whose run result is `document`."""
        return cls(index, case_id, document.model_dump(mode="json"), exit_code)

    @property
    def document(self) -> RunResultDocument:
        """The run result (`run-result.v1`), validated from `body`."""
        from converge_dsl.runtime import RunResultDocument

        return RunResultDocument.model_validate(self.body)

    @property
    def stop_reason(self) -> str:
        return str(self.body["stop_reason"])

    @property
    def usage(self) -> Mapping[str, int]:
        """`model_calls`, `input_tokens` and `output_tokens` of the run."""
        return cast("Mapping[str, int]", self.body["usage"])

    def line(self) -> str:
        """The result line (JSON, one line, newline-terminated)."""
        if self.text is not None:
            return self.text
        head: dict[str, Any] = {"index": self.index, "id": self.id, "exit_code": self.exit_code}
        if self.pipeline is not None:
            head["pipeline"] = self.pipeline.as_json()
        return _LINE.encode({**head, **self.body}) + "\n"

    def with_line(self) -> CaseResult:
        """This result holding its result line (`text`), written now."""
        return replace(self, text=self.line())


def parse_case(index: int, text: str, span: SourceSpan | None = None) -> Case:
    """The case of one line of a cases file (a case with a `problem` if it is not one)."""
    too_deep = f"case {index}: its inputs nest deeper than {MAX_INPUT_DEPTH} levels"
    try:
        value = loads(text, object_pairs_hook=unique_keys)
    except RecursionError:
        return Case(index, None, {}, too_deep, span)
    except DuplicateKey as exc:  # the one rule of the run's other JSON inputs (`_json_keys`)
        return Case(index, None, {}, f"case {index}: {exc}", span)
    except ValueError as exc:
        return Case(index, None, {}, f"case {index}: not JSON ({exc})", span)
    if nests_deeper(value, text, MAX_INPUT_DEPTH):
        return Case(index, None, {}, too_deep, span)
    if not isinstance(value, dict):
        return Case(index, None, {}, f"case {index}: a case is a JSON object of inputs", span)
    case_id = value.pop("id", None)
    if case_id is not None and (isinstance(case_id, bool) or not isinstance(case_id, str | int)):
        problem = f"case {index}: `id` must be a string or an integer"
        return Case(index, None, value, problem, span)
    return Case(index, case_id, value, span=span)


def read_cases(path: Path) -> list[Case]:
    """Every case of the cases file `path`; `UsageError` when it cannot be read or holds
    no case."""
    return cases_in(cases_text(path), path)


def cases_text(path: Path) -> str:
    """The text of the cases file `path`, without the byte order mark an editor may put
    first (as an evaluation's dataset is read); `UsageError` when it cannot be read."""
    try:
        return read_text(path, "--cases file").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"--cases {path} is not UTF-8 text (byte {exc.start})", code=codes.FILE_UNREADABLE
        ) from None
    except OSError as exc:
        raise UsageError(
            f"cannot read --cases {path}: {exc.strerror}", code=codes.FILE_UNREADABLE
        ) from None


def cases_in(text: str, path: Path) -> list[Case]:
    """Every case of `text`, the cases file `path`'s, each located at its line there.
    A file with no case (empty, or blank lines alone) is a `UsageError` (CD338) located
    at it, as an evaluation refuses an empty dataset (CD340): a batch of no case would
    succeed having run nothing."""
    from converge_dsl._files import jsonl_lines
    from converge_dsl.diagnostics import SourceSpan

    numbered = enumerate(jsonl_lines(text), 1)
    lines = ((number, line) for number, line in numbered if line.strip())
    cases = [
        parse_case(index, line, SourceSpan(str(path), number, 1, number, len(line) + 1))
        for index, (number, line) in enumerate(lines)
    ]
    if not cases:
        error = UsageError(
            f"--cases {one_line(str(path))} holds no case: nothing would run",
            hint="give a case a line: a JSON object of its inputs, with an optional `id`",
            code=codes.INPUT_REFUSED,
        )
        error.where = f"{path}:1:1"
        raise error
    return cases


def cases_of(inputs: Iterator[tuple[int, Mapping[str, Any]] | Case]) -> Iterator[Case]:
    """API cases (index, inputs mapping) as `Case`s; `id` is kept out of the inputs.
    A `Case` is taken as it is."""
    for item in inputs:
        if isinstance(item, Case):
            yield item
            continue
        index, given = item
        if not isinstance(given, Mapping):
            yield Case(index, None, {}, f"case {index}: a case is a mapping of inputs")
            continue
        values = named_inputs(given, f"case #{index}")
        yield Case(index, values.pop("id", None), values)


def named_inputs(given: Mapping[Any, Any], where: str) -> dict[str, Any]:
    """`given` as a run's inputs (`Pipeline.run`'s, each case's of `run_many`): an input
    name that is not a string is refused as a usage error (CD338) naming `where`."""
    for name in given:
        if not isinstance(name, str):
            raise UsageError(
                f"{where}: input name {name!r} is not a string",
                hint="name each input as a string, as the pipeline declares it",
                code=codes.INPUT_REFUSED,
            )
    return dict(given)


def recognise(first: bytes) -> bool:
    """True for the first line of a results file this command wrote."""
    return first.startswith(LINE_START)


@dataclass(slots=True)
class Done:
    """What a results file already holds: index -> id, and the usage those cases spent;
    `pipelines`: each pipeline its lines name, with the number of the first such line."""

    ids: dict[int, CaseId] = field(default_factory=dict)
    model_calls: int = 0
    tokens: int = 0
    pipelines: dict[PipelineStamp, int] = field(default_factory=dict)
    # A last line without its newline (a batch killed while writing it): where the
    # complete lines end and the file's size then, for `cut_torn`; None: no such line.
    torn: tuple[int, int] | None = None


def read_done(path: Path, cases: Path | None = None, *, cut: bool = True) -> Done:
    """The cases `path` (a results file) already holds, and their usage.

    Before a byte changes, `path` must be a results file this command wrote
    (`converge_dsl._files.open_ours`: not a link, one hard link, a result
    line first) and not the cases file `cases`; then every complete line must
    be a result line. Only then is a last line without its newline (a batch
    killed while writing it) cut from the file (`cut_torn`), so appending
    continues on a line of its own; with `cut` false it is only noted
    (`Done.torn`), for the batch to cut once every check of it has passed (a
    refused batch leaves `path` as it was). A missing file holds nothing. A
    refusal is a `UsageError`.
    """
    from converge_dsl._files import open_ours, same_file

    fd = open_ours(path, "--out", "results file", recognise=recognise)
    if fd is None:
        return Done()
    with os.fdopen(fd, "rb") as handle:
        if cases is not None and same_file(path, cases):
            raise UsageError(
                f"--out {path} is the cases file; it is not changed",
                hint="give --out the results file of this batch",
                code=codes.OUTPUT_REFUSED,
            )
        try:
            data = handle.read()
        except OSError as exc:
            raise UsageError(
                f"cannot read --out {path}: {exc.strerror}", code=codes.FILE_UNREADABLE
            ) from None
    end = data.rfind(b"\n") + 1
    done = _done(data[:end], path)
    if end < len(data):
        if not LINE_START.startswith(data[end:]) and not recognise(data[end:]):
            raise _not_results(path, data.count(b"\n") + 1)  # a foreign last line
        done.torn = (end, len(data))
        if cut:
            cut_torn(path, done)
    return done


def cut_torn(path: Path, done: Done) -> None:
    """Cut from `path` the last line without its newline that `read_done` found in it
    (`done.torn`), so appending continues on a line of its own; refused (`UsageError`)
    when `path` has changed since."""
    if done.torn is None:
        return
    from converge_dsl._files import open_ours

    end, size = done.torn
    fd = open_ours(path, "--out", "results file", recognise=recognise)
    if fd is None or os.fstat(fd).st_size != size:
        if fd is not None:
            os.close(fd)
        raise UsageError(
            f"--out {path} changed while the batch started; it is not changed",
            hint="run the batch again",
            code=codes.OUTPUT_REFUSED,
        )
    with os.fdopen(fd, "r+b") as handle:
        handle.truncate(end)
        os.fsync(fd)


def _not_results(path: Path, number: int) -> UsageError:
    return UsageError(
        f"--out {path}: line {number} is not a result line of a batch run",
        hint="give --out a new file, or the results file of this batch",
        code=codes.FILE_UNREADABLE,
    )


_COUNTS = ("model_calls", "input_tokens", "output_tokens")


def _done(data: bytes, path: Path) -> Done:
    """What the complete result lines `data` of `path` hold; `UsageError` for any other line."""
    done = Done()
    for number, raw in enumerate(data.split(b"\n")[:-1], start=1):
        try:
            line = json.loads(raw) if recognise(raw) else None
        except ValueError:
            line = None
        usage = line.get("usage") or {} if isinstance(line, dict) else None
        counts = [usage.get(name, 0) for name in _COUNTS] if isinstance(usage, dict) else None
        stamp = _stamp(line.get("pipeline")) if isinstance(line, dict) else False
        if (
            not isinstance(line, dict)
            or not isinstance(line.get("index"), int)
            or counts is None
            or not all(type(count) is int for count in counts)
            or stamp is False
        ):
            raise _not_results(path, number)
        if stamp is not None:
            done.pipelines.setdefault(stamp, number)
        done.ids[line["index"]] = line.get("id")
        done.model_calls += counts[0]
        done.tokens += counts[1] + counts[2]
    return done


def _stamp(value: Any) -> PipelineStamp | Literal[False] | None:
    """The stamp a line's `pipeline` holds; None when it has none; False when it is not one."""
    if value is None:
        return None
    if (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and isinstance(value.get("sha256"), str)
        and _SHA256.match(value["sha256"])
    ):
        return PipelineStamp(value["name"], value["sha256"])
    return False


class ResultsRefused(UsageError):
    """`--resume` of a results file that holds lines of another pipeline (CD321); exit 3."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(
            f"results file refused: {message}", hint=hint, code=codes.RESULTS_OF_ANOTHER_PIPELINE
        )


def check_pipeline(done: Done, stamp: PipelineStamp, path: Path) -> None:
    """Refuse (`ResultsRefused`) a results file whose lines name a pipeline other than
    `stamp` (another name, or this name with another text): at its first such line.
    Lines that name no pipeline are taken as this one's."""
    others = [(number, other) for other, number in done.pipelines.items() if other != stamp]
    if not others:
        return
    number, other = min(others, key=lambda found: found[0])
    if other.name == stamp.name:
        what = (
            f"a result of pipeline {other.name!r} as its text was before an edit "
            f"(sha256 {other.sha256[:16]}; now {stamp.sha256[:16]})"
        )
    else:
        what = (
            f"a result of pipeline {other.name!r} (sha256 {other.sha256[:16]}), "
            f"not of {stamp.name!r} (sha256 {stamp.sha256[:16]})"
        )
    raise ResultsRefused(
        f"--out {one_line(str(path))}: line {number} holds {what}; resuming would mix "
        "their results",
        hint="give a new --out for this pipeline, or drop --resume to start --out again",
    )


def check_resumable(done: Mapping[int, CaseId], cases: list[Case], path: Path) -> None:
    """Refuse (`UsageError`) a results file written for other cases than `cases`."""
    for index, case_id in done.items():
        if index >= len(cases) or cases[index].id != case_id:
            raise UsageError(
                f"--out {path} holds a result for case {index} (id {case_id!r}) "
                "that the cases file does not have",
                hint="resume with the cases file the batch started with, or a new --out",
                code=codes.FILE_UNREADABLE,
            )


def error_result(case: Case, error: ConvergeError, pipeline: Path) -> CaseResult:
    """The result of a case that could not run (or failed outside the engine)."""
    from converge_dsl.runtime import not_run_document

    document = not_run_document(error, pipeline, inputs_at=case.span)
    return CaseResult.of(case.index, case.id, document, error.exit_code)
