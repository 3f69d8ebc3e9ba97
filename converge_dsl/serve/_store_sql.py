"""The SQL of the service's state (`_store.RunStore`): its tables, and the statements
a run's rows are written and read with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# One SQL statement and its arguments.
Statement = tuple[str, Sequence[Any]]

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    pipeline TEXT NOT NULL,
    request TEXT NOT NULL,
    status TEXT NOT NULL,
    stop_reason TEXT,
    decisions TEXT,
    result TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_status ON runs (status, seq);
-- `seq` is numbered by the store (`RunStore`, from the largest at open): no index of
-- its own to find the next (an older server's is dropped; one more update per run)
DROP INDEX IF EXISTS runs_seq;
CREATE TABLE IF NOT EXISTS events (
    run TEXT NOT NULL,
    seq INTEGER NOT NULL,
    line TEXT NOT NULL,
    PRIMARY KEY (run, seq)
);
CREATE TABLE IF NOT EXISTS results (
    run TEXT NOT NULL,
    body TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS results_run ON results (run);
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    run TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idempotency_run ON idempotency (run);
-- the number past every event of a run a stream has sent, written before it sends them:
-- an attempt that continues the run after a kill numbers its events from there at the
-- least, so no number a client holds names another event (`StoredEvents`)
CREATE TABLE IF NOT EXISTS sent (
    run TEXT PRIMARY KEY,
    past INTEGER NOT NULL
);
"""

# An older server (no table `sent`) numbered an attempt's events from its stored ones
# and sent them before it stored them: at most `_events.FLUSH_LINES` (256) records since
# its last write of them, and the batch of a write in progress. What it may have sent of
# a run it left unended is taken to lie below its stored events and this margin, many
# such writes wide: the run, continued here, numbers its events past it (`MIGRATION`).
OLDER_SERVER_MARGIN = 1 << 16


def stored_past_sql(run: str) -> str:
    """SQL of the number past the events stored of the run `run` names (0: none)."""
    return (
        "COALESCE((SELECT seq + LENGTH(line) - LENGTH(REPLACE(line, CHAR(10), '')) + 1 "
        f"FROM events WHERE events.run = {run} ORDER BY seq DESC LIMIT 1), 0)"
    )


# Run once, in the transaction that makes `sent` in a state an older server made: each
# run it left running, queued after an attempt, or continued after a restart (its rows
# of `recoveries`, from which it gave numbers again) is marked sent up to the margin
# past its stored events; `recoveries` goes.
MIGRATION = f"""
CREATE TABLE IF NOT EXISTS recoveries (run TEXT PRIMARY KEY, first_unstored INTEGER NOT NULL);
INSERT OR REPLACE INTO sent (run, past)
    SELECT id, {stored_past_sql("runs.id")} + {OLDER_SERVER_MARGIN} FROM runs
    WHERE status = 'running' OR (status = 'queued' AND attempts > 0)
    OR id IN (SELECT run FROM recoveries);
DROP TABLE recoveries;
"""

INSERT_EVENTS = "INSERT OR REPLACE INTO events (run, seq, line) VALUES (?, ?, ?)"
# A mark is written only while the run may still make events: one a stream writes
# after the run paused or ended (its events all stored then) is no mark.
INSERT_SENT = (
    "INSERT OR REPLACE INTO sent (run, past) SELECT ?, ? WHERE EXISTS "
    "(SELECT 1 FROM runs WHERE id = ? AND status IN ('running', 'queued'))"
)
# At a pause, or an end with the attempt's last events, every event of the attempt is
# stored: the number past them (a mark a stream noted ahead, `_streams.SENT_AHEAD`,
# names no event). An end with no events of its own keeps its mark: a killed attempt's
# streams may have sent numbers never stored.
SETTLED_SENT = f"UPDATE sent SET past = {stored_past_sql('?')} WHERE run = ?"

# A run's result: a pause's in its row, else (an end) its first row of `results`.
COLUMNS = (
    "id, pipeline, request, status, stop_reason, decisions, attempts, COALESCE(result, "
    "(SELECT body FROM results WHERE results.run = runs.id ORDER BY rowid LIMIT 1)), "
    "created, updated"
)
SELECT = f"SELECT {COLUMNS} FROM runs"


def add_statements(
    run: str,
    pipeline: str,
    request: str,
    *,
    seq: int,
    status: str,
    attempts: int,
    now: float,
    key: tuple[str, str] | None,
) -> list[Statement]:
    """The statements adding `run` (its `request` as JSON text), numbered `seq` in arrival
    order, with its idempotency `key` and the digest of its request when given."""
    statements: list[Statement] = [
        (
            "INSERT INTO runs (id, seq, pipeline, request, status, attempts, created, "
            "updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (run, seq, pipeline, request, status, attempts, now, now),
        )
    ]
    if key is not None:
        statements.append(
            ("INSERT INTO idempotency (key, digest, run) VALUES (?, ?, ?)", (*key, run))
        )
    return statements
