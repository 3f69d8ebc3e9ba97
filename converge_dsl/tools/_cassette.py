"""Tool calls in cassettes: `--record` keeps each server's start and every call, `--replay`
answers them with no server started.

A cassette (`converge_dsl.models.cassette`) is JSON Lines; the tools' lines sit
beside the models' and are marked `"kind": "mcp"` (a model replay skips them).
`RecordingToolServer` wraps any `ToolServer` and appends one line for its start
(the `ServerInfo`: name, version, tools with their input schemas, or the
`ToolFailure` that kept it from starting) and one per call: the request
(server, tool, arguments), its `key` (sha256 of the request's canonical JSON),
then the `ToolResult` or the `ToolFailure`. A call's line also keeps `started`
and `step`, its start and its answer numbered on the step counter the run's
model recorders share, so the whole run's events are in one order. Each line
passes the server's redactor (the values the run hands it).

`ToolReplay` reads the tool lines of a cassette once and makes, for each
server of a run, a `ReplayToolServer` that stands in for it: `start` gives the
recorded `ServerInfo` (or raises the recorded failure), `call` the recorded
result of the same request (a request recorded several times answers in order,
then repeats its last answer) at its recorded place in the run (`ReplayOrder`,
shared with the models' replays of the same cassette, so concurrent callers
meet the budget and write the trace in the recorded order). Nothing is
started: the server's command is never looked up. A call (or a start) with no
recording is `ToolReplayMiss` (CD968), naming the caller's request and the
nearest recorded one with where it differs; it is not a `ToolFailure`, so it
fails the suggestor, as a model's replay miss does, rather than being handed
to the model as a soft error. A tool line that is not a recording is CD969.
`is_replay(server)` tells a replay (or a wrapper around one) from a live server.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from converge_dsl import codes
from converge_dsl._json_types import JsonObject
from converge_dsl.engine.types import canonical_json
from converge_dsl.errors import ConvergeError
from converge_dsl.frontend import ToolServerSpec
from converge_dsl.models import Redactor, ReplayOrder
from converge_dsl.models.cassette import (
    CASSETTE_VERSION,
    RECORD_HINT,
    TOOL_LINE_KIND,
    first_difference,
)
from converge_dsl.tools._environment import server_secrets
from converge_dsl.tools._port import (
    ServerFactory,
    ServerInfo,
    ToolFailure,
    ToolInfo,
    ToolResult,
    ToolServer,
)

_REPLAY_HINT = (
    "the pipeline, its inputs or a tool's arguments changed since recording; record the "
    "run again (`converge-dsl run PIPELINE --record CASSETTE`)"
)


class ToolReplayMiss(ConvergeError):
    """A replayed run asked a tool server for something its cassette does not hold (CD968),
    or a tool line of the cassette is not a recording (CD969)."""

    code: str

    def __init__(self, code: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, code=code)

    @property
    def diagnostic_code(self) -> str:
        """The code the run's stop note gives (the engine reads it from the cause)."""
        return self.code


def is_tool_line(entry: Mapping[str, Any]) -> bool:
    """True for a decoded cassette line that records a tool server (not a model)."""
    return entry.get("kind") == TOOL_LINE_KIND


def call_request(server: str, tool: str, arguments: JsonObject) -> dict[str, Any]:
    return {"server": server, "op": "call", "tool": tool, "arguments": dict(arguments)}


def request_key(request: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(request).encode("utf-8")).hexdigest()


def _info_json(info: ServerInfo) -> dict[str, Any]:
    tools = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in info.tools
    ]
    return {"name": info.name, "version": info.version, "tools": tools}


def _info_from_json(raw: Mapping[str, Any]) -> ServerInfo:
    tools = tuple(
        ToolInfo(str(t["name"]), str(t.get("description", "")), dict(t["input_schema"]))
        for t in raw["tools"]
    )
    return ServerInfo(str(raw["name"]), str(raw["version"]), tools)


def _result_json(result: ToolResult) -> dict[str, Any]:
    return {
        "text": result.text,
        "structured": result.structured,
        "is_error": result.is_error,
        "cut": result.cut,
        "size": result.size,
    }


def _result_from_json(raw: Mapping[str, Any]) -> ToolResult:
    return ToolResult(
        str(raw["text"]),
        raw.get("structured"),
        bool(raw.get("is_error", False)),
        bool(raw.get("cut", False)),
        int(raw.get("size", 0)),
    )


def _failure_json(failure: ToolFailure) -> dict[str, Any]:
    return {"code": failure.code, "message": failure.message, "hint": failure.hint}


def _failure_from_json(server: str, raw: Mapping[str, Any]) -> ToolFailure:
    hint = raw.get("hint")
    return ToolFailure(
        str(raw["code"]), server, str(raw["message"]), hint=None if hint is None else str(hint)
    )


class RecordingToolServer:
    """Forwards to `inner` and appends its start and each call to `cassette` (see the
    module docstring); `steps` is the counter the run's recorders share."""

    def __init__(
        self,
        inner: ToolServer,
        cassette: Path,
        *,
        steps: Iterator[int] | None = None,
        redact: Callable[[str], str] = lambda text: text,
    ) -> None:
        self._inner = inner
        self._cassette = Path(cassette)
        self._steps = steps if steps is not None else itertools.count(1)
        self._redact = redact

    @property
    def name(self) -> str:
        return self._inner.name

    def start(self) -> ServerInfo:
        entry: dict[str, Any] = self._entry({"server": self.name, "op": "start"})
        try:
            info = self._inner.start()
        except ToolFailure as failure:
            entry["failure"] = _failure_json(failure)
            self._append(entry)
            raise
        entry["info"] = _info_json(info)
        self._append(entry)
        return info

    async def call(self, tool: str, arguments: JsonObject) -> ToolResult:
        entry = self._entry(call_request(self.name, tool, arguments))
        entry["started"] = next(self._steps)
        try:
            result = await self._inner.call(tool, arguments)
        except ToolFailure as failure:
            entry["failure"] = _failure_json(failure)
            entry["step"] = next(self._steps)
            self._append(entry)
            raise
        entry["result"] = _result_json(result)
        entry["step"] = next(self._steps)
        self._append(entry)
        return result

    def close(self) -> None:
        self._inner.close()

    def _entry(self, request: dict[str, Any]) -> dict[str, Any]:
        return {
            "v": CASSETTE_VERSION,
            "kind": TOOL_LINE_KIND,
            "key": request_key(request),
            "request": request,
        }

    def _append(self, entry: Mapping[str, Any]) -> None:
        from converge_dsl._files import open_output, write_all
        from converge_dsl.models.cassette import is_cassette_line

        line = self._redact(json.dumps(entry, sort_keys=True, ensure_ascii=False))
        where = f"cassette {str(self._cassette)!r}"
        try:
            with open_output(
                self._cassette, "record", "cassette", recognise=is_cassette_line, append=True
            ) as out:
                write_all(out, line + "\n", where)
        except (OSError, ConvergeError) as exc:
            reason = exc.cited if isinstance(exc, ConvergeError) else exc.strerror or exc
            raise ConvergeError(
                f"cannot write {where}: {reason}",
                hint="free space or record to another path; the lines already written are kept",
                code=codes.OUTPUT_REFUSED,
            ) from None


def recording(
    factory: ServerFactory, cassette: Path, steps: Iterator[int] | None = None
) -> ServerFactory:
    """`factory` with each server it makes recorded into `cassette` (redacted of the values
    the run hands that server)."""

    def make(spec: ToolServerSpec, base_dir: Path, environ: Mapping[str, str]) -> ToolServer:
        return RecordingToolServer(
            factory(spec, base_dir, environ),
            cassette,
            steps=steps,
            redact=Redactor(server_secrets(spec, environ)),
        )

    return make


@dataclass(frozen=True, slots=True)
class _Recorded:
    line: int
    request: Mapping[str, Any]
    info: ServerInfo | None = None
    result: ToolResult | None = None
    failure: Mapping[str, Any] | None = None
    started: int | None = None
    step: int | None = None

    @property
    def order(self) -> int:
        return self.line if self.step is None else self.step


class ToolReplay:
    """The tool lines of one cassette, standing in for a run's servers (see the module
    docstring). `order` is shared with the models' replays of the same cassette."""

    def __init__(
        self, recorded: list[_Recorded], file: str, *, order: ReplayOrder | None = None
    ) -> None:
        self._file = file
        self._starts: dict[str, _Recorded] = {}
        self._calls: dict[str, list[_Recorded]] = {}
        for entry in recorded:
            if entry.request.get("op") == "start":
                self._starts.setdefault(str(entry.request.get("server")), entry)
            else:
                self._calls.setdefault(request_key(entry.request), []).append(entry)
        self._served: dict[str, int] = {}
        self._order = order or ReplayOrder()
        self._order.expect(
            step
            for entries in self._calls.values()
            for e in entries
            for step in (e.started, e.order)
            if step is not None
        )

    @classmethod
    def from_file(cls, cassette: Path, *, order: ReplayOrder | None = None) -> ToolReplay:
        """The tool lines of `cassette` (a line that is not a recording: CD969)."""
        from converge_dsl._files import jsonl_lines
        from converge_dsl._reading import read_text

        path = Path(cassette)
        try:
            text = read_text(path, "cassette")
        except UnicodeDecodeError as exc:
            raise ToolReplayMiss(
                codes.TOOL_CASSETTE_INVALID,
                f"cassette {path.name} is not UTF-8 text (byte {exc.start}); it is not a recording",
                hint=RECORD_HINT,
            ) from None
        except OSError as exc:
            raise ToolReplayMiss(
                codes.TOOL_CASSETTE_INVALID,
                f"cannot read cassette {path.name}: {exc.strerror}",
                hint=RECORD_HINT,
            ) from None
        recorded: list[_Recorded] = []
        for number, line in enumerate(jsonl_lines(text), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict):  # every line, a model's too, is an object
                    raise TypeError("not a JSON object")
                if is_tool_line(entry):
                    recorded.append(_recorded_from_json(number, entry))
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
                # a KeyError's text is the bare key: say what it is
                why = f"it has no field {exc.args[0]!r}" if isinstance(exc, KeyError) else exc
                raise ToolReplayMiss(
                    codes.TOOL_CASSETTE_INVALID,
                    f"cassette {path.name} line {number} is not a tool recording: {why}",
                    hint="record the cassette again (`--record CASSETTE`); do not edit it by hand",
                ) from None
        return cls(recorded, path.name, order=order)

    def server(
        self, spec: ToolServerSpec, base_dir: Path, environ: Mapping[str, str]
    ) -> ToolServer:
        """The stand-in for `spec`'s server (a `ServerFactory`): nothing is started."""
        return ReplayToolServer(self, spec.name)

    def start(self, server: str) -> ServerInfo:
        entry = self._starts.get(server)
        if entry is None:
            known = ", ".join(repr(s) for s in sorted(self._starts)) or "none"
            raise ToolReplayMiss(
                codes.TOOL_REPLAY_MISS,
                f"cassette {self._file} holds no start of tool server {server!r} "
                f"(servers recorded: {known})",
                hint=_REPLAY_HINT,
            )
        if entry.failure is not None:
            raise _failure_from_json(server, entry.failure)
        assert entry.info is not None
        return entry.info

    async def call(self, server: str, tool: str, arguments: JsonObject) -> ToolResult:
        request = call_request(server, tool, arguments)
        key = request_key(request)
        entries = self._calls.get(key)
        if not entries:
            # Not recorded: later recorded answers come first, as they did; then it fails.
            await self._order.turn(sys.maxsize)
            raise self._miss(request)
        served = self._served.get(key, 0)
        self._served[key] = served + 1
        entry = entries[min(served, len(entries) - 1)]
        if entry.started is not None:
            await self._order.turn(entry.started)
            self._order.answered(entry.started)
        await self._order.turn(entry.order)
        try:
            if entry.failure is not None:
                raise _failure_from_json(server, entry.failure)
            assert entry.result is not None
            return entry.result
        finally:
            self._order.answered(entry.order)

    def _miss(self, request: Mapping[str, Any]) -> ToolReplayMiss:
        wanted = canonical_json(request)
        where = f"server {request['server']!r}, tool {request['tool']!r}"
        best: _Recorded | None = None
        best_ratio = -1.0
        for entries in self._calls.values():
            ratio = difflib.SequenceMatcher(
                None, wanted, canonical_json(entries[0].request), autojunk=False
            ).quick_ratio()
            if ratio > best_ratio:
                best, best_ratio = entries[0], ratio
        if best is None:
            return ToolReplayMiss(
                codes.TOOL_REPLAY_MISS,
                f"cassette {self._file} holds no tool call; no answer for the call ({where})",
                hint=_REPLAY_HINT,
            )
        differs = first_difference(best.request, request) or "<nothing>"
        return ToolReplayMiss(
            codes.TOOL_REPLAY_MISS,
            f"no recorded answer in cassette {self._file} for the tool call ({where}, "
            f"arguments {canonical_json(request['arguments'])}); nearest recorded call: "
            f"line {best.line} (server {best.request.get('server')!r}, tool "
            f"{best.request.get('tool')!r}), which differs at {differs}",
            hint=_REPLAY_HINT,
        )


class ReplayToolServer:
    """One server of a replayed run: answered by its `ToolReplay`, nothing started."""

    def __init__(self, replay: ToolReplay, name: str) -> None:
        self._replay = replay
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def start(self) -> ServerInfo:
        return self._replay.start(self._name)

    async def call(self, tool: str, arguments: JsonObject) -> ToolResult:
        return await self._replay.call(self._name, tool, arguments)

    def close(self) -> None:
        """Nothing runs."""


def _recorded_from_json(number: int, entry: Mapping[str, Any]) -> _Recorded:
    request = dict(entry["request"])
    if request.get("op") not in ("start", "call") or not isinstance(request.get("server"), str):
        raise ValueError("its request names no server and operation")
    info = entry.get("info")
    result = entry.get("result")
    failure = entry.get("failure")
    if info is None and result is None and failure is None:
        raise ValueError("it holds neither an answer nor a failure")
    return _Recorded(
        number,
        request,
        None if info is None else _info_from_json(info),
        None if result is None else _result_from_json(result),
        None if failure is None else dict(failure),
        None if entry.get("started") is None else int(entry["started"]),
        None if entry.get("step") is None else int(entry["step"]),
    )


def is_replay(server: object) -> bool:
    """Whether `server`, or a server it wraps (`inner`, as the lock's and the cache's
    wrappers expose it), is a cassette's replay: it starts nothing."""
    while not isinstance(server, ReplayToolServer):
        server = getattr(server, "inner", None)
        if server is None:
            return False
    return True
