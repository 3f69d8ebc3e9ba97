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
-- an older server's numbers past the stored events at a restart, which it gave again
DROP TABLE IF EXISTS recoveries;
"""

INSERT_EVENTS = "INSERT OR REPLACE INTO events (run, seq, line) VALUES (?, ?, ?)"
INSERT_SENT = "INSERT OR REPLACE INTO sent (run, past) VALUES (?, ?)"

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
