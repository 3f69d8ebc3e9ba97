"""Record / replay: cassettes of request -> answer pairs in JSON Lines.

`RecordingModel` wraps any model and appends one line per call: the stable
key (sha256 of the normalised request), the normalised request, the recorded
model's `model_id` and account label (and the pipeline's name for the model,
when given), and either the return or the error. A line also keeps what
happened inside the call: `attempts` (each request an adapter sent: account,
HTTP status, error code; written when there was more than one), `gates` (each
budget decision on a further attempt: `allowed`, `refused`, `deadline`, with
its step), `started` (the call's place among the cassette's events when it
began), `step` (the answer's place) and `default_max_tokens` (the answer cap
the model sends when a request names none). `ReplayModel` answers from a
cassette with no network (skipping the lines of tool servers, `"kind": "mcp"`,
which `converge_dsl.tools` replays); a request with no recording fails with
`E_REPLAY_MISS` naming the nearest recorded request and where it differs. A
key recorded several times replays its answers in order, then keeps repeating
the last one.

A replay reproduces the run, not only the answers: it asks the run's attempt
gate (the usage meter) once per recorded further attempt, so retries and
failovers count as model calls again and a retry the budget refused is
refused again (`E_BUDGET_EXHAUSTED`, the call budget's stop); it reports the
recorded attempts to the attempt observer (the trace); and it starts its
calls and gives its answers in the order they were recorded (`ReplayOrder`),
so concurrent suggestors and agents reserve and meet the budget in the same
order: a call that started before another caller's answer in the recorded run
(it was in flight, holding its share of the budget) starts before it again,
though a replay's answers take no time.

Replay stands in for the recorded model: its `model_id()` and
`provider_account()` are the recorded ones, and a return recorded without a
model id gets the line's, so every suggestor kind (llm, agent, summarizer)
gives facts with the recorded `model_id` and `account`.

Requests carry no secrets and errors are already redacted by the adapters;
each line also passes the wrapped model's redactor (when it has one), which
masks the exact secrets of its accounts and nothing else: answer text that
merely looks like a credential is kept as recorded. A line nested deeper than
`CASSETTE_MAX_DEPTH` is refused before it is decoded.
"""

from __future__ import annotations

import difflib
import itertools
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from converge_dsl._reading import read_text
from converge_dsl.engine.types import canonical_json
from converge_dsl.models._common import (
    emit_increments,
    normalise_request,
    request_key,
    return_from_json,
    return_to_json,
)
from converge_dsl.models._limits import MAX_JSON_DEPTH, json_depth
from converge_dsl.models._metered import configured_cap
from converge_dsl.models._replay_order import ReplayOrder
from converge_dsl.models.events import (
    ATTEMPT_OBSERVER,
    GATE_LOG,
    AttemptReport,
    report_attempt,
)
from converge_dsl.models.port import (
    AccountBinding,
    ModelDefaults,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ModelReturn,
    ModelWrapper,
    OnEarlyToolCall,
    OnIncrement,
)
from converge_dsl.models.port import Model as ModelPort

CASSETTE_VERSION = 2
# The `kind` of a line that records an MCP tool server, not a model (skipped here).
TOOL_LINE_KIND = "mcp"
# A line wraps a request and an answer, each nested at most MAX_JSON_DEPTH deep.
CASSETTE_MAX_DEPTH = 2 * MAX_JSON_DEPTH
RECORD_HINT = (
    "record one with `converge-dsl run PIPELINE --record CASSETTE` "
    "(or `record: PATH` in the model's configuration)"
)
RERECORD_HINT = "record the cassette again (`--record CASSETTE`); do not edit it by hand"


def is_cassette_line(line: bytes) -> bool:
    """True for a line of a cassette (a JSON object with `key` and `request`)."""
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(entry, dict) and "key" in entry and "request" in entry


class RecordingModel(ModelWrapper):
    """Forwards every call to `inner` and records it into `cassette` (started afresh).

    `name` is the pipeline's name for the model; `ReplayModel.from_file(...,
    name=...)` uses it to stand in for this model when a cassette holds several.
    """

    def __init__(
        self,
        inner: ModelPort,
        cassette: Path,
        *,
        append: bool = False,
        name: str | None = None,
        steps: Iterator[int] | None = None,
    ) -> None:
        """`steps` numbers the events of the cassette (a budget decision, an answer) in
        the order they happened; the recorders of one cassette share it."""
        self._inner = inner
        self._name = name
        self._steps = steps if steps is not None else itertools.count(1)
        self._cassette = Path(cassette)
        self._cassette.parent.mkdir(parents=True, exist_ok=True)
        if not append:  # started afresh; refuses a link or a file that is not a cassette
            self._open(append=False).close()

    def _open(self, *, append: bool) -> Any:
        """The cassette opened by the one output opener (`converge_dsl._files.open_output`)."""
        from converge_dsl._files import open_output

        return open_output(
            self._cassette, "record", "cassette", recognise=is_cassette_line, append=append
        )

    def __repr__(self) -> str:
        return f"RecordingModel({self._inner!r}, cassette={self._cassette.name!r})"

    def model_id(self) -> str:
        return self._inner.model_id()

    def default_max_tokens(self) -> int | None:
        return configured_cap(self._inner)

    def redact(self, text: str) -> str:
        """`text` with the wrapped model's secrets masked (unchanged when it has none)."""
        redactor = getattr(self._inner, "redact", None)
        return redactor(text) if callable(redactor) else text

    async def call(self, req: ModelRequest) -> ModelReturn:
        return await self._record(req, self._inner.call(req))

    async def call_streaming(self, req: ModelRequest, on_increment: OnIncrement) -> ModelReturn:
        return await self._record(req, self._inner.call_streaming(req, on_increment))

    async def call_speculating(
        self, req: ModelRequest, on_increment: OnIncrement, on_early_call: OnEarlyToolCall
    ) -> ModelReturn:
        return await self._record(
            req, self._inner.call_speculating(req, on_increment, on_early_call)
        )

    async def _record(self, req: ModelRequest, pending: Any) -> ModelReturn:
        entry: dict[str, Any] = {
            "v": CASSETTE_VERSION,
            "key": request_key(req),
            "request": normalise_request(req),
            "model_id": self._inner.model_id(),
        }
        if self._name is not None:
            entry["name"] = self._name
        cap = configured_cap(self._inner)
        if cap is not None:
            entry["default_max_tokens"] = cap
        entry["started"] = next(self._steps)
        attempts: list[AttemptReport] = []
        gates: list[tuple[str, int]] = []
        outer = ATTEMPT_OBSERVER.get()

        def observe(report: AttemptReport) -> None:
            attempts.append(report)
            if outer is not None:
                outer(report)

        def decided(decision: str) -> None:
            gates.append((decision, next(self._steps)))

        observing, logging = ATTEMPT_OBSERVER.set(observe), GATE_LOG.set(decided)
        try:
            result: ModelReturn = await pending
        except ModelError as exc:
            entry.update(_inside(attempts, gates))
            entry.update(self._account(None))
            entry["error"] = {
                "code": exc.code.value,
                "message": exc.message,
                "retryable": exc.retryable,
                "retry_after": exc.retry_after,
                "hint": exc.hint,
            }
            entry["step"] = next(self._steps)
            self._append(entry)
            raise
        finally:
            ATTEMPT_OBSERVER.reset(observing)
            GATE_LOG.reset(logging)
        entry.update(_inside(attempts, gates))
        entry.update(self._account(result.account))
        entry["return"] = return_to_json(result)
        entry["step"] = next(self._steps)
        self._append(entry)
        return result

    def _account(self, answered: str | None) -> dict[str, Any]:
        """The account fields of a line: the label that answered, else the bound one."""
        binding = self._inner.provider_account()
        label = answered if answered is not None else binding and binding.label
        return {"account": label, "provider": binding and binding.provider}

    def _append(self, entry: Mapping[str, Any]) -> None:
        line = json.dumps(entry, sort_keys=True, ensure_ascii=False)
        redactor = getattr(self._inner, "redact", None)
        if callable(redactor):
            line = redactor(line)
        from converge_dsl._files import write_all
        from converge_dsl.errors import ConvergeError

        try:
            with self._open(append=True) as out:
                write_all(out, line + "\n", f"cassette {str(self._cassette)!r}")
        except (OSError, ConvergeError) as exc:
            reason = exc.cited if isinstance(exc, ConvergeError) else exc.strerror or exc
            raise ModelError(
                ModelErrorCode.CONFIG,
                f"cannot write cassette {str(self._cassette)!r}: {reason}",
                hint="free space or record to another path; the lines already written are kept",
            ) from None


def _inside(attempts: list[AttemptReport], gates: list[tuple[str, int]]) -> dict[str, Any]:
    """The fields of a line that keep what happened inside its call (none for one attempt)."""
    fields: dict[str, Any] = {}
    if len(attempts) > 1:
        fields["attempts"] = [
            {"account": a.account, "status": a.status_code, "error": a.error} for a in attempts
        ]
    if gates:
        fields["gates"] = [list(gate) for gate in gates]
    return fields


@dataclass(frozen=True, slots=True)
class _Recording:
    line: int
    request: Mapping[str, Any]
    answer: ModelReturn | ModelError
    model_id: str = ""
    account: AccountBinding | None = None
    name: str | None = None
    attempts: tuple[Mapping[str, Any], ...] = ()
    gates: tuple[tuple[str, int | None], ...] = ()
    default_max_tokens: int | None = None
    step: int | None = None
    started: int | None = None

    @property
    def order(self) -> int:
        """Where its answer comes in the recorded run (its step, else its line)."""
        return self.line if self.step is None else self.step

    def steps(self) -> Iterator[int]:
        """Every step of the recording: its start, its budget decisions, then its answer."""
        if self.started is not None:
            yield self.started
        yield from (step for _, step in self.gates if step is not None)
        yield self.order


class ReplayModel(ModelDefaults):
    """Answers from a cassette; never touches the network.

    It stands in for the recorded model: `model_id()` and `provider_account()`
    are the recorded ones when the cassette's lines (those of `name`, when given
    and recorded) agree on them, else `replay:FILE` and None.
    """

    def __init__(
        self,
        recordings: Mapping[str, list[_Recording]],
        file: str,
        *,
        name: str | None = None,
        attempt_gate: Callable[[], bool] | None = None,
        order: ReplayOrder | None = None,
        clock: Any = None,
    ) -> None:
        """`attempt_gate` is the run's (see `HttpModel`); `order` is shared by the replays
        of one cassette in a run (each replay has its own without); `clock` times the
        replayed attempts' reports (none: they are not reported)."""
        self._recordings = recordings
        self._served: dict[str, int] = {}
        self._file = file
        self._gate = attempt_gate
        self._clock = clock
        everything = [e for entries in recordings.values() for e in entries]
        self._order = order or ReplayOrder()
        self._order.expect(step for e in everything for step in e.steps())
        # The request names the model that answered it (its `model_id()`); a replay
        # stands in for those models, so a request also matches under their ids.
        self._recorded_models = sorted({str(e.request.get("model")) for e in everything})
        mine = [e for e in everything if name is not None and e.name == name] or everything
        ids = {e.model_id for e in mine if e.model_id}
        self._model_id = ids.pop() if len(ids) == 1 else f"replay:{file}"
        accounts = {e.account for e in mine}
        self._account = accounts.pop() if len(accounts) == 1 else None
        caps = {e.default_max_tokens for e in mine}
        self._default_max_tokens = caps.pop() if len(caps) == 1 else None

    @classmethod
    def from_file(
        cls,
        cassette: Path,
        *,
        name: str | None = None,
        attempt_gate: Callable[[], bool] | None = None,
        order: ReplayOrder | None = None,
        clock: Any = None,
    ) -> ReplayModel:
        """The replay of `cassette`, standing in for the model recorded as `name`."""
        path = Path(cassette)
        try:
            text = read_text(path, "cassette")
        except UnicodeDecodeError as exc:
            raise ModelError(
                ModelErrorCode.CONFIG,
                f"cassette {path.name} is not UTF-8 text (byte {exc.start}); it is not a recording",
                hint=RERECORD_HINT,
            ) from None
        except OSError as exc:
            raise ModelError(
                ModelErrorCode.CONFIG,
                f"cannot read cassette {path.name}: {exc.strerror}",
                hint=RECORD_HINT,
            ) from None
        recordings: dict[str, list[_Recording]] = {}
        from converge_dsl._files import jsonl_lines

        for number, line in enumerate(jsonl_lines(text), start=1):
            if not line.strip():
                continue
            if json_depth(line) > CASSETTE_MAX_DEPTH:
                raise ModelError(
                    ModelErrorCode.CONFIG,
                    f"cassette {path.name} line {number} nests deeper than "
                    f"{CASSETTE_MAX_DEPTH} levels; it is not a recording",
                    hint=RERECORD_HINT,
                )
            try:
                entry = json.loads(line)
                if isinstance(entry, dict) and entry.get("kind") == TOOL_LINE_KIND:
                    continue  # a tool server's line: replayed by `converge_dsl.tools`
                recordings.setdefault(str(entry["key"]), []).append(
                    _recording_from_json(number, entry)
                )
            except RecursionError:
                raise ModelError(
                    ModelErrorCode.CONFIG,
                    f"cassette {path.name} line {number} nests too deeply to be a recording",
                    hint=RERECORD_HINT,
                ) from None
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ModelError(
                    ModelErrorCode.CONFIG,
                    f"cassette {path.name} line {number} is not a recording: "
                    + _not_a_recording(line, exc),
                    hint=RERECORD_HINT,
                ) from None
        return cls(
            recordings, path.name, name=name, attempt_gate=attempt_gate, order=order, clock=clock
        )

    def __repr__(self) -> str:
        return f"ReplayModel(cassette={self._file!r}, keys={len(self._recordings)})"

    def model_id(self) -> str:
        return self._model_id

    def provider_account(self) -> AccountBinding | None:
        return self._account

    def default_max_tokens(self) -> int | None:
        """The recorded model's answer cap for requests that name none."""
        return self._default_max_tokens

    async def call(self, req: ModelRequest) -> ModelReturn:
        try:
            recording = self._recording(req)
        except ModelError:
            # Not recorded: in the recorded run this call may have been cancelled in
            # flight by what the later lines answer (a failing suggestor stops the
            # run). Those answers come first, as they did then; a miss still stands.
            await self._order.turn(sys.maxsize)
            raise
        if recording.started is not None:  # a line recorded before `started` has none
            await self._order.turn(recording.started)
            self._order.answered(recording.started)
        answer = recording.answer
        for decision, step in recording.gates:
            allowed = await self._decide(decision, step)
            if not allowed:
                if (
                    isinstance(answer, ModelError)
                    and answer.code is ModelErrorCode.BUDGET_EXHAUSTED
                ):
                    break  # refused as recorded: the recorded error follows
                raise ModelError(
                    ModelErrorCode.BUDGET_EXHAUSTED,
                    f"replay of cassette {self._file}: the run's budget allows no further attempt",
                    hint="raise the run's budget",
                )
        await self._order.turn(recording.order)
        try:
            return self._replay(recording)
        finally:
            self._order.answered(recording.order)

    async def _decide(self, decision: str, step: int | None) -> bool:
        """Ask the run's gate, at the recorded point, for a recorded further attempt."""
        if step is not None:
            await self._order.turn(step)
        try:
            return decision == "deadline" or self._gate is None or self._gate()
        finally:
            if step is not None:
                self._order.answered(step)

    def _replay(self, recording: _Recording) -> ModelReturn:
        """What happened in the recorded call, again: its attempts and its answer."""
        if self._clock is not None:
            for attempt in recording.attempts:
                started = self._clock.monotonic()
                status, error = attempt.get("status"), attempt.get("error")
                report_attempt(started, self._clock, attempt.get("account"), status, error)
        answer = recording.answer
        if isinstance(answer, ModelError):
            raise ModelError(
                answer.code,
                answer.message,
                retryable=answer.retryable,
                retry_after=answer.retry_after,
                hint=answer.hint,
            )
        if not answer.model_id and recording.model_id:
            # The suggestor would have named the recorded model: replay names it too.
            return replace(answer, model_id=recording.model_id)
        return answer

    def _recording(self, req: ModelRequest) -> _Recording:
        """The recording that answers `req` now (`E_REPLAY_MISS` without one)."""
        key = request_key(req)
        entries = self._recordings.get(key)
        for recorded_model in self._recorded_models:
            if entries:
                break
            key = request_key(replace(req, model=recorded_model))
            entries = self._recordings.get(key)
        if not entries:
            key = request_key(req)
            raise self._miss(req, key)
        served = self._served.get(key, 0)
        self._served[key] = served + 1
        return entries[min(served, len(entries) - 1)]

    async def call_streaming(self, req: ModelRequest, on_increment: OnIncrement) -> ModelReturn:
        result = await self.call(req)
        emit_increments(result.text, on_increment)
        return result

    def _miss(self, req: ModelRequest, key: str) -> ModelError:
        wanted = normalise_request(req)
        wanted_text = canonical_json(wanted)
        best: _Recording | None = None
        best_ratio = -1.0
        for entries in self._recordings.values():
            candidate = entries[0]
            ratio = difflib.SequenceMatcher(
                None, wanted_text, canonical_json(candidate.request), autojunk=False
            ).quick_ratio()
            if ratio > best_ratio:
                best, best_ratio = candidate, ratio
        where = f"suggestor {req.suggestor!r}, turn {req.turn!r}, key {key[:12]}"
        if best is None:
            return ModelError(
                ModelErrorCode.REPLAY_MISS,
                f"cassette {self._file} is empty; no answer for the request ({where})",
                hint="record the run again with the real model: " + RECORD_HINT,
            )
        differs = first_difference(best.request, wanted) or "<nothing>"
        return ModelError(
            ModelErrorCode.REPLAY_MISS,
            f"no recorded answer in cassette {self._file} for the request ({where}); "
            f"nearest recorded request: line {best.line} (suggestor "
            f"{best.request.get('suggestor')!r}, turn {best.request.get('turn')!r}), "
            f"which differs at {differs}",
            hint="the pipeline or its inputs changed since recording; record the run again "
            "(`converge-dsl run PIPELINE --record CASSETTE`)",
        )


def _not_a_recording(line: str, exc: Exception) -> str:
    """Why a cassette line is not a recording, in the user's words (not Python's)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg} at column {exc.colno})"
    try:
        entry = json.loads(line)
    except ValueError as again:  # Python's limit on the digits of an integer
        many = "max_str_digits" in str(again)
        return "a number in it has too many digits to be read" if many else "not JSON"
    if not isinstance(entry, dict):
        return "not a JSON object"
    if "key" not in entry and "type" in entry and "seq" in entry:
        return "it is a trace line (`--trace` writes those); replay a cassette `--record` wrote"
    if isinstance(exc, KeyError):
        return f"it has no {exc.args[0]!r} field"
    if isinstance(exc, ValueError):  # the readers' own words (`_usage_from_json`...)
        return str(exc)
    return "a field holds a value of the wrong type"


def _recording_from_json(number: int, entry: Mapping[str, Any]) -> _Recording:
    """One cassette line; a version-1 line (no model id or account) takes its return's."""
    answer = _answer_from_json(entry)
    recorded = answer if isinstance(answer, ModelReturn) else None
    model_id = entry.get("model_id", recorded.model_id if recorded else "")
    label = entry.get("account", recorded.account if recorded else None)
    provider = entry.get("provider")
    account = None if label is None else AccountBinding(str(provider or "replay"), str(label))
    name = entry.get("name")
    cap = entry.get("default_max_tokens")
    return _Recording(
        number,
        entry["request"],
        answer,
        str(model_id or ""),
        account,
        None if name is None else str(name),
        tuple(dict(a) for a in entry.get("attempts", ())),
        tuple(_gate(g) for g in entry.get("gates", ())),
        None if cap is None else int(cap),
        None if entry.get("step") is None else int(entry["step"]),
        None if entry.get("started") is None else int(entry["started"]),
    )


def _gate(raw: Any) -> tuple[str, int | None]:
    """A recorded budget decision: `[decision, step]` (or a bare decision)."""
    if isinstance(raw, list):
        decision, step = raw
        return str(decision), int(step)
    return str(raw), None


def _answer_from_json(entry: Mapping[str, Any]) -> ModelReturn | ModelError:
    if "error" in entry:
        error = entry["error"]
        code = ModelErrorCode(error["code"])
        return ModelError(
            code,
            # a cassette recorded before the code left the message has it there too
            str(error["message"]).removeprefix(f"{code.value}: "),
            retryable=bool(error.get("retryable")),
            retry_after=error.get("retry_after"),
            hint=error.get("hint"),
        )
    return return_from_json(entry["return"])


def first_difference(recorded: Any, wanted: Any, path: str = "") -> str | None:
    """The JSON path of the first place where two JSON values differ, or None."""
    if isinstance(recorded, Mapping) and isinstance(wanted, Mapping):
        for name in sorted(set(recorded) | set(wanted)):
            found = first_difference(
                recorded.get(name), wanted.get(name), f"{path}.{name}" if path else name
            )
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(wanted, list):
        for index, (left, right) in enumerate(zip(recorded, wanted, strict=False)):
            found = first_difference(left, right, f"{path}[{index}]")
            if found is not None:
                return found
        if len(recorded) != len(wanted):
            return f"{path} (length {len(recorded)} recorded, {len(wanted)} now)"
        return None
    return None if recorded == wanted else path or "<root>"
