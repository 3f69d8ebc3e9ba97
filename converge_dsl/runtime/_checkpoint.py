"""Checkpoints: a MAC-chained journal of the run, one record per cycle (docs/architecture.md §12).

`DIR/checkpoint.jsonl` (format `_journal`) starts with a snapshot record: the
format, a random nonce, the id of the key that seals it, the SHA-256 of the
pipeline text and of text + inputs, the inputs as given (so `--resume DIR`
needs none), the engine state it starts from (null before the first cycle)
and the per-run state of stateful suggestors. Then one record per cycle holds
only what changed: the new facts, cycle, Lamport time, dirty keys, usage, and,
when they changed, the pending proposals, the ids a human rejected and the
suggestors' states. A cycle costs what it changed, not the size of the
state: its record is written at once (a killed run keeps it) and fdatasynced
by a background thread (`_journal.Appender`), so the run does not wait for
the disk every cycle; `close()` waits for the last sync. When the records since the snapshot grow
past `compact_bytes` (at least twice the snapshot), the journal is compacted:
a new file holding one snapshot of the whole state replaces it atomically.

Reading verifies every record's MAC (CD950 names the record that fails), the
key (CD953), the format (CD951) and the pipeline and inputs (CD952); a last
record torn by a kill mid-append is ignored and cut before the next append.

A run paused for a human also checkpoints its pending proposals; decisions
given so far for it are kept in `DIR/decisions.json`, sealed with the key and
bound to the pause and to each proposal's content (`_decisions`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from converge_dsl import codes
from converge_dsl._json_types import JsonObject, JsonValue
from converge_dsl.engine import json_problem
from converge_dsl.engine.state import (
    EngineState,
    PendingProposal,
    fact_to_data,
    pending_to_data,
    usage_to_data,
)
from converge_dsl.engine.types import Fact, FrozenDict, Suggestor
from converge_dsl.errors import ConvergeError, UsageError

from ._checkpoint_folder import LOCK_FILE, check_folder, folder_lock
from ._checkpoint_key import CheckpointRefused, key_id
from ._decisions import Decision, decisions_line, decisions_refused, verify_decisions
from ._journal import Record, encode, parse_journal, seal
from ._journal_media import CHECKPOINT_FILE, FolderJournal, JournalMedium
from ._suggestor_state import StatefulSuggestor, stateful

__all__ = [  # the folder's lock and checks live beside the store, imported from here too
    "CHECKPOINT_FILE",
    "LOCK_FILE",
    "Checkpoint",
    "CheckpointStore",
    "check_folder",
    "folder_lock",
    "pipeline_digest",
    "pipeline_text_digest",
]

FORMAT = "converge-dsl/checkpoint/v2"
COMPACT_BYTES = 4 << 20


def pipeline_text_digest(text: str) -> str:
    """Hex SHA-256 of a pipeline's text: what a checkpoint keeps of it (`pipeline_text`),
    and what a batch's result lines name it by (`converge_dsl.batch.PipelineStamp`)."""
    return _text_hash(text).hexdigest()


def pipeline_digest(pipeline_text: str, inputs: Any) -> str:
    """SHA-256 of the pipeline text and its resolved inputs: what a checkpoint belongs to."""
    digest = _text_hash(pipeline_text).copy()
    digest.update(("\0" + json.dumps(inputs, sort_keys=True, default=str)).encode("utf-8"))
    return digest.hexdigest()


@functools.lru_cache(maxsize=64)
def _text_hash(text: str) -> hashlib._Hash:
    """SHA-256 over `text`, kept: a served pipeline's text is hashed once, not per run."""
    return hashlib.sha256(text.encode("utf-8"))


def _json_inputs(inputs: JsonObject) -> Any:
    """The inputs as JSON reads them back, keys sorted (flat text and numbers as they are)."""
    if all(type(key) is str and type(value) in _FLAT for key, value in inputs.items()):
        return dict(sorted(inputs.items()))
    return json.loads(json.dumps(dict(inputs), sort_keys=True, default=str))


_FLAT = frozenset((str, int, float, bool, type(None)))  # what JSON reads back as it was


def _thawed(value: Any) -> Any:
    """`value` (frozen JSON) with its `FrozenDict`s as dicts and its tuples as lists.

    The journal's JSON writer (pydantic's) writes them alike, but infers the type
    of an instance of a subclass (a `FrozenDict`, a `ContextKey`) about 0.6 us
    slower than that of a dict or str (`bench/checkpoint.py`, record bodies).
    """
    kind = type(value)
    if kind is FrozenDict:
        return {k: v if type(v) in _FLAT else _thawed(v) for k, v in value.items()}
    if kind is tuple:
        return [v if type(v) in _FLAT else _thawed(v) for v in value]
    return value


def _thaw_data(item: dict[str, Any]) -> dict[str, Any]:
    """`item` (a fact's or a pending proposal's data shape) with its data `_thawed`."""
    if item["data"] is not None:
        item["data"] = _thawed(item["data"])
    return item


def _fact_data(fact: Fact) -> dict[str, Any]:
    return _thaw_data(fact_to_data(fact))


def _pending_data(item: PendingProposal) -> dict[str, Any]:
    return _thaw_data(pending_to_data(item))


def _state_data(state: EngineState) -> dict[str, Any]:
    """`state.to_data()`, written by the journal as it was, in less time (`_thawed`)."""
    data = state.to_data()
    data["dirty"] = [str(key) for key in state.dirty]
    for name in ("facts", "pending"):
        for item in data[name]:
            _thaw_data(item)
    return data


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A verified checkpoint: where a resumed run starts.

    `state` is None when no cycle had finished (resuming starts afresh from the
    seeds). `inputs` are the inputs as the first run was given them.
    """

    state: EngineState | None
    inputs: JsonObject
    pipeline_sha256: str
    digest: str
    suggestors: Mapping[str, JsonValue] = field(default_factory=dict)
    last_mac: str = ""
    records: int = 1
    end: int = 0

    def check_pipeline(self, pipeline_text: str) -> None:
        """Refuse (CD952) a checkpoint made from another pipeline text."""
        if pipeline_text_digest(pipeline_text) != self.pipeline_sha256:
            raise _foreign("the checkpoint belongs to another pipeline")

    def check_digest(self, digest: str) -> None:
        """Refuse (CD952) a checkpoint of the same pipeline with other inputs."""
        if digest != self.digest:
            raise _foreign("the checkpoint belongs to another pipeline or other inputs")


def _foreign(message: str) -> CheckpointRefused:
    return CheckpointRefused(
        codes.CHECKPOINT_FOREIGN,
        message,
        hint="resume with the same pipeline file (and the same --input values, or none: "
        "the checkpoint keeps them)",
    )


def _rebuild(where: str, records: Sequence[Record]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The engine-state data and suggestor states after `records` (snapshot + deltas)."""
    head = records[0].body
    state: dict[str, Any] | None = None if head["state"] is None else dict(head["state"])
    states = dict(head.get("suggestors") or {})
    for record in records[1:]:
        body = record.body
        try:
            if body["kind"] != "cycle" or body["seq"] != record.number:
                raise ValueError("out of sequence")
            if state is None:
                state = EngineState().to_data()
            state["facts"] = [*state["facts"], *body["facts"]]
            for name in ("cycle", "lamport", "dirty", "usage"):
                state[name] = body[name]
            for name in ("pending", "rejected_ids"):
                if name in body:
                    state[name] = body[name]
            states.update(body.get("suggestors") or {})
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointRefused(
                codes.CHECKPOINT_CORRUPT,
                f"record {record.number} of {where!r} is malformed ({exc})",
                hint="start the run again without --resume",
            ) from None
    return state, states


class CheckpointStore:
    """The checkpoint journal of one folder (or of `medium`), sealed with `key`.

    `read()` verifies and rebuilds a checkpoint; `start(...)` begins a fresh
    journal, `resume(checkpoint, ...)` continues one; then `save(state)` after
    each cycle appends what changed. `close()` releases the journal. Where the
    records are kept is the medium's business (`_journal_media`): the folder's
    files by default.
    """

    def __init__(
        self,
        folder: Path | None,
        key: bytes,
        *,
        compact_bytes: int = COMPACT_BYTES,
        random_bytes: Callable[[int], bytes] = os.urandom,
        medium: JournalMedium | None = None,
    ) -> None:
        if medium is None:
            assert folder is not None, "a checkpoint store needs a folder or a medium"
            medium = FolderJournal(folder)
        self.folder = folder
        self.medium = medium
        self._key = key
        self._compact_floor = compact_bytes
        self._random = random_bytes
        self._open = False
        self._mac = ""
        self._seq = 0
        self._since_snapshot = 0
        self._compact_at = compact_bytes
        self._header: dict[str, Any] = {}
        self._stateful: tuple[StatefulSuggestor, ...] = ()
        self._written = _Written()

    @property
    def file(self) -> Path:
        assert self.folder is not None
        return self.folder / CHECKPOINT_FILE

    # -- reading --------------------------------------------------------------

    def read(self) -> Checkpoint:
        """The last complete checkpoint; `UsageError` if absent, `CheckpointRefused` if unusable."""
        where = self.medium.where
        try:
            raw = self.medium.read()
        except FileNotFoundError:
            raise UsageError(
                f"no checkpoint in {where!r}",
                hint="run with --checkpoint DIR first",
                code=codes.PATH_NOT_FOUND,
            ) from None
        except OSError as exc:
            raise UsageError(
                f"cannot read checkpoint in {where!r}: {exc.strerror or exc}",
                code=codes.FILE_UNREADABLE,
            ) from None
        label = str(self.file) if self.folder is not None else where
        journal = parse_journal(raw, self._key, label)
        head = journal.records[0].body
        if head.get("format") != FORMAT or head.get("kind") != "snapshot":
            raise CheckpointRefused(
                codes.CHECKPOINT_CORRUPT,
                f"checkpoint {label!r} is torn or corrupt: its first record is not a "
                f"{FORMAT} snapshot",
                hint="start the run again without --resume",
            )
        try:
            data, states = _rebuild(label, journal.records)
            state = None if data is None else EngineState.from_data(data)
            inputs, text_sha, digest = head["inputs"], head["pipeline_text"], head["pipeline"]
        except (ConvergeError, KeyError, TypeError, RecursionError) as exc:
            detail = exc.cited if isinstance(exc, ConvergeError) else repr(exc)
            raise CheckpointRefused(
                codes.CHECKPOINT_CORRUPT,
                f"checkpoint {label!r} is unreadable: {detail}",
                hint="start the run again without --resume",
            ) from None
        last = journal.records[-1]
        return Checkpoint(
            state, dict(inputs), str(text_sha), str(digest), states, last.mac,
            len(journal.records), journal.end,
        )  # fmt: skip

    # -- writing --------------------------------------------------------------

    def start(
        self,
        *,
        pipeline_text: str,
        digest: str,
        inputs: JsonObject,
        suggestors: Iterable[Suggestor] = (),
    ) -> None:
        """Begin a fresh journal (replacing any old one) with a snapshot of no state yet."""
        self._header = {
            "pipeline_text": pipeline_text_digest(pipeline_text),
            "pipeline": digest,
            "inputs": _json_inputs(inputs),
        }
        self._stateful = stateful(suggestors)
        self.medium.clear_decisions()  # kept for the old journal's pause: they fit no other
        self._snapshot(None)

    def resume(self, checkpoint: Checkpoint, suggestors: Iterable[Suggestor] = ()) -> None:
        """Continue appending to the journal `checkpoint` was read from (a torn tail is cut)."""
        self._header = {
            "pipeline_text": checkpoint.pipeline_sha256,
            "pipeline": checkpoint.digest,
            "inputs": dict(checkpoint.inputs),
        }
        self._stateful = stateful(suggestors)
        self.medium.reopen(checkpoint.end)
        self._open = True
        self._mac, self._seq = checkpoint.last_mac, checkpoint.records - 1
        self._since_snapshot = 0
        self._compact_at = max(self._compact_floor, 2 * checkpoint.end)
        self._written = _Written.of(checkpoint.state, dict(checkpoint.suggestors))

    def save(self, state: EngineState) -> None:
        """Append what changed since the last record (nothing when nothing changed)."""
        written = self._written
        facts = state.facts
        count = written.facts
        tip = facts[count - 1] if 0 < count <= len(facts) else written.last
        moved = len(facts) < count or (tip is not written.last and tip != written.last)
        if not self._open or moved:
            self._snapshot(state)
            return
        states = self._states()
        body = written.delta(state, states)
        if body is None:
            return
        body["seq"] = self._seq + 1
        mac, line = seal(self._key, self._mac, encode(body))
        if self._since_snapshot + len(line) > self._compact_at:
            self._snapshot(state)
            return
        self.medium.append(line)
        self._mac, self._seq = mac, self._seq + 1
        self._since_snapshot += len(line)
        self._written = _Written.of(state, states)

    def flush(self) -> None:
        """Wait until every record saved so far is durable (`RunError` if one failed)."""
        if self._open:
            self.medium.flush()

    def close(self) -> None:
        """Flush and release the journal (`RunError` if a record failed to reach the disk)."""
        opened, self._open = self._open, False
        if opened:
            self.medium.close()

    def _states(self) -> dict[str, JsonValue]:
        return {s.name: s.checkpoint_state() for s in self._stateful}

    def _snapshot(self, state: EngineState | None) -> None:
        """Replace the journal by one snapshot of `state` (atomically), and append from there."""
        states = self._states()
        _check_states(states)
        body = {
            "kind": "snapshot",
            "format": FORMAT,
            "seq": 0,
            "nonce": self._random(16).hex(),
            "key_id": key_id(self._key),
            **self._header,
            "state": None if state is None else _state_data(state),
            "suggestors": states,
        }
        mac, line = seal(self._key, "", encode(body))
        self.medium.replace(line)
        self._open = True
        self._mac, self._seq, self._since_snapshot = mac, 0, 0
        self._compact_at = max(self._compact_floor, 2 * len(line))
        self._written = _Written.of(state, states)

    # -- decisions of a paused run (`_decisions`) -------------------------------

    def save_decisions(
        self, run: str, decisions: Mapping[str, Decision], pending: Sequence[PendingProposal]
    ) -> None:
        """Seal the decisions given so far for the pause `run` (the journal's last MAC)."""
        self.medium.write_decisions(decisions_line(self._key, run, decisions, pending))

    def load_decisions(self, run: str, pending: Sequence[PendingProposal]) -> dict[str, Decision]:
        """The sealed decisions kept for the pause `run`; CD932 for anything else."""
        where = self.medium.decisions_where
        try:
            raw = self.medium.read_decisions()
        except OSError as exc:
            raise decisions_refused(where, f"it cannot be read ({exc.strerror or exc})") from None
        return {} if raw is None else verify_decisions(where, self._key, raw, run, pending)

    def clear_decisions(self) -> None:
        self.medium.clear_decisions()


def _check_states(states: Mapping[str, JsonValue]) -> None:
    """Refuse a suggestor state to write that the journal would not read back as it is.

    A user's `checkpoint_state()` is not checked by the promotion gate (the
    engine's facts are), and the journal's writer would write a set, a
    Decimal, a datetime, a non-string key or an integer `json.loads` cannot
    read back as something else (or fail): `TypeError`, naming what
    `json_problem` found. Only states written are checked: one unchanged since
    its last record costs nothing.
    """
    for name, data in states.items():
        problem = json_problem(data)
        if problem is not None:
            raise TypeError(f"the checkpoint state of suggestor {name!r} is not JSON: {problem}")


_NO_STATES: Mapping[str, JsonValue] = MappingProxyType({})


class _Written(NamedTuple):
    """What the journal holds so far, to write only what changed (made at each record: a
    tuple, made in a third of a frozen dataclass's time)."""

    facts: int = 0
    last: Fact | None = None
    scalars: tuple[Any, ...] = ()
    pending: tuple[Any, ...] = ()
    rejected: tuple[str, ...] = ()
    states: Mapping[str, JsonValue] = _NO_STATES

    @classmethod
    def of(cls, state: EngineState | None, states: Mapping[str, JsonValue]) -> _Written:
        if state is None:
            return cls(states=states)
        return cls(
            len(state.facts),
            state.facts[-1] if state.facts else None,
            (state.cycle, state.lamport, state.dirty, state.usage),
            state.pending,
            state.rejected_ids,
            states,
        )

    def delta(self, state: EngineState, states: Mapping[str, JsonValue]) -> dict[str, Any] | None:
        """The record body of what `state` adds; None when it adds nothing."""
        new = state.facts[self.facts :]
        body: dict[str, Any] = {}
        if state.pending != self.pending:
            body["pending"] = [_pending_data(item) for item in state.pending]
        if state.rejected_ids != self.rejected:
            body["rejected_ids"] = list(state.rejected_ids)
        changed = {name: data for name, data in states.items() if self.states.get(name) != data}
        if changed:
            _check_states(changed)
            body["suggestors"] = changed
        scalars = (state.cycle, state.lamport, state.dirty, state.usage)
        if not new and not body and scalars == self.scalars:
            return None
        body.update(
            kind="cycle",
            cycle=state.cycle,
            lamport=state.lamport,
            dirty=[str(key) for key in state.dirty],
            usage=usage_to_data(state.usage),
            facts=[_fact_data(fact) for fact in new],
        )
        return body
