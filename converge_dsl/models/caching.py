"""The answer cache as a model-port decorator: `CachedModel` around any `Model`.

A run's `AnswerCache` holds the store (`answer_store.AnswerStore`), the mode
(`read-write`: answer from the store and store new answers; `read-only`:
answer from it, store nothing), `offline` (a miss is an error, never a call)
and what the run saw: the hits, the misses and why (`records`, what
`run --explain-cache` prints). `AnswerCache.wrap(name, model)` caches a model
that says who it is (`cache_identity()`: the HTTP adapters); a model that does
not (scripted, replay, a test's fake) answers locally and deterministically,
and is returned as it is: caching it would only hide an edit of its script.

A hit returns the stored `ModelReturn` exactly as the wrapped model returned it
(its text replayed as one increment to a streaming caller) and marks the call's
`CALL_NOTE` as cached: the traced call says `cached`. A cached answer counts
toward no budget: the metered call asks `cached_answer(req)` before it reserves
anything and, on a hit, makes the call unreserved; the cache then answers it
from that look-up (`CACHE_PROBE`), and a miss is not looked up twice. A row that
fails its check (`answer_store.verify`) or a store that cannot be read is a miss
and a warning (CD974), never an answer; a store that failed to store an answer
is given no answer for `STORE_PAUSE_S` (`SavePause`, shared by every run on the
store and, through a file in its folder, by every process on it: one warning and
one wait, not one a call, a case or a worker), then tried again. An offline miss
is a `CacheMiss` (CD973) naming the suggestor, with a diff against the nearest
cached request of the same suggestor. Two processes missing the same key at once
both call the model; the later write replaces the earlier row.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from converge_dsl import codes
from converge_dsl.clock import Clock
from converge_dsl.engine.types import canonical_json
from converge_dsl.errors import ConvergeError
from converge_dsl.models._answer_key import answer_key, model_request_json
from converge_dsl.models._call_note import CACHE_PROBE, mark_cached
from converge_dsl.models._common import emit_increments, return_from_json, return_to_json
from converge_dsl.models.answer_store import AnswerStore, CacheRow, CacheStoreError, verify
from converge_dsl.models.port import (
    Model,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ModelReturn,
    ModelWrapper,
    OnEarlyToolCall,
    OnIncrement,
)

CacheMode = Literal["read-write", "read-only", "off"]
CACHE_MODES: tuple[CacheMode, ...] = ("read-write", "read-only", "off")
MODEL_KIND = "model"
DIFF_LINES = 40
STORE_PAUSE_S = 60.0  # after a failed store, how long no answer is stored
PAUSE_FILE = "store-paused-until"  # in the store's folder: the shared pause (`SavePause`)


@dataclass(frozen=True, slots=True)
class SharedPause:
    """What `PAUSE_FILE` says: storing is paused until `until` (epoch seconds) because
    process `pid` failed to store an answer (`why`); `owner` is the file's user id
    (None where the system has none). Only the current user's file is honoured: one
    written by another user (whose own permissions may have made the store fail)
    pauses nobody else."""

    file: Path
    until: float
    pid: int
    why: str
    owner: int | None

    @property
    def honoured(self) -> bool:
        uid = getattr(os, "getuid", None)
        return uid is None or self.owner is None or self.owner == uid()

    def owner_name(self) -> str:
        if self.owner is None:
            return "unknown"
        try:
            import pwd

            return pwd.getpwuid(self.owner).pw_name
        except (ImportError, KeyError):
            return f"uid {self.owner}"

    def describe(self, now: float) -> str:
        """One line: until when, why, how to lift it (what a skipped store and
        `cache stats` say)."""
        from converge_dsl._escapes import shell_word

        end = time.strftime("%H:%M:%S UTC", time.gmtime(self.until))
        return (
            f"answer cache: no answer is stored until {end} ({max(self.until - now, 0):.0f} s "
            f"more), by any process on the cache: process {self.pid} failed to store one "
            f"({self.why}) and wrote {shell_word(str(self.file))}; the pause ends by itself, "
            f"or now with `rm -- {shell_word(str(self.file))}` (`converge-dsl cache clear` "
            "and `cache prune` remove it too)"
        )


def read_pause(file: Path) -> SharedPause | None:
    """The pause `file` holds, honoured or not; None when it is not there or cannot be
    one (garbage, a FIFO: never read, it would block)."""
    from converge_dsl._escapes import UNSHOWN, escaped
    from converge_dsl._reading import open_regular

    try:
        with open_regular(file, "the answer cache's pause file") as handle:
            owner = os.fstat(handle.fileno()).st_uid if hasattr(os, "getuid") else None
            data = json.loads(handle.read(4096))
        until, pid, why = data["until"], data["pid"], data["why"]
    except (OSError, ValueError, ConvergeError, TypeError, KeyError):
        return None
    if not (
        isinstance(until, float) and isinstance(pid, int) and isinstance(why, str)
    ) or isinstance(pid, bool):
        return None
    return SharedPause(file, until, pid, re.sub(UNSHOWN, escaped, why[:300]), owner)


# The shared pauses this process has warned about (file, end): one warning a pause.
_TOLD: set[tuple[Path, float]] = set()
_TOLD_LOCK = threading.Lock()


class SavePause:
    """Whether answers are stored now: not for `pause_s` after a store failed (held past
    its busy timeout, a full disk, a read-only file), when each later store would wait
    and fail alike. One per store, shared by the runs on it (`AnswerCaching`).

    With a `file` (`PAUSE_FILE` in the store's folder) the pause is shared by the
    processes on the store too (`--executor process` workers): a failure writes the
    pause's end (epoch seconds, `now`), its process and why there atomically
    (`SharedPause`), and a store is tried only when neither this process nor the file
    says the pause runs. A process that skips storing because of the file is told so
    once a pause (`notice`). A file that cannot be written or read pauses this process
    alone; one of another user, or with an end further than `pause_s` ahead (a clock
    set back, a file edited by hand), is no pause."""

    def __init__(
        self,
        pause_s: float = STORE_PAUSE_S,
        now: Callable[[], float] = time.time,
        file: Path | None = None,
    ) -> None:
        self.pause_s = pause_s
        self._now = now
        self._file = file
        self._until: float | None = None
        self._by_file: SharedPause | None = None
        self._lock = threading.Lock()
        # One store at a time: runs on several threads that all found storing open would
        # otherwise each wait out the failing store's busy timeout, and each warn.
        self.attempt = threading.Lock()

    def open(self) -> bool:
        """Whether an answer is stored now (no store failed in the last `pause_s`)."""
        with self._lock:
            now = self._now()
            self._by_file = None
            if self._until is not None and 0 < self._until - now <= self.pause_s:
                return False
            shared = self._shared()
            if shared is not None and 0 < shared.until - now <= self.pause_s:
                self._until = shared.until
                self._by_file = shared
                return False
            return True

    def notice(self) -> str | None:
        """The warning for a store the file's pause skipped just now (`open`), the first
        time this process skips one for that pause; else None."""
        with self._lock:
            shared = self._by_file
            if shared is None:
                return None
            with _TOLD_LOCK:
                if (shared.file, shared.until) in _TOLD:
                    return None
                _TOLD.add((shared.file, shared.until))
            return shared.describe(self._now())

    def failed(self, why: str = "") -> None:
        """A store failed (`why`): none is tried for `pause_s` from now."""
        with self._lock:
            self._until = self._now() + self.pause_s
            if self._file is not None:
                from converge_dsl._files import replace_file

                with _TOLD_LOCK:  # this process warned of its own failure
                    _TOLD.add((self._file, self._until))
                text = json.dumps({"until": self._until, "pid": os.getpid(), "why": why})
                with contextlib.suppress(OSError):
                    replace_file(self._file, text.encode())

    def _shared(self) -> SharedPause | None:
        if self._file is None:
            return None
        shared = read_pause(self._file)
        return shared if shared is not None and shared.honoured else None


class CacheMiss(ModelError):
    """`--offline` and no cached answer: the error names the suggestor and shows a diff."""

    diagnostic_code = codes.CACHE_OFFLINE_MISS

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(ModelErrorCode.CACHE_MISS, message, hint=hint)


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One cached model's call: `hit`, `miss` (stored or not), with why it missed."""

    suggestor: str | None
    model: str
    key: str
    outcome: Literal["hit", "miss"]
    why: str | None = None
    kind: str = MODEL_KIND  # `tool`: an MCP tool call (`model` is then `mcp:SERVER/TOOL`)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "suggestor": self.suggestor,
            "model": self.model,
            "key": self.key,
            "outcome": self.outcome,
            "why": self.why,
        }


class AnswerCache:
    """One run's view of an answer store (see the module docstring).

    `warn` hears each warning line (a row that failed its check, a store that
    failed); `wall` gives the epoch seconds rows are stamped with. `explain`
    says why each miss missed (the nearest cached request and a diff), which
    costs a look through the suggestor's rows: offline misses always say it.
    """

    def __init__(
        self,
        store: AnswerStore,
        *,
        mode: CacheMode = "read-write",
        offline: bool = False,
        explain: bool = False,
        clock: Clock,
        warn: Callable[[str], object] | None = None,
        wall: Callable[[], float] = time.time,
        saving: SavePause | None = None,
    ) -> None:
        self.store = store
        self.mode: CacheMode = mode
        self.offline = offline
        self.explain = explain
        self._clock = clock
        self._warn = warn
        self._wall = wall
        self._lock = threading.Lock()
        self._saving = saving or SavePause()
        self.records: list[CallRecord] = []

    @property
    def clock(self) -> Clock:
        return self._clock

    def wall_now(self) -> float:
        return self._wall()

    @property
    def hits(self) -> int:
        return sum(1 for r in self.records if r.outcome == "hit")

    def wrap(self, name: str, model: Model) -> Model:
        """`model` behind the cache, or `model` itself when it says not who it is."""
        identity = getattr(model, "cache_identity", None)
        if self.mode == "off" or not callable(identity):
            return model
        return CachedModel(name, model, identity(), self)

    @staticmethod
    def key(kind: str, identity: Mapping[str, Any], request: Mapping[str, Any]) -> str:
        """The key of `request` of `kind` sent to `identity` (`_answer_key.answer_key`):
        what another port's cache (the MCP tools') keys its calls with."""
        return answer_key(kind, identity, request)

    def warn(self, text: str) -> None:
        line = f"warning[{codes.CACHE_ENTRY_UNREADABLE}]: {text}"
        if self._warn is not None:
            self._warn(line)

    def lookup(self, key: str) -> CacheRow | None:
        """The verified row of `key`; a row failing its check, or a failing store, is None
        and a warning."""
        try:
            with self._lock:
                row = self.store.get(key, self._wall())
        except CacheStoreError as exc:
            self.warn(f"{exc.coded_message}; the call is made as if nothing were cached")
            return None
        if row is None:
            return None
        problem = verify(row)
        if problem is not None:
            self.warn(f"cached answer {key[:16]} is not used: {problem}")
            return None
        return row

    def save(self, row: CacheRow) -> None:
        """Store `row`, unless a store failed less than `STORE_PAUSE_S` ago (`SavePause`)."""
        if self.mode != "read-write":
            return
        with self._saving.attempt:
            if not self._saving.open():
                notice = self._saving.notice()
                if notice is not None:
                    self.warn(notice)
                return
            try:
                with self._lock:
                    self.store.put(row)
            except CacheStoreError as exc:
                self._saving.failed(exc.coded_message)
                self.warn(
                    f"{exc.coded_message}; the answer was not cached, nor will any for "
                    f"{self._saving.pause_s:g} s"
                )

    def record(self, record: CallRecord) -> None:
        with self._lock:
            self.records.append(record)

    def nearest(
        self,
        identity: str,
        request: Mapping[str, Any],
        suggestor: str | None,
        kind: str = MODEL_KIND,
    ) -> str:
        """Why `request` missed, against the most alike cached request (of `kind`) of
        `suggestor`; rows that fail their check are no candidates (their JSON may not read)."""
        try:
            with self._lock:
                found = self.store.rows(suggestor=suggestor, kind=kind)[:50]
        except CacheStoreError as exc:
            return f"the cache could not be read ({exc.coded_message})"
        rows = [row for row in found if verify(row) is None]
        if not rows:
            failing = f" ({len(found)} cached entries fail their check)" if found else ""
            return f"nothing is cached for suggestor {suggestor!r}{failing}"
        wanted = canonical_json(request)
        best = max(
            rows,
            key=lambda row: difflib.SequenceMatcher(
                None, wanted, row.request, autojunk=False
            ).quick_ratio(),
        )
        if best.identity != identity:
            callee = "model" if kind == MODEL_KIND else "server"
            why = f"the {callee} differs (" + _first_difference(best.identity, identity) + ")"
        else:
            why = "the request differs at " + _first_difference(best.request, wanted)
        return f"{why}; the nearest cached request is {best.key[:16]}\n" + request_diff(
            best.request, wanted
        )


def _first_difference(before: str, after: str) -> str:
    from converge_dsl.models.cassette import first_difference

    return first_difference(json.loads(before), json.loads(after)) or "<nothing>"


def request_diff(cached: str, wanted: str) -> str:
    """A unified diff from the cached request's JSON to the wanted one (indented JSON)."""

    def lines(text: str) -> list[str]:
        return json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False).split(
            "\n"
        )

    diff = list(
        difflib.unified_diff(lines(cached), lines(wanted), "cached", "this run", lineterm="", n=1)
    )
    if len(diff) > DIFF_LINES:
        diff = [*diff[:DIFF_LINES], f"... ({len(diff) - DIFF_LINES} more lines)"]
    return "\n".join(diff)


class CachedModel(ModelWrapper):
    """`inner` behind `cache`: a verified stored answer, or `inner`'s answer, then stored."""

    def __init__(
        self, name: str, inner: Model, identity: Mapping[str, Any], cache: AnswerCache
    ) -> None:
        self._name = name
        self._inner = inner
        self._identity = dict(identity)
        self._identity_json = canonical_json(self._identity)
        self._cache = cache

    def __repr__(self) -> str:
        return f"CachedModel({self._inner!r})"

    def model_id(self) -> str:
        return self._inner.model_id()

    def default_max_tokens(self) -> int | None:
        cap = getattr(self._inner, "default_max_tokens", None)
        value = cap() if callable(cap) else None
        return value if isinstance(value, int) else None

    def redact(self, text: str) -> str:
        redactor = getattr(self._inner, "redact", None)
        return redactor(text) if callable(redactor) else text

    def cache_identity(self) -> dict[str, Any]:
        return dict(self._identity)

    async def call(self, req: ModelRequest) -> ModelReturn:
        return await self._cached(req, None, lambda: self._inner.call(req))

    async def call_streaming(self, req: ModelRequest, on_increment: OnIncrement) -> ModelReturn:
        return await self._cached(
            req, on_increment, lambda: self._inner.call_streaming(req, on_increment)
        )

    async def call_speculating(
        self, req: ModelRequest, on_increment: OnIncrement, on_early_call: OnEarlyToolCall
    ) -> ModelReturn:
        return await self._cached(
            req,
            on_increment,
            lambda: self._inner.call_speculating(req, on_increment, on_early_call),
            on_early_call,
        )

    def cached_answer(self, req: ModelRequest) -> ModelReturn | None:
        """The verified cached answer to `req` (None: a miss), asked before a call is
        reserved; the call that follows is counted as a hit or a miss, not this look-up."""
        return self._answer(answer_key(MODEL_KIND, self._identity, model_request_json(req)))

    def _answer(self, key: str) -> ModelReturn | None:
        row = self._cache.lookup(key)
        if row is None:
            return None
        try:
            return return_from_json(json.loads(row.value))
        except (ValueError, KeyError, TypeError) as exc:
            self._cache.warn(f"cached answer {key[:16]} is not used: {exc}")
            return None

    async def _cached(
        self,
        req: ModelRequest,
        on_increment: OnIncrement | None,
        make: Callable[[], Awaitable[ModelReturn]],
        on_early_call: OnEarlyToolCall | None = None,
    ) -> ModelReturn:
        cache = self._cache
        request = model_request_json(req)
        key = answer_key(MODEL_KIND, self._identity, request)
        probe = CACHE_PROBE.get()
        # Looked up just before the call was reserved (or not, for a hit): not again.
        answer = probe.answer if probe is not None and probe.request is req else self._answer(key)
        if answer is not None:
            cache.record(CallRecord(req.suggestor, self._name, key, "hit"))
            mark_cached()
            if on_increment is not None:
                emit_increments(answer.text, on_increment)
            if on_early_call is not None:  # every early call is one of the answer's
                for tool_call in answer.tool_calls:
                    on_early_call(tool_call)
            return answer
        why = (
            cache.nearest(self._identity_json, request, req.suggestor)
            if cache.offline or cache.explain
            else None
        )
        cache.record(CallRecord(req.suggestor, self._name, key, "miss", why))
        if cache.offline:
            raise CacheMiss(
                f"--offline: no cached answer for suggestor {req.suggestor!r} "
                f"(model {self._name!r}, key {key[:16]}): {why}",
                hint="run once without --offline (with --cache) to fill the cache",
            )
        started = self._clock_now()
        answer = await make()
        duration = self._clock_now() - started
        value = self.redact(canonical_json(return_to_json(answer)))
        now = cache.wall_now()
        cache.save(
            CacheRow(
                key=key,
                kind=MODEL_KIND,
                identity=self._identity_json,
                suggestor=req.suggestor,
                request=canonical_json(request),
                value=value,
                created=now,
                duration_s=duration,
                last_used=now,
            )
        )
        return answer

    def _clock_now(self) -> float:
        return self._cache.clock.monotonic()
